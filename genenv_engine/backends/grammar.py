"""Grammar-constrained sampling: each decoding step keeps only the tokens a Lark grammar allows next.

An environment declares the grammar of the text its simulator writes (`Environment.task_grammar`: Lark rules
``prompt`` and ``answer``); `task_grammar` joins them in the simulator's output style, and a backend given
``Sampling(grammar=...)`` only emits strings of it. The masks come from llguidance (an Earley parser over the
tokenizer's vocabulary whose per-step bitmask is computed in Rust, imported lazily): `GrammarMask` holds one
matcher per row of a decoding batch, masks that step's logits, and advances each row by the token it drew; the
next step's masks are then computed on a worker thread while the model computes the next logits. A grammar is
compiled once per tokenizer and process, and the lexer states its matchers build are kept with it.
What a grammar cannot carry (a name listed once, evidence that agrees with a knowledge base) stays with the
environment's validator.

A masked row's log-probabilities are those of the distribution it was sampled from (the renormalised masked one).
Sampling noise is drawn as without a grammar, so a grammar that allows every token changes nothing.
"""

from __future__ import annotations

import functools
import random
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import torch

STYLES = {
    "compact": 'start: prompt " => " answer',  # `genenv_engine.environments.base.SEP` between them
    "instruct": 'start: "TASK: " prompt "\\nANSWER: " answer',
}
"""The start rule of each simulator output style, over an environment's ``prompt`` and ``answer`` rules."""

_TOKENIZERS: weakref.WeakKeyDictionary[object, object] = weakref.WeakKeyDictionary()


_EXECUTOR: list[object] = []
_WORKER: list[ThreadPoolExecutor] = []


def _worker() -> ThreadPoolExecutor:
    """The thread that computes masks ahead of the decoding thread."""
    if not _WORKER:
        _WORKER.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="genenv-grammar"))
    return _WORKER[0]


def _executor():
    """llguidance's mask executor, on one thread (decoding already has the cores it is given)."""
    import llguidance

    if not _EXECUTOR:
        _EXECUTOR.append(llguidance.LLExecutor(num_threads=1))
    return _EXECUTOR[0]


_BASES: weakref.WeakKeyDictionary[object, dict[str, object]] = weakref.WeakKeyDictionary()
BASES_KEPT = 16
"""Compiled grammars kept per tokenizer (a run uses one per benchmark and output style)."""
STEP_LEXER_FUEL = 5_000_000
"""llguidance's lexer work allowed per token (its default, 200,000, is spent when a batch's rows explore many
branches of a large catalog's terminals at once: every row then fails with "too many expressions constructed")."""


def _base_matcher(tokenizer, grammar: str):
    """A fresh matcher of ``grammar`` to copy rows from, compiled once per tokenizer (a batch's rows and later
    batches copy it, and the lexer states it has built go with the copies)."""
    import llguidance

    kept = _BASES.setdefault(tokenizer, {})
    if grammar not in kept:
        limits = llguidance.LLParserLimits(step_lexer_fuel=STEP_LEXER_FUEL)
        matcher = llguidance.LLMatcher(ll_tokenizer(tokenizer), compile_grammar(grammar), log_level=0, limits=limits)
        if matcher.is_error():
            raise GrammarError(matcher.get_error())
        if len(kept) >= BASES_KEPT:
            kept.pop(next(iter(kept)))
        kept[grammar] = matcher
    return kept[grammar]


class GrammarError(ValueError):
    """A grammar llguidance cannot compile, or text outside it."""


def task_grammar(rules: str, style: str = "compact") -> str:
    """The whole grammar of a simulator's output: the ``style``'s start rule over an environment's ``rules``.

    >>> print(task_grammar('prompt: "add " NUM\\nanswer: NUM\\nNUM: /[0-9]+/'))
    start: prompt " => " answer
    prompt: "add " NUM
    answer: NUM
    NUM: /[0-9]+/
    """
    if style not in STYLES:
        raise GrammarError(f"unknown simulator style {style!r}; known: {', '.join(STYLES)}")
    return f"{STYLES[style]}\n{rules.strip()}"


def ll_tokenizer(tokenizer):
    """llguidance's view of a Hugging Face fast tokenizer (built once per tokenizer object)."""
    import llguidance.hf

    found = _TOKENIZERS.get(tokenizer)
    if found is None:
        found = llguidance.hf.from_tokenizer(tokenizer)
        _TOKENIZERS[tokenizer] = found
    return found


def compile_grammar(grammar: str) -> str:
    """llguidance's serialized form of a Lark ``grammar``; a `GrammarError` naming the fault if it does not compile.

    >>> compile_grammar('start: "a" NUM\\nNUM: /[0-9]+/') != ""
    True
    >>> compile_grammar('start: missing_rule')
    Traceback (most recent call last):
    ...
    genenv_engine.backends.grammar.GrammarError: ...
    """
    import llguidance

    compiled = llguidance.LLMatcher.grammar_from_lark(grammar)
    failed, messages = llguidance.LLMatcher.validate_grammar_with_warnings(compiled)
    if failed:
        raise GrammarError(" ".join(" ".join(messages).split()) or "grammar does not compile")
    return compiled


class GrammarMask:
    """One llguidance matcher per row of a decoding batch, all for one grammar.

    ``apply_`` masks a step's scores (rows given by their index in the original batch, since ended rows leave the
    decoding batch); ``advance`` feeds each row the token it drew. A row whose matcher has failed (it cannot, short
    of a library fault) or has stopped may only end: it is allowed the end-of-sequence token alone.
    """

    def __init__(self, tokenizer, grammar: str, rows: int, ahead: bool = True) -> None:
        self.tok = ll_tokenizer(tokenizer)
        self.eos = tokenizer.eos_token_id
        first = _base_matcher(tokenizer, grammar)
        self.matchers = [first.deep_copy() for _ in range(rows)]
        self.ahead = ahead
        """Compute the next step's masks on a worker thread while the model computes the next logits."""
        self._pending: tuple[tuple[int, ...], Future] | None = None
        self.steps = 0
        """Decoding steps masked so far (a step masks every live row)."""
        self.seconds = 0.0
        """Time the decoding thread spent on the grammar: masks it waited for or computed, matchers advanced (the
        constraint's cost to decoding; masks computed ahead while the model runs cost it nothing)."""

    def bitmask(self, rows: Sequence[int]) -> torch.Tensor:
        """The (len(rows), words) int32 bitmask of the tokens each row may draw next (the live rows' masks computed
        in one call into the library)."""
        self._settle()
        return self._compute(rows)

    def _compute(self, rows: Sequence[int]) -> torch.Tensor:
        mask = torch.full((len(rows), (self.tok.vocab_size + 31) // 32), -1, dtype=torch.int32)
        live = []
        for i, row in enumerate(rows):
            matcher = self.matchers[row]
            if matcher.is_error() or matcher.is_stopped():
                mask[i] = 0
                mask[i, self.eos // 32] = 1 << (self.eos % 32)
            else:
                live.append((matcher, i))
        if live:
            _executor().unsafe_compute_mask_ptr(live, mask.data_ptr(), mask.shape[1] * 4, len(rows))
        return mask

    def apply_(self, scores: torch.Tensor, rows: Sequence[int]) -> None:
        """Set to -inf, in place, every score of a token that row ``rows[i]`` may not draw next."""
        start = time.perf_counter()
        self.steps += 1
        apply_bitmask_(scores, self._masks(list(rows)).to(scores.device))
        self.seconds += time.perf_counter() - start

    def advance(self, rows: Sequence[int], tokens: Sequence[int]) -> None:
        """Feed row ``rows[i]`` the token ``tokens[i]`` it drew (and, with ``ahead``, start computing these rows'
        next masks)."""
        start = time.perf_counter()
        self._settle()
        for row, token in zip(rows, tokens, strict=False):
            matcher = self.matchers[row]
            if not (matcher.is_error() or matcher.is_stopped()):
                matcher.consume_token(int(token))
        if self.ahead:
            self._pending = (tuple(rows), _worker().submit(self._compute, list(rows)))
        self.seconds += time.perf_counter() - start

    def _masks(self, rows: list[int]) -> torch.Tensor:
        """The masks of ``rows``: from the ones computed ahead when they cover these rows (ended rows leave the
        batch between steps), else computed now."""
        if self._pending is not None:
            ahead, future = self._pending
            self._pending = None
            mask = future.result()
            if tuple(rows) == ahead:
                return mask
            where = {row: i for i, row in enumerate(ahead)}
            if all(row in where for row in rows):
                return mask[[where[row] for row in rows]]
        return self._compute(rows)

    def _settle(self) -> None:
        """Wait for masks being computed ahead (the matchers must not move under them) and drop them."""
        if self._pending is not None:
            self._pending[1].result()
            self._pending = None

    def accepts(self, row: int) -> bool:
        """Whether row ``row``'s text so far is a whole string of the grammar."""
        self._settle()
        matcher = self.matchers[row]
        return not matcher.is_error() and (matcher.is_stopped() or matcher.is_accepting())


def matches(tokenizer, grammar: str, text: str) -> bool:
    """Whether ``text`` is a whole string of ``grammar`` (tokenized as a model would write it).

    >>> from genenv_engine.training.tokenizer import build_byte_tokenizer
    >>> tok = build_byte_tokenizer()
    >>> g = 'start: "add " NUM\\nNUM: /[1-9][0-9]*/'
    >>> matches(tok, g, "add 12"), matches(tok, g, "add 012"), matches(tok, g, "add ")
    (True, False, False)
    """
    matcher = _base_matcher(tokenizer, grammar).deep_copy()
    for token in tokenizer.encode(text, add_special_tokens=False):
        if not matcher.consume_token(token):
            return False
    return matcher.is_accepting()


@functools.cache
def _byte_caps() -> tuple[torch.Tensor, torch.Tensor]:
    """For each byte value, its 8 bits (least significant first) as (score caps: +inf where set, -inf where not;
    whether each is clear)."""
    clear = ((torch.arange(256)[:, None] >> torch.arange(8)) & 1) == 0
    return torch.where(clear, float("-inf"), float("inf")), clear


def apply_bitmask_(scores: torch.Tensor, bits: torch.Tensor) -> None:
    """Set to -inf, in place, each score of ``scores`` (rows, vocab) whose token is not set in its row of the int32
    bitmask ``bits`` (rows, words); tokens past the bitmask's ``32 * words`` are masked too.

    The scores of ``llguidance.torch.apply_token_bitmask_inplace`` (tested equal), with plain tensor operations: its
    kernel goes through ``torch.compile``, seconds on a process's first mask. Each score is capped by +inf (kept) or
    -inf (masked), looked up per byte of the bitmask (a 64 x 49,152 step in about 1.5 ms on one thread); scores
    holding a NaN are masked by ``masked_fill_`` instead (a capped NaN would stay NaN where llguidance writes -inf).

    >>> scores = torch.zeros(2, 34)
    >>> apply_bitmask_(scores, torch.tensor([[0b101, 1], [-1, 0]], dtype=torch.int32))
    >>> scores[0, :4].tolist(), scores[0, 32:].tolist(), int(scores[1].isfinite().sum())
    ([0.0, -inf, 0.0, -inf], [0.0, -inf], 32)
    """
    if scores.dim() == 1:
        scores, bits = scores.unsqueeze(0), bits.reshape(1, -1)
    vocab, width = scores.shape[1], 32 * bits.shape[1]
    if vocab > width:
        scores[:, width:] = float("-inf")
        scores = scores[:, :width]
    caps, clear = (table.to(scores.device) for table in _byte_caps())
    index = bits.contiguous().view(torch.uint8).reshape(-1).long()  # little-endian: byte j of a word is its bits 8j..
    if torch.isnan(scores).any():
        scores.masked_fill_(clear.index_select(0, index).view(bits.shape[0], -1)[:, :vocab], float("-inf"))
    else:
        torch.minimum(
            scores, caps.to(scores.dtype).index_select(0, index).view(bits.shape[0], -1)[:, :vocab], out=scores
        )


def allowed_ids(bits: torch.Tensor, vocab: int) -> list[int]:
    """The token ids set in one row of an int32 bitmask (bit ``t % 32`` of word ``t // 32`` stands for token ``t``).

    >>> allowed_ids(torch.tensor([0b101, 1], dtype=torch.int32), 40)
    [0, 2, 32]
    """
    ids = torch.arange(vocab)
    return ids[((bits[ids // 32] >> (ids % 32)) & 1).bool()].tolist()


def random_strings(tokenizer, grammar: str, n: int, seed: int = 0, max_tokens: int = 400) -> list[str]:
    """``n`` strings drawn from ``grammar`` by a uniform choice among the allowed tokens at each step (ending, when
    allowed, with probability 1/4): what a model with random weights writes under the constraint. A draw that
    reaches ``max_tokens`` unfinished is returned as far as it got."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        mask = GrammarMask(tokenizer, grammar, 1, ahead=False)
        ids: list[int] = []
        for _ in range(max_tokens):
            allowed = allowed_ids(mask.bitmask([0])[0], mask.tok.vocab_size)
            others = [t for t in allowed if t != mask.eos]
            if not others or (mask.eos in allowed and rng.random() < 0.25):
                break
            token = rng.choice(others)
            mask.advance([0], [token])
            ids.append(token)
        out.append(tokenizer.decode(ids, skip_special_tokens=True))
    return out
