"""The funnel screen (``F`` on the dashboard): its rows equal the database's counts, hostile rejection reasons are
drawn literally, and an SVG snapshot of the fixed session's funnel."""

from __future__ import annotations

from conftest import wait_until
from rich.text import Text

from genenv_console.__main__ import make_app
from genenv_console.screens.funnel import FunnelScreen, funnel_rows
from genenv_console.screens.help import HelpScreen
from genenv_console.widgets.plots import CalibrationPlot
from genenv_engine.storage.store import Store

SIZE = (140, 44)
HOSTILE_REASON = "[bold red]RED[/bold red] \x1b[31mx\u202e: detail"


def _db_counts(path, epoch: int) -> dict[str, int]:
    with Store(path / "genenv.db") as store:
        q = lambda sql: store.db.execute(sql, [epoch]).fetchone()[0]  # noqa: E731
        return {
            "drafts": q("SELECT count(*) FROM tasks WHERE origin = 'generated' AND epoch = ?"),
            "valid": q("SELECT count(*) FROM tasks WHERE origin = 'generated' AND valid = 1 AND epoch = ?"),
            "trained": q("SELECT count(DISTINCT task_id) FROM rollouts WHERE purpose = 'train' AND epoch = ?"),
        }


async def test_f_opens_the_funnel_at_the_cursor_epoch_with_the_database_counts(fixed_session):
    app = make_app(fixed_session, sessions_root=fixed_session.parent, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        plot = app.dashboard.query_one(CalibrationPlot)
        plot.focus()
        await pilot.press("right", "left")  # the cursor starts at the last epoch
        assert plot.cursor == 1
        await pilot.press("F")
        await wait_until(lambda: isinstance(app.screen, FunnelScreen) and app.screen.entries, 10, "the funnel")
        screen = app.screen
        for epoch in (1, 2):
            assert screen.epoch == epoch
            (row,) = screen.rows()
            counts = _db_counts(fixed_session, epoch)
            assert row[0] == "bfcl" and (row[1], row[3], row[4]) == (
                str(counts["drafts"]),
                str(counts["valid"]),
                str(counts["trained"]),
            )
            table = screen.query_one("#funnel-table")
            assert table.row_count == 1 and [c.plain for c in table.get_row_at(0)] == list(row)
            with Store(fixed_session / "genenv.db") as store:
                assert screen.rows() == funnel_rows(store.funnel(), epoch)
            await pilot.press("right")
        assert screen.epoch == 2
        await pilot.press("left")
        assert screen.epoch == 1
        await pilot.press("escape")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        keys = [
            app.screen.query_one("#help-table").get_row_at(i)[1]
            for i in range(app.screen.query_one("#help-table").row_count)
        ]
        assert "F" in keys


async def test_a_hostile_rejection_reason_is_drawn_literally(fixed_session):
    with Store(fixed_session / "genenv.db") as store:
        store.db.execute("UPDATE tasks SET reason = ? WHERE valid = 0 AND epoch = 1", [HOSTILE_REASON])
        store.db.execute("DELETE FROM funnels")  # read from the edited tasks, not the snapshots of the run
    app = make_app(fixed_session, sessions_root=fixed_session.parent, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("F")
        await wait_until(lambda: isinstance(app.screen, FunnelScreen) and app.screen.entries, 10, "the funnel")
        screen = app.screen
        await pilot.press("left")
        assert screen.epoch == 1
        cell = screen.query_one("#funnel-table").get_row_at(0)[5]
        assert isinstance(cell, Text) and cell.plain.startswith("[bold red]RED[/bold red] ␛[31mx<U+202E> ")
        assert "\x1b" not in cell.plain and "\u202e" not in cell.plain


def test_funnel_snapshot(fixed_session, snap_compare):
    app = make_app(fixed_session, sessions_root=fixed_session.parent, autostart=False)

    async def run_before(pilot) -> None:
        await pilot.pause()
        await pilot.press("F")
        await wait_until(lambda: isinstance(app.screen, FunnelScreen) and app.screen.entries, 10, "the funnel")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
