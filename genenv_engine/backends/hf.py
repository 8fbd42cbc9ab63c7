"""The default backend: a batched decode loop with a KV cache on the policy's own model.

Prompts are left-padded and decoded in chunks by `decode`: a prefill in prompt-length groups, then
one forward per step on the rows still decoding, since ended rows leave the batch (``generate``
decodes every row until the longest ends: completions of 19 tokens on average cost as much as the
longest, 64). Small models decode on one CPU thread unless the other cores are idle
(`genenv_engine.backends.cpu_load`); small float32 Llama models on CPU (the tiny
presets) run the hand-written forward of `genenv_engine.backends.static_llama` on a static KV
cache (prompts sharing a prefix compute it once, ended rows leave at every step), as does every Llama model it serves
(SmolLM2, LoRA roles) when the policy asks (``static_decode``, or a bfloat16 ``inference_dtype``); every other
model runs the transformers forward on a ``DynamicCache`` (`_decode`). The sampled tokens and
their log-probabilities (after temperature) are those of ``model.generate(do_sample=True,
top_k=0)`` for the same seed and chunk, up to float rounding of the logits (see `decode`).
Chunks keep the size they had under ``generate`` (`chunk_for`), so a seed picks the same rows'
noise as before. Because the model object is shared with the trainer, `sync` has nothing to do.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from genenv_engine.backends.base import Completion, Sampling
from genenv_engine.backends.cpu_load import decode_threads
from genenv_engine.backends.grammar import GrammarMask

SCORES_BUDGET = 1 << 30
"""Bytes of per-step scores one ``generate`` call held (prompts x new tokens x vocabulary x 4): it still sets the
chunk size, so that sampling with a given seed draws what it drew under ``generate``."""


def chunk_for(vocab: int, max_new_tokens: int, limit: int, budget: int = SCORES_BUDGET) -> int:
    """Prompts per ``generate`` call so the stored scores fit ``budget``, between 8 and ``limit``.

    >>> chunk_for(261, 200, 128)
    128
    >>> chunk_for(49152, 128, 128)
    42
    """
    return max(min(8, limit), min(limit, budget // max(1, max_new_tokens * vocab * 4)))


class HFBackend:
    """Batched generation with `decode` (a KV-cache loop on the model) for a `genenv_engine.training.policy.Policy`."""

    def __init__(self, policy, chunk_size: int = 128) -> None:
        self.policy = policy
        self.chunk_size = chunk_size
        self.tokens_generated = 0
        self.tokens_prompted = 0
        """Prompt tokens prefilled so far (as sent: a prefix shared by several prompts counts for each)."""
        self.grammar_steps = 0
        """Decoding steps masked by a grammar so far."""
        self.grammar_seconds = 0.0
        """Time the decoding thread spent on those masks (`GrammarMask.seconds`)."""
        self.tick: Callable[[], None] | None = None
        """Called between decoding steps (the loop sets its pause/stop check here)."""

    def sync(self) -> None:
        """Nothing to do: generation uses the trainer's model object."""

    @torch.no_grad()
    def generate(self, prompts: list[str], sampling: Sampling) -> list[Completion]:
        """Sample one completion per prompt; order is preserved."""
        out: list[Completion] = []
        size = chunk_for(len(self.policy.tokenizer), sampling.max_new_tokens, self.chunk_size)
        for start in range(0, len(prompts), size):
            out.extend(self._generate_chunk(prompts[start : start + size], sampling))
        return out

    def _generate_chunk(self, prompts: list[str], sampling: Sampling) -> list[Completion]:
        pol = self.policy
        tok = pol.tokenizer
        budget = max(8, pol.max_length - sampling.max_new_tokens)
        enc = [e[-budget:] for e in tok(prompts, add_special_tokens=False)["input_ids"]]  # pol.encode, batched
        self.tokens_prompted += sum(map(len, enc))
        width = max(len(e) for e in enc)
        ids = torch.full((len(enc), width), tok.pad_token_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, e in enumerate(enc):
            ids[i, width - len(e) :] = torch.tensor(e)
            attn[i, width - len(e) :] = 1
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        was_training = pol.model.training
        pol.activate()  # a LoRA role shares its model with the other role: use this role's adapter
        pol.model.eval()
        try:
            grammar = None if sampling.grammar is None else GrammarMask(tok, sampling.grammar, len(enc))
            tokens, logprobs, lengths, finished = decode(
                pol.model,
                ids.to(pol.device),
                attn.to(pol.device),
                sampling.max_new_tokens,
                tok.eos_token_id,
                tok.pad_token_id,
                None if sampling.greedy else sampling.temperature,
                self.tick,
                grammar=grammar,
                static=getattr(pol, "static_decode", False),
                dtype=getattr(pol, "inference_dtype", None),
            )
            if grammar is not None:
                self.grammar_steps += grammar.steps
                self.grammar_seconds += grammar.seconds
        finally:
            pol.model.train(was_training)
        ids = [row[:n] for row, n in zip(tokens.tolist(), lengths.tolist(), strict=False)]
        lps = [row[:n] for row, n in zip(logprobs.tolist(), lengths.tolist(), strict=False)]
        ends = finished.tolist()
        self.tokens_generated += sum(map(len, ids)) + sum(ends)
        texts = tok.batch_decode(ids, skip_special_tokens=True)
        ended = [
            tok.eos_token_id if end else (tok.pad_token_id if len(i) < sampling.max_new_tokens else None)
            for i, end in zip(ids, ends, strict=False)
        ]
        return [
            Completion(text, i, lp, end, stop)
            for text, i, lp, end, stop in zip(texts, ids, lps, ends, ended, strict=False)
        ]


SMALL_MODEL = 30_000_000
"""Models with fewer parameters decode on their configured threads only while no other process uses the cores, else on
one (`genenv_engine.backends.cpu_load.decode_threads`): their per-step operations are so small that two threads
waiting on each other were 10-20x slower than one beside one busy process on 2 cores, and 1.5x faster on idle ones."""
PREFILL_BUCKETS = 8
"""Prompt-length groups prefilled separately, each padded only to its own longest prompt."""
STATIC_PREFILL_ROWS = 8
"""Prompts per group of the static path's prefill (its per-group cost is small: no cache objects)."""
STATIC_SHARE_MIN = 8
"""Leading tokens a prompt shares with another for the static path's prefill to copy their keys and values instead of
computing them (0: never). On 128 bfcl prompts 112 copy 2,487 of 11,348 prompt tokens (the tool list's start)."""
STATIC_DECODE_GROUPS = 8
"""Groups of consecutive cache rows whose decoding attention runs together on the static path (each reads only
the columns its longest prompt needs); 4-8 measured alike, 1 (all rows padded to the longest prompt) 5-10 % slower."""
COMPACT_AT = 0.75
"""Ended rows leave the decoding batch (a copy of its cache) once at most this share of it is still decoding."""


def distinct_rows(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[list[int], list[int]]:
    """The first row of each distinct (ids, mask) row, and for every row the index of its distinct row among them.

    A task's k rollouts, and a simulator seed's variations, send one prompt several times: its keys and values are
    computed once.

    >>> distinct_rows(torch.tensor([[5, 6], [7, 8], [5, 6]]), torch.ones(3, 2, dtype=torch.long))
    ([0, 1], [0, 1, 0])
    """
    first: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
    unique: list[int] = []
    inverse: list[int] = []
    for i, key in enumerate(zip(map(tuple, input_ids.tolist()), map(tuple, attention_mask.tolist()), strict=False)):
        if key not in first:
            first[key] = len(unique)
            unique.append(i)
        inverse.append(first[key])
    return unique, inverse


def _prefill(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor, cache
) -> torch.Tensor:
    """Run the prompts through the model into ``cache`` and return each row's last logits (B, V).

    Rows that repeat another row (`distinct_rows`) are computed once and copied. The distinct rows are
    grouped by prompt length into `PREFILL_BUCKETS` groups, each run without the padding
    its group does not need; their keys and values are then placed in one cache left-padded to the
    batch width (padding positions are masked, so their zeros are never attended to).
    """
    from transformers import DynamicCache

    unique, inverse = distinct_rows(input_ids, attention_mask)
    if len(unique) < len(inverse):
        pick = torch.tensor(unique, device=input_ids.device)
        part = DynamicCache(config=model.config)
        logits = _prefill(model, input_ids[pick], attention_mask[pick], positions[pick], part)
        spread = torch.tensor(inverse, device=input_ids.device)
        for i, layer in enumerate(part.layers):
            cache.update(layer.keys[spread], layer.values[spread], i)
        return logits[spread]
    batch, width = input_ids.shape
    lengths = attention_mask.sum(-1)
    order = torch.argsort(lengths, stable=True)
    groups = [g for g in torch.tensor_split(order, min(PREFILL_BUCKETS, batch)) if g.numel()]
    logits = None
    layers: list[tuple[torch.Tensor, torch.Tensor]] = []
    for g in groups:
        w = max(1, int(lengths[g].max()))
        part = DynamicCache(config=model.config)
        out = model(
            input_ids=input_ids[g, width - w :],
            attention_mask=attention_mask[g, width - w :],
            position_ids=positions[g, width - w :],
            past_key_values=part,
            use_cache=True,
            logits_to_keep=1,
        )
        if logits is None:
            logits = out.logits.new_empty((batch, out.logits.shape[-1]))
        logits[g] = out.logits[:, -1]
        for i, layer in enumerate(part.layers):
            if len(layers) <= i:
                shape = (batch, *layer.keys.shape[1:2], width, layer.keys.shape[-1])
                layers.append((layer.keys.new_zeros(shape), layer.values.new_zeros(shape)))
            layers[i][0][g, :, width - w :] = layer.keys
            layers[i][1][g, :, width - w :] = layer.values
    for i, (k, v) in enumerate(layers):
        cache.update(k, v, i)
    assert logits is not None
    return logits


@torch.no_grad()
def decode(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    max_new_tokens: int,
    eos_token_id: int,
    pad_token_id: int | None,
    temperature: float | None,
    tick: Callable[[], None] | None = None,
    every: float = 0.2,
    fast: bool | None = None,
    grammar: GrammarMask | None = None,
    static: bool = False,
    dtype: torch.dtype | None = None,
):
    """Sample (or, with ``temperature=None``, greedily pick) up to ``max_new_tokens`` tokens per left-padded row.

    Returns ``(tokens, logprobs, lengths, finished)``: (B, T) sampled ids and their log-probabilities
    under the sampling distribution, each row's number of tokens before end-of-sequence (or before a
    sampled padding token, which also ends a completion), and whether it ended with end-of-sequence.
    On the transformers path prompts are prefilled in length groups (`_prefill`) and rows that
    have ended leave the batch once a quarter of it has ended (`COMPACT_AT`); on the static path
    (`_decode_static`) rows leave at the step they end. Later steps run the model on the unfinished
    rows only (``generate`` decodes every row until the longest ends). Sampling draws what
    ``generate`` draws for the same seed: ``torch.multinomial`` with one sample is
    ``argmax(p / q)`` with ``q ~ Exp(1)`` drawn for the whole (B, vocab) batch each step, and the
    same full-batch noise is drawn here, each row reading its own slice. The logits themselves may
    differ from ``generate``'s in the last float bits (matrix products of other shapes, and the
    static path's own forward: log-probs within ~2e-5), so a token is the same unless two
    candidates tie to ~1e-6.
    ``grammar`` (one matcher per row) keeps each row to the strings of its grammar.
    ``tick`` runs between steps, at most every ``every`` seconds (pause/stop checks). ``fast``
    chooses the path: `static_llama.StaticLlama` (the default for a small model, see `SMALL_MODEL`,
    that `static_llama.fits`) or the transformers forward with a ``DynamicCache`` (the default
    otherwise); both draw the same tokens and leave the random generator in the same state.
    ``static`` makes the static path the default for every model it serves (`llama_weights.serves`: SmolLM2, LoRA
    roles), where the float rounding of its logits can flip a near-tie, so it is asked for, not default. ``dtype``
    (bfloat16) decodes in that dtype over the model's float32 weights: on the static path (its default then,
    weights cast once per policy version) or under autocast on the transformers path.
    """
    from transformers import DynamicCache

    from genenv_engine.backends import static_llama

    threads = torch.get_num_threads()
    small = input_ids.device.type == "cpu" and sum(p.numel() for p in model.parameters()) < SMALL_MODEL
    decoding = decode_threads(threads) if small else threads
    if decoding != threads:
        torch.set_num_threads(decoding)
    try:
        if fast is None:
            fast = small and static_llama.fits(model)
            if not fast and (static or dtype is not None) and input_ids.device.type == "cpu":
                from genenv_engine.backends.llama_weights import serves

                fast = serves(model)
        if fast:
            return _decode_static(
                model,
                input_ids,
                attention_mask,
                max_new_tokens,
                eos_token_id,
                pad_token_id,
                temperature,
                tick,
                every,
                grammar,
                dtype,
            )
        with _autocast(input_ids.device, dtype):
            return _decode(
                model,
                input_ids,
                attention_mask,
                max_new_tokens,
                eos_token_id,
                pad_token_id,
                temperature,
                tick,
                every,
                DynamicCache(config=model.config),
                grammar,
            )
    finally:
        if decoding != threads:
            torch.set_num_threads(threads)


def _autocast(device: torch.device, dtype: torch.dtype | None):
    """Autocast to ``dtype`` on ``device`` (nothing when None)."""
    from contextlib import nullcontext

    return nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


def _pick(
    logits: torch.Tensor, temperature: float | None, rows: torch.Tensor, batch: int, grammar: GrammarMask | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """One decoding step's tokens and their log-probs: argmax when ``temperature`` is None, else a sample by the
    exponential-race trick. The noise is drawn for all ``batch`` original rows and read at ``rows`` (the live
    rows' original indices), so a row's draws do not depend on which other rows have ended. With ``grammar`` the
    scores of tokens a row's grammar forbids are masked first, and each row's matcher takes the token drawn."""
    scores = logits.float()
    if grammar is not None:
        scores = scores.clone() if scores is logits else scores
        grammar.apply_(scores, rows.tolist())
    if temperature is None:
        picked = scores.argmax(-1)
    else:
        if temperature != 1.0:
            scores = scores / temperature
        noise = torch.empty((batch, scores.shape[-1]), dtype=scores.dtype, device=scores.device).exponential_(1)
        picked = (scores.softmax(-1) / noise[rows]).argmax(-1)
    if grammar is not None:
        grammar.advance(rows.tolist(), picked.tolist())
    return picked, scores.log_softmax(-1).gather(1, picked[:, None]).squeeze(1)


def _decode(
    model,
    input_ids,
    attention_mask,
    max_new_tokens,
    eos_token_id,
    pad_token_id,
    temperature,
    tick,
    every,
    cache,
    grammar=None,
):
    device = input_ids.device
    batch = input_ids.shape[0]
    positions = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
    logits = _prefill(model, input_ids, attention_mask, positions, cache)
    tokens = torch.zeros((batch, max_new_tokens), dtype=torch.long, device=device)
    logprobs = torch.zeros((batch, max_new_tokens), dtype=torch.float32, device=device)
    lengths = torch.full((batch,), max_new_tokens, dtype=torch.long, device=device)
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    rows = torch.arange(batch, device=device)  # the original row of each row in the decoding batch
    live = torch.ones(batch, dtype=torch.bool, device=device)  # which rows of the decoding batch have not ended
    position = positions[:, -1:]
    last_tick = float("-inf")  # the first check runs after the first step
    for step in range(max_new_tokens):
        picked, lp = _pick(logits, temperature, rows, batch, grammar)
        mine = rows[live]
        tokens[mine, step] = picked[live]
        logprobs[mine, step] = lp[live]
        eos = live & (picked == eos_token_id)
        ended = eos if pad_token_id is None else eos | (live & (picked == pad_token_id))
        if bool(ended.any()):
            lengths[rows[ended]] = step
            finished[rows[eos]] = True
            live = live & ~ended
            alive = int(live.sum())
            if alive == 0:
                break
            if alive <= COMPACT_AT * live.numel():  # compact: drop the ended rows from the batch and its cache
                keep = live.nonzero().squeeze(1)
                cache.batch_select_indices(keep)
                rows, attention_mask, position, picked, live = (
                    rows[keep],
                    attention_mask[keep],
                    position[keep],
                    picked[keep],
                    live[keep],
                )
        if step == max_new_tokens - 1:
            break
        if tick is not None and time.monotonic() - last_tick >= every:
            last_tick = time.monotonic()
            tick()
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones((attention_mask.shape[0], 1))], dim=-1)
        position = position + 1
        logits = model(
            input_ids=picked[:, None],
            attention_mask=attention_mask,
            position_ids=position,
            past_key_values=cache,
            use_cache=True,
        ).logits[:, -1]
    return tokens.cpu(), logprobs.cpu(), lengths.cpu(), finished.cpu()


def _ranges(count: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` consecutive ranges of ``range(count)`` as even as possible (none empty)."""
    return [(int(r[0]), int(r[-1]) + 1) for r in torch.arange(count).tensor_split(min(parts, count)) if r.numel()]


def _decode_static(
    model,
    input_ids,
    attention_mask,
    max_new_tokens,
    eos_token_id,
    pad_token_id,
    temperature,
    tick,
    every,
    grammar=None,
    dtype=None,
):
    """`decode` on `static_llama.StaticLlama`: rows in the prefill's order, ended rows leave at once."""
    from genenv_engine.backends.static_llama import StaticLlama, plan_prefill

    batch, width = input_ids.shape
    lengths = attention_mask.sum(-1).tolist()
    plan = plan_prefill(
        [row[width - n :] for row, n in zip(input_ids.tolist(), lengths, strict=False)],
        STATIC_PREFILL_ROWS,
        STATIC_SHARE_MIN,
    )
    rows = torch.tensor(plan.order)  # the original row of each row of the decoding batch
    input_ids, attention_mask = input_ids[rows], attention_mask[rows]
    positions = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
    net = StaticLlama(model, batch, width + max_new_tokens, dtype)
    try:
        return _sample_static(
            net,
            plan,
            input_ids,
            attention_mask,
            positions,
            rows,
            max_new_tokens,
            eos_token_id,
            pad_token_id,
            temperature,
            tick,
            every,
            grammar,
        )
    finally:
        net.release()


def _sample_static(
    net,
    plan,
    input_ids,
    attention_mask,
    positions,
    rows,
    max_new_tokens,
    eos_token_id,
    pad_token_id,
    temperature,
    tick,
    every,
    grammar=None,
):
    batch, width = input_ids.shape
    logits = net.prefill(input_ids, attention_mask, positions, plan, _ranges(batch, STATIC_DECODE_GROUPS))
    tokens = torch.zeros((batch, max_new_tokens), dtype=torch.long)
    logprobs = torch.zeros((batch, max_new_tokens), dtype=torch.float32)
    lengths = torch.full((batch,), max_new_tokens, dtype=torch.long)
    finished = torch.zeros(batch, dtype=torch.bool)
    position = positions[:, -1]
    last_tick = float("-inf")
    for step in range(max_new_tokens):
        picked, lp = _pick(logits, temperature, rows, batch, grammar)
        tokens[rows, step] = picked
        logprobs[rows, step] = lp
        eos = picked == eos_token_id
        ended = eos if pad_token_id is None else eos | (picked == pad_token_id)
        if bool(ended.any()):
            lengths[rows[ended]] = step
            finished[rows[eos]] = True
            if bool(ended.all()):
                break
            keep = torch.tensor(net.drop(ended.tolist(), width + step), dtype=torch.long)
            rows, position, picked = rows[keep], position[keep], picked[keep]
        if step == max_new_tokens - 1:
            break
        if tick is not None and time.monotonic() - last_tick >= every:
            last_tick = time.monotonic()
            tick()
        position = position + 1
        logits = net.step(picked, position, width + step)
    return tokens, logprobs, lengths, finished
