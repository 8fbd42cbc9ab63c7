"""LoRA roles: two adapters on one base train independently, save in PEFT format, reload, resume.

The base is a small Llama made in the test and saved as a local checkpoint folder (no downloads),
used exactly like a user's ``--base-model PATH``.
"""

from __future__ import annotations

import random

import pytest
import torch

from genenv_engine.config import ConfigError, ModelConfig, RuntimeConfig, load_config
from genenv_engine.training.adapters import is_adapter_folder
from genenv_engine.training.models import load_role_policies, warmstart_agent, warmstart_simulator
from genenv_engine.training.policy import Policy, build_tiny_model
from genenv_engine.training.tokenizer import build_byte_tokenizer
from genenv_engine.training.trainer import Group, GRPOTrainer, RWRTrainer, sft

SMALL = dict(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128, max_length=96)
RUNTIME = RuntimeConfig()


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    """A local checkpoint folder (model + tokenizer) standing for a pretrained base."""
    folder = tmp_path_factory.mktemp("base")
    tok = build_byte_tokenizer()
    model = build_tiny_model(ModelConfig(**SMALL), tok, seed=3)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def lora_cfg(base_dir, **extra) -> ModelConfig:
    return ModelConfig(
        kind="hf",
        path=str(base_dir),
        agent_tuning="lora",
        simulator_tuning="lora",
        lora_r=4,
        lora_alpha=8,
        **{**SMALL, **extra},
    )


def pairs_for(policy: Policy, texts: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    return [(policy.encode(policy.chat([{"role": "user", "content": q}])), policy.completion_ids(a)) for q, a in texts]


AGENT_DATA = [("add 2 and 3", "add(a=2,b=3)"), ("sq 7", "sq(x=7)")]
SIM_DATA = [("sq 7 => sq(x=7)", "sq 9 => sq(x=9)")]


def snapshot(params) -> list[torch.Tensor]:
    return [p.detach().clone() for p in params]


def same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=False))


def test_two_adapters_share_one_base_and_train_independently(base_dir):
    cfg = lora_cfg(base_dir)
    agent = warmstart_agent(cfg, RUNTIME, seed=0)
    sim = warmstart_simulator(cfg, RUNTIME, agent, base_dir / "unused")
    assert agent.model is sim.model  # one base model in memory
    assert (agent.adapter, sim.adapter) == ("agent", "simulator")
    base_params = [p for n, p in agent.model.named_parameters() if "lora_" not in n]
    base_before = snapshot(base_params)
    assert agent.num_trainable() == sim.num_trainable() < agent.num_parameters() // 10

    sim_before, agent_before = snapshot(sim.parameters()), snapshot(agent.parameters())
    sft(agent, pairs_for(agent, AGENT_DATA), steps=3, lr=1e-2, batch_size=2, rng=random.Random(0))
    assert not same(agent.parameters(), agent_before)  # the agent's adapter learned
    assert same(sim.parameters(), sim_before)  # the simulator's adapter did not move
    assert same(base_params, base_before)  # nor did the shared base

    agent_after = snapshot(agent.parameters())
    sft(sim, pairs_for(sim, SIM_DATA), steps=3, lr=1e-2, batch_size=2, rng=random.Random(0))
    assert not same(sim.parameters(), sim_before)
    assert same(agent.parameters(), agent_after)
    assert same(base_params, base_before)

    # each policy's forward pass uses its own adapter
    batch = agent.make_batch(*zip(*pairs_for(agent, AGENT_DATA[:1]), strict=False))
    with torch.no_grad():
        a, s = agent.logprobs(batch), sim.logprobs(batch)
        a_again = agent.logprobs(batch)
    assert not torch.allclose(a, s)
    torch.testing.assert_close(a, a_again)


def test_simulator_starts_as_a_copy_of_the_warm_started_agent(base_dir):
    cfg = lora_cfg(base_dir)
    agent = warmstart_agent(cfg, RUNTIME, seed=0)
    sft(agent, pairs_for(agent, AGENT_DATA), steps=2, lr=1e-2, batch_size=2, rng=random.Random(1))
    sim = warmstart_simulator(cfg, RUNTIME, agent, base_dir / "unused")
    assert same(sim.parameters(), agent.parameters()) and sim.fingerprint() > 0


def test_adapter_saves_in_peft_format_and_reloads_with_plain_peft(base_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    cfg = lora_cfg(base_dir)
    agent = warmstart_agent(cfg, RUNTIME, seed=0)
    sft(agent, pairs_for(agent, AGENT_DATA), steps=3, lr=1e-2, batch_size=2, rng=random.Random(0))
    agent.save(tmp_path / "agent")
    assert is_adapter_folder(tmp_path / "agent")
    assert (tmp_path / "agent" / "adapter_model.safetensors").is_file()
    assert not (tmp_path / "agent" / "model.safetensors").exists()  # the base is not copied
    plain = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir), tmp_path / "agent").eval()
    batch = agent.make_batch(*zip(*pairs_for(agent, AGENT_DATA), strict=False))
    agent.model.eval()
    with torch.no_grad():
        ours = agent.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        theirs = plain(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_checkpoint_reload_shares_the_base_and_freezes_the_references(base_dir, tmp_path):
    cfg = lora_cfg(base_dir)
    agent = warmstart_agent(cfg, RUNTIME, seed=0)
    sim = warmstart_simulator(cfg, RUNTIME, agent, base_dir / "unused")
    init = tmp_path / "init"
    agent.save(init / "agent")
    sim.save(init / "simulator")
    sft(agent, pairs_for(agent, AGENT_DATA), steps=3, lr=1e-2, batch_size=2, rng=random.Random(0))
    here = tmp_path / "e1"
    agent.save(here / "agent")
    sim.save(here / "simulator")
    roles = load_role_policies(cfg, RUNTIME, here, init)
    models = {id(p.model) for p in roles.values()}
    assert len(models) == 1  # four role views, one base in memory
    assert roles["agent"].fingerprint() == pytest.approx(agent.fingerprint(), rel=1e-6)
    assert roles["agent_ref"].fingerprint() != pytest.approx(roles["agent"].fingerprint(), rel=1e-6)
    assert roles["agent_ref"].frozen and not roles["agent"].frozen
    # training the reloaded agent leaves its reference and the simulator where they were
    ref_before, sim_before = snapshot(roles["agent_ref"].parameters()), snapshot(roles["simulator"].parameters())
    sft(roles["agent"], pairs_for(agent, AGENT_DATA), steps=2, lr=1e-2, batch_size=2, rng=random.Random(2))
    assert same(roles["agent_ref"].parameters(), ref_before)
    assert same(roles["simulator"].parameters(), sim_before)


def _grads_of_one_step(policy_factory, micro_batch: int, kind: str) -> list[torch.Tensor]:
    policy = policy_factory()
    rows = pairs_for(policy, AGENT_DATA + [("mod 9 and 4", "mod(a=9,b=4)"), ("sq 12", "sq(x=12)")])
    rng = random.Random(0)
    if kind == "sft":
        sft(policy, rows, steps=1, lr=1e-2, batch_size=4, rng=rng, micro_batch=micro_batch)
    elif kind == "grpo":
        ref = policy.frozen_copy()
        groups = [
            Group(rows[0][0], [rows[0][1], rows[1][1], rows[2][1][:3]], [1.0, 0.0, 0.5]),
            Group(rows[3][0], [rows[3][1], rows[0][1]], [0.0, 1.0]),
        ]
        GRPOTrainer(policy, ref, lr=1e-2, clip=0.2, kl_coef=0.1, minibatch=8, micro_batch=micro_batch).update(
            groups, rng
        )
    else:
        ref = policy.frozen_copy()
        examples = [(p, c, w) for (p, c), w in zip(rows, (1.0, 2.0, 0.5, 1.5), strict=False)]
        RWRTrainer(
            policy, ref, lr=1e-2, kl_coef=0.1, max_kl=10.0, passes=1, batch_size=4, micro_batch=micro_batch
        ).update(examples, rng)
    # the gradient of the (only) optimizer step stays on the parameters until the next step zeroes it
    return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in policy.parameters()]


@pytest.mark.parametrize("kind", ["sft", "grpo", "rwr"])
def test_micro_batches_accumulate_to_the_whole_batch_gradient(base_dir, kind):
    def factory():
        return Policy.load(base_dir, torch.device("cpu"), max_length=96)

    whole = _grads_of_one_step(factory, 0, kind)
    micro = _grads_of_one_step(factory, 1, kind)
    assert sum(float(g.abs().sum()) for g in whole) > 0  # there was a gradient
    for a, b in zip(whole, micro, strict=False):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)


def test_lora_on_a_model_trained_from_scratch_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        ModelConfig(kind="tiny", agent_tuning="lora")
    assert err.value.field == "model.agent_tuning"


def test_cli_model_flags_become_config_overrides(base_dir, tmp_path):
    from genenv_engine.interfaces.cli import _overrides, build_parser

    args = build_parser().parse_args(
        [
            "run",
            "--preset",
            "micro",
            "--base-model",
            str(base_dir),
            "--lora",
            "simulator",
            "--agent-model",
            str(base_dir),
        ]
    )
    cfg = load_config("micro", overrides=_overrides(args))
    assert (cfg.model.kind, cfg.model.path, cfg.model.agent_path) == ("hf", str(base_dir), str(base_dir))
    assert (cfg.model.agent_tuning, cfg.model.simulator_tuning) == ("full", "lora")
    with pytest.raises(ConfigError) as err:
        load_config("micro", overrides={"model.simulator_path": str(tmp_path / "missing")})
    assert err.value.field == "model.simulator_path"


def instruct_lora(base_dir, **extra) -> dict:
    """Overrides for a micro run with LoRA roles on ``base_dir`` and the instruct simulator prompt."""
    over = {
        "model.kind": "hf",
        "model.path": str(base_dir),
        "model.agent_tuning": "lora",
        "model.simulator_tuning": "lora",
        "model.lora_r": 4,
        "runtime.micro_batch": 4,
        "simulator.prompt": "instruct",
        "simulator.seeds_per_epoch": 8,
        "simulator.variations": 4,
    }
    return over | extra


def test_the_fixed_line_note_keeps_the_warm_start_line_although_success_was_measured(base_dir, tmp_path):
    from genenv_engine.method.loop import run
    from genenv_engine.storage.session import Session
    from genenv_engine.testing import scripted_backends

    cfg = load_config("micro", overrides=instruct_lora(base_dir, epochs=2) | {"simulator.note": "fixed_line"})
    session = Session.create(cfg, tmp_path / "s")
    factory = scripted_backends(p=0.5, style="instruct")
    assert run(session, backend_factory=factory) == {"epochs_done": 2}
    assert session.store.epoch_metrics()[1]["generated_success_by_benchmark"]["bfcl"] is not None
    prompts = factory.made["simulator"].prompts
    assert len(prompts) == 2 * 8 * 4  # epochs 1 and 2: 8 seeds x 4 variations
    assert all("Agent success on recent bfcl tasks: not measured yet (target 50%)." in p for p in prompts)


def test_micro_run_with_lora_roles_and_instruct_prompt_checkpoints_adapters_and_resumes(base_dir, tmp_path):
    from genenv_engine.method.loop import run
    from genenv_engine.storage.session import Session
    from genenv_engine.testing import scripted_backends
    from genenv_engine.training.roles import load_roles

    session = Session.create(load_config("micro", overrides=instruct_lora(base_dir, epochs=1)), tmp_path / "s")
    assert run(session, backend_factory=scripted_backends(p=0.5, style="instruct")) == {"epochs_done": 1}
    for epoch in (0, 1):
        for role in ("agent", "simulator"):
            assert is_adapter_folder(session.checkpoint_dir(epoch) / role)
    m0, m1 = session.store.epoch_metrics()[:2]
    assert m1["valid"] > 0 and m1["agent_update"]["steps"] >= 1  # TASK/ANSWER lines parsed into valid tasks
    assert m1["agent_fingerprint"] != pytest.approx(m0["agent_fingerprint"], rel=1e-9)

    again = Session.open(session.path)
    again.set_epochs(2)
    factory = scripted_backends(p=0.5, style="instruct")
    assert run(again, backend_factory=factory) == {"epochs_done": 2}
    # epoch 2's simulator prompts report epoch 1's measured success against alpha
    rate = m1["generated_success_by_benchmark"]["bfcl"]
    assert all(
        f"Agent success on recent bfcl tasks: {rate:.0%} (target 50%)." in p for p in factory.made["simulator"].prompts
    )
    roles = load_roles(again, 1)
    assert roles.agent.fingerprint() == pytest.approx(m1["agent_fingerprint"], rel=1e-6)
    assert roles.simulator.fingerprint() == pytest.approx(m1["simulator_fingerprint"], rel=1e-6)
    assert roles.agent.model is roles.simulator.model


def test_hf_generation_uses_each_roles_own_adapter_whatever_was_active(base_dir):
    from genenv_engine.backends.base import Sampling
    from genenv_engine.backends.hf import HFBackend

    cfg = lora_cfg(base_dir)
    agent = warmstart_agent(cfg, RUNTIME, seed=0)
    sim = warmstart_simulator(cfg, RUNTIME, agent, base_dir / "unused")
    # make the two adapters answer differently: train each on its own fixed text
    sft(agent, pairs_for(agent, [("q", "aaaa")]), steps=30, lr=3e-2, batch_size=2, rng=random.Random(0))
    sft(sim, pairs_for(sim, [("q", "zzzz")]), steps=30, lr=3e-2, batch_size=2, rng=random.Random(0))
    prompt = [agent.chat([{"role": "user", "content": "q"}])]
    greedy = Sampling(max_new_tokens=4, greedy=True)
    agent_backend, sim_backend = HFBackend(agent), HFBackend(sim)
    sim.activate()  # the other role's adapter is active ...
    assert agent_backend.generate(prompt, greedy)[0].text == "aaaa"  # ... yet the agent answers as itself
    assert sim_backend.generate(prompt, greedy)[0].text == "zzzz"
    assert agent_backend.generate(prompt, greedy)[0].text == "aaaa"


def test_mixed_tunings_and_own_models_start_where_documented(base_dir, tmp_path):
    # a full simulator from a LoRA agent: the agent's base with its trained adapter merged in
    cfg = ModelConfig(kind="hf", path=str(base_dir), agent_tuning="lora", simulator_tuning="full", lora_r=4, **SMALL)
    agent = warmstart_agent(cfg, RUNTIME, seed=0)
    sft(agent, pairs_for(agent, AGENT_DATA), steps=3, lr=1e-2, batch_size=2, rng=random.Random(0))
    agent.save(tmp_path / "agent")
    sim = warmstart_simulator(cfg, RUNTIME, agent, tmp_path / "agent")
    assert sim.adapter is None and sim.model is not agent.model
    batch = agent.make_batch(*zip(*pairs_for(agent, AGENT_DATA), strict=False))
    with torch.no_grad():
        torch.testing.assert_close(sim.logprobs(batch), agent.logprobs(batch), rtol=1e-4, atol=1e-5)
    # a LoRA simulator next to a full agent: a fresh adapter on the base (zero update: the base's outputs)
    cfg = ModelConfig(kind="hf", path=str(base_dir), agent_tuning="full", simulator_tuning="lora", lora_r=4, **SMALL)
    agent = warmstart_agent(cfg, RUNTIME, seed=0)
    sim = warmstart_simulator(cfg, RUNTIME, agent, base_dir)
    assert agent.adapter is None and sim.adapter == "simulator" and sim.model is not agent.model
    base = Policy.load(base_dir, torch.device("cpu"), max_length=96)
    with torch.no_grad():
        torch.testing.assert_close(sim.logprobs(batch), base.logprobs(batch))
    # a simulator with its own checkpoint starts from it, not from the agent
    other = tmp_path / "other"
    tok = build_byte_tokenizer()
    build_tiny_model(ModelConfig(**SMALL), tok, seed=11).save_pretrained(other)
    tok.save_pretrained(other)
    cfg = ModelConfig(kind="hf", path=str(base_dir), simulator_path=str(other), **SMALL)
    sim = warmstart_simulator(cfg, RUNTIME, warmstart_agent(cfg, RUNTIME, seed=0), tmp_path / "unused")
    assert sim.source == other
    assert sim.fingerprint() == pytest.approx(Policy.load(other, torch.device("cpu"), 96).fingerprint(), rel=1e-6)


def test_gradient_checkpointing_gives_the_same_gradients(base_dir):
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)  # the same random LoRA A matrices
        policy = warmstart_agent(lora_cfg(base_dir), RuntimeConfig(gradient_checkpointing=checkpointing), seed=0)
        assert policy.model.get_base_model().is_gradient_checkpointing == checkpointing
        sft(policy, pairs_for(policy, AGENT_DATA), steps=1, lr=1e-2, batch_size=2, rng=random.Random(0))
        grads.append([p.grad.clone() for p in policy.parameters()])
    assert sum(float(g.abs().sum()) for g in grads[0]) > 0
    for a, b in zip(*grads, strict=False):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)


def test_export_model_writes_plain_hf_folders_whole_adapter_and_merged(base_dir, tmp_path, capsys):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from genenv_engine.interfaces.cli import main
    from genenv_engine.method.loop import run
    from genenv_engine.storage.session import Session
    from genenv_engine.testing import scripted_backends

    session = Session.create(load_config("micro", overrides=instruct_lora(base_dir, epochs=1)), tmp_path / "s")
    run(session, backend_factory=scripted_backends(p=0.5, style="instruct"))
    session.store.close()
    assert main(["export-model", str(tmp_path / "s"), "--out", str(tmp_path / "adapter")]) == 0
    assert "agent of epoch 1 (adapter)" in capsys.readouterr().out
    assert (
        main(
            [
                "export-model",
                str(tmp_path / "s"),
                "--merge",
                "--role",
                "simulator",
                "--epoch",
                "0",
                "--out",
                str(tmp_path / "merged"),
            ]
        )
        == 0
    )
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")  # a whole model, no peft needed
    reference = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base_dir), str(session.checkpoint_dir(0) / "simulator")
    ).merge_and_unload()
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    assert torch.allclose(merged(ids).logits, reference(ids).logits, atol=1e-5)
    base = AutoModelForCausalLM.from_pretrained(base_dir)
    assert not torch.allclose(merged(ids).logits, base(ids).logits, atol=1e-5)  # the adapter was folded in
    assert (tmp_path / "merged" / "tokenizer.json").is_file()
    assert main(["export-model", str(tmp_path / "s"), "--out", str(tmp_path / "merged")]) == 2  # never overwrites
    assert "already exists" in capsys.readouterr().err


def test_export_model_of_a_tiny_session_is_the_checkpoint_whole(tmp_path, capsys):
    from transformers import AutoModelForCausalLM

    from genenv_engine.interfaces.cli import main
    from genenv_engine.method.loop import run
    from genenv_engine.storage.session import Session
    from genenv_engine.testing import scripted_backends

    session = Session.create(load_config("micro", overrides={"epochs": 1}), tmp_path / "s")
    run(session, backend_factory=scripted_backends())
    session.store.close()
    assert main(["export-model", str(tmp_path / "s"), "--out", str(tmp_path / "agent")]) == 0
    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "agent")
    saved = AutoModelForCausalLM.from_pretrained(session.checkpoint_dir(1) / "agent")
    assert all(
        torch.equal(a, b) for a, b in zip(exported.state_dict().values(), saved.state_dict().values(), strict=False)
    )
    assert not (tmp_path / "agent" / "agent_optimizer.pt").exists()
    # the exported agent answers 20 held-out tasks greedily exactly as the session's own agent does
    from genenv_engine.backends import get_backend
    from genenv_engine.backends.base import Sampling
    from genenv_engine.environments import environments_of
    from genenv_engine.training.agent import heldout_tasks, rollout
    from genenv_engine.training.policy import Policy
    from genenv_engine.training.roles import load_roles

    again = Session.open(tmp_path / "s")
    envs = environments_of(again.config)
    tasks = heldout_tasks(envs, 20)
    greedy = Sampling(temperature=0.0, max_new_tokens=again.config.agent.max_new_tokens, seed=0)
    own = load_roles(again, 1).agent
    outside = Policy.load(tmp_path / "agent", torch.device("cpu"), again.config.model.max_length)
    texts = [
        [
            a.completion.text
            for s in rollout(get_backend("hf", policy=p), p, envs, tasks, 1, greedy, 0.5)
            for a in s.attempts
        ]
        for p in (own, outside)
    ]
    again.store.close()
    assert len(texts[0]) == 20 and texts[0] == texts[1]
    assert main(["export-model", str(tmp_path / "s"), "--epoch", "7", "--out", str(tmp_path / "x")]) == 2
    assert "no checkpoint of epoch 7" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_a_model_path_that_stops_being_a_model_is_one_line_and_the_session_resumes_once_it_is_back(
    base_dir, tmp_path, capsys, monkeypatch
):
    """A session started from ``--base-model PATH`` whose folder later holds no model (a moved or half-copied
    checkpoint): ``resume`` says so in one line and changes nothing; with the model back it resumes."""
    import shutil

    from genenv_engine.interfaces.cli import main
    from genenv_engine.storage.session import Session

    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    base = tmp_path / "base"
    shutil.copytree(base_dir, base)
    folder = tmp_path / "s"
    assert (
        main(
            [
                "run",
                "--preset",
                "micro",
                "--base-model",
                str(base),
                "--session",
                str(folder),
                "--epochs",
                "0",
                "--quiet",
            ]
        )
        == 0
    )
    capsys.readouterr()
    before = (folder / "config.toml").read_text()
    (base / "config.json").rename(tmp_path / "config.json.away")
    assert main(["resume", str(folder), "--epochs", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("genenv: config error in 'model.path'") and "is not a model folder" in err
    assert (folder / "config.toml").read_text() == before and Session.open(folder).store.last_finished_epoch() == 0
    (tmp_path / "config.json.away").rename(base / "config.json")
    assert main(["resume", str(folder), "--epochs", "1", "--quiet"]) == 0
    assert Session.open(folder).store.last_finished_epoch() == 1
