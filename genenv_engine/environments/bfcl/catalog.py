"""The BFCL-mini function catalog and its controlled prompt grammar (render and strict parse).

A byte-level model sees every character, so prompts are compact: ``F: <signatures> | Q: <query>``.
This module owns the 16 catalog functions, how a call is phrased in a query, and the inverse parser
that turns a prompt back into gold calls; both the task generator and the validator of simulator
text go through :func:`read_prompt`, so built-in and generated tasks get identical gold and levels.

Query grammar (one part per call, parts joined by `` then ``)::

    <verb> <required values, each after its cue> [<optional cue> <value>]...

Example:

>>> draft = read_prompt("F: add(a:int,b:int) neg(x:int) | Q: add 3 and 5")
>>> draft.answer, draft.level
('add(a=3,b=5)', 1)
>>> read_prompt("F: move(d:n|s|e|w,k:int=1) sq(x:int) add(a:int,b:int) | Q: go w by 4").answer
'move(d=w,k=4)'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from genenv_engine.environments.drafts import read_signatures

MAX_FUNCTIONS = 6
MAX_CALLS = 3
MAX_NUMBER = 999
QUERY_JOIN = " then "
ANSWER_JOIN = ";"
_PROMPT_RE = re.compile(r"F: (\S.*) \| Q: (\S.*)")
_INT_RE = re.compile(r"0|[1-9][0-9]{0,2}")


class PromptError(ValueError):
    """A prompt outside the grammar; ``str(err)`` is a short machine-readable reason."""


@dataclass(frozen=True)
class Param:
    """One parameter: ``int`` or ``enum`` (``values``), optional when it has a ``default``."""

    name: str
    kind: str = "int"
    values: tuple[str, ...] = ()
    default: int | str | None = None
    cue: str = ""
    """Word(s) that precede the value in a query (required for optional parameters)."""

    @property
    def optional(self) -> bool:
        return self.default is not None

    @property
    def doc(self) -> str:
        """Compact doc form, e.g. ``a:int``, ``u:c|f``, ``k:int=1``."""
        kind = "|".join(self.values) if self.kind == "enum" else self.kind
        return f"{self.name}:{kind}" + ("" if self.default is None else f"={self.default}")

    def schema(self) -> dict[str, Any]:
        """JSON-schema property for the tool doc."""
        prop: dict[str, Any] = {"type": "integer" if self.kind == "int" else "string"}
        if self.kind == "enum":
            prop["enum"] = list(self.values)
        if self.optional:
            prop["default"] = self.default
        return prop


@dataclass(frozen=True)
class Function:
    """A catalog function: parameters, its verbs (canonical first, then synonyms) and a description."""

    name: str
    params: tuple[Param, ...]
    verbs: tuple[str, ...]
    description: str

    @property
    def signature(self) -> str:
        """The exact form listed after ``F:``, e.g. ``add(a:int,b:int)``."""
        return f"{self.name}({','.join(p.doc for p in self.params)})"

    @property
    def rich(self) -> bool:
        """Whether the function has enum or optional parameters (an L3+ feature)."""
        return any(p.kind == "enum" or p.optional for p in self.params)

    def tool(self) -> dict[str, Any]:
        """BFCL-style JSON-schema function doc."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": {
                "type": "dict",
                "properties": {p.name: p.schema() for p in self.params},
                "required": [p.name for p in self.params if not p.optional],
            },
        }


def _binary(name: str, verbs: tuple[str, ...], description: str) -> Function:
    return Function(name, (Param("a"), Param("b", cue="and")), verbs, description)


def _unary(name: str, verbs: tuple[str, ...], description: str) -> Function:
    return Function(name, (Param("x"),), verbs, description)


CATALOG: dict[str, Function] = {
    f.name: f
    for f in (
        _binary("add", ("add", "sum", "plus"), "Add a and b."),
        _binary("sub", ("sub", "minus", "subtract"), "Subtract b from a."),
        _binary("mul", ("mul", "times", "multiply"), "Multiply a by b."),
        _binary("div", ("div", "divide", "split"), "Divide a by b."),
        _binary("mod", ("mod", "modulo", "remainder"), "Remainder of a divided by b."),
        _binary("pow", ("pow", "power", "raise"), "Raise a to the power b."),
        _binary("max", ("max", "larger", "bigger"), "The larger of a and b."),
        _binary("min", ("min", "smaller", "lesser"), "The smaller of a and b."),
        _unary("neg", ("neg", "negate", "flip"), "Negate x."),
        _unary("sq", ("sq", "square", "sqr"), "Square x."),
        _unary("abs", ("abs", "absolute", "magnitude"), "Absolute value of x."),
        Function(
            "set_temp",
            (Param("t"), Param("u", "enum", ("c", "f"))),
            ("set temp", "heat", "warm"),
            "Set the thermostat to t degrees in unit u.",
        ),
        Function(
            "move",
            (Param("d", "enum", ("n", "s", "e", "w")), Param("k", default=1, cue="by")),
            ("move", "go", "walk"),
            "Move k steps in direction d.",
        ),
        Function(
            "alarm",
            (Param("h"), Param("m", default=0, cue="min")),
            ("alarm", "wake", "ring"),
            "Set an alarm at hour h, minute m.",
        ),
        Function(
            "tip",
            (Param("b"), Param("p", default=15, cue="pct")),
            ("tip", "gratuity", "bonus"),
            "Tip p percent on bill b.",
        ),
        Function(
            "play",
            (Param("s", "enum", ("pop", "jazz", "rock")), Param("v", default=5, cue="vol")),
            ("play", "stream", "spin"),
            "Play genre s at volume v.",
        ),
    )
}

VERBS: dict[str, tuple[str, bool]] = {verb: (f.name, i > 0) for f in CATALOG.values() for i, verb in enumerate(f.verbs)}
"""Verb phrase -> (function name, is_synonym)."""
PLAIN = tuple(name for name, f in CATALOG.items() if not f.rich)
RICH = tuple(name for name, f in CATALOG.items() if f.rich)


@dataclass(frozen=True)
class Call:
    """One call as phrased in a query: function, verb used, and the values the query mentions."""

    name: str
    verb: str
    args: dict[str, int | str] = field(default_factory=dict)

    @property
    def function(self) -> Function:
        return CATALOG[self.name]

    def phrase(self) -> str:
        """The query text for this call, e.g. ``add 3 and 5`` or ``go w by 4``."""
        words = [self.verb]
        for p in self.function.params:
            if p.name in self.args:
                words += [p.cue] if p.cue else []
                words.append(str(self.args[p.name]))
        return " ".join(words)

    def answer(self) -> str:
        """Canonical answer text: keyword args in doc order, enum values as bare names.

        >>> Call("set_temp", "heat", {"t": 20, "u": "f"}).answer()
        'set_temp(t=20,u=f)'
        """
        return f"{self.name}({','.join(f'{k}={v}' for k, v in self._ordered())})"

    def expected(self) -> dict[str, Any]:
        """BFCL possible-answer entry: each arg lists allowed values; ``""`` means it may be omitted."""
        args: dict[str, list[Any]] = {}
        for p in self.function.params:
            if p.name not in self.args:
                args[p.name] = [p.default, ""]
            else:
                value = self.args[p.name]
                args[p.name] = [value, ""] if p.optional and value == p.default else [value]
        return {"name": self.name, "args": args}

    def _ordered(self) -> list[tuple[str, int | str]]:
        return [(p.name, self.args[p.name]) for p in self.function.params if p.name in self.args]


@dataclass(frozen=True)
class Draft:
    """A prompt read back through the grammar: listed functions, calls, gold and level features."""

    prompt: str
    functions: tuple[str, ...]
    calls: tuple[Call, ...]

    @property
    def answer(self) -> str:
        return ANSWER_JOIN.join(c.answer() for c in self.calls)

    @property
    def expected(self) -> dict[str, Any]:
        return {"calls": [c.expected() for c in self.calls]}

    @property
    def tools(self) -> list[dict[str, Any]]:
        return [CATALOG[name].tool() for name in self.functions]

    @property
    def features(self) -> dict[str, Any]:
        values = [v for c in self.calls for v in c.args.values() if isinstance(v, int)]
        return {
            "n_functions": len(self.functions),
            "n_args": sum(len(c.args) for c in self.calls),
            "n_calls": len(self.calls),
            "n_distractors": len(self.functions) - len({c.name for c in self.calls}),
            "synonym": any(VERBS[c.verb][1] for c in self.calls),
            "rich": any(c.function.rich for c in self.calls),
            "max_value": max(values, default=0),
        }

    @property
    def level(self) -> int:
        return infer_level(self.features)


def infer_level(features: dict[str, Any]) -> int:
    """Level 1-4 from ladder features; the generator and the validator both use this.

    >>> infer_level({"n_calls": 1, "synonym": False, "rich": False, "max_value": 7, "n_functions": 2})
    1
    >>> infer_level({"n_calls": 1, "synonym": True, "rich": False, "max_value": 7, "n_functions": 2})
    3
    """
    if features["n_calls"] >= 2:
        return 4
    if features["synonym"] or features["rich"] or features["max_value"] > 99:
        return 3
    if features["n_functions"] >= 3 or features["max_value"] > 9:
        return 2
    return 1


def render_prompt(functions: list[str] | tuple[str, ...], calls: list[Call] | tuple[Call, ...]) -> str:
    """``F: <signatures> | Q: <query>`` for the listed functions and calls."""
    sigs = " ".join(CATALOG[name].signature for name in functions)
    return f"F: {sigs} | Q: {QUERY_JOIN.join(c.phrase() for c in calls)}"


def read_prompt(prompt: str) -> Draft:
    """Strictly parse a prompt into a :class:`Draft`; raise :class:`PromptError` with a reason.

    >>> read_prompt("F: add(a:int,b:int) | Q: mul 3 and 5")
    Traceback (most recent call last):
    ...
    genenv_engine.environments.bfcl.catalog.PromptError: verb_not_listed: mul
    """
    match = _PROMPT_RE.fullmatch(prompt)
    if match is None:
        raise PromptError("bad_format: expected 'F: <functions> | Q: <query>'")
    functions = _read_functions(match.group(1))
    parts = match.group(2).split(QUERY_JOIN)
    if len(parts) > MAX_CALLS:
        raise PromptError(f"too_many_calls: {len(parts)}")
    return Draft(prompt, functions, tuple(_read_call(part, functions) for part in parts))


def _read_functions(text: str) -> tuple[str, ...]:
    return read_signatures(
        text, CATALOG, pattern=r"[a-z_]+\(\S*\)", noun="function", limit=MAX_FUNCTIONS, error=PromptError
    )


def _read_call(part: str, functions: tuple[str, ...]) -> Call:
    words = part.split(" ")
    verb = next((v for v in sorted(VERBS, key=len, reverse=True) if words[: len(v.split())] == v.split()), None)
    if verb is None:
        raise PromptError(f"unknown_verb: {words[0][:20]}")
    name = VERBS[verb][0]
    if name not in functions:
        raise PromptError(f"verb_not_listed: {name}")
    rest = words[len(verb.split()) :]
    args: dict[str, int | str] = {}
    for p in CATALOG[name].params:
        cue = p.cue.split() if p.cue else []
        if p.optional and rest[: len(cue)] != cue:
            continue
        if rest[: len(cue)] != cue or len(rest) <= len(cue):
            raise PromptError(f"unparseable_query: {name} needs {p.name}")
        args[p.name] = _read_value(p, rest[len(cue)])
        rest = rest[len(cue) + 1 :]
    if rest:
        raise PromptError(f"unparseable_query: trailing {' '.join(rest)[:20]!r}")
    return Call(name, verb, args)


def _read_value(param: Param, word: str) -> int | str:
    if param.kind == "enum":
        if word not in param.values:
            raise PromptError(f"unparseable_query: {param.name} must be one of {'|'.join(param.values)}")
        return word
    if not _INT_RE.fullmatch(word):
        raise PromptError(f"unparseable_query: {param.name} must be an integer 0-{MAX_NUMBER}")
    return int(word)
