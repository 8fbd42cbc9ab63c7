"""End to end through the console: start a micro session, watch an epoch reach the plots, pause, edit, ban,
pin, resume, check the next epoch trained on the edit, stop, and resume the session in a new app.

The engine, policies, trainers and store are real; only the roles' text generation is scripted (see
conftest). Assertions read the captured message stream and the session database, not only pixels.
Keys go through Pilot; pauses are observed through `RunPaused` messages, never through timing.
"""

from __future__ import annotations

import random

from conftest import first, wait_until
from textual.widgets import DataTable, Input, Select, TextArea

from genenv_console import messages as M
from genenv_console.__main__ import make_app
from genenv_console.screens.edit import EditScreen
from genenv_console.screens.tasks import TasksScreen
from genenv_console.widgets.plots import CalibrationPlot, HeldoutPlot, PhasePlot, PHatHistogram
from genenv_console.widgets.status_bar import StatusBar
from genenv_engine.environments.bfcl.mini import generate_task
from genenv_engine.storage.session import Session
from genenv_engine.storage.store import Store

SIZE = (140, 44)


def rollout_ids(store: Store, epoch: int) -> set[str]:
    """Task ids the agent rolled out (trained on) in ``epoch``."""
    return {
        r[0]
        for r in store.db.execute(
            "SELECT task_id FROM rollouts WHERE epoch = ? AND purpose = 'train'", [epoch]
        ).fetchall()
    }


async def test_run_pause_edit_ban_resume_stop_and_resume_session(tmp_path, scripted_factory):
    app = make_app(preset="micro", overrides={"epochs": 5}, sessions_root=tmp_path, backend_factory=scripted_factory)
    msgs: list = []
    async with app.run_test(size=SIZE, message_hook=msgs.append) as pilot:
        path = app.session_path
        assert path is not None and path.parent == tmp_path and app.state.active
        bar = app.dashboard.query_one(StatusBar)

        # 1. space pauses the running epoch: RunPaused arrives and the status bar says so
        await wait_until(lambda: first(msgs, M.EpochStarted, epoch=1), 90, "epoch 1 to start")
        await pilot.press("space")
        assert "pausing" in bar.text or "PAUSED" in bar.text
        await wait_until(lambda: first(msgs, M.RunPaused), 30, "RunPaused")
        await pilot.pause()
        assert "PAUSED" in bar.text and app.state.run == "paused"

        # 2. make the edits between two epochs: if the pause landed inside an epoch, ask for a pause as soon
        #    as it ends (P) and resume; `n` is the epoch that will run after the edits
        paused = first(msgs, M.RunPaused)
        started = first(msgs, M.EpochStarted, epoch=paused.epoch)
        await pilot.press("P")
        if started is not None and msgs.index(started) < msgs.index(paused):
            await pilot.press("space")
            await wait_until(lambda: first(msgs, M.RunPaused, epoch=paused.epoch + 1), 60, "the pause at epoch end")
            await pilot.pause()
            assert first(msgs, M.RunResumed) is not None and "PAUSED" in bar.text
            n = paused.epoch + 1
        else:
            n = paused.epoch
        assert "pause after epoch" in bar.text
        store = Store(path / "genenv.db")
        metrics = {m["epoch"]: m for m in store.epoch_metrics()}
        assert metrics[n - 1]["status"] == "done" and n not in metrics  # paused before epoch n started
        calibration = app.dashboard.query_one(CalibrationPlot).data
        assert calibration.points["bfcl"] == [
            (e, metrics[e]["generated_success_by_benchmark"]["bfcl"]) for e in range(1, n)
        ]
        assert calibration.alpha == 0.5 and calibration.k_min == 0.1
        assert app.dashboard.query_one(HeldoutPlot).data["bfcl"] == [
            (e, metrics[e]["heldout"]["bfcl"]) for e in range(n)
        ]
        scored = first(msgs, M.AttemptsScored, epoch=n - 1).event
        histogram = app.dashboard.query_one(PHatHistogram).data
        assert histogram.epoch == n - 1 and histogram.p_hats == scored.p_hats and histogram.r_envs == scored.r_envs
        epochs, phases = app.dashboard.query_one(PhasePlot).data
        assert epochs == list(range(n)) and phases["rollout"][-1] == metrics[n - 1]["phase_seconds"]["rollout"]

        # 3. the tasks screen: generated valid tasks, detail pane with lineage to the seed
        await pilot.press("t")
        screen = app.screen
        assert isinstance(screen, TasksScreen)
        screen.query_one("#origin", Select).value = "generated"
        screen.query_one("#valid", Select).value = True
        await pilot.pause()
        rows = screen.current.rows
        assert rows and all(r["origin"] == "generated" and r["valid"] for r in rows)
        assert screen.current.total == store.count_tasks(origin="generated", valid=True)
        target, to_ban, to_pin = rows[0]["id"], rows[1]["id"], rows[2]["id"]
        detail = str(screen.query_one("#detail").render())
        seed_id = store.get_task(target).parent_id
        assert target in detail and "lineage" in detail and seed_id in detail and "rollouts" in detail

        # 4. edit: an invalid edit shows the validator's reason and stores nothing
        await pilot.press("enter")
        modal = app.screen
        assert isinstance(modal, EditScreen)
        modal.query_one("#edit-prompt", TextArea).load_text("F: add(a:int,b:int) | Q: add 3 and 5")
        modal.query_one("#edit-answer", Input).value = "add(a=3,b=9)"
        await pilot.press("ctrl+s")
        assert app.screen is modal and "not saved" in modal.error and "answer_mismatch" in modal.error
        assert store.count_tasks(origin="edited") == 0
        # ... a valid edit becomes a new revision with origin 'edited'; the old one is kept, superseded
        prompt, answer, *_ = generate_task(2, random.Random(99))
        modal.query_one("#edit-prompt", TextArea).load_text(prompt)
        modal.query_one("#edit-answer", Input).value = answer
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is screen
        revised = first(msgs, M.TaskRevised)
        assert revised is not None and revised.old_id == target and revised.new_id == f"{target}/r1"
        new = store.get_task(revised.new_id)
        assert new.origin == "edited" and new.parent_id == target and new.prompt == prompt and new.valid
        assert store.task_stats(target)["superseded_by"] == revised.new_id and store.get_task(target) is not None

        # 5. ban one task, pin another, through the keys on the highlighted row
        table = screen.query_one(DataTable)
        ids = [r["id"] for r in screen.current.rows]
        table.move_cursor(row=ids.index(to_ban))
        await pilot.pause()
        await pilot.press("b")
        table.move_cursor(row=[r["id"] for r in screen.current.rows].index(to_pin))
        await pilot.pause()
        await pilot.press("p")
        assert store.get_task(to_ban).status == "banned" and store.get_task(to_pin).status == "pinned"
        assert first(msgs, M.TaskStatusChanged, task_id=to_ban, status="banned") is not None
        assert to_ban not in {t.id for t in store.pool()}

        # 6. resume: epoch n trains on the edit and the pinned task, never on the banned or superseded ones
        await pilot.press("d", "space")
        await wait_until(lambda: first(msgs, M.RunPaused, epoch=n + 1), 60, "the pause after epoch n")
        trained = rollout_ids(store, n)
        assert revised.new_id in trained and to_pin in trained
        assert to_ban not in trained and target not in trained
        assert app.dashboard.query_one(CalibrationPlot).data.points["bfcl"][-1][0] == n

        # 7. stop (while paused before epoch n + 1): the run stops, that epoch is partial, the session is resumable
        await pilot.press("s")
        await wait_until(lambda: first(msgs, M.RunStopped), 30, "RunStopped")
        await wait_until(lambda: not app.state.active, 30, "the engine thread to end")
        await pilot.pause()
        assert "stopped" in bar.text
        assert [(m["epoch"], m["status"]) for m in store.epoch_metrics()] == [
            *[(e, "done") for e in range(n + 1)],
            (n + 1, "partial"),
        ]
        store.close()
        await pilot.press("q")

    # 8. resume the session from its folder in a new app (target n + 1): the partial epoch is redone, the run finishes
    again = make_app(path, overrides={"epochs": n + 1}, sessions_root=tmp_path, backend_factory=scripted_factory)
    msgs2: list = []
    async with again.run_test(size=SIZE, message_hook=msgs2.append):
        await wait_until(lambda: first(msgs2, M.RunFinished), 90, "the resumed run to finish")
        assert first(msgs2, M.RunStarted).event.start_epoch == n + 1
        assert again.dashboard.query_one(HeldoutPlot).data["bfcl"][0][0] == 0  # history reloaded from the store
    session = Session.open(path)
    assert [(m["epoch"], m["status"]) for m in session.store.epoch_metrics()] == [(e, "done") for e in range(n + 2)]
