"""Python-call syntax for the real BFCL benchmark: a safe decoder into BFCL's decoded form, and a renderer.

BFCL's prompting models answer ``[func(a=1, b='x'), other(c=[1, 2])]``; the official decoder parses
that with :mod:`ast` but evaluates some nodes (``BinOp``, ``Lambda``) and, for Java/JS, needs
``tree_sitter``. This module re-implements the Python decoder on the standard-library :mod:`ast`
alone, never evaluating anything, and returns BFCL's decoded form ``[{name: {arg: value}}, ...]``
that the official ``ast_checker`` consumes. The rules follow BFCL's decoder: surrounding back-ticks,
newlines and spaces are stripped; the text is wrapped in ``[...]`` when it is not already; positional
arguments are ignored (BFCL reads keywords only); a bare name reads as its string; a nested call
without keywords reads as its source text, with keywords as ``{name: {arg: value}}``. Unlike BFCL,
arithmetic and lambdas are rejected (BFCL evaluates them) and several calls may also be joined by
``;`` (or newlines), the genenv answer format.

The renderer writes the canonical answer: keyword calls with Python literals, several calls joined
by ``"; "``, ``[]`` for "no call"; every ``=>`` inside a string literal is written ``=\\x3e`` so
the simulator's ``<prompt> => <answer>`` separator never appears in an answer.

>>> decode_calls("f(a=1, b='x'); g(c=[1, 2])")
[{'f': {'a': 1, 'b': 'x'}}, {'g': {'c': [1, 2]}}]
>>> decode_calls("[math.hypot(x=3, y=-4)]")
[{'math.hypot': {'x': 3, 'y': -4}}]
>>> decode_calls("I cannot help with that.")
Traceback (most recent call last):
...
genenv_engine.environments.bfcl.official.calls.DecodeError: not a list of calls
>>> render_calls([{"f": {"a": 1.0, "b": "New York", "c": {"k": True}}}, {"g": {}}])
"f(a=1.0, b='New York', c={'k': True}); g()"
"""

from __future__ import annotations

import ast
import math
import warnings
from typing import Any

MAX_RESPONSE_CHARS = 60_000
"""Longer responses are not decoded (the longest real BFCL gold answer is far shorter)."""
NO_CALL = "[]"
"""The canonical answer when no function should be called."""
CALL_JOIN = "; "


class DecodeError(ValueError):
    """The text is not a list of function calls in Python syntax."""


# ---------------------------------------------------------------- decoding (never eval)


def decode_calls(text: str) -> list[dict[str, dict[str, Any]]]:
    """Decode a response into BFCL's form ``[{name: {arg: value}}]``; raise :class:`DecodeError`.

    >>> decode_calls("```\\n[]\\n```")
    []
    >>> decode_calls("f(1, a=None)")
    [{'f': {'a': None}}]
    """
    if len(text) > MAX_RESPONSE_CHARS:
        raise DecodeError("response too long")
    nodes = _call_nodes(text.strip("`\n "))
    return [_resolve_call(node) for node in nodes]


def _call_nodes(text: str) -> list[ast.Call]:
    wrapped = text if text.startswith("[") else "[" + text
    wrapped = wrapped if wrapped.endswith("]") else wrapped + "]"
    body = _parse(wrapped, "eval")
    if body is not None:
        elts = [body] if isinstance(body, ast.Call) else getattr(body, "elts", None)
        if elts is not None and all(isinstance(e, ast.Call) for e in elts):
            return elts
        raise DecodeError("not a list of calls")
    statements = _parse(text, "exec")
    if not statements:
        raise DecodeError("not a list of calls")
    nodes = []
    for stmt in statements:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            raise DecodeError("not a list of calls")
        nodes.append(stmt.value)
    return nodes


def _parse(text: str, mode: str) -> Any:
    try:
        with warnings.catch_warnings():  # odd literals warn with pieces of the text; keep them off stderr
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            tree = ast.parse(text, mode=mode)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tree.body


def _resolve_call(node: ast.Call) -> dict[str, dict[str, Any]]:
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise DecodeError("**kwargs are not allowed")
        args[kw.arg] = _value(kw.value)
    return {call_name(node.func): args}


def call_name(node: ast.expr) -> str:
    """Dotted name of a call target (``math.hypot``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{call_name(node.value)}.{node.attr}"
    raise DecodeError("call target is not a name")


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _value(node.operand)
        if isinstance(inner, bool) or not isinstance(inner, (int, float, complex)):
            raise DecodeError("sign applied to a non-number")
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.List):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise DecodeError("** in a dict literal")
        return {_hashable(_value(k)): _value(v) for k, v in zip(node.keys, node.values, strict=False)}
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return _resolve_call(node) if node.keywords else ast.unparse(node)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node)
    raise DecodeError(f"unsupported argument syntax: {type(node).__name__}")


def _hashable(key: Any) -> Any:
    try:
        hash(key)
    except TypeError:
        raise DecodeError("unhashable dict key") from None
    return key


# ---------------------------------------------------------------- rendering


def render_calls(calls: list[dict[str, dict[str, Any]]]) -> str:
    """The canonical answer text of decoded calls (``[]`` when there are none)."""
    if not calls:
        return NO_CALL
    return CALL_JOIN.join(render_call(name, args) for call in calls for name, args in call.items())


def render_call(name: str, args: dict[str, Any]) -> str:
    """``name(k=v, ...)`` with Python literals; raises ValueError on a value with no literal form.

    >>> render_call("f", {"s": "a => b", "n": -2})
    "f(s='a =\\\\x3e b', n=-2)"
    """
    return f"{name}({', '.join(f'{k}={render_value(v)}' for k, v in args.items())})"


def render_value(value: Any) -> str:
    """A Python literal for a JSON-like value (dicts, lists, tuples, str, numbers, bools, None)."""
    if isinstance(value, str):
        return repr(value).replace("=>", "=\\x3e")
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("non-finite float has no literal")
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(render_value(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(render_value(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{render_value(k)}: {render_value(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"no literal form for {type(value).__name__}")


def literal_args(node: ast.Call) -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword argument values of a call whose arguments are all literals.

    Used for the gold call strings of multi-turn items (which may pass arguments by position).

    >>> literal_args(ast.parse("sort('a.txt', lines=2)", mode="eval").body)
    (['a.txt'], {'lines': 2})
    """
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        raise DecodeError("starred arguments are not allowed")
    return [_value(a) for a in node.args], {k.arg: _value(k.value) for k in node.keywords if k.arg}
