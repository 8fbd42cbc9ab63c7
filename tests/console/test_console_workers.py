"""The dashboard's status bar shows the latest epoch's rollout workers: their count and each one's tasks/s and
tokens/s, as ``genenv status`` shows them (`genenv_engine.storage.progress.worker_summary`)."""

from __future__ import annotations

from genenv_console import messages as M
from genenv_console.__main__ import make_app
from genenv_console.state import RunState
from genenv_console.widgets.status_bar import StatusBar
from genenv_engine.core import events as ev

TWO_WORKERS = [
    {"batches": 3, "tasks": 48, "tokens": 4800, "seconds": 12.0},
    {"batches": 3, "tasks": 48, "tokens": 5000, "seconds": 10.0},
]


def test_state_gives_the_latest_epoch_that_reports_workers():
    state = RunState()
    assert state.rollout_workers() == ""
    state.apply(ev.EpochFinished(1, {"rollout_workers": TWO_WORKERS}))
    state.apply(ev.EpochFinished(2, {"rollout_workers": []}))  # an epoch without rollouts reports none
    assert state.rollout_workers() == "2: 4.0+4.8 tasks/s, 400+500 tok/s"


async def test_status_bar_shows_worker_count_and_per_worker_throughput(tmp_path):
    app = make_app(preset="micro", sessions_root=tmp_path, autostart=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        bar = app.screen.query_one(StatusBar)
        assert "rollout workers" not in bar.text  # no epoch yet
        app.post_message(
            M.wrap(ev.EpochFinished(1, {"tokens_per_second": 900.0, "rollout_workers": TWO_WORKERS}), app.runner)
        )
        await pilot.pause()
        assert bar.text.endswith(" │ rollout workers 2: 4.0+4.8 tasks/s, 400+500 tok/s")
        app.post_message(
            M.wrap(
                ev.EpochFinished(2, {"rollout_workers": [{"batches": 1, "tasks": 40, "tokens": 3000, "seconds": 8.0}]}),
                app.runner,
            )
        )
        await pilot.pause()
        assert bar.text.endswith(" │ rollout workers 1: 5.0 tasks/s, 375 tok/s")
