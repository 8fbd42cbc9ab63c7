"""SVG snapshots of the dashboard and the tasks screen at a fixed size, on the fixed session (no engine, no clock).

Update the baselines with ``pytest tests/console --snapshot-update`` after checking the report.
"""

from __future__ import annotations

from genenv_console.__main__ import make_app

SIZE = (140, 44)


def test_dashboard_snapshot(fixed_session, snap_compare):
    app = make_app(fixed_session, sessions_root=fixed_session.parent, autostart=False)

    async def run_before(pilot) -> None:
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_tasks_snapshot(fixed_session, snap_compare):
    app = make_app(fixed_session, sessions_root=fixed_session.parent, autostart=False)

    async def run_before(pilot) -> None:
        await pilot.pause()
        await pilot.press("t")
        await pilot.pause()
        await pilot.press("down", "down", "down")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
