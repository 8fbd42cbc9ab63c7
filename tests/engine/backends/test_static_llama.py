"""The hand-written Llama forward of the hf backend computes what the transformers model computes.

`genenv_engine.backends.static_llama.StaticLlama` replaces the model's forward while small CPU
Llama models decode; these tests check its logits against the model's own on left-padded batches
(prefill, decoding steps, and steps after ended rows left the batch), that `decode` draws the same
tokens on both paths, and that `fits` keeps every other model on the transformers path.
"""

from __future__ import annotations

import pytest
import torch

from genenv_engine.backends import hf
from genenv_engine.backends.static_llama import StaticLlama, fits, plan_prefill
from genenv_engine.config import ModelConfig
from genenv_engine.training.policy import build_tiny_model
from genenv_engine.training.tokenizer import build_byte_tokenizer

CFG = ModelConfig(hidden_size=32, num_layers=3, num_heads=4, intermediate_size=48, max_length=96)
TEXTS = [
    "a",
    "add 1 and 2",
    "the quick brown fox jumps",
    "sq 5",
    "mul 3 4 then add 7 and 8 and 9",
    "x y",
    "what is 2+2?",
    "neg 7",
    "add 1 and 2",
    "add 1 and 22",
    "the quick brown cat",
    "mul 3 4",
    "sq 5 and 6",
]
"""Prompts of several lengths; some equal, some a prefix of another, some sharing a few leading tokens."""


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    tok = build_byte_tokenizer()
    m = build_tiny_model(CFG, tok, seed=3)
    with torch.no_grad():  # larger weights than the initialisation, so the logits are far from uniform
        for p in m.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    return m.eval(), tok


def padded(tok, texts: list[str], group_rows: int = 8, share: int = 0):
    """Left-padded ids and mask of ``texts`` in the order of their `plan_prefill`, and the plan."""
    enc = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    width = max(map(len, enc))
    ids = torch.full((len(enc), width), tok.pad_token_id)
    attn = torch.zeros_like(ids)
    for i, e in enumerate(enc):
        ids[i, width - len(e) :], attn[i, width - len(e) :] = torch.tensor(e), 1
    plan = plan_prefill(enc, group_rows, share)
    order = torch.tensor(plan.order)
    return ids[order], attn[order], plan


def reference(model, ids: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
    """The model's next-token logits (rows, vocab) after each left-padded row."""
    positions = (attn.cumsum(-1) - 1).masked_fill(attn == 0, 0)
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=attn, position_ids=positions).logits[:, -1]


@pytest.mark.parametrize("group_rows,decode_groups,share", [(8, 1, 0), (3, 2, 2), (1, 8, 1)])
def test_prefill_and_steps_give_the_models_logits(model, group_rows, decode_groups, share):
    m, tok = model
    ids, attn, plan = padded(tok, TEXTS, group_rows, share)
    assert bool(plan.parents) == (share > 0)  # some prompts do copy a prefix
    rows, width = ids.shape
    positions = (attn.cumsum(-1) - 1).masked_fill(attn == 0, 0)
    net = StaticLlama(m, rows, width + 6)
    logits = net.prefill(ids, attn, positions, plan, hf._ranges(rows, decode_groups))
    assert logits.abs().max() > 1.0
    torch.testing.assert_close(logits, reference(m, ids, attn), atol=1e-5, rtol=1e-5)
    gen = torch.Generator().manual_seed(0)
    position = positions[:, -1]
    alive = torch.arange(rows)  # the batch's rows as rows of ``ids``
    for step in range(6):
        picked = torch.randint(0, 256, (alive.numel(),), generator=gen)
        ids = torch.cat([ids, ids.new_full((rows, 1), tok.pad_token_id)], 1)
        attn = torch.cat([attn, attn.new_zeros((rows, 1))], 1)
        ids[alive, -1], attn[alive, -1] = picked, 1
        position = position + 1
        logits = net.step(picked, position, width + step)
        want = reference(m, ids[alive], attn[alive])
        torch.testing.assert_close(logits, want, atol=1e-5, rtol=1e-5)
        if step in (1, 3):  # rows leave: a whole first group, then every other row
            ended = [i < 3 for i in range(alive.numel())] if step == 1 else [i % 2 == 0 for i in range(alive.numel())]
            keep = torch.tensor(net.drop(ended, width + step + 1))
            assert sorted(keep.tolist()) == [i for i, e in enumerate(ended) if not e]
            alive, position = alive[keep], position[keep]


def test_a_wrong_mask_is_seen(model):
    # guards against a vacuous comparison: letting the rows attend to their padding changes their logits
    m, tok = model
    ids, attn, _ = padded(tok, TEXTS)
    positions = (attn.cumsum(-1) - 1).masked_fill(attn == 0, 0)
    net = StaticLlama(m, *ids.shape)
    rows = ids.shape[0]
    whole = plan_prefill([[0] * ids.shape[1]] * rows, rows, 0)  # every row runs all its columns
    logits = net.prefill(ids, torch.ones_like(attn), positions, whole, [(0, rows)])
    diff = (logits - reference(m, ids, attn)).abs().amax(-1)
    short = attn.sum(-1) < attn.shape[1]
    assert bool((diff[short] > 1e-3).all()) and bool((diff[~short] < 1e-5).all())


@pytest.mark.parametrize("temperature", [1.0, 0.7, None])
def test_decode_draws_the_same_tokens_on_both_paths(model, temperature, monkeypatch):
    from genenv_engine.backends import static_llama

    m, tok = model
    ids, attn, _ = padded(tok, TEXTS * 3)
    # the static path reuses the last decode's storage: whatever it holds (NaN here) must not leak into this one
    monkeypatch.setitem(static_llama._SPARE, "kv", torch.full((1 << 22,), float("nan")))
    out = {}
    for fast in (True, False):
        torch.manual_seed(5)
        out[fast] = hf.decode(m, ids, attn, 16, tok.eos_token_id, tok.pad_token_id, temperature, fast=fast)
        out[fast] += (torch.rand(3),)  # the generator is left where ``generate`` leaves it
    (tokens, logprobs, lengths, finished, after), (tokens_hf, logprobs_hf, lengths_hf, finished_hf, after_hf) = (
        out[True],
        out[False],
    )
    assert torch.equal(lengths, lengths_hf) and torch.equal(finished, finished_hf)
    assert torch.equal(after, after_hf)
    real = torch.arange(16)[None] < lengths[:, None]
    assert torch.equal(tokens[real], tokens_hf[real])
    torch.testing.assert_close(logprobs[real], logprobs_hf[real], atol=1e-5, rtol=1e-5)


def test_only_plain_float32_cpu_llamas_fit(model):
    from transformers import LlamaConfig, LlamaForCausalLM

    from genenv_engine.training.adapters import new_adapter

    m, tok = model
    assert fits(m)
    assert not fits(build_tiny_model(CFG, tok, seed=0).to(torch.bfloat16))
    gqa = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    assert not fits(LlamaForCausalLM(gqa))
    lora = new_adapter(
        build_tiny_model(CFG, tok, seed=0), "agent", ModelConfig(kind="tiny", lora_targets=("q_proj", "v_proj"))
    )
    assert not fits(lora) and not fits(lora.base_model.model)
