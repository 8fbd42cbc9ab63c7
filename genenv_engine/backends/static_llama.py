"""A hand-written forward of ``LlamaForCausalLM`` models for CPU decoding over a static KV cache.

`fits` says whether a model takes it by default: a plain float32 ``LlamaForCausalLM`` on CPU (no PEFT adapter
or other wrapped layer, default RoPE, SiLU MLP, no biases, as many key/value heads as query heads).
`genenv_engine.backends.llama_weights.serves` is the wider set it can run when asked: grouped-query attention
(SmolLM2), LoRA roles (the adapter merged into the weights) and bfloat16 decoding of float32 weights.
`plan_prefill` decides how a batch of prompts is prefilled: which prompts copy the keys and values
of a prefix they share with another instead of computing them, the order of the cache rows and the
prefill groups. `StaticLlama` runs the model's own weight tensors with the operations of the
transformers forward, so its logits agree with the model's to float rounding (tested to 1e-5),
without the per-step work of the general implementation (the tiny agent decoding 128 bfcl prompts
spent a third of its time in the ``DynamicCache``'s concatenations and a fifth in the attention
kernel): one (layers, 2, rows, heads, columns, head_dim) key/value tensor
allocated once, one additive attention mask built once, decoding attention as two batched matrix
products per group of rows, the query/key/value and the gate/up projections fused into one
matrix product each, and the rotary tables computed once.

The cache rows are split into `groups` of consecutive rows of similar prompt length; a group's
attention reads only the columns its longest prompt needs (decoding attention reads the whole
cache every step, so on CPU it is bound by memory bandwidth and padding costs as much as prompt).
Rows that end leave their group: live rows of the group's tail are copied into their places
(`drop`), so every step runs on the live rows only. The KV storage is kept for the next decode
(`StaticLlama.release`), on huge pages where Linux allows (`_huge_empty`).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

_SPARE: dict[str, torch.Tensor] = {}
"""The largest KV storage of a finished decode, reused by the next (faulting in ~100 MB costs ~30 ms a call)."""
SPARE_MAX_BYTES = 512 << 20
"""A larger KV storage is not kept after its decode."""


def fits(model) -> bool:
    """Whether `StaticLlama` takes ``model`` by default (else the caller keeps the transformers path): a model
    `llama_weights.serves` that is a plain float32 ``LlamaForCausalLM`` (no adapter or other wrapped layer) with as
    many key/value heads as query heads."""
    from transformers import LlamaForCausalLM

    from genenv_engine.backends.llama_weights import linears, serves

    if type(model) is not LlamaForCausalLM:  # a PeftModel or any subclass with its own forward
        return False
    if model.config.num_key_value_heads != model.config.num_attention_heads:
        return False
    if any(type(m) is not torch.nn.Linear for m in linears(model)):  # LoRA layers, quantised ones
        return False
    return all(p.dtype == torch.float32 for p in model.parameters()) and serves(model)


class Plan(NamedTuple):
    """How `StaticLlama.prefill` runs a batch, the rows taken in `order` (see `plan_prefill`)."""

    order: list[int]
    """The original row of each cache row."""
    parents: dict[int, tuple[int, int]]
    """``child: (parent, shared)``: the cache row whose first ``shared`` tokens' keys and values it copies."""
    groups: list[tuple[int, int, int]]
    """``(first, end, queries)``: consecutive cache rows that run their last ``queries`` tokens together."""
    copy_after: int
    """How many groups (those of the parents) run before the children copy their prefixes."""


def plan_prefill(tokens: list[list[int]], group_rows: int, share: int) -> Plan:
    """The prefill of prompts ``tokens`` (unpadded): who copies whose prefix, the row order and the groups.

    In lexicographic order each prompt is compared with the last prompt that runs whole (a
    parent): if they share at least ``share`` leading tokens (at most all but its last; 0:
    never), it takes those from the parent; else it becomes the next parent. Rows are ordered
    parents first, by length, then the others by how many tokens they still run, and cut into
    groups of ``group_rows``; a group runs its longest remainder for every row.

    >>> plan_prefill([[1, 2, 3], [1, 2, 4, 5], [9], [1, 2, 3]], 2, 2)
    Plan(order=[2, 0, 3, 1], parents={2: (1, 2), 3: (1, 2)}, groups=[(0, 2, 3), (2, 4, 2)], copy_after=1)
    """
    parents: dict[int, tuple[int, int]] = {}
    parent = None
    for row in sorted(range(len(tokens)), key=lambda r: tokens[r]):
        if parent is not None and share > 0:
            a, b = tokens[row], tokens[parent]
            common = 0
            for x, y in zip(a, b, strict=False):
                if x != y:
                    break
                common += 1
            common = min(common, len(a) - 1)
            if common >= share:
                parents[row] = (parent, common)
                continue
        parent = row
    whole = sorted((r for r in range(len(tokens)) if r not in parents), key=lambda r: len(tokens[r]))
    rest = sorted(parents, key=lambda r: len(tokens[r]) - parents[r][1])
    order = whole + rest
    left = [len(tokens[r]) - (parents[r][1] if r in parents else 0) for r in order]
    groups = []
    for part_start, part_end in ((0, len(whole)), (len(whole), len(order))):
        for first in range(part_start, part_end, group_rows):
            end = min(first + group_rows, part_end)
            groups.append((first, end, max(1, max(left[first:end]))))
    at = {r: i for i, r in enumerate(order)}
    return Plan(
        order, {at[c]: (at[p], n) for c, (p, n) in parents.items()}, groups, sum(1 for g in groups if g[0] < len(whole))
    )


HUGE_PAGE = 2 << 20
"""Bytes of a transparent huge page on x86-64 Linux."""


def _huge_empty(numel: int, dtype: torch.dtype) -> torch.Tensor:
    """An empty 1-d tensor on 2 MB-aligned memory that Linux is asked to back with huge pages.

    Each decoding step writes one column of every row and head of the cache, 512 places some
    29 KB apart for 128 rows of the tiny model: with 4 KB pages nearly each is a TLB miss.
    Elsewhere (or if ``madvise`` fails) it is plain memory.
    """
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.empty(numel + HUGE_PAGE // size, dtype=dtype)
    start = -raw.data_ptr() % HUGE_PAGE // size
    out = raw[start : start + numel]
    try:
        import ctypes
        import sys

        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            libc.madvise(out.data_ptr(), numel * size // HUGE_PAGE * HUGE_PAGE, 14)  # MADV_HUGEPAGE
    except (OSError, AttributeError):
        pass
    return out


class StaticLlama:
    """The forward of a `fits` (or `llama_weights.serves`) model over a static KV cache of ``rows`` x ``columns``.

    `prefill` fills columns ``[0, width)`` of every row from left-padded prompts and returns their
    last logits; `step` feeds one token per live row at a given column and returns the next logits;
    `drop` removes ended rows; `release` hands the cache's memory to the next one. The weights are
    read when this object is built (laid out once per policy version, `llama_weights.decode_weights`, in
    ``dtype`` when given): build one per decode. With grouped-query attention each key/value head's queries run
    as one batched matrix product against its keys.

    Two rewrites of the transformers computation, exact but for float rounding: the query and key projections' rows are
    permuted within each head so that the rotary embedding's pairs (i, i + head_dim / 2) are
    adjacent, making it one complex multiplication (attention scores are dot products, unchanged
    when queries and keys permute alike); and the first layer's normed query/key/value projection
    depends on the token alone, so it is a table of the vocabulary looked up per token (small vocabularies).
    """

    def __init__(self, model, rows: int, columns: int, dtype: torch.dtype | None = None) -> None:
        from genenv_engine.backends.llama_weights import decode_weights

        w = decode_weights(model, dtype)
        self.heads = w.heads
        self.kv_heads = kv = w.kv_heads
        self.group = w.heads // w.kv_heads
        """Query heads per key/value head (1: plain multi-head attention)."""
        self.head_dim = dim = w.head_dim
        self.eps = w.eps
        self.inner_size = w.inner_size
        self.embed, self.norm, self.head, self.layers = w.embed, w.norm, w.head, w.layers
        self.first_qkv = w.first_qkv
        """The first layer's query/key/value projection of every token (vocabulary, heads * 3 * head_dim), or None."""
        half = dim // 2
        freqs = torch.arange(columns, dtype=torch.float32)[:, None] * w.inv_freq[None]
        emb = torch.cat((freqs, freqs), dim=-1)  # the transformers tables, then their first half as cos + i sin
        cos, sin = emb.cos() * w.attention_scaling, emb.sin() * w.attention_scaling
        self.rotation = torch.complex(cos[:, :half].contiguous(), sin[:, :half].contiguous())
        numel = len(self.layers) * 2 * rows * kv * columns * dim
        storage = _SPARE.pop("kv", None)
        if storage is None or storage.numel() < numel or storage.dtype != self.embed.dtype:
            storage = _huge_empty(numel, self.embed.dtype)
        self._storage = storage
        self.kv = storage[:numel].view(len(self.layers), 2, rows, kv, columns, dim)
        """Keys and values (keys in the paired order): a reused storage holds anything, so every column a prefill or a
        step reads is written (or zeroed) by this decode first."""
        self.mask = torch.zeros((rows, kv, 1, columns), dtype=self.embed.dtype)
        """Additive attention mask of the decoding steps, per key/value head so that it views as (rows * kv_heads, 1,
        columns)."""
        self.groups: list[list[int]] = []
        """``[first cache row, live rows, first column read]`` per group; live rows are the group's first ones."""
        self.live = torch.arange(rows)
        """The cache row of each row of the decoding batch (the groups' live rows in order)."""
        self._qkv = torch.empty((rows, kv * (self.group + 2) * dim), dtype=self.embed.dtype)
        """A step's projections per key/value head, (rows, kv_heads, group + 2, head_dim) once viewed: the group's
        queries, then the key and the value."""
        self._att = torch.empty((rows * kv, self.group, dim), dtype=self.embed.dtype)
        self._views: list[list[tuple[torch.Tensor, ...]]] = []
        self._cached: dict[tuple[int, int], list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {}

    def release(self) -> None:
        """Keep the cache's memory for the next decode (this object must not be used afterwards)."""
        kept = _SPARE.get("kv")
        size = self._storage.numel() * self._storage.element_size()
        if (kept is None or kept.numel() < self._storage.numel()) and size <= SPARE_MAX_BYTES:
            _SPARE["kv"] = self._storage
        del self.kv, self._storage
        self._views, self._cached = [], {}

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        # LlamaRMSNorm, weight * (x * rsqrt(mean(x^2) + eps)), in one call (the same floats, measured)
        return F.rms_norm(x, weight.shape, weight, self.eps)

    def _rope_(self, x: torch.Tensor, rotation: torch.Tensor) -> None:
        """Rotate paired-order ``x`` (..., head_dim) in place by complex ``rotation`` (..., head_dim / 2) (a
        bfloat16 ``x`` through a float32 copy: there is no bfloat16 complex type)."""
        if x.dtype == torch.float32:
            torch.view_as_complex(x.unflatten(-1, (-1, 2))).mul_(rotation)
            return
        y = x.to(torch.float32, memory_format=torch.contiguous_format)
        torch.view_as_complex(y.unflatten(-1, (-1, 2))).mul_(rotation)
        x.copy_(y)

    def _mlp(self, x: torch.Tensor, norm: torch.Tensor, gate_up: torch.Tensor, down_t: torch.Tensor) -> torch.Tensor:
        """``x + down(silu(gate(h)) * up(h))`` for h the normed (tokens, hidden) ``x``."""
        gu = F.linear(self._norm(x, norm), gate_up)
        act = F.silu(gu[:, : self.inner_size], inplace=True)
        return torch.addmm(x, act.mul_(gu[:, self.inner_size :]), down_t)

    def _group_views(self) -> None:
        """Per layer and group with live rows: (transposed keys, values, mask, queries, output, first column).

        A group's cache views are rebuilt only when its number of live rows changed.
        """
        n = sum(count for _, count, _ in self.groups)
        kv, g = self.kv_heads, self.group
        queries = self._qkv[:n].view(n, kv, g + 2, self.head_dim)[:, :, :g].reshape(n * kv, g, self.head_dim)
        self._views = [[] for _ in self.layers]
        offset = 0
        for g, (first, count, lo) in enumerate(self.groups):
            if not count:
                continue
            part = slice(offset * kv, (offset + count) * kv)
            offset += count
            key = (g, count)
            if key not in self._cached:
                rows = slice(first, first + count)
                self._cached[key] = [
                    (
                        self.kv[i, 0, rows].flatten(0, 1).transpose(1, 2),
                        self.kv[i, 1, rows].flatten(0, 1),
                        self.mask[rows].flatten(0, 1),
                    )
                    for i in range(len(self.layers))
                ]
            q, out = queries[part], self._att[part]
            for views, (keys_t, values, mask) in zip(self._views, self._cached[key], strict=False):
                views.append((keys_t, values, mask, q, out, lo))

    @torch.no_grad()
    def prefill(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        positions: torch.Tensor,
        plan: Plan,
        decode_groups: list[tuple[int, int]],
    ) -> torch.Tensor:
        """Run left-padded prompts (rows, width) into the cache; return each row's last logits (rows, vocab).

        The rows are already in ``plan.order`` (`plan_prefill`); ``decode_groups`` are the row
        ranges whose attention `step` runs together. A group of ``plan.groups`` runs its rows'
        last ``queries`` tokens, attending to the keys and values of all of their tokens (a
        prefix copied from a parent, ``plan.parents``, is in the cache), without the padding
        none of its rows needs. The prompts' last column must be real (left padding).
        """
        rows, width = input_ids.shape
        self.mask[:rows, :, 0, :width].masked_fill_((attention_mask == 0)[:, None], float("-inf"))
        lengths = attention_mask.sum(-1).tolist()
        self.groups = [[a, b - a, width - max(1, max(lengths[a:b]))] for a, b in decode_groups]
        self._cached = {}
        # Padding that attention reads (masked, but 0 * NaN is NaN) and nothing writes: zeros. Decoding reads a group's
        # columns from its longest prompt's first; a prefill group from its own longest prompt's first.
        reads = [(first, first + count, lo) for first, count, lo in self.groups]
        reads += [(first, end, width - max(lengths[first:end])) for first, end, _ in plan.groups]
        for first, end, lo in reads:
            self.kv[:, :, first:end, :, lo : width - min(lengths[first:end])] = 0
        self.live = torch.arange(rows)
        logits = self.head.new_empty((rows, self.head.shape[0]))
        for g, (first, end, queries) in enumerate(plan.groups):
            if g == plan.copy_after:
                for child, (parent, shared) in plan.parents.items():  # all layers' keys and values of the prefix
                    to, frm = width - lengths[child], width - lengths[parent]
                    self.kv[:, :, child, :, to : to + shared] = self.kv[:, :, parent, :, frm : frm + shared]
            logits[first:end] = self._prefill_group(
                first, end, input_ids, attention_mask, positions, queries, max(lengths[first:end])
            )
        self._group_views()
        return logits

    def _prefill_group(
        self,
        first: int,
        end: int,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        positions: torch.Tensor,
        queries: int,
        keys: int,
    ) -> torch.Tensor:
        """Run the last ``queries`` columns of rows ``first:end`` attending to their last ``keys``."""
        n, width = end - first, input_ids.shape[1]
        heads, dim, kv, g = self.heads, self.head_dim, self.kv_heads, self.group
        q_col, k_col = width - queries, width - keys
        real = attention_mask[first:end, k_col:].bool()
        i = torch.arange(queries)[:, None] + (keys - queries)  # each query's column among the keys'
        j = torch.arange(keys)[None]
        allowed = (j <= i) & (real[:, None, :] | (j == i))  # causal, real keys; a padding query sees itself
        mask = torch.zeros((n, 1, queries, keys), dtype=self.embed.dtype).masked_fill_(~allowed[:, None], float("-inf"))
        rotation = self.rotation[positions[first:end, q_col:]][:, :, None, None]  # (n, queries, 1, 1, dim / 2)
        ids = input_ids[first:end, q_col:]
        x = F.embedding(ids, self.embed).flatten(0, 1)  # (n * queries, hidden)
        last = len(self.layers) - 1
        for layer, (norm1, qkv_w, out_t, norm2, gate_up, down_t) in enumerate(self.layers):
            if layer == 0 and self.first_qkv is not None:
                qkv = F.embedding(ids, self.first_qkv).view(n, queries, kv, g + 2, dim)
            else:
                qkv = (self._norm(x, norm1) @ qkv_w).view(n, queries, kv, g + 2, dim)
            self._rope_(qkv[:, :, :, : g + 1], rotation)
            self.kv[layer, :, first:end, :, q_col:width] = qkv[:, :, :, g:].permute(3, 0, 2, 1, 4)
            keys_i = self.kv[layer, 0, first:end, :, k_col:width]
            values_i = self.kv[layer, 1, first:end, :, k_col:width]
            q = qkv[:, :, :, 0].transpose(1, 2) if g == 1 else qkv[:, :, :, :g].flatten(2, 3).transpose(1, 2)
            if layer == last:  # only the last position goes on: the next token's logits
                q, mask, x = q[:, :, -1:], mask[:, :, -1:], x.view(n, queries, -1)[:, -1]
            att = (
                F.scaled_dot_product_attention(q, keys_i, values_i, attn_mask=mask)
                if g == 1
                else F.scaled_dot_product_attention(q, keys_i, values_i, attn_mask=mask, enable_gqa=True)
            )
            x = torch.addmm(x, att.transpose(1, 2).reshape(x.shape[0], heads * dim), out_t)
            x = self._mlp(x, norm2, gate_up, down_t)
        return F.linear(self._norm(x, self.norm), self.head)

    @torch.no_grad()
    def step(self, tokens: torch.Tensor, positions: torch.Tensor, column: int) -> torch.Tensor:
        """Feed ``tokens`` (n,) of the live rows at ``column`` (their positions (n,)); return logits (n, vocab)."""
        n = tokens.shape[0]
        heads, dim, kv, g = self.heads, self.head_dim, self.kv_heads, self.group
        rotation = self.rotation[positions][:, None, None]
        scale = dim**-0.5
        end = column + 1
        qkv = self._qkv[:n]
        per_head = qkv.view(n, kv, g + 2, dim)
        att = self._att[: n * kv].view(n, heads * dim)
        x = F.embedding(tokens, self.embed)
        for i, (norm1, qkv_w, out_t, norm2, gate_up, down_t) in enumerate(self.layers):
            if i == 0 and self.first_qkv is not None:
                torch.index_select(self.first_qkv, 0, tokens, out=qkv)
            else:
                torch.mm(self._norm(x, norm1), qkv_w, out=qkv)
            self._rope_(per_head[:, :, : g + 1], rotation)
            self.kv[i, :, self.live, :, column] = per_head[:, :, g:].permute(2, 0, 1, 3)
            for keys_t, values, mask, q, out, lo in self._views[i]:
                weights = torch.baddbmm(mask[:, :, lo:end], q, keys_t[:, :, lo:end], alpha=scale)
                torch.bmm(weights.softmax(-1), values[:, lo:end], out=out)
            x = torch.addmm(x, att, out_t)
            x = self._mlp(x, norm2, gate_up, down_t)
        return F.linear(self._norm(x, self.norm), self.head)

    def drop(self, ended: list[bool], columns: int) -> list[int]:
        """Remove the ended rows of the decoding batch (flags in batch order); return the batch rows kept, in order.

        Within each group, live rows past the group's new size are copied (their first ``columns``
        columns) into the places of ended rows before it.
        """
        keep: list[int] = []
        offset = 0
        for group in self.groups:
            first, count, lo = group
            flags = ended[offset : offset + count]
            alive = count - sum(flags)
            dst = [j for j in range(alive) if flags[j]]
            src = [j for j in range(alive, count) if not flags[j]]
            for d, s in zip(dst, src, strict=False):  # a copy per row: no gathered temporary
                self.kv[:, :, first + d, :, lo:columns].copy_(self.kv[:, :, first + s, :, lo:columns])
                self.mask[first + d].copy_(self.mask[first + s])
            moved = dict(zip(dst, src, strict=False))
            keep += [offset + moved.get(j, j) for j in range(alive)]
            group[1] = alive
            offset += count
        self.live = torch.tensor([first + j for first, count, _ in self.groups for j in range(count)], dtype=torch.long)
        self._group_views()
        return keep
