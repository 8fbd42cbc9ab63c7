"""Concurrent writers: a second connection pins, bans and edits tasks every few ms while the engine runs.

The engine and the editor use separate SQLite connections on one real WAL file, as the console
(its UI thread) and the engine thread do. The run must finish, neither side may see
"database is locked", and every edit must be in the database afterwards exactly as last written.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time

from genenv_engine.config import load_config
from genenv_engine.environments.bfcl.mini import generate_task
from genenv_engine.method.loop import run
from genenv_engine.storage.session import Session
from genenv_engine.storage.store import Store
from genenv_engine.testing import scripted_backends


class Editor(threading.Thread):
    """Pins, bans, unbans and revises base tasks through its own connection until told to stop."""

    def __init__(self, db_path, interval: float = 0.003) -> None:
        super().__init__(daemon=True)
        self.db_path, self.interval = db_path, interval
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.final_status: dict[str, str] = {}
        self.revisions: dict[str, str] = {}  # old id -> revision id
        self.ops = 0

    def run(self) -> None:
        rng = random.Random(1)
        try:
            with Store(self.db_path) as store:
                while store.last_finished_epoch() < 0 and not self.stop.is_set():
                    time.sleep(0.01)  # epoch 0 (re)writes the base tasks; edit once they are in
                # a dozen tasks: every pinned task and fresh edit is trained on, so keep the epochs short
                ids = [r["id"] for r in store.query_tasks(origin="seed", limit=12, order="id")]
                assert ids, "no base tasks to edit"
                while not self.stop.is_set():
                    task_id = rng.choice(ids)
                    if rng.random() < 0.1 and task_id not in self.revisions and len(self.revisions) < 4:
                        old = store.get_task(task_id)
                        prompt, answer, expected, tools, _ = generate_task(2, rng)
                        new = old.with_(
                            id=task_id + "/r1", prompt=prompt, answer=answer, expected=expected, tools=tools
                        )
                        store.revise_task(task_id, new)
                        self.revisions[task_id] = new.id
                    else:
                        status = rng.choice(("pinned", "banned", "active"))
                        store.set_status(task_id, status)
                        self.final_status[task_id] = status
                    self.ops += 1
                    time.sleep(self.interval)
        except BaseException as exc:  # recorded and asserted on by the test
            self.errors.append(exc)


def test_engine_run_and_a_second_writer_never_lock_each_other(tmp_path):
    session = Session.create(load_config("micro", overrides={"epochs": 3}), tmp_path / "s")
    editor = Editor(session.path / "genenv.db")
    editor.start()
    try:
        summary = run(session, backend_factory=scripted_backends())
    finally:
        editor.stop.set()
        editor.join(30)
    assert not editor.errors, editor.errors
    assert summary == {"epochs_done": 3}
    assert editor.ops > 50 and editor.revisions and editor.final_status
    with Store(session.path / "genenv.db") as store:
        assert [(m["epoch"], m["status"]) for m in store.epoch_metrics()] == [(e, "done") for e in range(4)]
        for task_id, status in editor.final_status.items():
            assert store.get_task(task_id).status == status, task_id
        for old_id, new_id in editor.revisions.items():
            assert store.task_stats(old_id)["superseded_by"] == new_id
            revised = store.get_task(new_id)
            assert revised.origin == "edited" and revised.parent_id == old_id
        assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert not [line for line in session.log_path().read_text().splitlines() if "database is locked" in line]


def test_write_transactions_take_the_write_lock_up_front(tmp_path):
    """A read-then-write transaction must not fail when another connection commits between its read and write."""
    path = tmp_path / "t.db"
    with Store(path) as store:
        store.set_meta("k", "0")

        def other_writer() -> None:
            other = sqlite3.connect(path, timeout=5)
            other.execute("UPDATE meta SET value = 'x' WHERE key = 'k'")
            other.commit()
            other.close()

        with store.write():
            store.get_meta("k")  # a read inside the transaction...
            # ...then another connection tries to commit: it waits (busy) instead of invalidating our snapshot
            waiter = threading.Thread(target=other_writer)
            waiter.start()
            time.sleep(0.2)
            assert waiter.is_alive()
            store.set_meta("k", "1")
        waiter.join(5)
        assert not waiter.is_alive()
        assert store.get_meta("k") == "x"  # the other writer went second
