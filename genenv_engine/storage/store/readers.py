"""Reads that need no `Store`: the funnel's queries (shared with `Store.funnel`), and read-only connections to a
database file that neither migrate nor write it (`read_only`, `read_only_rows`, `read_only_funnel`,
`probe_database`), so a session another process runs, or an older database, is read as it is.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any, TypeVar

from genenv_engine.storage.store.funnel import _fold_funnel
from genenv_engine.storage.store.migrations import MIGRATIONS
from genenv_engine.storage.store.rows import GENERATED_ORIGINS, _batch_rows, _epoch_rows

T = TypeVar("T")

BUSY_TIMEOUT_MS = 30_000
"""How long a connection waits for another one's write transaction before giving up."""


_EPOCHS_SQL = "SELECT * FROM epochs ORDER BY epoch"
_BATCHES_SQL = "SELECT * FROM batches ORDER BY id"

_PREFIX_SQL = "CASE WHEN instr(reason, ':') > 0 THEN substr(reason, 1, instr(reason, ':') - 1) ELSE reason END"
_FUNNEL_DRAFTS_SQL = (
    f"SELECT epoch, benchmark, valid, {_PREFIX_SQL} AS reason, level, count(*) AS n FROM tasks "
    f"WHERE origin IN ({', '.join(repr(o) for o in GENERATED_ORIGINS)}) AND epoch IS NOT NULL{{where}} "
    "GROUP BY 1, 2, 3, 4, 5"
)
_FUNNEL_TRAIN_SQL = (
    "SELECT r.epoch AS epoch, t.benchmark AS benchmark, t.origin AS origin, CASE "
    "WHEN t.origin IN ('generated', 'static') AND (t.epoch = r.epoch OR b.epoch = r.epoch) THEN 'fresh' "
    "WHEN t.status = 'pinned' THEN 'pinned' WHEN t.origin = 'edited' THEN 'edited' "
    "WHEN t.origin IN ('generated', 'static') THEN 'replayed' WHEN t.origin = 'imported' THEN 'imported' "
    "ELSE 'base' END AS source, t.level AS level, count(DISTINCT r.task_id) AS n, count(*) AS rollouts "
    "FROM rollouts r JOIN tasks t ON t.id = r.task_id LEFT JOIN batches b ON b.id = t.batch_id "
    "WHERE r.purpose = 'train'{where} GROUP BY 1, 2, 3, 4, 5"
)


_COMPUTED_TABLES = frozenset({"tasks", "rollouts", "batches"})
"""The tables a funnel is computed from."""
_FUNNEL_TABLES = _COMPUTED_TABLES | {"funnels", "epochs"}
"""The tables a migrated store reads its funnel from (snapshots first)."""


def _funnel_read(
    rows: Callable[[str, list[Any]], Iterable[dict[str, Any]]], tables: AbstractSet[str], epoch: int | None = None
) -> list[dict[str, Any]]:
    """`Store.funnel`'s entries through ``rows(sql, params)``, from a database holding ``tables``: a finished
    epoch's stored snapshot (table ``funnels``), else computed from the tasks and rollouts (an epoch still running,
    or finished before snapshots were stored). Every epoch (``epoch`` None) of a database without any snapshot is
    computed in one pass; otherwise the epochs without one are computed one by one along the epoch indexes."""
    if not _COMPUTED_TABLES <= tables:
        return []

    def compute(e: int | None) -> list[dict[str, Any]]:
        where, params = ("", []) if e is None else (" AND {}epoch = ?", [e])
        drafts = rows(_FUNNEL_DRAFTS_SQL.format(where=where.format("")), params)
        trained = rows(_FUNNEL_TRAIN_SQL.format(where=where.format("r.")), params)
        return _fold_funnel(list(drafts), list(trained))

    stored: dict[int, list[dict[str, Any]]] = {}
    if "funnels" in tables:
        sql, params = (
            ("SELECT epoch, entries FROM funnels", [])
            if epoch is None
            else ("SELECT epoch, entries FROM funnels WHERE epoch = ?", [epoch])
        )
        stored = {row["epoch"]: json.loads(row["entries"]) for row in rows(sql, params)}
    if epoch is not None:
        return stored[epoch] if epoch in stored else compute(epoch)
    if not stored:
        return compute(None)
    known = [row["epoch"] for row in rows("SELECT epoch FROM epochs ORDER BY epoch", [])] if "epochs" in tables else []
    entries = [e for entries in stored.values() for e in entries]
    for e in known:
        if e not in stored:
            entries += compute(e)
    return sorted(entries, key=lambda e: (e["epoch"], e["benchmark"]))


def probe_database(path: Path) -> dict[str, Any]:
    """Read-only health facts of a database file, without migrating or writing it: ``quick_check`` (the
    first problems SQLite reports, ``["ok"]`` when none), ``applied`` (this store's applied migration names,
    None without a migrations table) and ``schema_version`` (the meta value, or None). sqlite3.DatabaseError
    propagates for a file that is not a database."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        out: dict[str, Any] = {
            "quick_check": [row[0] for row in conn.execute("PRAGMA quick_check(5)")],
            "applied": None,
            "schema_version": None,
        }
        if out["quick_check"] != ["ok"]:
            return out
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "_sqlite_migrations" in tables:
            out["applied"] = [
                r[0]
                for r in conn.execute("SELECT name FROM _sqlite_migrations WHERE migration_set = ?", [MIGRATIONS.name])
            ]
        if "meta" in tables:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            out["schema_version"] = None if row is None else str(row[0])
        return out
    finally:
        conn.close()


def read_only_rows(path: str | Path, batches: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The epochs (as `Store.epoch_metrics` gives them) and variation batches (as `Store.batches`) of a database
    file, read through a read-only connection (`read_only`): no migration, no meta update, no journal-mode switch,
    so a session another process runs (or an older database) is read without being written. With ``batches``
    False the batches are not read (an empty list)."""

    def read(conn: sqlite3.Connection, tables: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        epochs = [dict(r) for r in conn.execute(_EPOCHS_SQL)] if "epochs" in tables else []
        rows = [dict(r) for r in conn.execute(_BATCHES_SQL)] if batches and "batches" in tables else []
        return _epoch_rows(epochs), _batch_rows(rows)

    return read_only(path, read)


def read_only_funnel(path: str | Path) -> list[dict[str, Any]]:
    """`Store.funnel` of every epoch of a database file, read through a read-only connection (`read_only`).
    Empty for a database without tasks, rollouts or batches."""

    def read(conn: sqlite3.Connection, tables: set[str]) -> list[dict[str, Any]]:
        return _funnel_read(lambda sql, params: [dict(r) for r in conn.execute(sql, params)], tables)

    return read_only(path, read)


def read_only(path: str | Path, read: Callable[[sqlite3.Connection, set[str]], T]) -> T:
    """``read(connection, table names)`` in one read transaction (one snapshot) on a read-only connection to a
    database file. A WAL database in a folder this process cannot write (where SQLite cannot create the
    shared-memory file a reader needs) is read as immutable: nobody can be writing it there. FileNotFoundError when
    the file is missing; sqlite3.DatabaseError for a file that is not a database."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no database at {path}")
    try:
        return _read_only(path, "?mode=ro", read)
    except sqlite3.OperationalError:
        if os.access(path.parent, os.W_OK):
            raise
        return _read_only(path, "?mode=ro&immutable=1", read)


def _read_only(path: Path, query: str, read: Callable[[sqlite3.Connection, set[str]], T]) -> T:
    conn = sqlite3.connect(path.resolve().as_uri() + query, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.row_factory = sqlite3.Row
    try:
        with conn:
            conn.execute("BEGIN")
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            return read(conn, tables)
    finally:
        conn.close()
