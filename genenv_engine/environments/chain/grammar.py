"""The chain prompt grammar: integer rules, the strict prompt reader and the gold chain it recomputes.

A prompt lists a few one-argument integer functions, a start value, the ordered names of the functions to
apply (the chain, ``k`` calls) and, optionally, a hint giving the first ``j < k`` calls worked out. The level is
the number of calls left to compute, ``k - j``. The answer writes every call with its argument and result (the
hinted ones copied), so it is right only if every intermediate value is (the checker also takes each call
followed, in brackets, by the names still to apply)::

    apply <names> | start <n> | <definitions> [| hint <first j calls>]   =>   f(5)=8; g(8)=16; ...

Definitions are ``<name>(x)=x<op><c>``, a one-letter name (any lower-case letter but ``x``) and one of four
rule shapes: ``x+c``, ``x-c`` (``c`` in 1-9), ``x*c`` and ``x%c`` (``x mod c``; ``c`` in 2-9). Every value,
the start and each call's result, stays in 0-99. Functions listed but never applied are distractors.

The reader is strict (single spaces, no leading zeros) and executes the rules itself with integer
arithmetic: model text is never evaluated.

>>> draft = read_prompt("f(x)=x+3 g(x)=x*2 q(x)=x%5 | start 5 | apply f g f")
>>> draft.answer, draft.level, draft.features["distractors"]
('f(5)=8; g(8)=16; f(16)=19', 3, 1)
>>> read_prompt("f(x)=x**2 | start 5 | apply f")
Traceback (most recent call last):
...
genenv_engine.environments.chain.grammar.PromptError: bad_rule: 'f(x)=x**2' (allowed x+c, x-c, x*c, x%c)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MIN_K = 1
MAX_K = 8
"""A chain has ``MIN_K..MAX_K`` calls, and a level (the calls left to compute) is in the same range."""
LEVELS = tuple(range(MIN_K, MAX_K + 1))
MAX_FUNCTIONS = 10
"""Most definitions a prompt may list (chain functions and distractors together)."""
MAX_VALUE = 99
"""Every value of a chain (the start and each result) lies in ``0..MAX_VALUE``."""
CONSTANTS = {"+": range(1, 10), "-": range(1, 10), "*": range(2, 10), "%": range(2, 10)}
"""The rule shapes and the constants each allows."""
NAMES = "abcdefghijklmnopqrstuvwyz"
"""Allowed function names (one letter; ``x`` is the argument)."""
CALL_JOIN = "; "
SECTION_JOIN = " | "

_DEF_HEAD = re.compile(r"([a-z])\(x\)=(.*)")
_RULE = re.compile(r"x([-+*%])([1-9])")
_NUMBER = re.compile(r"0|[1-9][0-9]?")
_CALL = re.compile(r"([a-z])\((0|[1-9][0-9]?)\)=(0|[1-9][0-9]?)")
_CLIP = 20


class PromptError(ValueError):
    """A prompt outside the grammar; ``str(err)`` is a short machine-readable reason."""


@dataclass(frozen=True)
class Rule:
    """One function: ``name(x) = x <op> c``."""

    name: str
    op: str
    c: int

    def apply(self, x: int) -> int:
        """The rule applied to ``x`` (integer arithmetic; ``%`` is Python's non-negative mod for c > 0)."""
        if self.op == "+":
            return x + self.c
        if self.op == "-":
            return x - self.c
        if self.op == "*":
            return x * self.c
        return x % self.c

    @property
    def text(self) -> str:
        """The definition as a prompt writes it, e.g. ``f(x)=x+3``."""
        return f"{self.name}(x)=x{self.op}{self.c}"

    def tool(self) -> dict[str, Any]:
        """JSON-schema documentation of the function."""
        return {
            "name": self.name,
            "description": self.text,
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        }


@dataclass(frozen=True)
class Call:
    """One call of the chain: ``name(arg)=result``."""

    name: str
    arg: int
    result: int

    @property
    def text(self) -> str:
        return f"{self.name}({self.arg})={self.result}"


def run_chain(rules: dict[str, Rule], start: int, order: tuple[str, ...] | list[str]) -> tuple[Call, ...]:
    """The calls of applying ``order`` from ``start``; ``PromptError("value_out_of_range")`` when a result
    leaves ``0..MAX_VALUE``.

    >>> rules = {"f": Rule("f", "-", 4), "g": Rule("g", "%", 7)}
    >>> [c.text for c in run_chain(rules, 12, ["g", "f"])]
    ['g(12)=5', 'f(5)=1']
    >>> run_chain(rules, 2, ["f"])
    Traceback (most recent call last):
    ...
    genenv_engine.environments.chain.grammar.PromptError: value_out_of_range: f(2)=-2
    """
    calls, x = [], start
    for name in order:
        y = rules[name].apply(x)
        if not 0 <= y <= MAX_VALUE:
            raise PromptError(f"value_out_of_range: {name}({x})={y}")
        calls.append(Call(name, x, y))
        x = y
    return tuple(calls)


def join_calls(calls: tuple[Call, ...] | list[Call]) -> str:
    """Calls as an answer and a hint write them: ``f(5)=8; g(8)=16``."""
    return CALL_JOIN.join(c.text for c in calls)


@dataclass(frozen=True)
class Draft:
    """A prompt read back through the grammar: its rules, start, order, hint length, and the gold chain."""

    prompt: str
    rules: tuple[Rule, ...]
    start: int
    order: tuple[str, ...]
    hint: int
    calls: tuple[Call, ...]

    @property
    def answer(self) -> str:
        return join_calls(self.calls)

    @property
    def expected(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "order": list(self.order),
            "rules": {r.name: [r.op, r.c] for r in self.rules},
            "calls": [{"name": c.name, "arg": c.arg, "result": c.result} for c in self.calls],
        }

    @property
    def tools(self) -> list[dict[str, Any]]:
        return [r.tool() for r in self.rules]

    @property
    def level(self) -> int:
        """The calls left to compute: the chain's ``k`` less the ``j`` the hint gives."""
        return len(self.order) - self.hint

    @property
    def features(self) -> dict[str, Any]:
        """The difficulty knobs: ``k`` (calls in the chain), ``functions`` listed, ``distractors`` (listed, never
        applied), ``hint`` (calls given worked out) and ``max_value`` (largest value of the chain)."""
        used = set(self.order)
        return {
            "k": len(self.order),
            "functions": len(self.rules),
            "distractors": sum(r.name not in used for r in self.rules),
            "hint": self.hint,
            "max_value": max([self.start] + [c.result for c in self.calls]),
        }


def render_prompt(
    rules: list[Rule] | tuple[Rule, ...], start: int, order: list[str] | tuple[str, ...], hint: int = 0
) -> str:
    """The prompt of a chain (``hint``: how many leading calls to give worked out, 0 for none).

    The ``apply`` section comes first, so that its first name sits at a fixed place whatever the chain's length
    (at the end of the prompt, a tiny agent trained on one- and two-call chains read the names back from the end).

    >>> render_prompt([Rule("f", "+", 3), Rule("g", "*", 2)], 5, ["f", "g"], hint=1)
    'apply f g | start 5 | f(x)=x+3 g(x)=x*2 | hint f(5)=8'
    """
    parts = ["apply " + " ".join(order), f"start {start}", " ".join(r.text for r in rules)]
    if hint:
        parts.append("hint " + join_calls(run_chain({r.name: r for r in rules}, start, order)[:hint]))
    return SECTION_JOIN.join(parts)


def read_prompt(prompt: str) -> Draft:
    """Strictly parse a prompt into a :class:`Draft` (its gold chain recomputed); raise :class:`PromptError`.

    The ``apply``, ``start`` and definitions sections may come in any order (the generator writes ``apply``
    first); a ``hint`` section comes last.

    Reasons: ``bad_format``, ``bad_definition``, ``bad_rule``, ``bad_constant``, ``duplicate_function``,
    ``too_many_functions``, ``bad_start``, ``bad_k``, ``unknown_function``, ``value_out_of_range``, ``bad_hint``.
    """
    parts = prompt.split(SECTION_JOIN)
    hint_text = parts.pop() if len(parts) == 4 and parts[3].startswith("hint ") else None
    kinds = ["apply" if p.startswith("apply") else "start" if p.startswith("start ") else "defs" for p in parts]
    if len(parts) != 3 or sorted(kinds) != ["apply", "defs", "start"]:
        raise PromptError("bad_format: expected 'apply <names> | start <n> | <functions>[ | hint <calls>]'")
    section = dict(zip(kinds, parts, strict=False))
    if section["apply"].strip() == "apply":
        raise PromptError(f"bad_k: 0 calls (allowed {MIN_K}-{MAX_K})")
    if not section["apply"].startswith("apply "):
        raise PromptError("bad_format: expected 'apply <names>'")
    rules = _read_rules(section["defs"])
    start_text = section["start"][len("start ") :]
    if not _NUMBER.fullmatch(start_text):
        raise PromptError(f"bad_start: {start_text[:_CLIP]!r} (an integer 0-{MAX_VALUE})")
    start = int(start_text)
    order = tuple(section["apply"][len("apply ") :].split(" "))
    if not MIN_K <= len(order) <= MAX_K:
        raise PromptError(f"bad_k: {len(order)} calls (allowed {MIN_K}-{MAX_K})")
    for name in order:
        if name not in rules:
            raise PromptError(f"unknown_function: {name[:_CLIP]!r}")
    calls = run_chain(rules, start, order)
    hint = _read_hint(hint_text, calls) if hint_text is not None else 0
    return Draft(prompt, tuple(rules.values()), start, order, hint, calls)


def _read_rules(text: str) -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for part in text.split(" "):
        head = _DEF_HEAD.fullmatch(part)
        if head is None or head.group(1) not in NAMES:
            raise PromptError(f"bad_definition: {part[:_CLIP]!r} (expected <letter>(x)=<rule>)")
        name, body = head.groups()
        rule = _RULE.fullmatch(body)
        if rule is None:
            raise PromptError(f"bad_rule: {part[:_CLIP]!r} (allowed x+c, x-c, x*c, x%c)")
        op, c = rule.group(1), int(rule.group(2))
        if c not in CONSTANTS[op]:
            raise PromptError(
                f"bad_constant: {part!r} (x{op}c needs c in {CONSTANTS[op].start}-{CONSTANTS[op].stop - 1})"
            )
        if name in rules:
            raise PromptError(f"duplicate_function: {name}")
        rules[name] = Rule(name, op, c)
    if len(rules) > MAX_FUNCTIONS:
        raise PromptError(f"too_many_functions: {len(rules)} (at most {MAX_FUNCTIONS})")
    return rules


def _read_hint(text: str, calls: tuple[Call, ...]) -> int:
    """The number of calls a ``hint <calls>`` section gives; they must be the chain's first ones, fewer than all."""
    if not text.startswith("hint "):
        raise PromptError("bad_format: the fourth section must be 'hint <calls>'")
    pieces = text[len("hint ") :].split(CALL_JOIN)
    if not all(_CALL.fullmatch(p) for p in pieces):
        raise PromptError(f"bad_hint: {text[5 : 5 + _CLIP]!r} is not a list of name(arg)=result")
    if len(pieces) >= len(calls):
        raise PromptError(f"bad_hint: it gives {len(pieces)} of {len(calls)} calls (at most {len(calls) - 1})")
    if pieces != [c.text for c in calls[: len(pieces)]]:
        raise PromptError("bad_hint: it is not the start of the chain")
    return len(pieces)
