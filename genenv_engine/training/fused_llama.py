"""A hand-written, differentiable decoder forward of ``LlamaForCausalLM`` models under LoRA adapters, for updates.

`serves` says whether `hidden_states` computes what the transformers decoder computes for a model: a float32 Llama
on CPU that `genenv_engine.backends.llama_weights.serves` runs, whose base weights are frozen (LoRA tuning), outside
gradient checkpointing and autocast. `hidden_states` returns the final normed hidden states of the decoder for the
same inputs as the transformers call (token ids, a 2-d padding mask or a 4-d boolean mask, position ids), with
gradients flowing to the active adapter's LoRA matrices.

It is the same model with fewer, larger operations: the frozen query/key/value and gate/up projections laid out as
one matrix each (once per base, `base_layout`), the LoRA ``A`` matrices that read the same input stacked into one
product, the LoRA scaling applied by the ``B`` product itself (``addmm``'s ``alpha``) which also adds it to the base
output, the residual additions done by the output projections' matrix products, one fused RMSNorm kernel, and the
rotary embedding as one complex multiplication (the query and key rows of each head reordered so that rotary pairs
are adjacent; a reordering shared by queries and keys leaves every attention score unchanged). Equal to the
transformers forward up to float rounding (tested on SmolLM2's weights with an adapter: hidden states and LoRA
gradients), not bit for bit, so runs use it only when asked (``runtime.train_forward = "fused"``).
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import torch
import torch.nn.functional as F

from genenv_engine.backends.llama_weights import pair_rows

_LAYOUTS: dict[int, tuple[weakref.ref, tuple, BaseLayout]] = {}
LAYOUTS_KEPT = 2
"""Bases whose layout is kept at once (a LoRA agent and simulator share one; a role with its own base is a second)."""


class BaseLayout(NamedTuple):
    """The frozen weights of a Llama decoder laid out for `hidden_states` (see `base_layout`)."""

    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    layers: list[tuple[torch.Tensor, ...]]
    """Per layer: (input norm, qkv rows (q rows, then k rows, each paired by `pair_rows`, then v), o, post norm,
    gate/up rows, down), each a base weight (out, in) or norm vector."""


def _lora(module) -> tuple[torch.Tensor, torch.Tensor, float] | None:
    """The active adapter's (A, B, scaling) of a PEFT LoRA linear, or None for a plain linear (or no adapter)."""
    if type(module) is torch.nn.Linear:
        return None
    names = [n for n in module.active_adapters if n in module.lora_A]
    if not names:
        return None
    if len(names) > 1:
        raise ValueError("the fused forward runs one active LoRA adapter at a time")
    name = names[0]
    return module.lora_A[name].weight, module.lora_B[name].weight, float(module.scaling[name])


def _base(module) -> torch.Tensor:
    return module.weight if type(module) is torch.nn.Linear else module.base_layer.weight


def serves(model) -> bool:
    """Whether `hidden_states` computes ``model``'s decoder (a Llama, maybe under one LoRA adapter) in an update:
    float32 on CPU, base weights frozen, no gradient checkpointing, no autocast."""
    from genenv_engine.backends.llama_weights import serves as static_serves
    from genenv_engine.backends.llama_weights import unwrap

    if not static_serves(model):
        return False
    inner, active = unwrap(model)
    if len(active) > 1 or torch.is_autocast_enabled("cpu"):
        return False
    if getattr(inner, "is_gradient_checkpointing", False) and inner.training:
        return False
    # every adapter's matrices may train (only the active one is read); the base weights must not (their stacked
    # copies are laid out without gradients)
    return all(
        p.dtype == torch.float32 and ("lora_" in name or not p.requires_grad) for name, p in inner.named_parameters()
    )


def _signature(inner) -> tuple:
    from genenv_engine.backends.llama_weights import linears

    frozen = [inner.model.embed_tokens.weight, inner.model.norm.weight]
    for layer in inner.model.layers:
        frozen += [layer.input_layernorm.weight, layer.post_attention_layernorm.weight]
    frozen += [_base(m) for m in linears(inner)[1:]]
    return tuple((p.data_ptr(), p._version) for p in frozen)


def base_layout(inner) -> BaseLayout:
    """The frozen weights of ``inner`` (a ``LlamaForCausalLM``) laid out once per base: kept until one changes or the
    model is freed. The stacked q/k/v and gate/up matrices are copies: about two thirds of the decoder's linear
    weights again in memory (some 280 MB for SmolLM2-135M)."""
    key = id(inner)
    signature = _signature(inner)
    kept = _LAYOUTS.get(key)
    if kept is not None and kept[0]() is inner and kept[1] == signature:
        return kept[2]
    cfg = inner.config
    heads = cfg.num_attention_heads
    kv = cfg.num_key_value_heads or heads
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    layers = []
    with torch.no_grad():
        for layer in inner.model.layers:
            att, mlp = layer.self_attn, layer.mlp
            qkv = torch.cat([pair_rows(_base(att.q_proj), dim), pair_rows(_base(att.k_proj), dim), _base(att.v_proj)])
            gate_up = torch.cat([_base(mlp.gate_proj), _base(mlp.up_proj)])
            layers.append(
                (
                    layer.input_layernorm.weight,
                    qkv,
                    _base(att.o_proj),
                    layer.post_attention_layernorm.weight,
                    gate_up,
                    _base(mlp.down_proj),
                )
            )
    layout = BaseLayout(heads, kv, dim, cfg.rms_norm_eps, layers)
    if kept is None or kept[0]() is not inner:
        weakref.finalize(inner, _drop, key)  # a freed model takes its layout with it
    _LAYOUTS.pop(key, None)
    while len(_LAYOUTS) >= LAYOUTS_KEPT:
        _LAYOUTS.pop(next(iter(_LAYOUTS)))
    _LAYOUTS[key] = (weakref.ref(inner), signature, layout)
    return layout


def _drop(key: int) -> None:
    kept = _LAYOUTS.get(key)
    if kept is not None and kept[0]() is None:  # not a later model that took the freed one's id
        del _LAYOUTS[key]


def forget() -> None:
    """Drop the kept layout (tests; memory)."""
    _LAYOUTS.clear()


def _projections(
    x: torch.Tensor, base: torch.Tensor, modules: list, sizes: list[int], paired: list[int | None]
) -> list[torch.Tensor]:
    """``x`` (N, in) through the stacked base rows ``base`` of ``modules`` (output sizes ``sizes``), each plus its
    adapter's ``scaling * B @ A x``: one base product, one product for the stacked A's, one ``addmm`` per module.
    ``paired``: per module, None or the head size by which its B rows are paired (`pair_rows`) as its base rows are."""
    out = x @ base.t()
    loras = [_lora(m) for m in modules]
    present = [i for i, lora in enumerate(loras) if lora is not None]
    if not present:
        return list(out.split(sizes, dim=-1))
    a_all = x @ torch.cat([loras[i][0] for i in present]).t()
    a_parts = dict(zip(present, a_all.split([loras[i][0].shape[0] for i in present], dim=-1), strict=False))
    results, start = [], 0
    for i, size in enumerate(sizes):
        part = out[:, start : start + size]
        start += size
        if i not in a_parts:
            results.append(part)
            continue
        _, b, scaling = loras[i]
        if paired[i] is not None:
            b = pair_rows(b, paired[i])
        results.append(torch.addmm(part, a_parts[i], b.t(), alpha=scaling))
    return results


def _output(residual: torch.Tensor, x: torch.Tensor, module, base: torch.Tensor) -> torch.Tensor:
    """``residual + module(x)`` for a linear (maybe LoRA) ``module`` with base weight ``base``, as matrix products."""
    out = torch.addmm(residual, x, base.t())
    lora = _lora(module)
    if lora is None:
        return out
    a, b, scaling = lora
    return torch.addmm(out, x @ a.t(), b.t(), alpha=scaling)


def _rotary(inner, positions: torch.Tensor) -> torch.Tensor:
    """exp(i * position * inv_freq), (B, T, 1, head_dim / 2) complex: the rotation of each adjacent pair."""
    rotary = inner.model.rotary_emb
    angles = positions[..., None].float() * rotary.inv_freq.float().to(positions.device)
    scale = float(rotary.attention_scaling)
    rotation = torch.polar(torch.full_like(angles, scale), angles)
    return rotation[:, :, None, :]


def _mask(attention_mask: torch.Tensor | None, batch: int, width: int, device: torch.device) -> torch.Tensor:
    """The boolean (B, 1, T, T) mask of who attends to whom: a 4-d boolean mask as given, else causal and, for a
    2-d padding mask (1 = token), no padding key except a padding query's own position (so no row is empty)."""
    if attention_mask is not None and attention_mask.dim() == 4:
        if attention_mask.dtype != torch.bool:
            raise ValueError("the fused forward takes a boolean 4-d mask (True: attends), not an additive one")
        return attention_mask
    causal = torch.ones((width, width), dtype=torch.bool, device=device).tril()
    if attention_mask is None:
        return causal.expand(batch, 1, width, width)
    keys = attention_mask.bool()[:, None, None, :]
    return causal & (keys | torch.eye(width, dtype=torch.bool, device=device))


def hidden_states(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None
) -> torch.Tensor:
    """The decoder's final normed hidden states (B, T, hidden) of ``model`` for these inputs, as the transformers
    decoder's ``last_hidden_state`` (``get_base_model().get_decoder()`` under PEFT). Only for a model `serves`
    accepts: base weights that train would get no gradient through their stacked copies."""
    from genenv_engine.backends.llama_weights import unwrap

    inner, _ = unwrap(model)
    layout = base_layout(inner)
    batch, width = input_ids.shape
    heads, kv, dim, eps = layout.heads, layout.kv_heads, layout.head_dim, layout.eps
    if position_ids is None:
        position_ids = torch.arange(width, device=input_ids.device).expand(batch, width)
    rotation = _rotary(inner, position_ids)
    mask = _mask(attention_mask, batch, width, input_ids.device)
    x = F.embedding(input_ids, inner.model.embed_tokens.weight).reshape(batch * width, -1)
    size = x.shape[-1]

    def rotate(t: torch.Tensor, n: int) -> torch.Tensor:
        t = torch.view_as_complex(t.reshape(batch, width, n, dim // 2, 2)) * rotation
        return torch.view_as_real(t).reshape(batch, width, n, dim).transpose(1, 2)

    for layer, (norm_in, qkv, o, norm_post, gate_up, down) in zip(inner.model.layers, layout.layers, strict=False):
        att, mlp = layer.self_attn, layer.mlp
        h = F.rms_norm(x, (size,), norm_in, eps)
        q, k, v = _projections(
            h, qkv, [att.q_proj, att.k_proj, att.v_proj], [heads * dim, kv * dim, kv * dim], [dim, dim, None]
        )
        q, k = rotate(q, heads), rotate(k, kv)
        v = v.reshape(batch, width, kv, dim).transpose(1, 2)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=att.scaling, enable_gqa=heads != kv)
        attended = attended.transpose(1, 2).reshape(batch * width, heads * dim)
        x = _output(x, attended, att.o_proj, o)
        h = F.rms_norm(x, (size,), norm_post, eps)
        gate, up = _projections(h, gate_up, [mlp.gate_proj, mlp.up_proj], [mlp.intermediate_size] * 2, [None, None])
        x = _output(x, F.silu(gate) * up, mlp.down_proj, down)
    return F.rms_norm(x, (size,), inner.model.norm.weight, eps).reshape(batch, width, size)
