"""The ``vllm`` backend: its logic against a scripted fake of the ``vllm`` module, and for real when vLLM is installed.

The unit tests inject ``FakeVLLM`` (a test double of ``vllm.LLM`` / ``SamplingParams`` / ``LoRARequest``) into
``sys.modules`` and run in the normal CI virtualenv. The ``slow`` tests need the real vLLM (the CPU build from
``scripts/install_vllm_cpu.sh``): they compare greedy vLLM outputs with transformers ``generate`` on the same
weights, per LoRA adapter and for a full model, before and after a weight sync.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from genenv_engine.backends import get_backend
from genenv_engine.backends.base import Sampling
from genenv_engine.training.tokenizer import build_byte_tokenizer

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


# ---------------------------------------------------------------------------------------------- test doubles


@dataclass
class FakeLogprob:
    logprob: float


@dataclass
class FakeSamplingParams:
    """Test double of ``vllm.SamplingParams``: keeps its arguments."""

    temperature: float = 1.0
    max_tokens: int = 16
    seed: int | None = None
    logprobs: int | None = None
    stop_token_ids: list[int] = field(default_factory=list)
    detokenize: bool = True
    structured_outputs: Any = None


@dataclass
class FakeStructuredOutputsParams:
    """Test double of ``vllm.sampling_params.StructuredOutputsParams``."""

    grammar: str | None = None


@dataclass
class FakeLoRARequest:
    """Test double of ``vllm.lora.request.LoRARequest``."""

    lora_name: str
    lora_int_id: int
    lora_path: str


class FakeLLM:
    """Test double of ``vllm.LLM``: scripted completions and a record of every call.

    For prompt ids ``p``: ``len(p) % 4 + 1`` copies of ``p[-1]``, then EOS (finish ``stop``), cut to
    ``max_tokens`` (finish ``length``) when longer; the i-th token's log-prob is ``-(i + 1) / 10``.
    """

    def __init__(self, model: str, **kwargs: Any) -> None:
        self.model, self.kwargs = model, kwargs
        self.calls: list[dict[str, Any]] = []
        self.rpcs: list[tuple[str, tuple]] = []
        self.prefix_resets = 0
        self.removed: list[int] = []
        self.llm_engine = types.SimpleNamespace(remove_lora=self.removed.append)
        FAKE_ENGINES.append(self)

    def generate(self, prompts, sampling_params, *, use_tqdm=True, lora_request=None):
        self.calls.append(dict(prompts=prompts, params=sampling_params, lora=lora_request))
        results = []
        for prompt, params in zip(prompts, sampling_params, strict=False):
            ids = prompt["prompt_token_ids"]
            tokens = [ids[-1]] * (len(ids) % 4 + 1) + [params.stop_token_ids[0]]
            reason = "stop" if len(tokens) <= params.max_tokens else "length"
            tokens = tokens[: params.max_tokens]
            logprobs = [{t: FakeLogprob(-(i + 1) / 10)} for i, t in enumerate(tokens)] if params.logprobs == 0 else None
            out = types.SimpleNamespace(token_ids=tokens, logprobs=logprobs, finish_reason=reason)
            results.append(types.SimpleNamespace(outputs=[out]))
        return results

    def collective_rpc(self, method, args=(), kwargs=None):
        self.rpcs.append((method, args, kwargs))
        return [None]

    def reset_prefix_cache(self):
        self.prefix_resets += 1


FAKE_ENGINES: list[FakeLLM] = []


@pytest.fixture
def fake_vllm(monkeypatch):
    """Put a fake ``vllm`` package in ``sys.modules`` and empty the backend's engine registry around the test."""
    from genenv_engine.backends import vllm as backend

    root = types.ModuleType("vllm")
    root.LLM, root.SamplingParams = FakeLLM, FakeSamplingParams
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = FakeLoRARequest
    params = types.ModuleType("vllm.sampling_params")
    params.StructuredOutputsParams = FakeStructuredOutputsParams
    for name, module in (
        ("vllm", root),
        ("vllm.lora", lora),
        ("vllm.lora.request", request),
        ("vllm.sampling_params", params),
    ):
        monkeypatch.setitem(sys.modules, name, module)
    FAKE_ENGINES.clear()
    backend.close_engines()
    yield FAKE_ENGINES
    backend.close_engines()


class PolicyDouble:
    """Test double of `genenv_engine.training.policy.Policy` with the attributes the vllm backend reads.

    ``adapter`` set: a LoRA role on a shared ``PeftModel`` whose base lies in ``source``; None: a full model.
    """

    def __init__(self, model, tokenizer, source: Path | None, adapter: str | None = None, max_length: int = 64):
        self.model, self.tokenizer, self.source, self.adapter, self.max_length = (
            model,
            tokenizer,
            source,
            adapter,
            max_length,
        )
        self.saved: list[Path] = []

    @property
    def lora_rank(self) -> int | None:
        return self.model.peft_config[self.adapter].r if self.adapter else None

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def save_adapter(self, folder: Path) -> None:
        self.model.save_pretrained(str(folder), selected_adapters=[self.adapter])
        nested = Path(folder) / self.adapter  # peft writes non-default adapter names into a subfolder
        if nested.is_dir():
            for item in nested.iterdir():
                item.rename(Path(folder) / item.name)
            nested.rmdir()
        self.saved.append(Path(folder))

    def save(self, folder: Path) -> None:
        self.model.save_pretrained(str(folder))
        self.tokenizer.save_pretrained(str(folder))
        self.saved.append(Path(folder))


def tiny_base(tmp: Path, seed: int = 0, hidden: int = 32, heads: int = 2, scale: float = 0.02):
    """A small random Llama with the byte tokenizer, saved in ``tmp`` (returned with the tokenizer)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = build_byte_tokenizer()
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        initializer_range=scale,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
    )
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    return model, tok


def add_adapters(model, names=("agent", "simulator"), r: int = 8, seed: int = 1, std: float = 0.0):
    """A ``PeftModel`` with one LoRA adapter per name; ``std`` > 0 draws each adapter's B matrices at random."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=r, lora_alpha=2 * r, target_modules=TARGETS, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM"
    )
    peft = get_peft_model(model, config, adapter_name=names[0])
    for name in names[1:]:
        peft.add_adapter(name, config)
    for i, name in enumerate(names):
        randomize_adapter(peft, name, seed + i, std)
    return peft.eval()


@torch.no_grad()
def randomize_adapter(model, name: str, seed: int, std: float) -> None:
    """Draw adapter ``name``'s LoRA B matrices (zero at init) from N(0, std²)."""
    gen = torch.Generator().manual_seed(seed)
    for pname, param in model.named_parameters():
        if f"lora_B.{name}." in pname:
            param.copy_(torch.randn(param.shape, generator=gen) * std)


def adapter_state(model, name: str) -> dict[str, torch.Tensor]:
    from peft import get_peft_model_state_dict

    return {k: v.clone() for k, v in get_peft_model_state_dict(model, adapter_name=name).items()}


# ---------------------------------------------------------------------------------------------- unit tests


def test_registered_and_module_import_loads_no_vllm():
    from genenv_engine.backends import BACKENDS

    assert BACKENDS["vllm"] == "genenv_engine.backends.vllm:VLLMBackend"
    code = "import json, sys, genenv_engine.backends.vllm; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert "genenv_engine.backends.vllm" in loaded
    assert not [m for m in loaded if m.split(".")[0] == "vllm"]


def test_completions_map_in_order_with_finished_flag_and_logprobs(fake_vllm, tmp_path):
    model, tok = tiny_base(tmp_path)
    backend = get_backend("vllm", policy=PolicyDouble(model, tok, tmp_path), gpu_memory_utilization=0.3)
    (llm,) = fake_vllm
    assert llm.model == str(tmp_path) and llm.kwargs["gpu_memory_utilization"] == 0.3
    assert llm.kwargs["dtype"] == "float32" and llm.kwargs["logprobs_mode"] == "processed_logprobs"
    assert llm.kwargs["max_model_len"] == 64 and "enable_lora" not in llm.kwargs
    prompts = ["a", "bb", "ccc", "dddd"]  # 1..4 byte tokens: 2, 3, 4, 1 scripted copies
    out = backend.generate(prompts, Sampling(max_new_tokens=4, temperature=0.7, seed=5))
    for prompt, completion in zip(prompts, out, strict=False):
        copies = len(prompt) % 4 + 1
        kept = min(copies, 4)
        assert completion.token_ids == [tok.convert_tokens_to_ids(prompt[-1])] * kept
        assert completion.text == prompt[-1] * kept
        assert completion.finished == (copies + 1 <= 4)  # EOS fitted in the budget
        assert completion.logprobs == pytest.approx([-(i + 1) / 10 for i in range(kept)])
    assert [c.finished for c in out] == [True, True, False, True]
    assert backend.tokens_generated == sum(len(c.token_ids) + c.finished for c in out)
    (call,) = llm.calls
    assert call["lora"] is None
    assert [p.seed for p in call["params"]] == [5, 6, 7, 8]  # one seed per prompt: repeated prompts still differ
    assert {(p.temperature, p.max_tokens, p.logprobs) for p in call["params"]} == {(0.7, 4, 0)}
    assert call["params"][0].stop_token_ids == [tok.eos_token_id]


def test_greedy_unseeded_and_left_truncation(fake_vllm, tmp_path):
    model, tok = tiny_base(tmp_path)
    policy = PolicyDouble(model, tok, tmp_path, max_length=40)
    backend = get_backend("vllm", policy=policy)
    long = "".join(chr(ord("a") + i % 26) for i in range(100))
    backend.generate([long, "hi"], Sampling(max_new_tokens=10, greedy=True))
    call = fake_vllm[0].calls[0]
    assert call["prompts"][0]["prompt_token_ids"] == policy.encode(long)[-30:]
    assert call["prompts"][1]["prompt_token_ids"] == policy.encode("hi")
    assert [(p.temperature, p.seed) for p in call["params"]] == [(0.0, None), (0.0, None)]


def test_a_grammar_becomes_a_structured_output_request(fake_vllm, tmp_path):
    model, tok = tiny_base(tmp_path)
    backend = get_backend("vllm", policy=PolicyDouble(model, tok, tmp_path))
    grammar = 'start: "a" NUM\nNUM: /[0-9]+/'
    backend.generate(["x", "y"], Sampling(max_new_tokens=8, grammar=grammar))
    backend.generate(["z"], Sampling(max_new_tokens=8))
    constrained, free = (call["params"] for call in fake_vllm[0].calls)
    assert [p.structured_outputs for p in constrained] == [FakeStructuredOutputsParams(grammar=grammar)] * 2
    assert free[0].structured_outputs is None


def test_tick_runs_before_each_chunk(fake_vllm, tmp_path):
    model, tok = tiny_base(tmp_path)
    backend = get_backend("vllm", policy=PolicyDouble(model, tok, tmp_path), chunk_size=2)
    ticks = []
    backend.tick = lambda: ticks.append(len(fake_vllm[0].calls))
    out = backend.generate(["a", "b", "c", "d", "e"], Sampling(max_new_tokens=8))
    assert ticks == [0, 1, 2] and len(out) == 5
    assert [len(c["prompts"]) for c in fake_vllm[0].calls] == [2, 2, 1]
    assert [c.text[0] for c in out] == list("abcde")


def test_lora_roles_share_one_engine_per_base(fake_vllm, tmp_path):
    model, tok = tiny_base(tmp_path / "base")
    peft = add_adapters(model, r=16)
    agent = get_backend("vllm", policy=PolicyDouble(peft, tok, tmp_path / "base", "agent"), gpu_memory_utilization=0.5)
    simulator = get_backend(
        "vllm", policy=PolicyDouble(peft, tok, tmp_path / "base", "simulator"), gpu_memory_utilization=0.5
    )
    assert len(fake_vllm) == 1 and agent.llm is simulator.llm
    kwargs = fake_vllm[0].kwargs
    assert (kwargs["enable_lora"], kwargs["max_lora_rank"], kwargs["max_loras"]) == (True, 16, 2)
    assert fake_vllm[0].model == str((tmp_path / "base").resolve())
    other_model, _ = tiny_base(tmp_path / "other")
    get_backend("vllm", policy=PolicyDouble(add_adapters(other_model), tok, tmp_path / "other", "agent"))
    get_backend("vllm", policy=PolicyDouble(peft, tok, tmp_path / "base", "agent"), gpu_memory_utilization=0.9)
    assert len(fake_vllm) == 3  # another base, or other engine options, get their own engine
    agent.generate(["x"], Sampling())
    simulator.generate(["y"], Sampling())
    first, second = (c["lora"] for c in fake_vllm[0].calls)
    assert (first.lora_name, second.lora_name) == ("agent", "simulator")
    assert first.lora_int_id != second.lora_int_id


def test_lora_sync_saves_a_peft_folder_under_a_new_id(fake_vllm, tmp_path):
    from peft import PeftModel

    model, tok = tiny_base(tmp_path / "base")
    peft = add_adapters(model, std=0.1)
    backend = get_backend("vllm", policy=PolicyDouble(peft, tok, tmp_path / "base", "agent"))
    before = backend.lora_request()
    randomize_adapter(peft, "agent", seed=99, std=0.1)
    backend.sync()
    after = backend.lora_request()
    assert after.lora_int_id != before.lora_int_id and after.lora_path != before.lora_path
    assert fake_vllm[0].removed == [before.lora_int_id]
    assert not Path(before.lora_path).exists()  # old versions are deleted, not accumulated
    folder = Path(after.lora_path)
    assert {"adapter_config.json", "adapter_model.safetensors"} <= {p.name for p in folder.iterdir()}
    assert json.loads((folder / "adapter_config.json").read_text())["r"] == 8
    fresh, _ = tiny_base(tmp_path / "base2")
    reloaded = PeftModel.from_pretrained(fresh, str(folder), adapter_name="agent")
    want, got = adapter_state(peft, "agent"), adapter_state(reloaded, "agent")
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)
    backend.generate(["q"], Sampling())
    assert fake_vllm[0].calls[-1]["lora"] == after


def test_lora_policy_without_base_folder_is_refused(fake_vllm, tmp_path):
    model, tok = tiny_base(tmp_path)
    with pytest.raises(ValueError, match="policy.source"):
        get_backend("vllm", policy=PolicyDouble(add_adapters(model), tok, None, "agent"))


def test_full_sync_saves_and_reloads_weights_in_place(fake_vllm, tmp_path):
    from safetensors.torch import load_file

    from genenv_engine.backends.vllm import WEIGHT_SYNC

    model, tok = tiny_base(tmp_path / "ckpt")
    policy = PolicyDouble(model, tok, None)  # built in memory: the backend saves it first
    backend = get_backend("vllm", policy=policy, engine_kwargs={"swap_space": 0})
    (llm,) = fake_vllm
    assert llm.model == str(policy.saved[0]) and (policy.saved[0] / "model.safetensors").is_file()
    assert llm.kwargs["swap_space"] == 0 and llm.kwargs["worker_extension_cls"] == WEIGHT_SYNC
    with torch.no_grad():
        model.model.norm.weight.add_(1.0)
    backend.sync()
    ((method, (folder,), _),) = llm.rpcs
    assert method == "genenv_reload_weights" and llm.prefix_resets == 1
    folder = Path(folder)
    assert folder == policy.saved[-1] and not policy.saved[0].exists()
    assert torch.equal(load_file(str(folder / "model.safetensors"))["model.norm.weight"], model.model.norm.weight)


def test_weight_sync_extension_reloads_then_refreshes_prepacked_layers():
    from genenv_engine.backends.vllm import WeightSync

    class Layer(torch.nn.Module):  # test double of a vLLM layer: weight, quant method, maybe a CPU GEMM handle
        def __init__(self, size: int, packed: bool):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(size, 2))
            self.quant_method = types.SimpleNamespace(process_weights_after_loading=refreshed.append)
            if packed:
                self.cpu_linear = None

    class FakeWorker(WeightSync):  # test double of a vLLM worker with the extension mixed in
        def __init__(self):
            self.model = torch.nn.ModuleDict(dict(head=Layer(3, True), emptied=Layer(0, True), plain=Layer(3, False)))
            self.model_runner = types.SimpleNamespace(get_model=lambda: self.model)
            self.reloaded: list[str] = []

        def reload_weights(self, weights_path):
            self.reloaded.append(weights_path)

    refreshed: list[torch.nn.Module] = []
    worker = FakeWorker()
    assert worker.genenv_reload_weights("/some/folder") == 1
    assert worker.reloaded == ["/some/folder"] and refreshed == [worker.model["head"]]


# ---------------------------------------------------------------------------------------------- real vLLM


def hf_greedy(model, ids: list[int], max_new: int, eos: int, pad: int) -> tuple[list[int], bool]:
    """Reference greedy continuation with transformers ``generate`` (one unpadded prompt): ids before EOS, EOS seen."""
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=max_new,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=pad,
        )
    new = out[0, len(ids) :].tolist()
    return (new[: new.index(eos)], True) if eos in new else (new, False)


PROMPTS = ["<|user|>add 2 and 3<|assistant|>", "<|user|>weather in Paris?<|assistant|>", "hello world", "zzz 123"]
GREEDY = Sampling(max_new_tokens=24, greedy=True)
SIZE = dict(hidden=256, heads=4, scale=0.3)
"""head_dim 64 (vLLM's CPU attention supports 32, 64, 80, ... 512); large weights so greedy tokens are not near-ties."""


def expected(model, backend, adapter: str | None) -> list[tuple[list[int], bool]]:
    """HF greedy (token ids, finished) per prompt of `PROMPTS`, on the same truncated prompt ids the backend sends."""
    if adapter is not None:
        model.set_adapter(adapter)
    tok = backend.policy.tokenizer
    return [
        hf_greedy(model, backend.prompt_ids(p, GREEDY), GREEDY.max_new_tokens, tok.eos_token_id, tok.pad_token_id)
        for p in PROMPTS
    ]


@torch.no_grad()
def teacher_forced(model, prompt: list[int], completion: list[int]) -> list[float]:
    """log p(token) of each completion token under ``model`` (its active adapter), at temperature 1."""
    logits = model(input_ids=torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1].float()
    return logits.log_softmax(-1).gather(-1, torch.tensor(completion)[:, None])[:, 0].tolist()


def greedy(backend) -> list[tuple[list[int], bool]]:
    return [(c.token_ids, c.finished) for c in backend.generate(PROMPTS, GREEDY)]


@pytest.mark.slow
def test_real_vllm_lora_adapters_match_hf_and_follow_sync(tmp_path):
    pytest.importorskip("vllm")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from genenv_engine.backends import vllm as backend_module

    model, tok = tiny_base(tmp_path / "base", **SIZE)
    peft = add_adapters(model, r=8, seed=1, std=0.3)
    agent = get_backend("vllm", policy=PolicyDouble(peft, tok, tmp_path / "base", "agent", max_length=128))
    simulator = get_backend("vllm", policy=PolicyDouble(peft, tok, tmp_path / "base", "simulator", max_length=128))
    try:
        assert agent.llm is simulator.llm
        got_agent, got_sim = greedy(agent), greedy(simulator)
        want_agent, want_sim = expected(peft, agent, "agent"), expected(peft, simulator, "simulator")
        print("agent", got_agent, "\nsimulator", got_sim)
        assert got_agent == want_agent and got_sim == want_sim
        assert got_agent != got_sim  # the adapters really change the outputs

        randomize_adapter(peft, "agent", seed=7, std=0.3)
        assert greedy(agent) == got_agent  # the engine keeps the old adapter until sync
        agent.sync()
        agent.sync()  # twice in a row: the skipped version was never loaded by the engine
        synced = greedy(agent)
        assert synced == expected(peft, agent, "agent") and synced != got_agent
        assert greedy(simulator) == want_sim

        sampled = agent.generate([PROMPTS[0]] * 4, Sampling(max_new_tokens=16, temperature=1.0, seed=3))
        again = agent.generate([PROMPTS[0]] * 4, Sampling(max_new_tokens=16, temperature=1.0, seed=3))
        assert [c.token_ids for c in sampled] == [c.token_ids for c in again]  # seeded: reproducible
        assert len({tuple(c.token_ids) for c in sampled}) > 1  # one seed per prompt: repeats differ
        peft.set_adapter("agent")  # sampled and greedy log-probs are the policy's own (temperature 1: raw)
        prompt = agent.prompt_ids(PROMPTS[0], GREEDY)
        for c in sampled + agent.generate(PROMPTS[:1], GREEDY):
            assert len(c.logprobs) == len(c.token_ids)
            assert c.logprobs == pytest.approx(teacher_forced(peft, prompt, c.token_ids), abs=1e-3)
    finally:
        del agent, simulator
        backend_module.close_engines()
        gc.collect()


@pytest.mark.slow
def test_real_vllm_full_model_sync_reloads_weights(tmp_path):
    pytest.importorskip("vllm")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    model, tok = tiny_base(tmp_path / "ckpt", **SIZE)
    backend = get_backend("vllm", policy=PolicyDouble(model, tok, tmp_path / "ckpt", max_length=128))
    try:
        before = greedy(backend)
        assert before == expected(model, backend, None) and not any(done for _, done in before)
        with torch.no_grad():
            gen = torch.Generator().manual_seed(11)
            for param in model.model.layers[0].mlp.parameters():
                param.add_(torch.randn(param.shape, generator=gen) * 0.3)
            # make EOS win wherever the new model would say the 4th token of its first answer (tied embeddings:
            # the EOS row of the output layer is EOS's input embedding, which no prompt uses)
            stop = expected(model, backend, None)[0][0][3]
            embed = model.get_input_embeddings().weight
            embed[tok.eos_token_id] = embed[stop] * 1.05
        backend.sync()
        after = greedy(backend)
        print("before", before, "\nafter", after)
        assert after == expected(model, backend, None) and after != before
        assert after[0][1] and len(after[0][0]) <= 3 and stop not in after[0][0]  # stopped by EOS, EOS not returned
    finally:
        del backend
        gc.collect()
