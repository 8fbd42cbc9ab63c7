"""The screens on the fixed session (no engine running): tasks paging, filters and search, edit, pin/ban,
export, sessions list and create form, help and the command palette.
"""

from __future__ import annotations

import json

from conftest import FIXED_METRICS, first, wait_until
from textual.widgets import DataTable, Input, Select, TextArea

from genenv_console import messages as M
from genenv_console.__main__ import make_app
from genenv_console.data import PAGE_SIZE
from genenv_console.screens.edit import EditScreen
from genenv_console.screens.help import HelpScreen
from genenv_console.screens.sessions import SessionsScreen
from genenv_console.screens.tasks import TasksScreen
from genenv_console.widgets.plots import CalibrationPlot, HeldoutPlot, PHatHistogram, ThroughputPlot
from genenv_console.widgets.status_bar import StatusBar
from genenv_engine.storage.store import Store

SIZE = (140, 44)


def idle_app(path):
    return make_app(path, sessions_root=path.parent, autostart=False)


async def test_dashboard_shows_stored_epochs_without_running(fixed_session):
    app = idle_app(fixed_session)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        dash = app.dashboard
        assert dash.query_one(CalibrationPlot).data.points == {"bfcl": [(1, 0.625), (2, 0.55)]}
        assert dash.query_one(HeldoutPlot).data == {"bfcl": [(0, 0.125), (1, 0.25), (2, 0.375)]}
        histogram = dash.query_one(PHatHistogram).data
        assert histogram.epoch == 2 and histogram.p_hats == FIXED_METRICS[2]["batch_p_hats"]
        assert dash.query_one(ThroughputPlot).data == [(1, 410.0), (2, 455.0)]
        text = dash.query_one(StatusBar).text
        assert "demo-session" in text and "epoch 2/3" in text and "idle" in text
        assert not app.state.active and app.runner is None
        await pilot.press("space")  # nothing to pause: a warning, no crash
        assert not app.state.active


async def test_tasks_page_filters_search_and_detail(fixed_session):
    store = Store(fixed_session / "genenv.db")
    for i in range(PAGE_SIZE + 10):  # enough rows for two pages
        store.insert_tasks([store.get_task("bfcl/seed/00000").with_(id=f"bfcl/extra/{i:05d}", split="train")])
    app = idle_app(fixed_session)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("t")
        screen = app.screen
        assert isinstance(screen, TasksScreen)
        table = screen.query_one(DataTable)
        total = store.count_tasks()
        assert table.row_count == PAGE_SIZE and screen.current.total == total
        await pilot.press("right_square_bracket")
        assert screen.current.page == 1 and table.row_count == total - PAGE_SIZE
        await pilot.press("left_square_bracket")
        assert screen.current.page == 0

        screen.query_one("#valid", Select).value = False
        await pilot.pause()
        assert [r["id"] for r in screen.current.rows] == ["gen/e1/bfcl/0003-1"]
        detail = str(screen.query_one("#detail").render())
        assert "unknown_function" in detail and "bfcl/seed/" in detail  # validity reason, lineage to the seed
        screen.query_one("#valid", Select).value = Select.NULL

        screen.query_one("#epoch", Input).value = "2"
        screen.query_one("#p_min", Input).value = "0.5"
        await pilot.pause()
        assert screen.current.rows and all(r["epoch"] == 2 and r["p_hat"] >= 0.5 for r in screen.current.rows)
        assert screen.current.total == store.count_tasks(epoch=2, p_min=0.5)
        screen.query_one("#epoch", Input).value = ""
        screen.query_one("#p_min", Input).value = ""

        word = store.get_task("gen/e2/bfcl/0000-0").prompt.split("Q: ")[1].split()[0]
        await pilot.press("slash")
        await pilot.press(*word, "enter")
        assert screen.current.total == store.count_tasks(text=word) > 0
        await pilot.press("escape")
        detail = str(screen.query_one("#detail").render())
        first_id = screen.current.rows[0]["id"]
        assert first_id in detail and "gold answer" in detail and "rollouts" in detail
    store.close()


async def test_edit_rejects_invalid_and_stores_valid_revision_and_toggles(fixed_session):
    app = idle_app(fixed_session)
    msgs: list = []
    async with app.run_test(size=SIZE, message_hook=msgs.append) as pilot:
        await pilot.press("t")
        screen = app.screen
        target = screen.current.rows[0]["id"]
        store = app.ui_store
        await pilot.press("enter")
        modal = app.screen
        assert isinstance(modal, EditScreen)
        await pilot.press("ctrl+s")  # unchanged text is not a revision
        assert "nothing changed" in modal.error
        modal.query_one("#edit-prompt", TextArea).load_text("F: fly(a:int) | Q: fly 3")
        modal.query_one("#edit-answer", Input).value = "fly(a=3)"
        await pilot.press("ctrl+s")
        assert "unknown_function" in modal.error and store.count_tasks(origin="edited") == 0
        modal.query_one("#edit-prompt", TextArea).load_text("F: add(a:int,b:int) neg(x:int) | Q: add 4 and 6")
        modal.query_one("#edit-answer", Input).value = "add(a=4,b=6)"
        await pilot.press("ctrl+s")
        assert app.screen is screen
        new = store.get_task(f"{target}/r1")
        assert new is not None and new.origin == "edited" and new.parent_id == target and new.answer == "add(a=4,b=6)"
        assert store.task_stats(target)["superseded_by"] == new.id
        assert screen.selected_id == new.id  # the table jumps to the new revision
        await pilot.press("p")
        assert store.get_task(new.id).status == "pinned"
        await pilot.press("p")
        assert store.get_task(new.id).status == "active"
        await pilot.press("b")
        assert store.get_task(new.id).status == "banned"
        changed = {id(m): m for m in msgs if isinstance(m, M.TaskStatusChanged)}.values()  # seen by screen and app
        kinds = [(m.task_id, m.status) for m in changed]
        assert kinds == [(new.id, "pinned"), (new.id, "active"), (new.id, "banned")]
        await pilot.press("escape")
        await pilot.press("enter")  # cancel leaves everything as it was
        await pilot.press("escape")
        assert isinstance(app.screen, TasksScreen) and store.count_tasks(origin="edited") == 1


async def test_export_writes_metrics_and_every_task_admitted_or_rejected(fixed_session):
    app = idle_app(fixed_session)
    msgs: list = []
    async with app.run_test(size=SIZE, message_hook=msgs.append) as pilot:
        await pilot.press("x")
        await wait_until(lambda: first(msgs, M.ExportWritten), 30, "the export")
        written = first(msgs, M.ExportWritten)
    metrics = [json.loads(line) for line in (fixed_session / "export" / "metrics.jsonl").read_text().splitlines()]
    tasks = [
        json.loads(line)
        for name in ("tasks.jsonl", "rejected.jsonl")
        for line in (fixed_session / "export" / name).read_text().splitlines()
    ]
    with Store(fixed_session / "genenv.db") as store:
        assert written.tasks == len(tasks) == store.count_tasks()
    assert [m["epoch"] for m in metrics] == [0, 1, 2] and metrics[1]["generated_success"] == 0.625
    assert len({t["id"] for t in tasks}) == len(tasks)
    report = fixed_session / "report" / "report.html"  # the export key also writes the session report
    assert report in written.paths and (fixed_session / "report" / "report.md") in written.paths
    assert "data:image/png;base64," in report.read_text()


async def test_sessions_screen_lists_and_creates(fixed_session, scripted_factory):
    app = make_app(fixed_session, sessions_root=fixed_session.parent, autostart=False, backend_factory=scripted_factory)
    msgs: list = []
    async with app.run_test(size=SIZE, message_hook=msgs.append) as pilot:
        await pilot.press("o")
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        [info] = screen.sessions
        assert (info.path.name, info.epochs_done, info.target, info.status) == ("demo-session", 2, 3, "resumable")
        screen.query_one("#preset", Select).value = "micro"
        await pilot.pause()
        assert screen.query_one("#epochs", Input).value == "2"  # the form follows the preset
        screen.query_one("#alpha", Input).value = "1.5"
        screen.create()
        assert "curriculum.alpha" in str(screen.query_one("#form-error").render())
        screen.query_one("#alpha", Input).value = "0.4"
        screen.query_one("#epochs", Input).value = "0"
        screen.create()
        await wait_until(lambda: first(msgs, M.RunFinished), 90, "the new session's run")
        created = first(msgs, M.CreateSession).config
        assert created.curriculum.alpha == 0.4 and created.preset == "micro" and created.epochs == 0
        assert app.session_path != fixed_session and app.session_path.parent == fixed_session.parent
        await pilot.press("o")
        assert len(app.screen.sessions) == 2


async def test_help_screen_and_command_palette(fixed_session):
    app = idle_app(fixed_session)
    msgs: list = []
    async with app.run_test(size=SIZE, message_hook=msgs.append) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        rows = [app.screen.query_one(DataTable).get_row_at(i) for i in range(app.screen.query_one(DataTable).row_count)]
        assert ["everywhere", "space", "Pause/Resume"] in rows and ["everywhere", "x", "Export"] in rows
        assert any(r[1] == "enter" and "held-out answers" in r[2] for r in rows)  # the plots' drill-down keys
        await pilot.press("escape")
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"export metrics")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_until(lambda: first(msgs, M.ExportWritten), 30, "the export from the palette")
