"""The decode weights of a Llama-architecture model for `genenv_engine.backends.static_llama.StaticLlama`.

`serves` says whether the static forward can run a model: a ``LlamaForCausalLM`` on CPU (default RoPE, SiLU MLP, no
biases, grouped-query attention allowed), alone or under PEFT LoRA adapters on its linear layers (plain LoRA: no DoRA
or other variant, no LoRA bias). `decode_weights` lays the weights out for the static forward: the query and key
rows permuted within each head so the rotary pairs are adjacent, each key/value head's queries, key and value fused
into one matrix, the gate and up projections fused; the active adapter merged into each linear weight
(``W + scaling * B @ A``); optionally cast to another dtype (bfloat16 decoding over float32 master weights). For a
model of `KEEP_MIN_PARAMS` or more the result is kept per model and adapter until a weight changes, so a policy
version is laid out once however many decode calls it serves. A change is seen through the tensors' version
counters, which every in-place write through the parameter bumps (an optimizer's foreach or single-tensor step, a
loaded state dict); a write that bypasses them (``p.data``, a fused optimizer step) must call `forget`.
"""

from __future__ import annotations

import functools
import weakref
from typing import NamedTuple

import torch
import torch.nn.functional as F

TABLE_VOCAB = 4096
"""Vocabularies up to this size get the first layer's query/key/value projection as a table of every token (a
49,152-token vocabulary would make it a 54-GFLOP, 190 MB table per policy version: not worth it)."""
KEEP_MIN_PARAMS = 30_000_000
"""Models with fewer parameters are laid out afresh for every decode, as cheap as a lookup for them."""
CACHE_ENTRIES = 2
"""Laid-out weights kept at once (a LoRA agent and simulator on one base alternate their decodes)."""

_CACHE: dict[tuple[int, tuple[str, ...], torch.dtype], tuple[weakref.ref, tuple, DecodeWeights]] = {}


class DecodeWeights(NamedTuple):
    """The tensors and shapes `StaticLlama` reads (see `decode_weights`)."""

    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    inner_size: int
    embed: torch.Tensor
    norm: torch.Tensor
    head: torch.Tensor
    layers: list[tuple[torch.Tensor, ...]]
    """Per layer: (input norm, fused qkv (hidden, kv_heads * (group + 2) * head_dim), o transposed, post norm,
    fused gate/up (2 * inner, hidden), down transposed)."""
    first_qkv: torch.Tensor | None
    """The first layer's normed qkv projection of every token (vocabulary, ...), or None (`TABLE_VOCAB`)."""
    inv_freq: torch.Tensor
    attention_scaling: float


def unwrap(model):
    """The ``LlamaForCausalLM`` under a PEFT model (the model itself otherwise) and the active adapter names."""
    if hasattr(model, "peft_config") and hasattr(model, "get_base_model"):
        active = model.active_adapter
        return model.get_base_model(), tuple(active) if isinstance(active, (list, tuple)) else (active,)
    return model, ()


def _plain_lora(module) -> bool:
    """Whether a PEFT LoRA linear computes ``base(x) + scaling * B(A(x))`` for each active adapter (merge-able)."""
    base = getattr(module, "base_layer", None)
    if type(base) is not torch.nn.Linear or base.bias is not None or getattr(module, "merged", False):
        return False
    if getattr(module, "fan_in_fan_out", False) or getattr(module, "disable_adapters", False):
        return False
    for name in module.active_adapters:
        if name not in module.lora_A:
            continue
        if name in getattr(module, "lora_variant", {}) or module.lora_bias.get(name, False):
            return False
        dropout = module.lora_dropout[name]
        if module.training and not isinstance(dropout, torch.nn.Identity) and dropout.p > 0:
            return False
    return True


def linear_weight(module) -> torch.Tensor:
    """The weight a linear layer applies: its own, or a LoRA layer's base weight with the active adapters merged."""
    if type(module) is torch.nn.Linear:
        return module.weight
    weight = module.base_layer.weight
    for name in module.active_adapters:
        if name in module.lora_A:
            delta = module.lora_B[name].weight.float() @ module.lora_A[name].weight.float()
            weight = (weight.float() + delta * module.scaling[name]).to(weight.dtype)
    return weight


def linears(model) -> list:
    """The linear layers of a ``LlamaForCausalLM``: the output head, then each layer's seven projections."""
    layers = []
    for layer in model.model.layers:
        att, mlp = layer.self_attn, layer.mlp
        layers += [att.q_proj, att.k_proj, att.v_proj, att.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj]
    return [model.lm_head, *layers]


def pair_rows(weight: torch.Tensor, head_dim: int) -> torch.Tensor:
    """``weight`` (heads * head_dim, in) with the rows of each head reordered so that the rotary pairs (i, i + half)
    sit side by side (rows 2i, 2i + 1), the layout a complex-number rotary embedding reads.

    >>> pair_rows(torch.arange(8.0)[:, None], 4).flatten().tolist()
    [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]
    """
    order = _pair_order(head_dim, weight.device)
    return weight.view(-1, head_dim, weight.shape[-1])[:, order].reshape(weight.shape)


@functools.lru_cache(maxsize=8)
def _pair_order(head_dim: int, device: torch.device) -> torch.Tensor:
    """The row order within a head that puts rotary pairs side by side (made once per head size and device: the
    fused forward pairs LoRA B rows on every call)."""
    half = head_dim // 2
    return torch.tensor([j for i in range(half) for j in (i, i + half)], device=device)


def serves(model) -> bool:
    """Whether `StaticLlama` computes what ``model`` (a Llama, maybe under LoRA adapters) computes."""
    from transformers import LlamaForCausalLM

    inner, _ = unwrap(model)
    if type(inner) is not LlamaForCausalLM:
        return False
    cfg = inner.config
    if inner.training and getattr(cfg, "attention_dropout", 0.0):
        return False
    rope = getattr(cfg, "rope_parameters", None) or {}
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads or cfg.num_attention_heads
    if (
        cfg.hidden_act != "silu"
        or getattr(cfg, "attention_bias", False)
        or getattr(cfg, "mlp_bias", False)
        or rope.get("rope_type", "default") != "default"
        or getattr(cfg, "pretraining_tp", 1) != 1
        or heads % kv
        or len(inner.model.layers) != cfg.num_hidden_layers
        or type(inner.model.embed_tokens) is not torch.nn.Embedding
    ):
        return False
    for m in linears(inner):
        if type(m) is torch.nn.Linear:
            if m.bias is not None:
                return False
        elif not _plain_lora(m):
            return False
    return all(p.device.type == "cpu" and p.is_floating_point() for p in inner.parameters())


def _signature(model) -> tuple:
    """Changes whenever a weight is replaced or written in place (tensor version counters)."""
    return tuple((p.data_ptr(), p._version) for p in model.parameters())


def decode_weights(model, dtype: torch.dtype | None = None) -> DecodeWeights:
    """The laid-out weights of ``model`` (`serves`) in ``dtype`` (None: the model's own), kept per policy version."""
    inner, active = unwrap(model)
    dtype = dtype or inner.model.embed_tokens.weight.dtype
    if sum(p.numel() for p in inner.parameters()) < KEEP_MIN_PARAMS:
        with torch.no_grad():
            return _lay_out(inner, dtype)
    key = (id(inner), active, dtype)
    signature = _signature(inner)
    kept = _CACHE.get(key)
    if kept is not None and kept[0]() is inner and kept[1] == signature:
        return kept[2]
    with torch.no_grad():
        weights = _lay_out(inner, dtype)
    _CACHE.pop(key, None)
    while len(_CACHE) >= CACHE_ENTRIES:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (weakref.ref(inner), signature, weights)
    return weights


def forget() -> None:
    """Drop every kept layout (tests; memory)."""
    _CACHE.clear()


def _lay_out(inner, dtype: torch.dtype) -> DecodeWeights:
    cfg = inner.config
    heads = cfg.num_attention_heads
    kv = cfg.num_key_value_heads or heads
    group = heads // kv
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads

    def cast(t: torch.Tensor) -> torch.Tensor:
        return t if t.dtype == dtype else t.to(dtype)

    layers = []
    for layer in inner.model.layers:
        att, mlp = layer.self_attn, layer.mlp
        q = pair_rows(linear_weight(att.q_proj), dim).view(kv, group, dim, -1)
        k = pair_rows(linear_weight(att.k_proj), dim).view(kv, 1, dim, -1)
        v = linear_weight(att.v_proj).view(kv, 1, dim, -1)
        qkv = torch.stack([q[:, 0], k[:, 0], v[:, 0]], 1) if group == 1 else torch.cat([q, k, v], 1)
        layers.append(
            (
                cast(layer.input_layernorm.weight),
                cast(qkv.reshape(kv * (group + 2) * dim, -1).t()),
                cast(linear_weight(att.o_proj)).t(),
                cast(layer.post_attention_layernorm.weight),
                cast(torch.cat([linear_weight(mlp.gate_proj), linear_weight(mlp.up_proj)])),
                cast(linear_weight(mlp.down_proj)).t(),
            )
        )
    embed = cast(inner.model.embed_tokens.weight)
    head_weight = linear_weight(inner.lm_head)
    head = embed if head_weight is inner.model.embed_tokens.weight else cast(head_weight)  # tied: cast once
    first = None
    if embed.shape[0] <= TABLE_VOCAB:
        first = F.rms_norm(embed, layers[0][0].shape, layers[0][0], cfg.rms_norm_eps) @ layers[0][1]
    rotary = inner.model.rotary_emb
    return DecodeWeights(
        heads,
        kv,
        dim,
        cfg.rms_norm_eps,
        cfg.intermediate_size,
        embed,
        cast(inner.model.norm.weight),
        head,
        layers,
        first,
        rotary.inv_freq.float(),
        rotary.attention_scaling,
    )
