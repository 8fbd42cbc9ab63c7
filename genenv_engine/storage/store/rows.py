"""How the store's rows are encoded and filtered: a `Task` as a ``tasks`` row and back, the JSON and 0/1 columns
decoded, `TaskFilter` (which tasks a page or count covers), a safe full-text query and a checked ORDER BY.

Pure functions over rows and values; no connection is opened here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from genenv_engine.core.records import Task

_JSON_TASK_FIELDS = ("expected", "tools", "difficulty")
_SORTED_JSON = json.JSONEncoder(sort_keys=True).encode
"""``json.dumps(value, sort_keys=True)`` without building an encoder per call (a 32,000-task split has 98,000)."""
_POOL_ORIGINS = ("generated", "edited", "static", "imported")
GENERATED_ORIGINS = ("generated", "static")
"""Origins of the tasks a simulator wrote (an epoch's generations and a static augmentation)."""
_TASK_COLUMNS = (
    "id", "benchmark", "prompt", "answer", "expected", "tools", "difficulty", "level", "checker",
    "granularity", "split", "origin", "parent_id", "epoch", "generator", "valid", "reason", "status",
    "batch_id", "p_hat", "r_env", "n_rollouts", "superseded_by", "created_at", "simulator_version",
)  # fmt: skip
_TASK_FIELDS = tuple(f for f in Task.__dataclass_fields__)
_STAT_FIELDS = ("p_hat", "r_env", "n_rollouts", "batch_id", "superseded_by")

_ORDER_TERM = re.compile(r"^\s*(\w+)(?:\s+(asc|desc))?\s*$", re.IGNORECASE)


def _now() -> str:
    """Current UTC time as an ISO-8601 string."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fts_query(text: str) -> str:
    """Turn free user text into a safe FTS5 query: every word quoted, all words required.

    Punctuation and FTS operators lose their meaning, so no user input can raise a syntax error.

    >>> fts_query('add" OR (')
    '"add" "OR"'
    >>> fts_query("  ")
    ''
    """
    return " ".join(f'"{word}"' for word in re.findall(r"\w+", text))


def _task_row(task: Task, batch_id: str | None) -> dict[str, Any]:
    """A Task as a `tasks` row: JSON text for dict/list fields, level pulled out of difficulty."""
    row = task.to_row()
    for name in _JSON_TASK_FIELDS:
        row[name] = _SORTED_JSON(row[name])
    row["valid"] = int(task.valid)
    row["level"] = task.level
    if batch_id is not None:
        row["batch_id"] = batch_id
    return row


def _decode_row(row: dict[str, Any]) -> dict[str, Any]:
    """A `tasks` row with JSON fields decoded and `valid` as a bool."""
    out = dict(row)
    for name in _JSON_TASK_FIELDS:
        if out.get(name) is not None:
            out[name] = json.loads(out[name])
    if "valid" in out and out["valid"] is not None:
        out["valid"] = bool(out["valid"])
    return out


def _to_task(row: dict[str, Any]) -> Task:
    """Rebuild a Task from a `tasks` row."""
    decoded = _decode_row(row)
    return Task(**{name: decoded[name] for name in _TASK_FIELDS})


@dataclass(frozen=True)
class TaskFilter:
    """Which tasks a page or count covers: each field None means any (the tasks screen's filters).

    >>> TaskFilter(origin="generated", valid=True) == TaskFilter(valid=True, origin="generated")
    True
    """

    benchmark: str | None = None
    origin: str | None = None
    status: str | None = None
    epoch: int | None = None
    valid: bool | None = None
    p_min: float | None = None
    p_max: float | None = None
    text: str | None = None
    batch_id: str | None = None
    """The variation batch the tasks were written in (`Store.batches` ids; a seed task has none)."""


def _filter(where: TaskFilter | None, fields: dict[str, Any]) -> TaskFilter:
    """``where``, or a `TaskFilter` of the keyword ``fields`` (not both); TypeError names an unknown field."""
    if where is not None and fields:
        raise TypeError("give a TaskFilter or filter keywords, not both")
    return where if where is not None else TaskFilter(**fields)


def _marks(values: Sequence[Any]) -> str:
    """SQL placeholders for an IN list of ``values``.

    >>> _marks(("a", "b"))
    '?, ?'
    """
    return ", ".join("?" for _ in values)


def _json_or_none(text: str | None) -> Any:
    """A stored JSON column decoded; None when it is empty or not valid JSON."""
    try:
        return json.loads(text) if text else None
    except (TypeError, ValueError):
        return None


def _note_json(note: dict[str, Any] | str | None) -> str | None:
    """A batch's prompt note as its ``prompt_note`` column holds it: JSON text with sorted keys, or NULL.

    >>> _note_json({"steer": "harder", "success_line": None}), _note_json(None)
    ('{"steer": "harder", "success_line": null}', None)
    """
    if note is None or isinstance(note, str):
        return note
    return json.dumps(note, sort_keys=True)


def _bools(row: dict[str, Any], *names: str) -> dict[str, Any]:
    """Turn 0/1 integer columns of a row into bools (None stays None)."""
    return {k: (bool(v) if k in names and v is not None else v) for k, v in row.items()}


def _epoch_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``epochs`` table rows as `Store.epoch_metrics` gives them: the metrics JSON decoded into each row."""
    out = []
    for row in rows:
        metrics = json.loads(row.pop("metrics") or "{}")
        out.append({**row, **{k: v for k, v in metrics.items() if k not in row}})
    return out


def _batch_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``batches`` table rows as `Store.batches` gives them: ``in_band`` a bool, ``prompt_note`` decoded."""
    return [{**_bools(row, "in_band"), "prompt_note": _json_or_none(row.get("prompt_note"))} for row in rows]


def _order_sql(order: str) -> str:
    """Validate an ORDER BY string against the task columns, so it can be put into SQL as is."""
    terms = []
    for term in order.split(","):
        match = _ORDER_TERM.match(term)
        if not match or match.group(1) not in _TASK_COLUMNS:
            raise ValueError(f"bad order term {term.strip()!r}: use '<tasks column> [ASC|DESC]'")
        terms.append(f"tasks.{match.group(1)} {(match.group(2) or 'ASC').upper()}")
    return ", ".join(terms)
