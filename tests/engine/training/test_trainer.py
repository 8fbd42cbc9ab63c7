"""Trainer tests on a tiny Llama (hidden 32, 2 layers): GRPO, RWR, SFT and optimizer-state persistence."""

from __future__ import annotations

import random

import pytest
import torch

from genenv_engine.config import ModelConfig
from genenv_engine.training.policy import Policy, build_tiny_model
from genenv_engine.training.tokenizer import build_byte_tokenizer
from genenv_engine.training.trainer import Group, GRPOTrainer, RWRTrainer, _Trainer, sft

pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")

CFG = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)


@pytest.fixture(scope="module")
def tok():
    return build_byte_tokenizer()


@pytest.fixture
def policy(tok):
    torch.set_num_threads(1)
    return Policy(build_tiny_model(CFG, tok, seed=0), tok, torch.device("cpu"), max_length=64)


def ids(policy: Policy, text: str) -> list[int]:
    return policy.encode(text)


def snapshot(policy: Policy) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in policy.model.state_dict().items()}


def changed(before: dict[str, torch.Tensor], policy: Policy) -> list[str]:
    after = policy.model.state_dict()
    return [k for k, v in before.items() if not torch.equal(v, after[k])]


def mean_logp(policy: Policy, prompt: list[int], completion: list[int]) -> float:
    batch = policy.make_batch([prompt], [completion])
    with torch.no_grad():
        lp = policy.logprobs(batch)
    return float((lp * batch.mask).sum() / batch.mask.sum())


@pytest.fixture
def task(policy):
    prompt = ids(policy, "<|user|>What is 2+2?<|assistant|>")
    good = policy.completion_ids("four")
    bad = policy.completion_ids("zero")  # no byte in common with "four" but the end-of-sequence
    return prompt, good, bad


# --- GRPO ---------------------------------------------------------------------------------------


def test_grpo_update_raises_rewarded_completion(policy, task):
    prompt, good, bad = task
    reference = policy.frozen_copy()
    ref_before = snapshot(reference)
    before = snapshot(policy)
    good_before, bad_before = mean_logp(policy, prompt, good), mean_logp(policy, prompt, bad)
    trainer = GRPOTrainer(policy, reference, lr=1e-2, clip=0.2, kl_coef=0.01, minibatch=4, update_epochs=3)
    info = trainer.update([Group(prompt, [good, bad, bad, good], [1.0, 0.0, 0.0, 1.0])], random.Random(0))
    assert info["groups"] == 1.0
    assert info["sequences"] == 4.0
    assert info["steps"] == 3.0  # 3 epochs x 1 minibatch of 4
    assert trainer.steps == 3
    assert changed(before, policy)  # some parameter moved
    good_after, bad_after = mean_logp(policy, prompt, good), mean_logp(policy, prompt, bad)
    assert good_after > good_before + 0.3
    assert good_after - bad_after > good_before - bad_before + 0.3
    assert not changed(ref_before, reference)  # the reference stays frozen
    assert info["kl"] >= 0.0


def test_grpo_drops_zero_variance_groups(policy, task):
    prompt, good, bad = task
    before = snapshot(policy)
    trainer = GRPOTrainer(policy, policy.frozen_copy(), lr=1e-2, clip=0.2, kl_coef=0.01, minibatch=4)
    groups = [Group(prompt, [good, bad, good], [1.0, 1.0, 1.0]), Group(prompt, [bad, bad, good], [0.0, 0.0, 0.0])]
    info = trainer.update(groups, random.Random(0))
    assert info["groups"] == 2.0
    assert info["sequences"] == 0.0
    assert info["steps"] == 0.0
    assert trainer.steps == 0
    assert not changed(before, policy)


def test_grpo_keeps_mixed_groups_beside_dropped_ones(policy, task):
    prompt, good, bad = task
    trainer = GRPOTrainer(policy, policy.frozen_copy(), lr=1e-3, clip=0.2, kl_coef=0.0, minibatch=2)
    groups = [Group(prompt, [good, good], [1.0, 1.0]), Group(prompt, [good, bad, bad], [1.0, 0.0, 0.5])]
    info = trainer.update(groups, random.Random(0))
    assert info["sequences"] == 3.0
    assert info["steps"] == 2.0  # ceil(3 / 2) minibatches


def test_grpo_runs_each_prompt_of_a_step_once(policy, task, monkeypatch):
    """A step's rows that share a prompt are packed into one row of one forward; the step's gradient is still
    the mean over its sequences."""
    prompt, good, bad = task
    calls: list[list] = []
    real = policy.pair_logprobs
    monkeypatch.setattr(policy, "pair_logprobs", lambda p, c: calls.append(p) or real(p, c))
    seen: list[torch.Size] = []
    hook = policy.model.model.register_forward_pre_hook(
        lambda _m, _a, kw: seen.append(kw["input_ids"].shape), with_kwargs=True
    )
    prompts = [prompt, prompt[2:], prompt[4:], prompt[6:]]
    groups = [Group(p, [good, bad, good], [1.0, 0.0, 0.5]) for p in prompts]
    trainer = GRPOTrainer(policy, policy.frozen_copy(), lr=1e-3, clip=0.2, kl_coef=0.0, minibatch=12)
    try:
        info = trainer.update(groups, random.Random(0))
    finally:
        hook.remove()
    assert info["steps"] == 1.0 and len(calls) == 1 and len(calls[0]) == 12  # one step, one micro-batch
    # the step's forward holds one row per prompt: the prompt once, then its three completions
    assert seen[-1][0] == 4
    assert seen[-1][1] == len(prompt) + len(good) + len(bad) + len(good)


def test_grpo_without_dropping_trains_on_constant_groups_with_zero_advantage(policy, task):
    prompt, good, bad = task
    trainer = GRPOTrainer(
        policy, policy.frozen_copy(), lr=1e-2, clip=0.2, kl_coef=0.0, minibatch=4, drop_zero_variance=False
    )
    info = trainer.update([Group(prompt, [good, bad], [1.0, 1.0])], random.Random(0))
    assert info["sequences"] == 2.0
    assert info["loss"] == pytest.approx(0.0, abs=1e-7)  # zero advantages, no KL


def test_grpo_multi_epoch_ratio_is_against_the_sampling_policy(policy, task):
    prompt, good, bad = task
    trainer = GRPOTrainer(policy, policy.frozen_copy(), lr=5e-2, clip=0.2, kl_coef=0.0, minibatch=4, update_epochs=4)
    info = trainer.update([Group(prompt, [good, bad, bad, good], [1.0, 0.0, 0.0, 1.0])], random.Random(0))
    # after several large steps the policy has moved far from the one that sampled the rollouts
    assert info["clip_fraction"] > 0.0


# --- RWR ----------------------------------------------------------------------------------------


def test_rwr_update_raises_the_weighted_example(policy, task):
    prompt, good, bad = task
    initial = policy.frozen_copy()
    init_before = snapshot(initial)
    before = snapshot(policy)
    lp_before = mean_logp(policy, prompt, good)
    trainer = RWRTrainer(policy, initial, lr=1e-2, kl_coef=0.05, max_kl=100.0, passes=3, batch_size=2)
    info = trainer.update([(prompt, good, 1.0)], random.Random(0))
    assert info["examples"] == 1.0
    assert info["steps"] == 3.0
    assert info["stopped_by_kl"] == 0.0
    assert changed(before, policy)
    assert mean_logp(policy, prompt, good) > lp_before + 0.1
    assert not changed(init_before, initial)


def test_rwr_higher_weight_example_gains_more(tok):
    def run(w_red: float, w_blu: float) -> tuple[float, float]:
        pol = Policy(build_tiny_model(CFG, tok, seed=0), tok, torch.device("cpu"), max_length=64)
        prompt = pol.encode("<|user|>name a colour<|assistant|>")
        red, blu = pol.completion_ids("red"), pol.completion_ids("blu")
        r0, b0 = mean_logp(pol, prompt, red), mean_logp(pol, prompt, blu)
        trainer = RWRTrainer(pol, pol.frozen_copy(), lr=1e-2, kl_coef=0.0, max_kl=100.0, passes=4, batch_size=2)
        trainer.update([(prompt, red, w_red), (prompt, blu, w_blu)], random.Random(0))
        return mean_logp(pol, prompt, red) - r0, mean_logp(pol, prompt, blu) - b0

    red_heavy = run(1.9, 0.1)
    blu_heavy = run(0.1, 1.9)
    assert red_heavy[0] > 0.1  # the weighted example's log-prob rises
    assert blu_heavy[1] > 0.1
    # the same data from the same start: whichever example carries the weight gains more
    assert red_heavy[0] > blu_heavy[0] + 0.05
    assert blu_heavy[1] > red_heavy[1] + 0.05
    assert red_heavy[0] - red_heavy[1] > 0.0
    assert blu_heavy[1] - blu_heavy[0] > 0.0


def test_rwr_stops_after_first_pass_past_the_kl_cap(policy, task):
    prompt, good, bad = task
    examples = [(prompt, good, 1.0), (prompt, bad, 1.0), (prompt, good, 0.5)]
    trainer = RWRTrainer(policy, policy.frozen_copy(), lr=1e-2, kl_coef=0.05, max_kl=1e-9, passes=5, batch_size=2)
    info = trainer.update(examples, random.Random(0))
    assert info["stopped_by_kl"] == 1.0
    assert info["steps"] == 2.0  # ceil(3 / 2) batches in one pass
    assert trainer.steps == 2
    assert info["kl"] > 1e-9


def test_rwr_without_cap_runs_every_pass(policy, task):
    prompt, good, bad = task
    examples = [(prompt, good, 1.0), (prompt, bad, 1.0), (prompt, good, 0.5)]
    trainer = RWRTrainer(policy, policy.frozen_copy(), lr=1e-3, kl_coef=0.05, max_kl=1e6, passes=3, batch_size=2)
    info = trainer.update(examples, random.Random(0))
    assert info["stopped_by_kl"] == 0.0
    assert info["steps"] == 6.0


def test_rwr_with_no_examples_does_nothing(policy):
    before = snapshot(policy)
    trainer = RWRTrainer(policy, policy.frozen_copy(), lr=1e-2, kl_coef=0.05, max_kl=1.0, passes=3, batch_size=2)
    info = trainer.update([], random.Random(0))
    assert info == {"examples": 0.0, "steps": 0.0, "nll": 0.0, "kl": 0.0, "stopped_by_kl": 0.0}
    assert not changed(before, policy)


# --- SFT ----------------------------------------------------------------------------------------


def test_sft_lowers_loss_on_fixed_pairs(policy):
    pairs = [
        (ids(policy, "<|user|>a<|assistant|>"), policy.completion_ids("xy")),
        (ids(policy, "<|user|>b<|assistant|>"), policy.completion_ids("zw")),
    ]

    def pair_nll() -> float:
        return -sum(mean_logp(policy, p, c) for p, c in pairs) / len(pairs)

    before = pair_nll()
    seen: list[tuple[int, float]] = []
    losses = sft(
        policy, pairs, steps=30, lr=1e-2, batch_size=4, rng=random.Random(0), on_step=lambda s, v: seen.append((s, v))
    )
    assert len(losses) == 30
    assert [s for s, _ in seen] == list(range(30))
    assert [loss for _, loss in seen] == losses
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 1.0
    assert pair_nll() < before - 1.0


# --- optimizer state ----------------------------------------------------------------------------


def test_optimizer_state_roundtrip(policy, task, tmp_path):
    prompt, good, bad = task
    trainer = GRPOTrainer(policy, policy.frozen_copy(), lr=1e-3, clip=0.2, kl_coef=0.01, minibatch=2)
    trainer.update([Group(prompt, [good, bad, good], [1.0, 0.0, 1.0])], random.Random(0))
    assert trainer.steps == 2
    path = tmp_path / "opt.pt"
    trainer.save_state(path)

    fresh = GRPOTrainer(policy, policy.frozen_copy(), lr=1e-3, clip=0.2, kl_coef=0.01, minibatch=2)
    assert fresh.steps == 0 and not fresh.optimizer.state_dict()["state"]
    fresh.load_state(path)
    assert fresh.steps == 2
    a, b = trainer.optimizer.state_dict(), fresh.optimizer.state_dict()
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys() and len(a["state"]) > 0
    for key, slots in a["state"].items():
        assert slots.keys() == b["state"][key].keys()
        for name, value in slots.items():
            assert torch.equal(value, b["state"][key][name]), (key, name)
    # the restored moments are non-trivial (Adam has seen gradients)
    assert any(float(s["exp_avg_sq"].abs().sum()) > 0 for s in b["state"].values())


def test_trainer_step_counts_and_clips_gradients(policy, task):
    prompt, good, _ = task
    trainer = _Trainer(policy, lr=1e-3)

    def loss_of(part):
        batch = policy.make_batch([p for p, _ in part], [c for _, c in part])
        return -(policy.logprobs(batch) * batch.mask).sum() * 1000.0, {}, 1.0  # a huge gradient

    norm = trainer._accumulate([(prompt, good)], loss_of)["grad_norm"]
    assert trainer.steps == 1
    assert norm > 1.0  # the pre-clip norm is reported
    total = torch.sqrt(sum((p.grad.detach() ** 2).sum() for p in policy.model.parameters() if p.grad is not None))
    assert float(total) == pytest.approx(1.0, rel=1e-3)  # clipped to 1


def test_grpo_groups_train_on_the_token_that_ended_each_rollout(policy):
    """End-of-sequence or a sampled padding token is appended (the decoder strips both); a cut-off rollout gets
    nothing, and a rollout that sampled padding first is not empty (an empty completion cannot be scored)."""
    from genenv_engine.backends.base import Completion
    from genenv_engine.core.records import CheckResult, Task
    from genenv_engine.training.agent import Attempt, TaskAttempts, grpo_groups

    tok = policy.tokenizer
    eos, pad = tok.eos_token_id, tok.pad_token_id
    completions = [
        Completion("ab", [1, 2], finished=True),
        Completion("ab", [1, 2], finished=True, end_token=eos),
        Completion("", [], finished=False, end_token=pad),
        Completion("abc", [1, 2, 3], finished=False),
    ]
    task = Task(id="t", benchmark="bfcl", prompt="p", answer="a")
    attempts = [
        Attempt(c, CheckResult(bool(i % 2), float(i % 2)), float(i % 2), bool(i % 2)) for i, c in enumerate(completions)
    ]
    (group,) = grpo_groups(policy, [TaskAttempts(task, "p", attempts)])
    assert group.completions == [[1, 2, eos], [1, 2, eos], [pad], [1, 2, 3]]
    assert group.rewards == [0.0, 1.0, 0.0, 1.0]


# --- length-sorted micro-batches -------------------------------------------------------------------


def _one_step_grads(tok, monkeypatch, budget: int, kind: str) -> tuple[list[torch.Tensor], list[list[int]]]:
    """The gradient of one GRPO or RWR step over rows of four different lengths, under a micro-batch budget, and the
    sizes of the micro-batches the step ran."""
    import genenv_engine.training.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "PAD_BUDGET", budget)
    torch.manual_seed(0)
    policy = Policy(build_tiny_model(CFG, tok, seed=0), tok, torch.device("cpu"), max_length=64)
    prompts = [policy.encode("<|user|>" + "x" * n + "<|assistant|>") for n in (3, 30, 9, 20)]
    completions = [policy.completion_ids(t) for t in ("a", "bbbbbbbb", "cc", "ddddd")]
    sizes: list[int] = []
    real = policy.pair_logprobs
    monkeypatch.setattr(policy, "pair_logprobs", lambda p, c: sizes.append(len(p)) or real(p, c))
    if kind == "grpo":
        trainer = GRPOTrainer(policy, policy.frozen_copy(), lr=1e-3, clip=0.2, kl_coef=0.1, minibatch=8)
        trainer.update(
            [Group(p, [c, c[:1] + c], [1.0, 0.0]) for p, c in zip(prompts, completions, strict=False)], random.Random(0)
        )
    else:
        trainer = RWRTrainer(policy, policy.frozen_copy(), lr=1e-3, kl_coef=0.1, max_kl=100.0, passes=1, batch_size=8)
        trainer.update(
            [(p, c, w) for p, c, w in zip(prompts, completions, (1.0, 2.0, 0.5, 1.5), strict=False)], random.Random(0)
        )
    grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in policy.parameters()]
    return grads, sizes


@pytest.mark.parametrize("kind", ["grpo", "rwr"])
def test_length_sorted_micro_batches_give_the_whole_steps_gradient(tok, monkeypatch, kind):
    whole, one = _one_step_grads(tok, monkeypatch, 10**6, kind)
    parts, many = _one_step_grads(tok, monkeypatch, 60, kind)
    assert len(one) == 1 and len(many) > 1  # the small budget did split the step
    assert sum(float(g.abs().sum()) for g in whole) > 0
    for a, b in zip(whole, parts, strict=False):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
