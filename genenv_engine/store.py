"""The run's SQLite store: tasks, rollouts, variation batches, epochs, events and meta, as verb methods.

One `Store` per session folder keeps everything the co-evolution loop produces in one file so a run
can be resumed after a crash, browsed by the console while it runs (WAL lets a reader and the
engine's writer work at once) and reported on afterwards. It is built on sqlite-utils: the schema
is a list of named `Migrations` applied once each.

Every write is one short `Store.write()` transaction, which takes SQLite's write lock up front
(``BEGIN IMMEDIATE``) and waits up to `BUSY_TIMEOUT_MS` for it. A deferred transaction that reads
and then writes fails at once with "database is locked" (SQLITE_BUSY_SNAPSHOT, which no busy
timeout retries) when another connection commits in between, as the console does when it pins,
bans or edits tasks while the engine writes an epoch. sqlite3 connections are tied to their
thread, so the store holds one connection per thread (``store.db``); an in-memory store (tests)
shares a single connection.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlite_utils import Database, Migrations

from genenv_engine.records import STATUSES, Task

_JSON_TASK_FIELDS = ("expected", "tools", "difficulty")
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
SCAN_MATCHES = 2000
"""Above this many word-search matches, a page is found by walking the page-order index (see `Store.query_tasks`)."""
_ORDER_TERM = re.compile(r"^\s*(\w+)(?:\s+(asc|desc))?\s*$", re.IGNORECASE)

MIGRATIONS = Migrations("genenv.store")

BUSY_TIMEOUT_MS = 30_000
"""How long a connection waits for another one's write transaction before giving up."""


@MIGRATIONS()
def m001_initial(db: Database) -> None:
    """Create the six tables and the task indexes."""
    db.executescript(
        """
        CREATE TABLE tasks (
            id TEXT PRIMARY KEY, benchmark TEXT NOT NULL, prompt TEXT NOT NULL, answer TEXT NOT NULL,
            expected TEXT, tools TEXT, difficulty TEXT, level INTEGER, checker TEXT, granularity TEXT,
            split TEXT, origin TEXT, parent_id TEXT, epoch INTEGER, generator TEXT,
            valid INTEGER, reason TEXT, status TEXT, batch_id TEXT,
            p_hat REAL, r_env REAL, n_rollouts INTEGER NOT NULL DEFAULT 0, superseded_by TEXT,
            created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
        );
        CREATE TABLE rollouts (
            id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL, epoch INTEGER,
            response TEXT, reward REAL, success INTEGER, error_type TEXT, purpose TEXT
        );
        CREATE INDEX idx_rollouts_task_id ON rollouts (task_id);
        CREATE INDEX idx_rollouts_epoch ON rollouts (epoch);
        CREATE TABLE batches (
            id TEXT PRIMARY KEY, epoch INTEGER, benchmark TEXT, seed_task_id TEXT,
            n_generated INTEGER, n_valid INTEGER, p_hat REAL, r_env REAL, in_band INTEGER
        );
        CREATE TABLE epochs (
            epoch INTEGER PRIMARY KEY, status TEXT, started_at TEXT, finished_at TEXT, metrics TEXT
        );
        CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT, ts TEXT, epoch INTEGER, kind TEXT, payload TEXT
        );
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
        """
    )
    for column in ("epoch", "origin", "status", "benchmark", "batch_id", "parent_id"):
        db["tasks"].create_index([column], f"idx_tasks_{column}")


@MIGRATIONS()
def m002_fts(db: Database) -> None:
    """Full-text index over prompt and answer, kept current by insert/update/delete triggers."""
    # External-content FTS5 keys on the tasks rowid; a VACUUM may renumber rowids of a table with a
    # TEXT primary key, so run `rebuild` on tasks_fts after any VACUUM.
    db["tasks"].enable_fts(["prompt", "answer"], fts_version="FTS5", create_triggers=True)


@MIGRATIONS()
def m003_page_indexes(db: Database) -> None:
    """Indexes matching the console's task pages (epoch DESC, id), so deep pages and filters stay fast."""
    db.execute("CREATE INDEX IF NOT EXISTS idx_tasks_epoch_desc_id ON tasks (epoch DESC, id)")
    db.execute("CREATE INDEX IF NOT EXISTS idx_tasks_origin_valid_page ON tasks (origin, valid, epoch DESC, id)")


@MIGRATIONS()
def m004_search_indexes(db: Database) -> None:
    """Indexes for the tasks screen's status pages and p̂-range counts (a word search with a p̂ range counts
    its matches along the p̂ index)."""
    db.execute("CREATE INDEX IF NOT EXISTS idx_tasks_status_page ON tasks (status, epoch DESC, id)")
    db.execute("CREATE INDEX IF NOT EXISTS idx_tasks_p_hat ON tasks (p_hat)")


@MIGRATIONS()
def m005_rollout_policy_version(db: Database) -> None:
    """Each rollout records the version of the agent weights that sampled it (the epoch of their update; NULL on
    rollouts stored before versions existed)."""
    db.execute("ALTER TABLE rollouts ADD COLUMN policy_version INTEGER")


@MIGRATIONS()
def m006_task_simulator_version(db: Database) -> None:
    """Each generated task records the version of the simulator weights that wrote it (the epoch of their RWR
    update, 0: the warm start; NULL on tasks no simulator wrote and on those stored before versions existed)."""
    db.execute("ALTER TABLE tasks ADD COLUMN simulator_version INTEGER")


@MIGRATIONS()
def m007_batch_alpha_and_prompt_note(db: Database) -> None:
    """Each variation batch records the alpha its R_env was scored against and the prompt note its simulator
    prompt carried (``prompt_note``: JSON ``{"steer": word, "success_line": line}``, NULL when the prompt had none);
    both NULL on batches stored before they existed (`genenv_engine.session_view` then computes the alpha from
    the session's config)."""
    db.execute("ALTER TABLE batches ADD COLUMN alpha REAL")
    db.execute("ALTER TABLE batches ADD COLUMN prompt_note TEXT")


@MIGRATIONS()
def m008_epoch_funnels(db: Database) -> None:
    """Each finished epoch's funnel (`Store.funnel` entries as JSON), written when the epoch finishes, so reading
    the funnel of a long session does not group every rollout again. Epochs finished before it existed are
    computed from the tasks and rollouts, as before."""
    db.execute("CREATE TABLE IF NOT EXISTS funnels (epoch INTEGER PRIMARY KEY, entries TEXT NOT NULL)")


def _now() -> str:
    """Current UTC time as an ISO-8601 string."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
        row[name] = json.dumps(row[name], sort_keys=True)
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


def probe_database(path: Path) -> dict[str, Any]:
    """Read-only health facts of a database file, without migrating or writing it: ``quick_check`` (the
    first problems SQLite reports, ``["ok"]`` when none), ``applied`` (this store's applied migration names,
    None without a migrations table) and ``schema_version`` (the meta value, or None). sqlite3.DatabaseError
    propagates for a file that is not a database."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        out: dict[str, Any] = {"quick_check": [row[0] for row in conn.execute("PRAGMA quick_check(5)")],
                               "applied": None, "schema_version": None}
        if out["quick_check"] != ["ok"]:
            return out
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "_sqlite_migrations" in tables:
            out["applied"] = [r[0] for r in conn.execute(
                "SELECT name FROM _sqlite_migrations WHERE migration_set = ?", [MIGRATIONS.name])]
        if "meta" in tables:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            out["schema_version"] = None if row is None else str(row[0])
        return out
    finally:
        conn.close()


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


_EPOCHS_SQL = "SELECT * FROM epochs ORDER BY epoch"
_BATCHES_SQL = "SELECT * FROM batches ORDER BY id"


CAP_REASONS = ("heldout_copy", "duplicate", "duplicate_cap")
"""Reason prefixes of the drafts that passed the validator but the duplicate cap rejected
(`genenv_engine.simulator.cap_duplicates`)."""
FUNNEL_STAGES = ("drafts", "passed", "valid", "trained")
"""The funnel's stages: written, admitted by the validator, kept by the duplicate cap (stored valid), trained on."""
TRAIN_SOURCES = ("fresh", "replayed", "pinned", "edited", "imported", "base")
"""Where a trained task came from: written that epoch (or a static batch scored that epoch), the earlier generated
pool, pinned (its status now), a hand edit, an imported task, the base data (train split or unseen pool)."""
_PREFIX_SQL = "CASE WHEN instr(reason, ':') > 0 THEN substr(reason, 1, instr(reason, ':') - 1) ELSE reason END"
_FUNNEL_DRAFTS_SQL = (
    f"SELECT epoch, benchmark, valid, {_PREFIX_SQL} AS reason, level, count(*) AS n FROM tasks "
    f"WHERE origin IN ({', '.join(repr(o) for o in GENERATED_ORIGINS)}) AND epoch IS NOT NULL{{where}} "
    "GROUP BY 1, 2, 3, 4, 5")
_FUNNEL_TRAIN_SQL = (
    "SELECT r.epoch AS epoch, t.benchmark AS benchmark, t.origin AS origin, CASE "
    "WHEN t.origin IN ('generated', 'static') AND (t.epoch = r.epoch OR b.epoch = r.epoch) THEN 'fresh' "
    "WHEN t.status = 'pinned' THEN 'pinned' WHEN t.origin = 'edited' THEN 'edited' "
    "WHEN t.origin IN ('generated', 'static') THEN 'replayed' WHEN t.origin = 'imported' THEN 'imported' "
    "ELSE 'base' END AS source, t.level AS level, count(DISTINCT r.task_id) AS n, count(*) AS rollouts "
    "FROM rollouts r JOIN tasks t ON t.id = r.task_id LEFT JOIN batches b ON b.id = t.batch_id "
    "WHERE r.purpose = 'train'{where} GROUP BY 1, 2, 3, 4, 5")


_COUNTED_TASKS_SQL = (
    "SELECT tasks.*, (SELECT count(*) FROM rollouts r WHERE r.task_id = tasks.id AND r.purpose = 'train') "
    "AS train_rollouts, (SELECT coalesce(sum(r.success), 0) FROM rollouts r WHERE r.task_id = tasks.id "
    "AND r.purpose = 'train') AS train_successes FROM tasks WHERE {where} ORDER BY tasks.id")
LINEAGE_COLUMNS = ("id", "parent_id", "benchmark", "origin", "split", "epoch", "level", "valid", "reason", "status",
                   "p_hat", "r_env", "n_rollouts", "simulator_version", "generator", "batch_id", "superseded_by",
                   "prompt")
"""The columns of a `Store.lineage_tree` row (and ``depth``)."""
LINEAGE_NODES = 2000
"""The most tasks `Store.lineage_tree` reads."""
LINEAGE_DEPTH = 64
"""The deepest `Store.lineage_tree` follows ``parent_id``."""
LINEAGE_PROMPT_CHARS = 400
"""Characters of each prompt a `Store.lineage_tree` row carries."""


def funnel_validity(funnel: list[dict[str, Any]]) -> dict[int, dict[str, dict[str, Any]]]:
    """Per epoch, per benchmark with at least one draft: ``drafts``, ``valid``, ``valid_fraction`` and ``rejected``
    from `Store.funnel` entries (a benchmark that only trained base tasks that epoch is left out): the validity
    report of ``genenv status --json``, the loggers and the ablation tables.

    >>> funnel = [{"epoch": 1, "benchmark": "bfcl", "drafts": 5, "valid": 3, "rejected": {"parse_error": 2}},
    ...           {"epoch": 1, "benchmark": "chain", "drafts": 0, "valid": 0, "rejected": {}}]
    >>> funnel_validity(funnel)
    {1: {'bfcl': {'drafts': 5, 'valid': 3, 'valid_fraction': 0.6, 'rejected': {'parse_error': 2}}}}
    """
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for e in funnel:
        if e["drafts"]:
            out.setdefault(e["epoch"], {})[e["benchmark"]] = {
                "drafts": e["drafts"], "valid": e["valid"], "valid_fraction": round(e["valid"] / e["drafts"], 4),
                "rejected": dict(e["rejected"])}
    return out


def with_admitted(validity: dict[str, dict[str, Any]], admitted: dict[str, dict[str, int]]
                  ) -> dict[str, dict[str, Any]]:
    """An epoch's validity per benchmark with how its valid tasks were admitted (the epoch metrics' ``admitted``:
    as written, on the recomputed gold, mended), where the run counted it.

    >>> with_admitted({"b": {"valid": 3}, "c": {"valid": 0}}, {"b": {"mended": 1, "as_written": 2}})
    {'b': {'valid': 3, 'admitted': {'mended': 1, 'as_written': 2}}, 'c': {'valid': 0}}
    """
    return {b: {**v, "admitted": dict(admitted[b])} if b in admitted else v for b, v in validity.items()}


def _add(counts: dict[str, int], key: str, n: int) -> None:
    counts[key] = counts.get(key, 0) + n


def _fold_funnel(drafts: Iterable[dict[str, Any]], trained: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`Store.funnel`'s entries from its two grouped queries' rows.

    >>> drafts = [{"epoch": 1, "benchmark": "b", "valid": 1, "reason": None, "level": 2, "n": 3},
    ...           {"epoch": 1, "benchmark": "b", "valid": 0, "reason": "parse_error", "level": None, "n": 2},
    ...           {"epoch": 1, "benchmark": "b", "valid": 0, "reason": "duplicate_cap", "level": 1, "n": 1}]
    >>> trained = [{"epoch": 1, "benchmark": "b", "origin": "generated", "source": "fresh", "level": 2, "n": 3,
    ...             "rollouts": 12}, {"epoch": 1, "benchmark": "b", "origin": "seed", "source": "base", "level": 1,
    ...             "n": 2, "rollouts": 8}]
    >>> (e,) = _fold_funnel(drafts, trained)
    >>> e["drafts"], e["passed"], e["valid"], e["trained"], e["train_rollouts"], e["rejected"]
    (6, 4, 3, 5, 20, {'duplicate_cap': 1, 'parse_error': 2})
    >>> e["trained_by_source"], e["levels"]["drafts"], e["levels"]["trained"]
    ({'base': 2, 'fresh': 3}, {'L1': 1, 'L2': 3, 'L?': 2}, {'L1': 2, 'L2': 3})
    """
    out: dict[tuple[int, str], dict[str, Any]] = {}

    def entry(row: dict[str, Any]) -> dict[str, Any]:
        key = (row["epoch"], row["benchmark"])
        if key not in out:
            out[key] = {"epoch": key[0], "benchmark": key[1], "drafts": 0, "passed": 0, "valid": 0, "rejected": {},
                        "trained": 0, "train_rollouts": 0, "trained_by_origin": {}, "trained_by_source": {},
                        "levels": {stage: {} for stage in FUNNEL_STAGES}}
        return out[key]
    for row in drafts:
        e, n, level = entry(row), row["n"], "L?" if row["level"] is None else f"L{row['level']}"
        stages = ["drafts"]
        if row["valid"]:
            stages += ["passed", "valid"]
        else:
            _add(e["rejected"], row["reason"] or "", n)
            stages += ["passed"] if row["reason"] in CAP_REASONS else []
        for stage in stages:
            e[stage] += n
            _add(e["levels"][stage], level, n)
    for row in trained:
        e, n = entry(row), row["n"]
        e["trained"] += n
        e["train_rollouts"] += row["rollouts"]
        _add(e["trained_by_origin"], row["origin"] or "", n)
        _add(e["trained_by_source"], row["source"], n)
        _add(e["levels"]["trained"], "L?" if row["level"] is None else f"L{row['level']}", n)
    for e in out.values():
        for key in ("rejected", "trained_by_origin", "trained_by_source"):
            e[key] = dict(sorted(e[key].items()))
        e["levels"] = {stage: dict(sorted(c.items())) for stage, c in e["levels"].items()}
    return [out[k] for k in sorted(out)]


_COMPUTED_TABLES = frozenset({"tasks", "rollouts", "batches"})
"""The tables a funnel is computed from."""
_FUNNEL_TABLES = _COMPUTED_TABLES | {"funnels", "epochs"}
"""The tables a migrated store reads its funnel from (snapshots first)."""


def _funnel_read(rows: Callable[[str, list[Any]], Iterable[dict[str, Any]]], tables: set[str],
                 epoch: int | None = None) -> list[dict[str, Any]]:
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
        sql, params = ("SELECT epoch, entries FROM funnels", []) if epoch is None else (
            "SELECT epoch, entries FROM funnels WHERE epoch = ?", [epoch])
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


def read_only_rows(path: str | Path, batches: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The epochs (as `Store.epoch_metrics` gives them) and variation batches (as `Store.batches`) of a database
    file, read through a read-only connection (`read_only`): no migration, no meta update, no journal-mode switch,
    so a session another process runs (or an older database) is read without being written. With ``batches``
    False the batches are not read (an empty list)."""
    def read(conn: sqlite3.Connection, tables: set[str]):
        epochs = [dict(r) for r in conn.execute(_EPOCHS_SQL)] if "epochs" in tables else []
        rows = [dict(r) for r in conn.execute(_BATCHES_SQL)] if batches and "batches" in tables else []
        return _epoch_rows(epochs), _batch_rows(rows)
    return read_only(path, read)


def read_only_funnel(path: str | Path) -> list[dict[str, Any]]:
    """`Store.funnel` of every epoch of a database file, read through a read-only connection (`read_only`).
    Empty for a database without tasks, rollouts or batches."""
    def read(conn: sqlite3.Connection, tables: set[str]):
        return _funnel_read(lambda sql, params: [dict(r) for r in conn.execute(sql, params)], tables)
    return read_only(path, read)


def read_only(path: str | Path, read: Callable[[sqlite3.Connection, set[str]], Any]) -> Any:
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


def _read_only(path: Path, query: str, read: Callable[[sqlite3.Connection, set[str]], Any]) -> Any:
    conn = sqlite3.connect(path.resolve().as_uri() + query, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.row_factory = sqlite3.Row
    try:
        with conn:
            conn.execute("BEGIN")
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            return read(conn, tables)
    finally:
        conn.close()


def _order_sql(order: str) -> str:
    """Validate an ORDER BY string against the task columns, so it can be put into SQL as is."""
    terms = []
    for term in order.split(","):
        match = _ORDER_TERM.match(term)
        if not match or match.group(1) not in _TASK_COLUMNS:
            raise ValueError(f"bad order term {term.strip()!r}: use '<tasks column> [ASC|DESC]'")
        terms.append(f"tasks.{match.group(1)} {(match.group(2) or 'ASC').upper()}")
    return ", ".join(terms)


class Store:
    """The run database: one SQLite file (WAL), one connection per thread, migrated at open."""

    def __init__(self, path: str | Path) -> None:
        """Open (creating if needed) the store at `path`, or ":memory:" for a throwaway one."""
        self.path = str(path)
        self._local = threading.local()
        self._shared: Database | None = None
        if self.path == ":memory:":
            # One connection shared by every thread: fine for tests, not for concurrent writers.
            self._shared = Database(sqlite3.connect(":memory:", check_same_thread=False))
        MIGRATIONS.apply(self.db)
        version = str(len(self.applied_migrations()))
        if self.get_meta("schema_version") != version:
            self.set_meta("schema_version", version)

    # -- connections ---------------------------------------------------------------------------

    @property
    def db(self) -> Database:
        """This thread's `Database`, opened on first use (WAL, `BUSY_TIMEOUT_MS` busy timeout)."""
        if self._shared is not None:
            return self._shared
        db = getattr(self._local, "db", None)
        if db is None:
            db = Database(self.path)
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            db.enable_wal()
            db.execute("PRAGMA synchronous = NORMAL")  # safe with WAL; skips an fsync per commit
            self._local.db = db
        return db

    def close(self) -> None:
        """Close this thread's connection (other threads close their own)."""
        if self._shared is not None:
            self._shared.close()
            return
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    def __enter__(self) -> Store:
        """Use the store in a `with` block that closes this thread's connection at the end."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close this thread's connection."""
        self.close()

    @contextlib.contextmanager
    def write(self) -> Iterator[Database]:
        """One write transaction on this thread's connection, holding the write lock from its first statement.

        ``BEGIN IMMEDIATE`` waits (busy timeout) for another writer instead of starting a read
        snapshot that a later write cannot upgrade. Nested use becomes a savepoint of the open one.
        """
        db = self.db
        if db.conn.in_transaction:
            with db.atomic():
                yield db
            return
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            raise
        try:
            db.conn.execute("COMMIT")
        except BaseException:  # a failed COMMIT (disk full) leaves the transaction open: end it
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            raise

    def applied_migrations(self) -> list[str]:
        """Names of the applied migrations, in the order they ran."""
        return [m.name for m in MIGRATIONS.applied(self.db)]

    def _rows(self, sql: str, params: Iterable[Any] = ()) -> Iterator[dict[str, Any]]:
        """Rows of a SELECT as dicts, on this thread's connection."""
        return self.db.query(sql, list(params))

    # -- tasks ---------------------------------------------------------------------------------

    def insert_tasks(self, tasks: Iterable[Task], batch_id: str | None = None) -> None:
        """Upsert tasks by id; their stats and created_at survive a re-insert."""
        rows = [_task_row(task, batch_id) for task in tasks]
        if rows:
            with self.write():
                self.db["tasks"].upsert_all(rows, pk="id")

    def get_task(self, task_id: str) -> Task | None:
        """The task with this id, or None."""
        rows = list(self._rows("SELECT * FROM tasks WHERE id = ?", [task_id]))
        return _to_task(rows[0]) if rows else None

    def task_stats(self, task_id: str) -> dict[str, Any] | None:
        """The store-only fields of a task (p_hat, r_env, n_rollouts, batch_id, superseded_by), or None."""
        sql = f"SELECT {', '.join(_STAT_FIELDS)} FROM tasks WHERE id = ?"
        rows = list(self._rows(sql, [task_id]))
        return rows[0] if rows else None

    def set_task_stats(
        self,
        task_id: str,
        *,
        p_hat: float | None = None,
        r_env: float | None = None,
        n_rollouts: int | None = None,
    ) -> None:
        """Set the given success-rate statistics of a task (None means leave unchanged)."""
        values = {"p_hat": p_hat, "r_env": r_env, "n_rollouts": n_rollouts}
        given = {k: v for k, v in values.items() if v is not None}
        if given:
            self._update_task(task_id, given)

    def add_rollout_stats(self, stats: Iterable[tuple[str, float, int]]) -> None:
        """For many tasks at once: set p_hat and add newly made rollouts to n_rollouts, in one transaction.

        ``stats`` holds ``(task_id, p_hat, new_rollouts)``.
        """
        rows = [(p_hat, n, task_id) for task_id, p_hat, n in stats]
        with self.write():
            self.db.conn.executemany(
                "UPDATE tasks SET p_hat = ?, n_rollouts = coalesce(n_rollouts, 0) + ? WHERE id = ?", rows)

    def set_r_env(self, values: Iterable[tuple[str, float]]) -> None:
        """Set R_env for many tasks at once (``(task_id, r_env)`` pairs), in one transaction."""
        with self.write():
            self.db.conn.executemany("UPDATE tasks SET r_env = ? WHERE id = ?", [(r, i) for i, r in values])

    def tasks_in_batches(self, batch_ids: Iterable[str], *, origin: str, valid: bool = True) -> dict[str, list[Task]]:
        """Tasks of the given origin and validity grouped by variation batch, in one query (ordered by id)."""
        ids = list(batch_ids)
        out: dict[str, list[Task]] = {b: [] for b in ids}
        if ids:
            sql = (f"SELECT * FROM tasks WHERE origin = ? AND valid = ? AND batch_id IN ({', '.join('?' * len(ids))}) "
                   "ORDER BY id")
            for row in self._rows(sql, [origin, int(valid), *ids]):
                out[row["batch_id"]].append(_to_task(row))
        return out

    def _update_task(self, task_id: str, values: dict[str, Any]) -> None:
        """Set columns of one task row; KeyError when the id is unknown."""
        sets = ", ".join(f"{k} = ?" for k in values)
        with self.write():
            cursor = self.db.execute(f"UPDATE tasks SET {sets} WHERE id = ?", [*values.values(), task_id])
        if cursor.rowcount == 0:
            raise KeyError(f"no task with id {task_id!r}")

    def set_status(self, task_id: str, status: str) -> None:
        """Set a task's status to one of active, pinned or banned."""
        if status not in STATUSES:
            raise ValueError(f"bad status {status!r}: must be one of {', '.join(STATUSES)}")
        self._update_task(task_id, {"status": status})

    def revise_task(self, task_id: str, new: Task) -> Task:
        """Store a hand-edited revision of a task and mark the old one superseded, in one transaction."""
        if new.id == task_id:
            raise ValueError(f"the revision of {task_id!r} needs a new id")
        new = new.with_(origin="edited", parent_id=task_id)
        with self.write():
            self._update_task(task_id, {"superseded_by": new.id})
            self.insert_tasks([new])
        return new

    def lineage(self, task_id: str) -> list[Task]:
        """The task, its parent, its parent's parent, ... up to a task with no (stored) parent."""
        chain: list[Task] = []
        seen: set[str] = set()
        current: str | None = task_id
        while current is not None and current not in seen:
            seen.add(current)
            task = self.get_task(current)
            if task is None:
                break
            chain.append(task)
            current = task.parent_id
        return chain

    def batch_tasks(self, batch_id: str) -> list[dict[str, Any]]:
        """The tasks behind one variation batch: its seed task first (``role`` ``seed``; the batch row's
        ``seed_task_id``, else the variations' parent), then every variation written in it, valid or not, by id
        (``role`` ``variation``). Each row holds the task's columns (JSON decoded) and ``train_rollouts`` and
        ``train_successes``: the task's training rollouts over every epoch and how many succeeded. Empty for a batch
        with no stored tasks and no stored seed."""
        variations = [{**_decode_row(row), "role": "variation"}
                      for row in self._rows(_COUNTED_TASKS_SQL.format(where="tasks.batch_id = ?"), [batch_id])]
        batch = self.db.execute("SELECT seed_task_id FROM batches WHERE id = ?", [batch_id]).fetchone()
        seed_id = batch[0] if batch is not None else None
        if seed_id is None and variations:
            seed_id = variations[0]["parent_id"]
        seed = [] if seed_id is None else [
            {**_decode_row(row), "role": "seed"}
            for row in self._rows(_COUNTED_TASKS_SQL.format(where="tasks.id = ?"), [seed_id])]
        return seed + variations

    def lineage_tree(self, task_id: str, limit: int = LINEAGE_NODES) -> list[dict[str, Any]]:
        """The lineage tree ``task_id`` belongs to: its first stored ancestor (for a generated task, the seed the
        simulator varied), then every task descended from that one through ``parent_id`` (the variations each
        simulator version wrote, their hand edits, ...), nearest first: each row with ``depth`` (0: the root) and
        the columns `LINEAGE_COLUMNS`, the prompt cut to `LINEAGE_PROMPT_CHARS` characters. At most ``limit``
        rows; empty for an unknown id. A ``parent_id`` cycle (a damaged store) ends at `LINEAGE_DEPTH` levels."""
        chain = self.lineage(task_id)
        if not chain:
            return []
        columns = ", ".join(f"tasks.{c}" for c in LINEAGE_COLUMNS)
        sql = ("WITH RECURSIVE tree(id, depth) AS (SELECT ?, 0 UNION SELECT t.id, tree.depth + 1 FROM tasks t "
               "JOIN tree ON t.parent_id = tree.id WHERE tree.depth < ?), "
               "nearest(id, depth) AS (SELECT id, min(depth) FROM tree GROUP BY id) "
               f"SELECT {columns}, nearest.depth AS depth FROM nearest "
               "JOIN tasks ON tasks.id = nearest.id ORDER BY nearest.depth, tasks.epoch, tasks.id LIMIT ?")
        rows = self._rows(sql, [chain[-1].id, LINEAGE_DEPTH, int(limit)])
        # cut in Python: SQLite's substr stops at an embedded NUL, which untrusted text may hold
        return [{**_bools(row, "valid"), "prompt": (row["prompt"] or "")[:LINEAGE_PROMPT_CHARS]} for row in rows]

    def task_position(self, task_id: str, where: TaskFilter | None = None, **fields: Any) -> int | None:
        """Where ``task_id`` stands among the tasks matching ``where`` (or the `TaskFilter` fields given as keywords)
        in `query_tasks`'s default order (epoch DESC, id): how many matching tasks come before it. None when the
        task is unknown or does not match."""
        where = _filter(where, fields)
        row = self.db.execute("SELECT epoch FROM tasks WHERE id = ?", [task_id]).fetchone()
        if row is None:
            return None
        sql_where, params = self._where(where)
        join = " AND " if sql_where else " WHERE "
        count = f"SELECT count(*) FROM tasks{sql_where}{join}"
        if not self.db.execute(count + "tasks.id = ?", [*params, task_id]).fetchone()[0]:
            return None
        if row[0] is None:  # NULL epochs sort after every epoch in ``epoch DESC``
            before, values = "(tasks.epoch IS NOT NULL OR tasks.id < ?)", [task_id]
        else:
            before, values = "(tasks.epoch > ? OR (tasks.epoch = ? AND tasks.id < ?))", [row[0], row[0], task_id]
        return int(self.db.execute(count + before, [*params, *values]).fetchone()[0])

    def imported_seeds(self, benchmark: str, levels: Sequence[int] = ()) -> list[Task]:
        """Tasks imported into the simulator's seed split (`genenv_engine.interop`): valid, active, unsuperseded,
        at ``levels`` (all when empty), in id order."""
        sql = ("SELECT * FROM tasks WHERE origin = 'imported' AND split = 'seed' AND benchmark = ? AND valid = 1 "
               "AND status = 'active' AND superseded_by IS NULL")
        params: list[Any] = [benchmark]
        if levels:
            sql += f" AND level IN ({', '.join('?' for _ in levels)})"
            params += list(levels)
        return [_to_task(row) for row in self._rows(sql + " ORDER BY id", params)]

    def pool(self, benchmarks: list[str] | None = None) -> list[Task]:
        """The agent's training pool: valid, unsuperseded, not banned tasks that are generated,
        edited or static, plus every pinned task whatever its origin."""
        marks = ", ".join("?" for _ in _POOL_ORIGINS)
        sql = (
            "SELECT * FROM tasks WHERE valid = 1 AND superseded_by IS NULL AND ("
            f"(origin IN ({marks}) AND status = 'active' AND NOT (origin = 'imported' AND split = 'seed')) "
            "OR status = 'pinned')"
        )
        params: list[Any] = list(_POOL_ORIGINS)
        if benchmarks is not None:
            sql += f" AND benchmark IN ({', '.join('?' for _ in benchmarks)})"
            params += benchmarks
        return [_to_task(row) for row in self._rows(sql + " ORDER BY epoch, id", params)]

    def pinned_tasks(self) -> list[Task]:
        """Every pinned task that has not been superseded by an edit."""
        sql = "SELECT * FROM tasks WHERE status = 'pinned' AND superseded_by IS NULL ORDER BY id"
        return [_to_task(row) for row in self._rows(sql)]

    def _where(self, where: TaskFilter, scan_matches: bool = False) -> tuple[str, list[Any]]:
        """WHERE clause and parameters of a `TaskFilter`.

        ``scan_matches`` writes the word search so SQLite walks an index of the other filters (or the page
        order) and tests each entry against the matches, instead of fetching every match's row by rowid.
        """
        clauses, params = [], []
        for column in ("benchmark", "origin", "status", "epoch", "batch_id"):
            if getattr(where, column) is not None:
                clauses.append(f"tasks.{column} = ?")
                params.append(getattr(where, column))
        if where.valid is not None:
            clauses.append("tasks.valid = ?")
            params.append(int(where.valid))
        if where.p_min is not None:
            clauses.append("tasks.p_hat >= ?")
            params.append(where.p_min)
        if where.p_max is not None:
            clauses.append("tasks.p_hat <= ?")
            params.append(where.p_max)
        match = fts_query(where.text or "")
        if match:
            rowid = "+tasks.rowid" if scan_matches else "tasks.rowid"  # unary + keeps the rowid lookup out of the plan
            clauses.append(f"{rowid} IN (SELECT rowid FROM tasks_fts WHERE tasks_fts MATCH ?)")
            params.append(match)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params

    def query_tasks(self, where: TaskFilter | None = None, *, limit: int = 50, offset: int = 0,
                    order: str = "epoch DESC, id", **fields: Any) -> list[dict[str, Any]]:
        """One page of task rows (all columns, JSON decoded) matching ``where`` (or the `TaskFilter` fields given
        as keywords); ``text`` is a word search.

        The page's rowids are found first (sorting only the index columns), then only those rows are read;
        a word with more than `SCAN_MATCHES` matches is searched along the page-order index.
        """
        where = _filter(where, fields)
        match = fts_query(where.text or "")
        scan = bool(match) and self._word_matches(match) > SCAN_MATCHES
        sql_where, params = self._where(where, scan)
        order_sql = _order_sql(order)
        page = f"SELECT tasks.rowid FROM tasks{sql_where} ORDER BY {order_sql} LIMIT ? OFFSET ?"
        sql = f"SELECT * FROM tasks WHERE rowid IN ({page}) ORDER BY {order_sql}"
        return [_decode_row(row) for row in self._rows(sql, [*params, int(limit), int(offset)])]

    def _word_matches(self, match: str) -> int:
        """How many tasks an FTS query matches (from the full-text index alone)."""
        return self.db.execute("SELECT count(*) FROM tasks_fts WHERE tasks_fts MATCH ?", [match]).fetchone()[0]

    def count_tasks(self, where: TaskFilter | None = None, **fields: Any) -> int:
        """How many tasks match the same filter as `query_tasks` (a word search alone: from the full-text index)."""
        where = _filter(where, fields)
        match = fts_query(where.text or "")
        if match and where == TaskFilter(text=where.text):
            return self._word_matches(match)
        scan = bool(match) and self._word_matches(match) > SCAN_MATCHES
        sql_where, params = self._where(where, scan)
        return self.db.execute(f"SELECT count(*) FROM tasks{sql_where}", params).fetchone()[0]

    def counts_by_epoch(self) -> list[dict[str, Any]]:
        """Task counts grouped by (epoch, origin, status, valid)."""
        sql = (
            "SELECT epoch, origin, status, valid, count(*) AS n FROM tasks "
            "GROUP BY epoch, origin, status, valid ORDER BY epoch, origin, status, valid"
        )
        return [_bools(row, "valid") for row in self._rows(sql)]

    def static_batch_ids(self) -> list[str]:
        """Ids of the variation batches holding at least one valid, active static task, sorted."""
        sql = ("SELECT DISTINCT batch_id FROM tasks WHERE origin = 'static' AND valid = 1 AND status = 'active' "
               "ORDER BY batch_id")
        return [row["batch_id"] for row in self._rows(sql)]

    def inactive_train_ids(self) -> set[str]:
        """Base-data task ids (the train split and the ``unseen`` pool) the user banned, pinned or superseded by an
        edit (not plain base data)."""
        sql = ("SELECT id FROM tasks WHERE split IN ('train', 'unseen') "
               "AND (status != 'active' OR superseded_by IS NOT NULL)")
        return {row["id"] for row in self._rows(sql)}

    def generated_verdicts(self, epoch: int, origins: Sequence[str] = GENERATED_ORIGINS) -> list[dict[str, Any]]:
        """(valid, reason) of every task of the given origins made in ``epoch``, in id order."""
        sql = (f"SELECT valid, reason FROM tasks WHERE epoch = ? AND origin IN ({_marks(origins)}) ORDER BY id")
        return [_bools(row, "valid") for row in self._rows(sql, [epoch, *origins])]

    def batch_task_successes(self, epoch: int) -> list[dict[str, Any]]:
        """(id, benchmark, success) of every rollout made in ``epoch`` of a task in one of that epoch's
        variation batches: what p-hat of the generated tasks is computed from."""
        sql = ("SELECT t.id AS id, t.benchmark AS benchmark, r.success AS success FROM rollouts r "
               "JOIN tasks t ON t.id = r.task_id WHERE r.epoch = ? AND t.batch_id IN "
               "(SELECT id FROM batches WHERE epoch = ?) ORDER BY r.id")
        return list(self._rows(sql, [epoch, epoch]))

    def created_at(self, task_id: str) -> str | None:
        """When the task row was first stored, or None for an unknown id."""
        rows = list(self._rows("SELECT created_at FROM tasks WHERE id = ?", [task_id]))
        return rows[0]["created_at"] if rows else None

    def generated_summaries(self, origins: Sequence[str] = GENERATED_ORIGINS) -> list[dict[str, Any]]:
        """(id, benchmark, difficulty, epoch) of every valid task of the given origins, newest epoch first;
        ``difficulty`` decoded."""
        sql = (f"SELECT id, benchmark, difficulty, epoch FROM tasks WHERE origin IN ({_marks(origins)}) "
               "AND valid = 1 ORDER BY epoch DESC, id")
        return [{**row, "difficulty": _json_or_none(row["difficulty"])} for row in self._rows(sql, list(origins))]

    def rejected_ids(self, limit: int, origins: Sequence[str] = GENERATED_ORIGINS) -> list[str]:
        """Ids of up to ``limit`` rejected tasks of the given origins, newest epoch first."""
        sql = f"SELECT id FROM tasks WHERE origin IN ({_marks(origins)}) AND valid = 0 ORDER BY epoch DESC, id LIMIT ?"
        return [row["id"] for row in self._rows(sql, [*origins, limit])]

    def edits(self) -> list[tuple[str, str | None]]:
        """(edited task id, the id of the task it revised) of every hand edit, oldest first."""
        sql = "SELECT id, parent_id FROM tasks WHERE origin = 'edited' ORDER BY created_at, id"
        return [(row["id"], row["parent_id"]) for row in self._rows(sql)]

    def ids_with_status(self, status: str) -> list[str]:
        """Ids of the tasks with this status (pinned, banned, ...), by epoch then id."""
        return [row["id"] for row in self._rows("SELECT id FROM tasks WHERE status = ? ORDER BY epoch, id", [status])]

    def task_census(self) -> list[dict[str, Any]]:
        """Task counts grouped by (epoch, origin, split, status, valid, superseded), ordered by them."""
        sql = ("SELECT epoch, origin, split, status, valid, superseded_by IS NOT NULL AS superseded, count(*) AS n "
               "FROM tasks GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6")
        return list(self._rows(sql))

    def funnel(self, epoch: int | None = None) -> list[dict[str, Any]]:
        """The generated -> admitted -> trained funnel per (epoch, benchmark), of one epoch or all, in order.

        Each entry: ``drafts`` (tasks the simulator wrote, or a static augmentation, stored with that epoch),
        ``passed`` (admitted by the validator), ``valid`` (kept by the duplicate cap too: what the store holds as
        valid), ``rejected`` (count per reason prefix, the text before ``:``; the cap's are `CAP_REASONS`),
        ``trained`` (distinct tasks with training rollouts that epoch), ``train_rollouts``, ``trained_by_origin``
        (the tasks' origin column), ``trained_by_source`` (`TRAIN_SOURCES`) and ``levels`` (``{"L<level>": n}``
        per stage of `FUNNEL_STAGES`, ``L?`` for a draft with no level).

        ``drafts``/``valid``/``rejected`` sum to the epoch metrics' ``generated``/``valid``/``invalid_reasons``;
        ``trained`` to ``tasks_trained`` unless a small base pool repeated a task within the epoch (it counts
        once here). A finished epoch's funnel is the snapshot `finish_epoch` stored: a task pinned after that
        epoch shows as it stood when the epoch ended.
        """
        return _funnel_read(lambda sql, params: self._rows(sql, params), _FUNNEL_TABLES, epoch)

    # -- rollouts and batches ------------------------------------------------------------------

    def insert_rollouts(self, rows: list[dict[str, Any]]) -> None:
        """Append rollouts (task_id, epoch, response, reward, success, error_type, purpose='train', policy_version)."""
        if rows:
            full = [{"purpose": "train", "error_type": None, "policy_version": None, **row} for row in rows]
            with self.write():
                self.db["rollouts"].insert_all(full)

    def rollouts_for(self, task_id: str) -> list[dict[str, Any]]:
        """All rollouts of a task, oldest first."""
        rows = self._rows("SELECT * FROM rollouts WHERE task_id = ? ORDER BY id", [task_id])
        return [_bools(row, "success") for row in rows]

    def heldout_answers(self, epoch: int) -> dict[str, dict[str, Any]]:
        """The agent's greedy held-out answer of ``epoch`` per task id: response, success, error type (empty for
        an epoch evaluated before answers were stored)."""
        sql = ("SELECT task_id, response, success, error_type FROM rollouts WHERE epoch = ? AND purpose = 'heldout' "
               "ORDER BY id")
        return {row["task_id"]: _bools(row, "success") for row in self._rows(sql, [epoch])}

    def train_rollouts(self, epoch: int) -> list[dict[str, Any]]:
        """(task_id, reward, response) of the agent's training rollouts of ``epoch``, in insertion order."""
        sql = "SELECT task_id, reward, response FROM rollouts WHERE epoch = ? AND purpose = 'train' ORDER BY id"
        return list(self._rows(sql, [epoch]))

    def set_rollout_scores(self, rows: Iterable[tuple[str, float, float, int]]) -> None:
        """Set (p_hat, r_env, n_rollouts) of many tasks at once: ``(task_id, p_hat, r_env, n_rollouts)`` rows."""
        with self.write():
            self.db.conn.executemany("UPDATE tasks SET p_hat = ?, r_env = ?, n_rollouts = ? WHERE id = ?",
                                     [(p, r, n, i) for i, p, r, n in rows])

    def upsert_batches(self, rows: list[dict[str, Any]]) -> None:
        """Insert or update variation-batch rows by id. A column that no row of the call names keeps its stored
        values (one that only some rows name is set to NULL in the others); ``prompt_note`` is given as a dict (or
        None, or JSON text) and stored as JSON."""
        if rows:
            encoded = [{**row, "prompt_note": _note_json(row["prompt_note"])} if "prompt_note" in row else row
                       for row in rows]
            with self.write():
                self.db["batches"].upsert_all(encoded, pk="id")

    def batches(self, epoch: int | None = None) -> list[dict[str, Any]]:
        """Variation batches, of one epoch or all, ordered by id; ``prompt_note`` decoded (None when not stored)."""
        if epoch is None:
            rows = self._rows(_BATCHES_SQL)
        else:
            rows = self._rows("SELECT * FROM batches WHERE epoch = ? ORDER BY id", [epoch])
        return _batch_rows(rows)

    # -- epochs --------------------------------------------------------------------------------

    def start_epoch(self, epoch: int) -> None:
        """Record that an epoch began (restarting it resets its row)."""
        row = {"epoch": epoch, "status": "running", "started_at": _now()}
        with self.write():
            self.db["epochs"].upsert({**row, "finished_at": None, "metrics": None}, pk="epoch")
            self.db.execute("DELETE FROM funnels WHERE epoch = ?", [epoch])

    def finish_epoch(self, epoch: int, metrics: dict[str, Any]) -> None:
        """Record that an epoch completed, with its metrics, and store its funnel's snapshot (`funnel`)."""
        row = {"epoch": epoch, "status": "done", "finished_at": _now(), "metrics": json.dumps(metrics)}
        with self.write():
            self.db["epochs"].upsert(row, pk="epoch")
            entries = _funnel_read(lambda sql, params: self._rows(sql, params), _COMPUTED_TABLES, epoch)
            self.db["funnels"].upsert({"epoch": epoch, "entries": json.dumps(entries)}, pk="epoch")

    def mark_partial(self, epoch: int) -> None:
        """Record that an epoch stopped before completing."""
        with self.write():
            self.db["epochs"].upsert({"epoch": epoch, "status": "partial", "finished_at": _now()}, pk="epoch")

    def epoch_metrics(self) -> list[dict[str, Any]]:
        """One dict per epoch: epoch, status, started_at, finished_at and the decoded metrics."""
        return _epoch_rows(self._rows(_EPOCHS_SQL))

    def last_finished_epoch(self) -> int:
        """The highest epoch with status 'done', or -1 when none is."""
        value = self.db.execute("SELECT max(epoch) FROM epochs WHERE status = 'done'").fetchone()[0]
        return -1 if value is None else int(value)

    def drop_epochs_from(self, epoch: int) -> None:
        """Forget epochs >= `epoch` (resume after a crash): their generated/static tasks, rollouts,
        batches and epoch rows go; edited tasks, earlier epochs and events stay."""
        with self.write():
            sql = "DELETE FROM tasks WHERE epoch >= ? AND origin IN ('generated', 'static')"
            self.db.execute(sql, [epoch])
            for table in ("rollouts", "batches", "epochs", "funnels"):
                self.db.execute(f"DELETE FROM {table} WHERE epoch >= ?", [epoch])

    # -- events and meta -----------------------------------------------------------------------

    def log_event(self, kind: str, epoch: int | None, payload: dict[str, Any]) -> int:
        """Append an event and return its id."""
        row = {"ts": _now(), "epoch": epoch, "kind": kind, "payload": json.dumps(payload)}
        with self.write():
            return int(self.db["events"].insert(row).last_rowid)

    def last_event_id(self) -> int:
        """The id of the newest event (0 when none is stored)."""
        return int(self.db.execute("SELECT max(id) FROM events").fetchone()[0] or 0)

    def events(self, after_id: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        """Events with id > `after_id`, oldest first, payload decoded."""
        rows = self._rows("SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?", [after_id, limit])
        return [{**row, "payload": json.loads(row["payload"])} for row in rows]

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        """The stored value for `key`, or `default`."""
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return default if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        """Store a text value under `key`."""
        with self.write():
            self.db["meta"].upsert({"key": key, "value": value}, pk="key")
