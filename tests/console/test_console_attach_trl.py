"""The console attached to a run whose agent TRL trains (``genenv run --agent-trainer trl`` in another process): it
follows the epochs as they land, its calibration plot gains a point per epoch from TRL's rollouts, and the log shows
the engine's epoch lines, as for a native run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import wait_until

pytest.importorskip("trl")

from genenv_console.__main__ import make_app  # noqa: E402
from genenv_console.widgets.status_bar import StatusBar  # noqa: E402
from genenv_engine.storage import lease  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["simulator.seeds_per_epoch=2", "agent.rollouts=4", "agent.replay_tasks=4", "heldout_size=24"]
"""The tiny preset at the TRL tests' smallest sizes (seconds an epoch)."""
TRL = ["--agent-trainer", "trl", "--trl-steps", "2", "--trl-batch", "4"]


@pytest.mark.slow
@pytest.mark.subprocess
async def test_console_follows_a_trl_run_and_its_calibration_plot_moves(tmp_path):
    folder = tmp_path / "s"
    sets = [x for kv in SMALL for x in ("--set", kv)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = ["run", "--session", str(folder), "--preset", "tiny", "--epochs", "30", "--quiet", *TRL, *sets]
    headless = subprocess.Popen(
        [sys.executable, "-m", "genenv_engine", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        await wait_until(lambda: (lease.holder(folder) or {}).get("pid") == headless.pid, 120, "the TRL run's lease")
        app = make_app(folder, autostart=True)  # an attached console never starts its own engine
        async with app.run_test(size=(160, 44)) as pilot:
            await pilot.pause()
            assert app.attached is not None and app.attached["pid"] == headless.pid and app.runner is None
            assert "following another engine" in app.dashboard.query_one(StatusBar).text
            first = app.state.epochs_done()

            def points() -> list[tuple[int, float]]:
                return list(app.state.calibration().points.get("bfcl", []))

            before = points()
            await wait_until(lambda: len(points()) > len(before), 240, "a calibration point from a TRL epoch")
            after = points()
            landed = [epoch for epoch, _ in after if epoch > first]
            assert after[: len(before)] == before and landed, (before, after)  # new points from the new epochs
            assert all(0.0 <= p <= 1.0 for _, p in after)
            assert max(app.state.metrics) == app.state.epochs_done()
            assert any(line.startswith("epoch") for line in app.log_lines)
            for epoch in landed:  # each point is the mean p-hat TRL's rollouts gave that epoch's fresh tasks
                m = app.state.metrics[epoch]
                assert m["agent_update"]["trainer_step"] == 2 * epoch
                assert dict(after)[epoch] == pytest.approx(m["generated_success_by_benchmark"]["bfcl"])
    finally:
        if headless.poll() is None:
            headless.send_signal(signal.SIGKILL)
            headless.wait()
