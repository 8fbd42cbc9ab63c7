"""`Policy.row_logprobs` (each prompt run once for all its completions) equals `Policy.logprobs` on `make_batch`.

Checked on a full tiny model, on a grouped-query-attention Llama (SmolLM2's shape: fewer key/value heads than
query heads) and on a LoRA adapter of a shared base whose adapter weights are not zero, with prompts of several
lengths sent several times, completions of several lengths, forwards split by ``rows``, and pairs cut by
``max_length``.
"""

from __future__ import annotations

import random

import pytest
import torch

from genenv_engine.config import ModelConfig, RuntimeConfig
from genenv_engine.training.models import warmstart_agent
from genenv_engine.training.policy import Policy, build_tiny_model
from genenv_engine.training.tokenizer import build_byte_tokenizer


def gqa_policy(max_length: int) -> Policy:
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = build_byte_tokenizer()
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        intermediate_size=96,
        max_position_embeddings=256,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=True,
    )
    return Policy(LlamaForCausalLM(cfg), tok, torch.device("cpu"), max_length)


def tiny_policy(max_length: int) -> Policy:
    tok = build_byte_tokenizer()
    cfg = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_length=max_length)
    return Policy(build_tiny_model(cfg, tok, seed=1), tok, torch.device("cpu"), max_length)


def lora_policy(max_length: int, tmp_path) -> Policy:
    tok = build_byte_tokenizer()
    small = dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_length=max_length)
    build_tiny_model(ModelConfig(**small), tok, seed=3).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    agent = warmstart_agent(
        ModelConfig(kind="hf", path=str(tmp_path), agent_tuning="lora", lora_r=4, lora_alpha=8, **small),
        RuntimeConfig(),
        seed=0,
    )
    with torch.no_grad():  # LoRA's B starts at zero: make the adapter change the outputs
        for p in agent.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return agent


def pairs(max_length: int) -> tuple[list[list[int]], list[list[int]]]:
    rng = random.Random(5)
    prompts, completions = [], []
    for n in (7, 19, 3, 30):
        prompt = [rng.randrange(3, 200) for _ in range(n)]
        for _ in range(rng.choice((1, 3, 4))):  # a prompt repeated as a task's rollouts are
            prompts.append(prompt)
            completions.append([rng.randrange(3, 200) for _ in range(rng.choice((1, 2, 6, 11)))])
    prompts.append([9] * (max_length - 2))  # cut by max_length: the prompt loses tokens from the left
    completions.append([4, 5, 6, 7])
    return prompts, completions


@pytest.mark.parametrize("kind", ["tiny", "gqa", "lora"])
@pytest.mark.parametrize("rows", [1, 4, 64])
def test_row_logprobs_equal_the_batched_forward(kind, rows, tmp_path):
    max_length = 40
    pol = {
        "tiny": lambda: tiny_policy(max_length),
        "gqa": lambda: gqa_policy(max_length),
        "lora": lambda: lora_policy(max_length, tmp_path),
    }[kind]()
    pol.model.eval()
    prompts, completions = pairs(max_length)
    batch = pol.make_batch(prompts, completions)
    with torch.no_grad():
        want = pol.logprobs(batch)
    got = pol.row_logprobs(prompts, completions, rows)
    assert len(got) == len(prompts)
    for i, vec in enumerate(got):
        n = int(batch.attention_mask[i].sum()) - 1
        assert vec.shape == (n,)
        assert torch.allclose(vec, want[i, :n], atol=1e-5), i
        assert bool((vec[batch.mask[i, :n] == 0] == 0).all())  # prompt positions are 0, as in `logprobs`
        assert int((vec != 0).sum()) == int(batch.mask[i].sum())  # every completion token has its log-prob
    assert float(want.abs().sum()) > 0


def test_row_logprobs_run_each_prompt_once(tmp_path):
    pol = tiny_policy(64)
    pol.model.eval()
    prompts, completions = pairs(64)
    seen: list[torch.Tensor] = []
    hook = pol.model.model.register_forward_pre_hook(lambda _m, _a, kw: seen.append(kw["input_ids"]), with_kwargs=True)
    try:
        pol.row_logprobs(prompts, completions, rows=64)
    finally:
        hook.remove()
    fitted = [pol._fit(p, c) for p, c in zip(prompts, completions, strict=False)]
    distinct = {tuple(p) for p, _ in fitted}
    assert len(seen) == 1 and seen[0].shape[0] == len(distinct)  # one forward, one row per distinct prompt
    # each row holds its prompt once, then every completion of it: no prompt token is run twice
    real = int((seen[0] != pol.tokenizer.pad_token_id).sum())
    assert real == sum(len(p) for p in distinct) + sum(len(c) for _, c in fitted)
    assert real < sum(len(p) + len(c) for p, c in fitted)


def test_pair_logprobs_equal_the_padded_forward_with_gradients():
    """The trainers' packed forward: the same values, mask and gradient as `logprobs` on `make_batch`."""
    prompts, completions = pairs(40)
    grads = []
    for packed in (False, True):
        pol = tiny_policy(40)
        if packed:
            logp, mask = pol.pair_logprobs(prompts, completions)
        else:
            batch = pol.make_batch(prompts, completions)
            logp, mask = pol.logprobs(batch), batch.mask
        weights = torch.arange(1, len(prompts) + 1, dtype=torch.float32)[:, None]
        (logp * mask * weights).sum().backward()
        grads.append(([p.grad.clone() for p in pol.parameters()], logp.detach(), mask))
    (g_pad, lp_pad, m_pad), (g_pack, lp_pack, m_pack) = grads
    assert torch.equal(m_pad, m_pack)
    assert torch.allclose(lp_pad, lp_pack, atol=1e-5)
    assert float(lp_pack.abs().sum()) > 0
    for a, b in zip(g_pad, g_pack, strict=False):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)
    assert sum(float(g.abs().sum()) for g in g_pack) > 0


def test_row_logprobs_refuse_an_empty_completion():
    pol = tiny_policy(32)
    with pytest.raises(ValueError, match="non-empty"):
        pol.row_logprobs([[3, 4]], [[]], rows=4)


def _batched_row_logprobs(self, prompts, completions, rows):
    """What the trainers computed before `row_logprobs`: `logprobs` on `make_batch`, ``rows`` pairs at a time."""
    out = []
    with torch.no_grad():
        for start in range(0, len(prompts), rows):
            batch = self.make_batch(prompts[start : start + rows], completions[start : start + rows])
            lp = self.logprobs(batch)
            out += [lp[j, : int(batch.attention_mask[j].sum()) - 1] for j in range(len(batch))]
    return out


@pytest.mark.parametrize("trainer", ["grpo", "rwr"])
def test_trainer_steps_are_those_of_per_batch_reference_logprobs(trainer, monkeypatch):
    """A GRPO update (several steps: sampling and reference log-probs both used) and an RWR update give the
    weights they gave when every micro-batch ran its own reference forward."""
    from genenv_engine.training.trainer import Group, GRPOTrainer, RWRTrainer

    prompts, completions = pairs(48)

    def run() -> list[torch.Tensor]:
        pol = tiny_policy(48)
        ref = pol.frozen_copy()
        if trainer == "grpo":
            groups, i = [], 0
            while i < len(prompts):
                j = i
                while j < len(prompts) and prompts[j] == prompts[i]:
                    j += 1
                groups.append(Group(prompts[i], completions[i:j], [float(r % 2) for r in range(j - i)]))
                i = j
            GRPOTrainer(pol, ref, lr=1e-2, clip=0.2, kl_coef=0.1, minibatch=4, steps=3, micro_batch=2).update(
                groups, random.Random(0)
            )
        else:
            examples = [(p, c, 1.0 + (k % 3)) for k, (p, c) in enumerate(zip(prompts, completions, strict=False))]
            RWRTrainer(pol, ref, lr=1e-2, kl_coef=0.1, max_kl=10.0, passes=2, batch_size=4, micro_batch=2).update(
                examples, random.Random(0)
            )
        return [p.detach().clone() for p in pol.parameters()]

    new = run()
    monkeypatch.setattr(Policy, "row_logprobs", _batched_row_logprobs)
    old = run()
    assert any(
        not torch.equal(a, b) for a, b in zip(new, tiny_policy(48).parameters(), strict=False)
    )  # the update moved it
    for a, b in zip(
        new, old, strict=False
    ):  # three Adam steps at lr 1e-2 scale rounding differences up: 1e-4, not 1e-5
        assert torch.allclose(a, b, atol=1e-4), float((a - b).abs().max())
