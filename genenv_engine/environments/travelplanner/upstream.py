"""Loader for the upstream TravelPlanner query CSV (``osunlp/TravelPlanner`` validation/train files).

Provides :func:`load_upstream` (a user folder -> official tasks) and :func:`parse_literal`, a reader for
the Python-literal cells the CSV uses (``local_constraint``, ``date``, ``annotated_plan``) that walks
the :mod:`ast` tree and accepts only literals: nothing is evaluated.

Accepted input: a folder holding ``validation.csv`` (else ``train.csv``), or the CSV path itself, with
the columns ``org, dest, days, visiting_city_number, date, people_number, local_constraint, budget,
query, level`` and optionally ``annotated_plan``; other columns (``reference_information``...) are
ignored. The upstream sandbox database (flights, restaurants, stays... from the benchmark's Drive
zip) is not supported here, so official queries are loaded for display and for scoring plans only:
they become episode-level held-out tasks whose checker runs the constraints that need no database
(complete information, current city, city route, diversity, transport conflict, the transportation
constraint) and reports the rest as ``unchecked``. :func:`read_row` checks and reads one row, as a task
import reads it.

>>> parse_literal("{'house rule': None, 'cuisine': ['Thai', 'Mexican'], 'room type': 'entire room'}")
{'house rule': None, 'cuisine': ['Thai', 'Mexican'], 'room type': 'entire room'}
>>> parse_literal("__import__('os')")
Traceback (most recent call last):
...
genenv_engine.environments.travelplanner.upstream.LiteralError: not a literal: Call
"""

from __future__ import annotations

import ast
import csv
import json
import warnings
from pathlib import Path
from typing import Any

from genenv_engine.core.records import Task
from genenv_engine.environments.travelplanner.constraints import query_from_upstream

REQUIRED = (
    "org",
    "dest",
    "days",
    "visiting_city_number",
    "date",
    "people_number",
    "local_constraint",
    "budget",
    "query",
    "level",
)
FILES = ("validation.csv", "train.csv")
_LEVELS = {"easy": 2, "medium": 3, "hard": 4}
"""Upstream level -> mini ladder level (official trips are 3-7 days, all above the 1-day rung)."""


class LiteralError(ValueError):
    """A cell that is not a plain Python literal."""


def parse_literal(text: str) -> Any:
    """Read a Python literal (str, number, bool, None, list, tuple, dict) without evaluating anything."""
    try:
        with warnings.catch_warnings():  # odd literals warn with pieces of the text; keep them off stderr
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        raise LiteralError(f"unparseable: {err}") from None
    return _walk(node)


def _walk(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool, type(None))):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) in (int, float)
    ):
        return -node.operand.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_walk(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise LiteralError("dict unpacking is not a literal")
        return {_walk(k): _walk(v) for k, v in zip(node.keys, node.values, strict=False)}  # type: ignore[arg-type]
    raise LiteralError(f"not a literal: {type(node).__name__}")


def find_csv(data_dir: str | Path) -> Path:
    """The query CSV in ``data_dir`` (or ``data_dir`` itself when it is a file)."""
    path = Path(data_dir)
    if path.is_file():
        return path
    for name in FILES:
        if (path / name).is_file():
            return path / name
    raise FileNotFoundError(f"{path}: no TravelPlanner query CSV ({' or '.join(FILES)}) found")


def load_upstream(data_dir: str | Path) -> list[Task]:
    """Official TravelPlanner queries as held-out episode tasks (``origin="official"``).

    Raises ``ValueError`` naming the file and line of the first bad row or the missing columns.
    """
    path = find_csv(data_dir)
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
        tasks = []
        for row in reader:
            try:
                tasks.append(_row_task(row, len(tasks)))
            except (ValueError, KeyError, TypeError) as err:
                raise ValueError(f"{path}:{reader.line_num}: {err}") from None
    if not tasks:
        raise ValueError(f"{path}: no rows")
    return tasks


def read_row(row: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """One query row (CSV strings, or values already typed) as its checked query fields and the day records of
    its ``annotated_plan`` (None without one); ValueError says what is wrong."""
    missing = [c for c in REQUIRED if c not in row]
    if missing:
        raise ValueError(f"missing column(s) {', '.join(missing)}")
    query = {key: row[key] for key in REQUIRED}
    for key in ("days", "visiting_city_number", "people_number"):
        query[key] = _int(row[key], key)
    query["budget"] = _int(row["budget"], "budget")
    query["date"] = _cell(row["date"], "date", list)
    query["local_constraint"] = _cell(row["local_constraint"], "local_constraint", dict)
    if not isinstance(row["query"], str) or not isinstance(row["org"], str) or not isinstance(row["dest"], str):
        raise ValueError("org, dest and query must be text")
    if not isinstance(row["level"], str) or row["level"] not in _LEVELS:
        raise ValueError(f"level must be easy, medium or hard, got {row['level']!r}")
    parsed = query_from_upstream(query)
    if not 1 <= parsed.days <= 30 or parsed.cities < 1 or parsed.people < 1:
        raise ValueError("days, visiting_city_number and people_number must be positive")
    return query, _plan(row.get("annotated_plan") or "")


def _row_task(row: dict[str, str], index: int) -> Task:
    query, plan = read_row(row)
    parsed = query_from_upstream(query)
    level = 4 if parsed.days >= 5 or parsed.cities >= 2 else _LEVELS[row["level"]]
    features = {
        "days": parsed.days,
        "cities": parsed.cities,
        "people": parsed.people,
        "n_constraints": parsed.n_constraints,
        "upstream_level": row["level"],
    }
    return Task(
        id=f"travelplanner/heldout/{index:05d}",
        benchmark="travelplanner",
        prompt=row["query"].strip(),
        answer=json.dumps(plan) if plan else "",
        expected={"query": query, "annotated_plan": plan},
        difficulty={"level": level, "features": features},
        checker="tp_constraints",
        granularity="episode",
        split="heldout",
        origin="official",
    )


def _int(text: Any, key: str) -> int:
    try:
        return int(float(text))
    except (ValueError, TypeError, OverflowError):
        raise ValueError(f"{key} is not a number: {text!r}") from None


def _cell(text: Any, key: str, kind: type) -> Any:
    try:
        value = parse_literal(text) if isinstance(text, str) else text
    except LiteralError as err:
        raise ValueError(f"bad {key}: {err}") from None
    if not isinstance(value, kind):
        raise ValueError(f"bad {key}: expected a {kind.__name__}")
    return value


def _plan(text: Any) -> list[dict[str, Any]] | None:
    """The day records of an ``annotated_plan`` cell (its leading query-summary record is dropped)."""
    if isinstance(text, str) and not text.strip():
        return None
    value = _cell(text, "annotated_plan", list)
    days = [r for r in value if isinstance(r, dict) and "current_city" in r]
    if not days:
        raise ValueError("bad annotated_plan: no day records")
    return days
