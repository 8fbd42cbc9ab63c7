"""The console attached to a headless run: it follows the epochs as they land and its keys steer that engine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from conftest import wait_until

from genenv_console.__main__ import make_app
from genenv_console.widgets.status_bar import StatusBar
from genenv_engine.interfaces.cli import main
from genenv_engine.storage import lease
from genenv_engine.storage.store import Store

ROOT = Path(__file__).resolve().parents[2]


def _kinds(folder: Path, kind: str) -> int:
    with Store(folder / "genenv.db") as store:
        return store.db.execute("select count(*) from events where kind = ?", (kind,)).fetchone()[0]


async def test_console_follows_a_headless_run_and_steers_it(tmp_path):
    folder = tmp_path / "s"
    assert main(["run", "--preset", "micro", "--session", str(folder), "--epochs", "1", "--quiet"]) == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    headless = subprocess.Popen(
        [sys.executable, "-m", "genenv_engine", "resume", str(folder), "--epochs", "60", "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        await wait_until(lambda: (lease.holder(folder) or {}).get("pid") == headless.pid, 120, "the headless lease")
        app = make_app(folder, autostart=True)  # autostart too: an attached console never starts its own engine
        async with app.run_test(size=(160, 44)) as pilot:
            await pilot.pause()
            assert app.attached is not None and app.attached["pid"] == headless.pid and app.runner is None
            assert "following another engine" in app.dashboard.query_one(StatusBar).text
            first = app.state.epochs_done()
            await wait_until(lambda: app.state.epochs_done() >= first + 2, 120, "epochs landing while attached")
            assert max(app.state.metrics) == app.state.epochs_done()  # the plots' data: the landed epochs
            assert any(line.startswith("epoch") for line in app.log_lines)  # the engine's log lines, read back

            paused_before = _kinds(folder, "RunPaused")
            await pilot.press("space")  # pause reaches the other engine at its next batch
            await wait_until(lambda: _kinds(folder, "RunPaused") > paused_before, 60, "the engine's pause")
            held = _kinds(folder, "EpochFinished")
            assert "pause asked" in app.dashboard.query_one(StatusBar).text
            await pilot.press("r")  # refused with the holder named, nothing started
            assert app.runner is None
            await pilot.pause(2.5)
            assert _kinds(folder, "EpochFinished") == held  # paused: nothing lands
            with Store(folder / "genenv.db") as store:
                done = store.last_finished_epoch()
            await wait_until(lambda: app.state.epochs_done() == done, 5, "the console showing the stored epochs")

            await pilot.press("space")
            await wait_until(lambda: _kinds(folder, "RunResumed") > 0, 60, "the engine's resume")
            await pilot.press("s")
            await wait_until(lambda: headless.poll() is not None, 120, "the headless run's stop")
            await wait_until(lambda: app.attached is None, 30, "the console letting go")
            assert app.state.run == "stopped" and "r to resume" in app.dashboard.query_one(StatusBar).text
        assert headless.returncode == 130
    finally:
        if headless.poll() is None:
            headless.send_signal(signal.SIGKILL)
            headless.wait()
