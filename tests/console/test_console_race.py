"""The concurrent-write race through the console itself: pins, bans and a hand edit made with Pilot keys
while the engine thread runs micro epochs on the same SQLite file (its own connection).

Before write transactions took the lock up front, the engine thread failed with "database is locked"
whenever a UI write committed between its read and its write. Here the run must keep going while the UI writes
(it is stopped by the test once enough writes are made and two epochs have finished, so the race lasts however fast
the machine is), no error modal may appear, and every pin/ban/edit must be in the database as last made.

Pilot waits after each key until the process looks idle, at most a second twice a key; with the engine thread busy
by design it never does, so here that wait is a short fixed pause (`brief_idle`, a test double of Textual's idle
probe) and the keys come as fast as the UI takes them.
"""

from __future__ import annotations

import asyncio
import random

import pytest
import textual.app
import textual.pilot
from conftest import first, wait_until
from textual.widgets import DataTable, Input, TextArea

from genenv_console import messages as M
from genenv_console.__main__ import make_app
from genenv_console.screens.edit import EditScreen
from genenv_console.screens.error import ErrorScreen
from genenv_console.screens.tasks import TasksScreen
from genenv_engine.environments.bfcl.mini import generate_task
from genenv_engine.storage.store import Store


@pytest.fixture
def brief_idle(monkeypatch):
    """Textual's wait for an idle process replaced by one event-loop turn of 20 ms."""

    async def brief(*_args, **_kwargs) -> None:
        await asyncio.sleep(0.02)

    monkeypatch.setattr(textual.app, "wait_for_idle", brief)
    monkeypatch.setattr(textual.pilot, "wait_for_idle", brief)


async def test_pins_bans_and_edits_while_the_engine_runs(tmp_path, scripted_factory, brief_idle):
    app = make_app(preset="micro", overrides={"epochs": 400}, sessions_root=tmp_path, backend_factory=scripted_factory)
    msgs: list = []
    async with app.run_test(size=(140, 44), message_hook=msgs.append) as pilot:
        path = app.session_path
        await wait_until(lambda: first(msgs, M.EpochStarted, epoch=1), 120, "epoch 1 to start")
        await pilot.press("t")
        screen = app.screen
        assert isinstance(screen, TasksScreen)
        table = screen.query_one(DataTable)
        presses: dict[str, list[str]] = {}
        edited = None
        rng = random.Random(3)
        rounds = 0
        # the run is far longer than the test: the UI writes until it has made enough of them over two finished
        # epochs, then stops the run
        while (
            app.state.active
            and rounds < 4000
            and (
                edited is None
                or sum(len(v) for v in presses.values()) < 24
                or first(msgs, M.EpochFinished, epoch=2) is None
            )
        ):
            rounds += 1
            if table.row_count == 0:
                await pilot.pause()
                continue
            row = rng.randrange(min(table.row_count, 8))
            table.move_cursor(row=row)
            await pilot.pause()
            task_id = screen.selected_id
            if task_id is None:
                continue
            if edited is None:  # the edit first, while the run surely still has epochs to go
                await pilot.press("enter")
                await wait_until(lambda: isinstance(app.screen, EditScreen), 30, "the edit modal to open")
                modal = app.screen
                prompt, answer, *_ = generate_task(2, rng)
                modal.query_one("#edit-prompt", TextArea).load_text(prompt)
                modal.query_one("#edit-answer", Input).value = answer
                await pilot.press("ctrl+s")
                await wait_until(
                    lambda: app.screen is screen or isinstance(app.screen, ErrorScreen), 30, "the edit to be saved"
                )
                assert app.screen is screen, getattr(app.screen, "error", "")
                edited = (task_id, f"{task_id}/r1", answer)
                continue
            for _ in range(6):  # a burst of toggles on one task: UI writes as fast as the keys go
                key = rng.choice("pb")
                await pilot.press(key)
                presses.setdefault(task_id, []).append(key)
        assert app.state.active, "the run ended before the UI made its writes"
        app.action_stop()
        await wait_until(lambda: not app.state.active, 180, "the run to stop")
        await pilot.pause()
        assert app.state.run == "stopped", app.state.error
        assert not isinstance(app.screen, ErrorScreen)
        assert first(msgs, M.RunStopped) is not None and first(msgs, M.RunFailed) is None
    assert edited is not None and sum(len(v) for v in presses.values()) >= 24
    with Store(path / "genenv.db") as store:
        changes = [
            (m.task_id, m.status) for m in {id(m): m for m in msgs if isinstance(m, M.TaskStatusChanged)}.values()
        ]
        assert len(changes) == sum(len(v) for v in presses.values())
        last: dict[str, str] = {}
        for task_id, status in changes:
            last[task_id] = status
        for task_id, status in last.items():
            assert store.get_task(task_id).status == status, task_id
        old_id, new_id, answer = edited
        assert store.task_stats(old_id)["superseded_by"] == new_id and store.get_task(new_id).answer == answer
        statuses = [m["status"] for m in store.epoch_metrics()]
        done = statuses.count("done")
        assert done >= 2 and statuses[:done] == ["done"] * done and set(statuses[done:]) <= {"partial"}
        assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
