"""The run's SQLite store: tasks, rollouts, variation batches, epochs, events and meta, as verb methods.

One `Store` per session folder keeps everything the co-evolution loop produces in one file so a run
can be resumed after a crash, browsed by the console while it runs (WAL lets a reader and the
engine's writer work at once) and reported on afterwards. It is built on sqlite-utils: the schema
is a list of named `Migrations` applied once each (`genenv_engine.storage.store.migrations`).

Every write is one short `Store.write()` transaction, which takes SQLite's write lock up front
(``BEGIN IMMEDIATE``) and waits up to `BUSY_TIMEOUT_MS` for it. A deferred transaction that reads
and then writes fails at once with "database is locked" (SQLITE_BUSY_SNAPSHOT, which no busy
timeout retries) when another connection commits in between, as the console does when it pins,
bans or edits tasks while the engine writes an epoch. sqlite3 connections are tied to their
thread, so the store holds one connection per thread (``store.db``); an in-memory store (tests)
shares a single connection.

The reads live in parts `Store` inherits: `TaskReads` (`genenv_engine.storage.store.reads`), `TaskSearch`
(`genenv_engine.storage.store.search`) and `LineageReads` (`genenv_engine.storage.store.lineage`).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from genenv_engine.core.records import STATUSES, Task, paused_gc
from genenv_engine.storage.store.lineage import LineageReads
from genenv_engine.storage.store.migrations import MIGRATIONS
from genenv_engine.storage.store.readers import (
    _BATCHES_SQL,
    _COMPUTED_TABLES,
    _EPOCHS_SQL,
    BUSY_TIMEOUT_MS,
    _funnel_read,
)
from genenv_engine.storage.store.reads import TaskReads
from genenv_engine.storage.store.rows import _batch_rows, _epoch_rows, _note_json, _now, _task_row
from genenv_engine.storage.store.search import TaskSearch


class Store(TaskReads, TaskSearch, LineageReads):
    """The run database: one SQLite file (WAL), one connection per thread, migrated at open; its reads come from
    `TaskReads`, `TaskSearch` and `LineageReads`."""

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
        """Upsert tasks by id; their stats and created_at survive a re-insert (a split's rows are encoded and
        written with the cyclic garbage collector paused: `paused_gc`)."""
        with paused_gc():
            rows = [_task_row(task, batch_id) for task in tasks]
            if rows:
                with self.write():
                    self.db.table("tasks").upsert_all(rows, pk="id")

    def set_task_stats(
        self, task_id: str, *, p_hat: float | None = None, r_env: float | None = None, n_rollouts: int | None = None
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
                "UPDATE tasks SET p_hat = ?, n_rollouts = coalesce(n_rollouts, 0) + ? WHERE id = ?", rows
            )

    def set_r_env(self, values: Iterable[tuple[str, float]]) -> None:
        """Set R_env for many tasks at once (``(task_id, r_env)`` pairs), in one transaction."""
        with self.write():
            self.db.conn.executemany("UPDATE tasks SET r_env = ? WHERE id = ?", [(r, i) for i, r in values])

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

    # -- rollouts and batches ------------------------------------------------------------------

    def insert_rollouts(self, rows: list[dict[str, Any]]) -> None:
        """Append rollouts (task_id, epoch, response, reward, success, error_type, purpose='train', policy_version)."""
        if rows:
            full = [{"purpose": "train", "error_type": None, "policy_version": None, **row} for row in rows]
            with self.write():
                self.db.table("rollouts").insert_all(full)

    def set_rollout_scores(self, rows: Iterable[tuple[str, float, float, int]]) -> None:
        """Set (p_hat, r_env, n_rollouts) of many tasks at once: ``(task_id, p_hat, r_env, n_rollouts)`` rows."""
        with self.write():
            self.db.conn.executemany(
                "UPDATE tasks SET p_hat = ?, r_env = ?, n_rollouts = ? WHERE id = ?",
                [(p, r, n, i) for i, p, r, n in rows],
            )

    def rescore_rollouts(self, rows: Iterable[tuple[int, float, bool, str | None]]) -> None:
        """Set the reward, success and error type of stored rollouts by id (``(id, reward, success, error_type)``
        rows), in one transaction: a re-scored answer keeps its row, response and epoch."""
        with self.write():
            self.db.conn.executemany(
                "UPDATE rollouts SET reward = ?, success = ?, error_type = ? WHERE id = ?",
                [(r, int(ok), e, i) for i, r, ok, e in rows],
            )

    def upsert_batches(self, rows: list[dict[str, Any]]) -> None:
        """Insert or update variation-batch rows by id. A column that no row of the call names keeps its stored
        values (one that only some rows name is set to NULL in the others); ``prompt_note`` is given as a dict (or
        None, or JSON text) and stored as JSON."""
        if rows:
            encoded = [
                {**row, "prompt_note": _note_json(row["prompt_note"])} if "prompt_note" in row else row for row in rows
            ]
            with self.write():
                self.db.table("batches").upsert_all(encoded, pk="id")

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
            self.db.table("epochs").upsert({**row, "finished_at": None, "metrics": None}, pk="epoch")
            self.db.execute("DELETE FROM funnels WHERE epoch = ?", [epoch])

    def finish_epoch(self, epoch: int, metrics: dict[str, Any]) -> None:
        """Record that an epoch completed, with its metrics, and store its funnel's snapshot (`funnel`)."""
        row = {"epoch": epoch, "status": "done", "finished_at": _now(), "metrics": json.dumps(metrics)}
        with self.write():
            self.db.table("epochs").upsert(row, pk="epoch")
            entries = _funnel_read(lambda sql, params: self._rows(sql, params), _COMPUTED_TABLES, epoch)
            self.db.table("funnels").upsert({"epoch": epoch, "entries": json.dumps(entries)}, pk="epoch")

    def set_epoch_metrics(self, epoch: int, values: dict[str, Any]) -> None:
        """Set some metrics of a finished epoch (the others, its status and times kept); KeyError when it has none."""
        with self.write():
            row = self.db.execute("SELECT metrics FROM epochs WHERE epoch = ? AND status = 'done'", [epoch]).fetchone()
            if row is None:
                raise KeyError(f"epoch {epoch} is not finished")
            metrics = {**json.loads(row[0] or "{}"), **values}
            self.db.execute("UPDATE epochs SET metrics = ? WHERE epoch = ?", [json.dumps(metrics), epoch])

    def mark_partial(self, epoch: int) -> None:
        """Record that an epoch stopped before completing."""
        with self.write():
            self.db.table("epochs").upsert({"epoch": epoch, "status": "partial", "finished_at": _now()}, pk="epoch")

    def epoch_metrics(self) -> list[dict[str, Any]]:
        """One dict per epoch: epoch, status, started_at, finished_at and the decoded metrics."""
        return _epoch_rows(self._rows(_EPOCHS_SQL))

    def last_finished_epoch(self) -> int:
        """The highest epoch with status 'done', or -1 when none is."""
        value = self.db.execute("SELECT max(epoch) FROM epochs WHERE status = 'done'").fetchone()[0]
        return -1 if value is None else int(value)

    def drop_epochs_from(self, epoch: int) -> None:
        """Forget epochs >= `epoch` (resume after a crash): their generated/static tasks (and the grounded reward's
        probe siblings), rollouts, batches and epoch rows go; edited tasks, earlier epochs and events stay."""
        with self.write():
            sql = "DELETE FROM tasks WHERE epoch >= ? AND origin IN ('generated', 'static', 'probe')"
            self.db.execute(sql, [epoch])
            for table in ("rollouts", "batches", "epochs", "funnels"):
                self.db.execute(f"DELETE FROM {table} WHERE epoch >= ?", [epoch])

    # -- events and meta -----------------------------------------------------------------------

    def log_event(self, kind: str, epoch: int | None, payload: dict[str, Any]) -> int:
        """Append an event and return its id."""
        row = {"ts": _now(), "epoch": epoch, "kind": kind, "payload": json.dumps(payload)}
        with self.write():
            rowid = self.db.table("events").insert(row).last_rowid
        assert rowid is not None  # an insert sets it
        return rowid

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
            self.db.table("meta").upsert({"key": key, "value": value}, pk="key")
