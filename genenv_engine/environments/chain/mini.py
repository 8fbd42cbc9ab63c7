"""Chain: chained integer function calls, the level being the number of calls ``k`` (1-8).

A task lists a few one-argument integer functions (``f(x)=x+3``, ``g(x)=x*2``, ``h(x)=x-4``, ``m(x)=x%7``),
some of them distractors, a start value and the ordered names of the functions to apply; the answer writes
every call with its argument and result, each argument being the previous result::

    apply f g h | start 5 | f(x)=x+3 g(x)=x*2 h(x)=x-4   =>   f(5)=8; g(8)=16; h(16)=12

After a call an answer may name, in brackets, the functions still to apply (``f(5)=8 [g h]``); a bracket that is
written must be right. The answer is right only if the whole chain is: a target level earns no reward unless every step
of it can
be computed, which is the setting where a curriculum through the lower levels pays. Knobs beside ``k``
(kept in the task's ``difficulty.features``): ``distractors`` (functions listed but never applied) and
``hint`` (the first ``j`` calls given worked out, as a fourth prompt section ``hint f(5)=8; ...``, which the
answer copies). The level is what is left to compute, ``k - j``: a hinted task of level 2 continues a chain of
any length for two calls, and a hint-free one is a chain of two.

Provides :class:`ChainEnv` (seeded splits in equal shares of levels 1-8, the ``chain_exact`` checker, a
strict validator that recomputes the gold chain from the prompt's rules, and sibling pairs for the
simulator's warm start) and the module-level :func:`generate_draft`, :func:`parse_chain` and
:func:`check_chain`. The grammar lives in :mod:`genenv_engine.environments.chain.grammar`.

>>> env = ChainEnv(seed=0, sizes=SplitSizes(seed=8, train=16, heldout=8))
>>> task = env.splits()["train"][0]
>>> env.check(task, task.answer).success, env.check(task, "f(").error_type
(True, 'parse_error')
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

from genenv_engine.core.records import CheckResult, Task, Validation
from genenv_engine.environments.base import LadderEnvironment, SplitSizes
from genenv_engine.environments.chain.grammar import (
    CALL_JOIN,
    LEVELS,
    MAX_FUNCTIONS,
    MAX_K,
    MIN_K,
    Call,
    Draft,
    PromptError,
    Rule,
    join_calls,
    read_prompt,
    render_prompt,
    run_chain,
)
from genenv_engine.environments.chain.task_grammar import RULES
from genenv_engine.environments.drafts import step_draft

CHECKER = "chain_exact"
"""The checker name on every task: the whole chain, every name, argument and result, must match."""
ERROR_TYPES = (
    "parse_error",
    "too_long",
    "wrong_call",
    "wrong_arg",
    "wrong_value",
    "wrong_rest",
    "missing_calls",
    "extra_calls",
)
"""``too_long``: the response is over :data:`MAX_RESPONSE_CHARS` (the same meaning as in
:mod:`genenv_engine.core.limits`); the others name the first fault of a parsed chain, in chain order."""
MAX_PROMPT_CHARS = 240
"""The validator's prompt cap (the grammar's largest prompt, 10 definitions, a 99 start, 8 names and a 7-call
hint, is 204 characters)."""
MAX_ANSWER_CHARS = 200
"""The validator's answer cap (8 calls of ``n(99)=99`` with their brackets, joined by ``; ``, are 158 characters)."""
MAX_RESPONSE_CHARS = 1000
"""Longest agent response the checker parses (well under :data:`genenv_engine.core.limits.MAX_RESPONSE_CHARS`)."""
POOL = "fghkmnpqrstuvw"
"""The names the generator draws from (the validator takes any letter but ``x``)."""
DRAW_CONSTANTS = {"+": (1, 2, 3, 4), "-": (1, 2, 3, 4), "*": (2,)}
"""The rule shapes and constants the generator draws (a subset of what the grammar allows): one-digit steps, so that
a small model can learn each call's arithmetic from the short chains and the level, the chain's length, is what
makes a task hard (with values up to 99, ``x*3`` and ``x%c``, the tiny agent did not learn single calls)."""
START_MAX = 9
"""The generator's start values are 0..START_MAX (the grammar allows 0..99)."""
DRAW_MAX_VALUE = 9
"""Every value of a generated chain lies in 0..DRAW_MAX_VALUE (the grammar allows 0..99)."""
MAX_CHAIN_FUNCTIONS = 8
"""Most distinct functions a generated chain applies: each of its functions is applied once, so a chain of ``k``
calls lists ``k`` functions (and its distractors). With names repeated (``apply r r w``) a tiny agent warm-started
on one- and two-call chains could not tell which name comes next; with each name once, the next name is the one
after the last in the ``apply`` list, however long it is."""

_CALL = re.compile(r"\s*([a-z])\s*\(\s*(-?[0-9]{1,9})\s*\)\s*=\s*(-?[0-9]{1,9})\s*(?:\[([a-z ]*)\]\s*)?")


class _ParseError(ValueError):
    """The response is not a ``;``-separated list of ``name(arg)=result`` calls."""


# ---------------------------------------------------------------- checker


def parse_chain(text: str) -> list[Call]:
    """The calls of a response, whitespace-tolerant (one trailing ``;`` allowed); never evaluated. A call's
    bracket of names still to apply, when written, is read by `parse_rests`.

    >>> [c.text for c in parse_chain(" f( 5 )=8 [g];g(8) = 16; ")]
    ['f(5)=8', 'g(8)=16']
    """
    return [call for call, _ in parse_rests(text)]


def parse_rests(text: str) -> list[tuple[Call, tuple[str, ...] | None]]:
    """Each call of a response with the names its bracket lists (None: no bracket written).

    >>> parse_rests("f(5)=8 [g  h]; g(8)=16")
    [(Call(name='f', arg=5, result=8), ('g', 'h')), (Call(name='g', arg=8, result=16), None)]
    """
    parts = text.split(";")
    if len(parts) > 1 and not parts[-1].strip():
        parts = parts[:-1]
    calls = []
    for part in parts:
        match = _CALL.fullmatch(part)
        if match is None:
            raise _ParseError(f"not a call: {part[:20]!r}")
        rest = None if match.group(4) is None else tuple(match.group(4).split())
        calls.append((Call(match.group(1), int(match.group(2)), int(match.group(3))), rest))
    return calls


def check_chain(expected: dict[str, Any], response: str) -> CheckResult:
    """Score a response against the gold chain in ``expected["calls"]``.

    Success needs every call right and no call missing or extra. ``score`` is the correct leading calls over
    max(gold calls, response calls) (1.0 exactly on success); ``sub_scores``: ``prefix`` (correct leading
    calls over gold calls) and ``final`` (whether the last result written is the gold's last result).
    """
    gold = [Call(c["name"], c["arg"], c["result"]) for c in expected["calls"]]
    if len(response) > MAX_RESPONSE_CHARS:
        return CheckResult(False, 0.0, {"prefix": 0.0, "final": 0.0}, "too_long")
    try:
        parsed = parse_rests(response)
    except _ParseError:
        return CheckResult(False, 0.0, {"prefix": 0.0, "final": 0.0}, "parse_error")
    calls = [call for call, _ in parsed]
    names = tuple(c.name for c in gold)
    prefix, error = 0, None
    for i, (want, (got, rest)) in enumerate(zip(gold, parsed, strict=False)):
        if got.name != want.name:
            error = "wrong_call"
        elif got.arg != want.arg:
            error = "wrong_arg"
        elif got.result != want.result:
            error = "wrong_value"
        elif rest is not None and rest != names[i + 1 :]:
            error = "wrong_rest"
        if error:
            break
        prefix += 1
    if error is None and len(calls) != len(gold):
        error = "missing_calls" if len(calls) < len(gold) else "extra_calls"
    sub = {"prefix": prefix / len(gold), "final": float(calls[-1].result == gold[-1].result)}
    if error is None:
        return CheckResult(True, 1.0, sub, None)
    return CheckResult(False, prefix / max(len(gold), len(calls)), sub, error)


# ---------------------------------------------------------------- generation


def _draw_rule(name: str, rng: random.Random) -> Rule:
    op = rng.choice(tuple(DRAW_CONSTANTS))
    return Rule(name, op, rng.choice(DRAW_CONSTANTS[op]))


def draw_order(rules: list[Rule], start: int, k: int, rng: random.Random) -> list[str] | None:
    """``k`` names of ``rules`` whose chain from ``start`` stays in 0..DRAW_MAX_VALUE, changes the value at every call
    (no
    ``x%7`` of a value under 7, no ``x*2`` of 0: each step needs computing, and a chain cannot collapse to a
    run of zeros) and applies every rule at least once, drawn step by step among the rules that fit; None if
    the draw runs into a dead end."""
    order: list[str] = []
    x = start
    for step in range(k):
        unused = [r for r in rules if r.name not in order]
        pool = unused if len(unused) >= k - step else rules
        fits = [r for r in pool if 0 <= r.apply(x) <= DRAW_MAX_VALUE and r.apply(x) != x]
        if not fits:
            return None
        rule = rng.choice(fits)
        order.append(rule.name)
        x = rule.apply(x)
    return order


def _fresh_chain(names: list[str], start: int, rng: random.Random) -> list[Rule]:
    """One new rule per name, in order, each drawn among those that change the running value and keep it in
    0..DRAW_MAX_VALUE (from any value some do)."""
    rules, x = [], start
    for name in names:
        shape = rng.choice([r for r in _DRAW_SHAPES if 0 <= r.apply(x) <= DRAW_MAX_VALUE and r.apply(x) != x])
        rule = Rule(name, shape.op, shape.c)
        rules.append(rule)
        x = rule.apply(x)
    return rules


_DRAW_SHAPES = tuple(Rule("", op, c) for op, cs in DRAW_CONSTANTS.items() for c in cs)
"""Every rule shape the generator draws, unnamed (built once: `_fresh_chain` names the one it picks)."""


def generate_draft(
    level: int, rng: random.Random, *, distractors: int = 0, hint: int = 0, n_chain: int | None = None
) -> Draft:
    """Sample a chain of ``k = level + hint`` calls, each of a function of its own (`_fresh_chain`; or over
    ``n_chain`` functions drawn with `draw_order`, names repeated), plus ``distractors`` unused functions, with
    the first ``hint`` calls given; read back through the grammar.

    >>> draft = generate_draft(3, random.Random(0), distractors=2, hint=1)
    >>> draft.level, draft.features["k"], draft.features["distractors"], draft.features["hint"]
    (3, 4, 2, 1)
    >>> draft.prompt.count(" | ")
    3
    """
    if level not in LEVELS:
        raise ValueError(f"level {level} is outside {MIN_K}-{MAX_K}")
    if not 0 <= hint <= MAX_K - level:
        raise ValueError(f"hint must be 0..{MAX_K - level} at level {level} (at most {MAX_K} calls), got {hint}")
    k = level + hint
    if distractors < 0 or distractors + MAX_CHAIN_FUNCTIONS > MAX_FUNCTIONS:
        raise ValueError(f"distractors must be 0..{MAX_FUNCTIONS - MAX_CHAIN_FUNCTIONS}, got {distractors}")
    while True:
        n = n_chain or k
        names = rng.sample(POOL, n + distractors)
        start = rng.randint(0, START_MAX)
        if n == k:
            chain = _fresh_chain(names[:n], start, rng)
            order = [r.name for r in chain]
        else:
            chain = [_draw_rule(name, rng) for name in names[:n]]
            order = draw_order(chain, start, k, rng)
            if order is None:
                continue
        table = chain + [_draw_rule(name, rng) for name in names[n:]]
        rng.shuffle(table)
        draft = read_prompt(render_prompt(table, start, order, hint))
        assert (draft.level, draft.features["distractors"], draft.hint) == (level, distractors, hint), draft.prompt
        return draft


# ---------------------------------------------------------------- the environment


class ChainEnv(LadderEnvironment):
    """Built-in chain benchmark: ``k`` chained integer calls, checked as a whole; the level is the calls left to
    compute (``k`` less the hinted ones), 1-8.

    Its splits hold equal shares of levels 1-8 (the seed split too, so a curriculum can start the simulator
    from the bottom); each split task draws its ``distractors`` from :attr:`DISTRACTORS`. A train or seed task
    below level 8 gets, with probability :attr:`HINT_RATE`, a hint of 1..8-level calls (a longer chain that it
    continues); held-out tasks, the unseen pool and `task_at` are hint-free, so there the level is ``k``.
    """

    name = "chain"
    data_version = 12
    """2: one-digit values and steps (the first generator drew values up to 99 with ``x*3`` and ``x%c``);
    3: a train split of 8,000 tasks (2,000 before); 4: each call of the answer followed by the names still to
    apply (a warm start on chains of one or two calls had learned to stop after two); 5: each function of a chain
    applied once (see `MAX_CHAIN_FUNCTIONS`); 6: the ``apply`` section first (see `render_prompt`); 7: the gold
    answer without brackets (a warm start on one- and two-call chains copied at most one name into them); 8: a
    train split of 32,000 tasks; 9: the level is the calls left to compute and half the train and seed tasks
    continue a hinted chain (a warm start on hint-free chains of one or two calls stopped every answer after two
    calls, whatever the chain's length); 10: every train and seed task below level 8 continues a hinted chain (with
    half of them hint-free, a warm start on levels 1 and 2 tied the absence of a hint to an answer of two calls); 11: a
    tenth of them hint-free (with none, a warm start never learned to begin a chain at its start value); 12: the
    agent's warm start also sees `PREFIX_PAIRS` hint-free chains of 3-8 calls cut after their first one or two calls
    (any hint-free chain it saw whole, of one or two calls, had tied "no hint" to an answer of two calls)."""
    granularity = "step"
    source = "built-in mini"
    SPLIT_PLAN = (("heldout", LEVELS), ("train", LEVELS), ("seed", LEVELS))
    DISTRACTORS: tuple[int, ...] = (0, 1, 2)
    """Distractor counts a split task draws from (uniformly)."""
    HINT_RATE: float = 0.9
    """Probability that a train or seed task below level 8 gives the first j calls of a chain of level + j
    (j uniform in 1..8 - level): the answers then write chains of every length while computing only ``level``
    calls of them, so where a chain stops is learned from the ``apply`` list, not from counting calls."""
    HINTED_SPLITS = ("train", "seed")
    """The splits that get hints (held-out measures hint-free chains)."""
    KNOBS = {"distractors": DISTRACTORS}
    """The distractor count can be asked for (`task_at`); the hint stays a split setting."""

    PREFIX_PAIRS: int = 2000
    """Hint-free chains of 3-8 calls that the agent's warm start sees cut after their first one or two calls and
    the separator after them, with no end of answer (`warm_start_prefixes`): they show how a chain of any length
    starts and that it goes on, while only whole answers (the hinted chains and the short hint-free ones) show
    where an answer stops."""
    PREFIX_LEVELS: tuple[int, ...] = (3, 4, 5, 6, 7, 8)

    DEFAULT_SIZES = SplitSizes(seed=200, train=32000, heldout=400)
    """A train split of 4,000 tasks a level, so that a warm start on the short chains alone
    (``warm_start.agent_levels = [1, 2]``) has 8,000 of them: on 500, and still on 2,000, the tiny agent
    memorised its pairs rather than the arithmetic."""

    def __init__(self, seed: int = 0, sizes: SplitSizes | None = None, data_dir: str | None = None) -> None:
        if data_dir is not None:
            from genenv_engine.core.errors import ConfigError

            raise ConfigError(f"data_dirs.{self.name}", "chain tasks are generated; it has no upstream data")
        self._hint_rate = 0.0
        self._prefixes: list[tuple[Task, str]] | None = None
        super().__init__(seed, sizes, data_dir)

    def _make_split(
        self, split: str, n: int, levels: tuple[int, ...], rng: random.Random, seen: set[str], tries: int | None = None
    ) -> list[Task]:
        self._hint_rate = self.HINT_RATE if split in self.HINTED_SPLITS else 0.0
        try:
            return super()._make_split(split, n, levels, rng, seen, tries)
        finally:
            self._hint_rate = 0.0

    def warm_start_prefixes(self) -> list[tuple[Task, str]]:
        """`PREFIX_PAIRS` hint-free chains in equal shares of `PREFIX_LEVELS`, none of them a split's prompt, each
        with its answer cut after the first one or two calls (half each) and the separator that follows: ids
        ``chain/prefix/<index:05d>``, split ``prefix``; the same for the same seed (their own rng).

        >>> pairs = ChainEnv(0, SplitSizes(seed=16, train=16, heldout=16)).warm_start_prefixes()
        >>> task, target = pairs[0]
        >>> task.answer.startswith(target) and target.endswith(CALL_JOIN) and target.count(CALL_JOIN) in (1, 2)
        True
        """
        if self._prefixes is None:
            rng = random.Random(f"{self.name}-prefix-{self.seed}")
            tasks = self._make_split("prefix", self.PREFIX_PAIRS, self.PREFIX_LEVELS, rng, set(self._split_prompts()))
            cut = random.Random(f"{self.name}-prefix-cut-{self.seed}")
            self._prefixes = [
                (t, CALL_JOIN.join(t.answer.split(CALL_JOIN)[: cut.choice((1, 2))]) + CALL_JOIN) for t in tasks
            ]
        return list(self._prefixes)

    def unseen_tasks(self, n: int, levels: tuple[int, ...] = ()) -> list[Task]:
        """As :meth:`LadderEnvironment.unseen_tasks`, in equal shares of levels 1-8 by default."""
        return super().unseen_tasks(n, tuple(levels) or LEVELS)

    def draft(self, level: int, rng: random.Random) -> tuple[str, Callable[..., Task]]:
        return self._draft_at(level, rng, {})

    def _draft_at(self, level: int, rng: random.Random, knobs: dict[str, int]) -> tuple[str, Callable[..., Task]]:
        unknown = set(knobs) - set(self.KNOBS)
        if unknown:
            raise ValueError(f"chain's knobs are {sorted(self.KNOBS)}; got {sorted(unknown)}")
        distractors = knobs["distractors"] if "distractors" in knobs else rng.choice(self.DISTRACTORS)
        hint = rng.randint(1, MAX_K - level) if level < MAX_K and rng.random() < self._hint_rate else 0
        return step_draft(
            generate_draft(level, rng, distractors=distractors, hint=hint), benchmark=self.name, checker=CHECKER
        )

    def check(self, task: Task, response: str) -> CheckResult:
        """The whole chain must match: every call's name, argument and result, none missing or extra."""
        return check_chain(task.expected, response)

    def validate(
        self,
        prompt: str,
        answer: str,
        *,
        task_id: str,
        parent: Task | None = None,
        epoch: int = 0,
        generator: str | None = None,
    ) -> Validation:
        """Accept a generated pair only if the prompt is in the grammar and its answer is the chain recomputed
        from the prompt's rules (``answer_mismatch: <error type>`` otherwise, as BFCL-mini does)."""
        return self._validate_step(
            prompt,
            answer,
            read_prompt,
            PromptError,
            MAX_PROMPT_CHARS,
            MAX_ANSWER_CHARS,
            checker=CHECKER,
            task_id=task_id,
            parent=parent,
            epoch=epoch,
            generator=generator,
        )

    def task_grammar(self) -> str:
        """The Lark rules of a task as the simulator writes it (see :mod:`.task_grammar`)."""
        return RULES

    def sibling(self, source: Task, rng: random.Random, task_id: str) -> Task:
        """A sibling with the source's function table: at the same level a new start (or a new order), one level
        up the chain with one more call, one level down without its last call; the hint kept (under ``k``, so
        a sibling one call shorter than its hint allows is one level lower).

        The level is the source's w.p. 0.5, else one step up or down (clamped to 1-8); when that variant cannot
        be made (no call keeps the chain in range, no other start fits) the others are tried, same level first.
        """
        draft = read_prompt(source.prompt)
        drafted = len(draft.order)
        want = min(MAX_K, self._sibling_level(source, rng, MIN_K, MAX_K) + draft.hint)  # the level's chain length
        for k in dict.fromkeys((want, drafted, drafted - 1, drafted + 1)):
            for start, order in self._variants(draft, k, rng):
                prompt = render_prompt(draft.rules, start, order, min(draft.hint, k - 1))
                sibling = self._as_sibling(
                    source, prompt, join_calls(run_chain(_by_name(draft), start, order)), task_id
                )
                if sibling is not None:
                    return sibling
        raise AssertionError(f"no sibling of {source.prompt!r}")  # unreachable: k=1 always has another start

    @staticmethod
    def _variants(draft: Draft, k: int, rng: random.Random) -> list[tuple[int, list[str]]]:
        """Candidate (start, order) pairs of ``k`` calls over the draft's table, best first."""
        rules, order = _by_name(draft), list(draft.order)
        if not MIN_K <= k <= MAX_K:
            return []
        if k == len(order) - 1:
            return [(draft.start, order[:-1])]
        if k == len(order) + 1:
            last = draft.calls[-1].result
            in_range = [n for n in rules if 0 <= rules[n].apply(last) <= DRAW_MAX_VALUE]
            pool = [n for n in in_range if n not in order] or in_range  # an unused function first: each once
            best = [n for n in pool if rules[n].apply(last) != last] or pool  # best one that changes the value
            return [(draft.start, order + [rng.choice(best)])] if best else []
        starts = [s for s in range(DRAW_MAX_VALUE + 1) if s != draft.start and _fits(rules, s, order)]
        near = [s for s in starts if s <= START_MAX] or starts
        out = [(rng.choice(near), order)] if near else []
        other = draw_order([rules[n] for n in dict.fromkeys(order)], draft.start, k, rng)
        if other is not None and other != order:
            out.append((draft.start, other))
        return out


def _by_name(draft: Draft) -> dict[str, Rule]:
    return {r.name: r for r in draft.rules}


def _fits(rules: dict[str, Rule], start: int, order: list[str]) -> bool:
    try:
        calls = run_chain(rules, start, order)
    except PromptError:
        return False
    return all(c.result <= DRAW_MAX_VALUE for c in calls)


__all__ = ["CHECKER", "ERROR_TYPES", "ChainEnv", "check_chain", "draw_order", "generate_draft", "parse_chain"]
