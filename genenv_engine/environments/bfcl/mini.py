"""BFCL-mini: a function-calling environment with BFCL's AST checking rules, sized for byte-level LMs.

Provides :class:`BfclMini` (seeded splits on a 4-level difficulty ladder, the ``bfcl_ast`` checker,
a strict validator for simulator-written tasks, and sibling pairs for simulator warm start) plus the
module-level helpers :func:`generate_task` and :func:`check_calls`. The catalog and prompt grammar
live in :mod:`genenv_engine.environments.bfcl.catalog`.

Answers are Python-call syntax, several calls joined by ``;`` (e.g. ``add(a=3,b=5);neg(x=4)``). They
are parsed with :func:`ast.parse` and inspected as a tree, never evaluated. Arguments must be keywords
with literal values; a bare identifier (``u=c``) is read as the string ``"c"`` so enum values may be
written bare (the canonical form) or quoted.

>>> env = BfclMini(seed=0, sizes=SplitSizes(seed=3, train=8, heldout=4))
>>> task = env.splits()["train"][0]
>>> env.check(task, task.answer).success
True
>>> env.check(task, "nope(").error_type
'parse_error'
"""

from __future__ import annotations

import ast
import random
import warnings
from collections.abc import Callable
from typing import Any

from genenv_engine.core.records import CheckResult, Task, Validation
from genenv_engine.environments.base import (  # noqa: F401 (SplitSizes: the docstring's example)
    LadderEnvironment,
    SplitSizes,
)
from genenv_engine.environments.bfcl.catalog import (
    CATALOG,
    PLAIN,
    RICH,
    Call,
    Draft,
    PromptError,
    read_prompt,
    render_prompt,
)
from genenv_engine.environments.bfcl.task_grammar import RULES
from genenv_engine.environments.drafts import first_listings, step_draft

ERROR_TYPES = ("parse_error", "wrong_count", "wrong_name", "missing_arg", "unexpected_arg", "type_error", "value_error")
CHECKER = "bfcl_ast"
"""The checker name on every task (BFCL's AST rules)."""
MAX_PROMPT_CHARS = 180
MAX_ANSWER_CHARS = 100
MAX_RESPONSE_CHARS = 1000
_LADDER = {  # level -> (functions listed, calls, synonym verbs, rich functions allowed, largest number)
    1: ((1, 2), 1, False, False, 9),
    2: ((3, 4), 1, False, False, 99),
    3: ((3, 4), 1, True, True, 99),
    4: ((4, 5), 2, True, True, 999),
}
_ERROR_RANK = {"value_error": 0, "type_error": 1, "unexpected_arg": 2, "missing_arg": 3, "wrong_name": 4}
_STRIP = str.maketrans("", "", " ,./-_*^")


class _ParseError(ValueError):
    """The response is not a list of ``name(key=literal, ...)`` calls."""


# ---------------------------------------------------------------- response parsing (never eval)


def parse_calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Parse ``;``-separated keyword calls into (name, args) pairs without executing anything.

    >>> parse_calls("add(a=3,b=5); set_temp(t=20,u='c')")
    [('add', {'a': 3, 'b': 5}), ('set_temp', {'t': 20, 'u': 'c'})]
    """
    if len(text) > MAX_RESPONSE_CHARS:
        raise _ParseError("too long")
    return [_parse_one(part.strip()) for part in text.split(";")]


def _parse_one(text: str) -> tuple[str, dict[str, Any]]:
    try:
        with warnings.catch_warnings():  # odd literals warn with pieces of the text; keep them off stderr
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        raise _ParseError(str(err)) from None
    if not isinstance(node, ast.Call) or node.args:
        raise _ParseError("not a keyword-only call")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None or kw.arg in args:
            raise _ParseError("bad or repeated keyword")
        args[kw.arg] = _literal(kw.value)
    return _dotted_name(node.func), args


def _dotted_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted_name(node.value)}.{node.attr}"
    raise _ParseError("call target is not a name")


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and not isinstance(node.value, (bytes, complex, type(...))):
        return node.value
    if isinstance(node, ast.Name):
        return node.id
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, (ast.USub, ast.UAdd))
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) in (int, float)
    ):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
            raise _ParseError("dict keys must be string literals")
        return {k.value: _literal(v) for k, v in zip(node.keys, node.values, strict=False)}  # type: ignore[union-attr]
    raise _ParseError("argument is not a literal")


# ---------------------------------------------------------------- BFCL AST rules


def standardize(text: str) -> str:
    """BFCL string standardisation: lower-case, drop spaces and ``,./-_*^``, ``'`` -> ``"``.

    >>> standardize("New-York City")
    'newyorkcity'
    """
    return text.lower().translate(_STRIP).replace("'", '"')


def _type_ok(value: Any, json_type: str | None) -> bool:
    if isinstance(value, bool):
        return json_type in (None, "boolean")
    checks = {
        "integer": (int,),
        "number": (int, float),
        "float": (int, float),
        "string": (str,),
        "boolean": (bool,),
        "array": (list,),
        "dict": (dict,),
        "object": (dict,),
    }
    return isinstance(value, checks.get(json_type or "", (object,)))


def _same(value: Any, allowed: Any) -> bool:
    if isinstance(value, str) and isinstance(allowed, str):
        return standardize(value) == standardize(allowed)
    if isinstance(value, list) and isinstance(allowed, list):
        return len(value) == len(allowed) and all(_same(v, a) for v, a in zip(value, allowed, strict=False))
    if isinstance(value, dict) and isinstance(allowed, dict):
        return _same_dict(value, allowed)
    if isinstance(value, (str, list, dict)) or isinstance(allowed, (str, list, dict)):
        return False
    return value == allowed


def _same_dict(value: dict[str, Any], allowed: dict[str, Any]) -> bool:
    """BFCL dict rule: each key's value is among its allowed list; a key may be left out if ``""`` is allowed.

    >>> _same_dict({"name": "Ann"}, {"name": ["ann"], "age": ["", 30]})
    True
    >>> _same_dict({"name": "Bob"}, {"name": ["ann"]}), _same_dict({"x": 1}, {"name": ["", "a"]})
    (False, False)
    """
    if set(value) - set(allowed):
        return False
    for key, options in allowed.items():
        options = options if isinstance(options, list) else [options]
        if key not in value:
            if "" not in options:
                return False
        elif not any(_same(value[key], option) for option in options if option != "" or value[key] == ""):
            return False
    return True


def call_error(gold: dict[str, Any], name: str, args: dict[str, Any], tool: dict[str, Any] | None) -> str | None:
    """The BFCL AST error of one response call against one gold call (None when it matches)."""
    if name != gold["name"]:
        return "wrong_name"
    props = (tool or {}).get("parameters", {}).get("properties", {})
    allowed_by_arg: dict[str, list[Any]] = gold["args"]
    required = [k for k, allowed in allowed_by_arg.items() if "" not in allowed]
    if any(k not in args for k in required):
        return "missing_arg"
    if any(k not in allowed_by_arg or (props and k not in props) for k in args):
        return "unexpected_arg"
    if not all(_type_ok(v, props.get(k, {}).get("type")) for k, v in args.items()):
        return "type_error"
    if not all(any(_same(v, a) for a in allowed_by_arg[k] if a != "") for k, v in args.items()):
        return "value_error"
    return None


def check_calls(expected: dict[str, Any], tools: list[dict[str, Any]], response: str) -> CheckResult:
    """Score a response against BFCL possible-answer gold: count, order-free matching, per-call rules.

    ``score`` is matched calls / max(gold calls, response calls), so it is 1.0 exactly on success.
    """
    gold = expected["calls"]
    try:
        calls = parse_calls(response)
    except _ParseError:
        return CheckResult(False, 0.0, {"name": 0.0, "calls": 0.0}, "parse_error")
    docs = {t["name"]: t for t in tools}
    errors = [[call_error(g, n, a, docs.get(g["name"])) for n, a in calls] for g in gold]
    matched = _max_matching(errors)
    score = len(matched) / max(len(gold), len(calls))
    sub = {"name": _name_recall([g["name"] for g in gold], [n for n, _ in calls]), "calls": score}
    if len(calls) != len(gold):
        return CheckResult(False, score, sub, "wrong_count")
    if len(matched) == len(gold):
        return CheckResult(True, 1.0, sub, None)
    return CheckResult(False, score, sub, _first_error(errors, matched))


def _max_matching(errors: list[list[str | None]]) -> dict[int, int]:
    """Maximum bipartite matching of gold -> response calls over error-free pairs (gold index -> response)."""
    owner: dict[int, int] = {}

    def augment(g: int, seen: set[int]) -> bool:
        for r, err in enumerate(errors[g]):
            if err is None and r not in seen:
                seen.add(r)
                if r not in owner or augment(owner[r], seen):
                    owner[r] = g
                    return True
        return False

    for g in range(len(errors)):
        augment(g, set())
    return {g: r for r, g in owner.items()}


def _first_error(errors: list[list[str | None]], matched: dict[int, int]) -> str:
    """The closest-miss error of the first unmatched gold call among unmatched response calls."""
    used = set(matched.values())
    g = next(i for i in range(len(errors)) if i not in matched)
    candidates = [e for r, e in enumerate(errors[g]) if r not in used and e is not None]
    return min(candidates, key=_ERROR_RANK.__getitem__, default="wrong_name")


def _name_recall(gold_names: list[str], names: list[str]) -> float:
    pool = list(names)
    hits = 0
    for name in gold_names:
        if name in pool:
            pool.remove(name)
            hits += 1
    return hits / len(gold_names) if gold_names else 1.0


# ---------------------------------------------------------------- task generation


def generate_draft(level: int, rng: random.Random, first: str | None = None) -> Draft:
    """Sample a prompt at ``level`` (optionally forcing the first call's function) and read it back."""
    (lo, hi), n_calls, synonym, rich, top = _LADDER[level]
    pool = PLAIN + RICH if rich else PLAIN
    names = [first or rng.choice(pool)] + [rng.choice(pool) for _ in range(n_calls - 1)]
    calls = [_sample_call(name, rng, synonym, top) for name in names]
    called = list(dict.fromkeys(names))
    others = [n for n in CATALOG if n not in called]
    n_funcs = max(rng.randint(lo, hi), len(called))
    functions = called + rng.sample(others, n_funcs - len(called))
    rng.shuffle(functions)
    draft = read_prompt(render_prompt(functions, calls))
    assert draft.level == level, (draft.prompt, draft.features)
    return draft


def _sample_call(name: str, rng: random.Random, synonym: bool, top: int) -> Call:
    function = CATALOG[name]
    verb = rng.choice(function.verbs[1:]) if synonym else function.verbs[0]
    args: dict[str, int | str] = {}
    for p in function.params:
        if p.optional and rng.random() < 0.5:
            continue
        args[p.name] = rng.choice(p.values) if p.kind == "enum" else rng.randint(0, top)
    return Call(name, verb, args)


def generate_task(
    level: int, rng: random.Random
) -> tuple[str, str, dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """Sample one task at ``level``: (prompt, answer, expected, tools, features).

    >>> prompt, answer, expected, tools, features = generate_task(1, random.Random(3))
    >>> prompt.startswith("F: ") and features["n_calls"]
    1
    """
    draft = generate_draft(level, rng)
    return draft.prompt, draft.answer, draft.expected, draft.tools, draft.features


def min_level(function: str) -> int:
    """The lowest level whose tasks may call ``function`` (rich functions start at L3)."""
    return 3 if CATALOG[function].rich else 1


# ---------------------------------------------------------------- the environment


class BfclMini(LadderEnvironment):
    """Built-in mini BFCL: single-step function calling, checked with BFCL's AST rules."""

    name = "bfcl"
    granularity = "step"
    source = "built-in mini"

    def draft(self, level: int, rng: random.Random) -> tuple[str, Callable[..., Task]]:
        return step_draft(generate_draft(level, rng), benchmark=self.name, checker=CHECKER)

    def check(self, task: Task, response: str) -> CheckResult:
        """BFCL AST check of ``response`` against the task's possible-answer gold."""
        return check_calls(task.expected, task.tools, response)

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
        """Accept a generated pair only if the prompt parses and its answer matches the recomputed gold."""
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

    def repair_prompt(self, prompt: str, reason: str) -> str | None:
        """A signature listed twice: the list with each at its first listing."""
        return first_listings(prompt, "F: ") if reason.startswith("duplicate_function") else None

    def task_grammar(self) -> str:
        """The Lark rules of a task as the simulator writes it (see :mod:`.task_grammar`)."""
        return RULES

    def sibling(self, source: Task, rng: random.Random, task_id: str) -> Task:
        """A sibling whose first call uses the source's first function, at the same level or ±1."""
        first = source.expected["calls"][0]["name"]
        level = self._sibling_level(source, rng, lo=min_level(first))
        while True:
            draft = generate_draft(level, rng, first=first)
            sibling = self._as_sibling(source, draft.prompt, draft.answer, task_id)
            if sibling is not None:
                return sibling
