"""API-Bank-mini syntax: the ``API-Request: [Name(k='v')]`` call form and lenient time/date normalisers.

Shared by the mock backend, the prompt grammar, the checker and the upstream loader. Calls are
parsed with :func:`ast.parse` and read as literals only; nothing is ever evaluated. The normalisers
turn the many ways an agent may write a time or date (``7:30pm``, ``2023-03-26``, ``March 26th``)
into the canonical ``HH:MM`` / ``MM-DD`` (year 2023) forms the mock database uses.

>>> render_call("AddAlarm", {"time": "07:30"})
"AddAlarm(time='07:30')"
>>> norm_time("7:30pm"), norm_date("March 26th")
('19:30', '03-26')
"""

from __future__ import annotations

import ast
import datetime
import re
import warnings
from typing import Any

YEAR = 2023
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


class CallSyntaxError(ValueError):
    """Text that is not one ``Name(key=literal, ...)`` call."""


def quiet_parse(text: str) -> ast.Expression:
    """:func:`ast.parse` in eval mode without warnings on odd literals (``1abc``, ``'\\ '``); never evaluates.

    The warnings would print pieces of generated text (escape characters included) to stderr.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(text, mode="eval")


# ---------------------------------------------------------------- value normalisation (agent side)


def norm_time(text: str) -> str | None:
    """``HH:MM`` (24 h) from ``7:30``, ``07:30:00``, ``7:30pm``, ``7 PM``, ``noon``; None if not a time.

    >>> [norm_time(t) for t in ("7:30pm", "07:30", "12am", "19:05:00", "7", "25:00")]
    ['19:30', '07:30', '00:00', '19:05', None, None]
    """
    text = text.strip().lower()
    if text in ("noon", "midnight"):
        return "12:00" if text == "noon" else "00:00"
    match = re.fullmatch(r"(\d{1,2})(?::([0-5]\d))?(?::00)?\s*(am|pm|a\.m\.|p\.m\.)?", text)
    if match is None:
        return None
    hour, minute, half = int(match.group(1)), int(match.group(2) or 0), match.group(3)
    if half is None:
        return f"{hour:02d}:{minute:02d}" if match.group(2) and hour < 24 else None
    if not 1 <= hour <= 12:
        return None
    return f"{hour % 12 + (12 if half.startswith('p') else 0):02d}:{minute:02d}"


def norm_date(text: str) -> str | None:
    """``MM-DD`` (year 2023) from ``2023-03-26``, ``03-26``, ``3/26``, ``mar 26``, ``March 26th``.

    >>> [norm_date(t) for t in ("2023-03-26", "3/26", "March 26th", "26 mar", "02-30", "2024-03-26")]
    ['03-26', '03-26', '03-26', '03-26', None, None]
    """
    text = text.strip().lower().replace(",", "")
    month = day = None
    year = YEAR
    if m := re.fullmatch(r"(\d{4})-(\d{1,2})-(\d{1,2})", text):
        year, month, day = (int(g) for g in m.groups())
    elif m := re.fullmatch(r"(\d{1,2})[-/](\d{1,2})(?:/(\d{4}|\d{2}))?", text):
        month, day = int(m.group(1)), int(m.group(2))
        year = int(m.group(3)) % 100 + 2000 if m.group(3) else YEAR
    elif m := re.fullmatch(r"([a-z]{3,9})\.? (\d{1,2})(?:st|nd|rd|th)?(?: (\d{4}))?", text):
        month, day, year = _month(m.group(1)), int(m.group(2)), int(m.group(3) or YEAR)
    elif m := re.fullmatch(r"(\d{1,2})(?:st|nd|rd|th)? ([a-z]{3,9})\.?(?: (\d{4}))?", text):
        month, day, year = _month(m.group(2)), int(m.group(1)), int(m.group(3) or YEAR)
    if month is None or year != YEAR:
        return None
    try:
        datetime.date(YEAR, month, day)
    except (ValueError, TypeError):
        return None
    return f"{month:02d}-{day:02d}"


def _month(word: str) -> int | None:
    full = (
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    )
    for i, name in enumerate(full):
        if word == MONTHS[i] or (len(word) >= 3 and name.startswith(word)):
            return i + 1
    return None


def norm_datetime(text: str) -> str | None:
    """``MM-DD HH:MM`` from a date followed by a time, e.g. ``2023-03-26 15:00:00`` or ``mar 26 3pm``.

    >>> norm_datetime("2023-03-26T15:00:00"), norm_datetime("OCT 5 3PM"), norm_datetime("3pm")
    ('03-26 15:00', '10-05 15:00', None)
    """
    words = re.sub(r"(?<=\d)T(?=\d)", " ", text.strip()).split()
    for cut in range(1, len(words)):
        date, time = norm_date(" ".join(words[:cut])), norm_time(" ".join(words[cut:]))
        if date and time:
            return f"{date} {time}"
    return None


def norm_value(kind: str, value: Any) -> Any:
    """Normalise one argument of a parameter type; raise TypeError when the value does not fit the type."""
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("expected an integer")
        return value
    if not isinstance(value, str):
        raise TypeError("expected a string")
    normaliser = {"time": norm_time, "date": norm_date, "datetime": norm_datetime}.get(kind)
    if normaliser is not None:
        result = normaliser(value)
        if result is None:
            raise TypeError(f"not a {kind}")
        return result
    value = " ".join(value.split())
    return value.upper() if kind == "code" else value if kind == "formula" else value.lower()


# ---------------------------------------------------------------- API-Request call syntax


def literal_text(value: Any) -> str:
    """Canonical literal text: strings single-quoted (repr), no spaces inside containers."""
    if isinstance(value, list):
        return "[" + ",".join(literal_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{literal_text(k)}:{literal_text(v)}" for k, v in value.items()) + "}"
    return repr(value)


def render_call(name: str, args: dict[str, Any]) -> str:
    """``Name(k='v',n=3)``: the canonical call text (keys in the given order)."""
    return f"{name}({','.join(f'{k}={literal_text(v)}' for k, v in args.items())})"


def parse_call(text: str) -> tuple[str, dict[str, Any]]:
    """Parse one keyword call into (name, args) with :func:`ast.parse`; nothing is evaluated.

    >>> parse_call("AddAgenda(what='gym', date='03-26', place='park')")
    ('AddAgenda', {'what': 'gym', 'date': '03-26', 'place': 'park'})
    """
    if len(text) > 2000:
        raise CallSyntaxError("too long")
    try:
        node = quiet_parse(text.strip()).body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        raise CallSyntaxError(str(err)) from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
        raise CallSyntaxError("not a keyword-only call of a plain name")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None or kw.arg in args:
            raise CallSyntaxError("bad or repeated keyword")
        args[kw.arg] = _literal(kw.value)
    return node.func.id, args


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and (node.value is None or type(node.value) in (str, int, float, bool)):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) in (int, float)
    ):
        return -node.operand.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict) and all(
        isinstance(k, ast.Constant) and type(k.value) in (str, int) for k in node.keys
    ):
        return {k.value: _literal(v) for k, v in zip(node.keys, node.values, strict=False)}  # type: ignore[union-attr]
    raise CallSyntaxError("argument is not a literal")
