"""The dashboard during the warm start: loss curves of both roles gain points, with steps/s and an ETA."""

from __future__ import annotations

from genenv_console import messages as M
from genenv_console.__main__ import make_app
from genenv_console.state import RunState
from genenv_console.widgets.plots import ThroughputPlot, WarmStartPlot
from genenv_engine.core import events as ev


def test_state_keeps_loss_points_and_rates_per_role():
    state = RunState()
    assert state.apply(ev.WarmStartProgressed(0, "agent", 14, 700, 3.5, 7.0)) == {"status", "warm", "log"}
    state.apply(ev.WarmStartProgressed(0, "agent", 28, 700, 2.5, 14.0))
    state.apply(ev.WarmStartProgressed(0, "simulator", 10, 500, 1.5, 4.0))
    warm = state.warm_start()
    assert warm.points == {"agent": [(14, 3.5), (28, 2.5)], "simulator": [(10, 1.5)]}
    assert warm.rates["agent"] == (28, 700, 2.0, 336.0)
    assert warm.summary() == "agent 28/700 2.0 steps/s ETA 5m36s · simulator 10/500 2.5 steps/s ETA 3m16s"
    state.apply(ev.WarmStartProgressed(0, "agent", 14, 700, 3.4, 7.0))  # a restarted warm start starts a new curve
    assert state.warm_start().points["agent"] == [(14, 3.4)]
    state.apply(ev.RunStarted(0, "s", {}, 0))
    assert state.warm_start().points == {}


async def test_loss_plot_gains_points_while_the_warm_start_runs(tmp_path):
    app = make_app(preset="micro", sessions_root=tmp_path, autostart=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        plot, throughput = app.screen.query_one(WarmStartPlot), app.screen.query_one(ThroughputPlot)
        assert not plot.display and throughput.display  # no warm start seen yet: the throughput plot
        sizes = []
        for step, loss, role in ((5, 3.0, "agent"), (10, 2.0, "agent"), (15, 1.5, "agent"), (4, 1.2, "simulator")):
            app.post_message(M.wrap(ev.WarmStartProgressed(0, role, step, 20, loss, step / 2), app.runner))
            await pilot.pause()
            sizes.append(sum(len(p) for p in plot.data.points.values()))
        assert sizes == [1, 2, 3, 4]
        assert plot.display and not throughput.display
        assert plot.data.points["agent"] == [(5, 3.0), (10, 2.0), (15, 1.5)]
        assert plot.data.summary() == "agent 15/20 2.0 steps/s ETA 0m02s · simulator 4/20 2.0 steps/s ETA 0m08s"
        # once an epoch reports a throughput, its plot comes back
        app.post_message(M.wrap(ev.EpochFinished(1, {"tokens_per_second": 900.0}), app.runner))
        await pilot.pause()
        assert throughput.display and not plot.display


async def test_samples_panel_shows_each_roles_latest_sample_sanitised(tmp_path):
    from genenv_console.widgets.plots import PhasePlot
    from genenv_console.widgets.samples import WarmStartSamples

    app = make_app(preset="micro", sessions_root=tmp_path, autostart=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        panel, phases = app.screen.query_one(WarmStartSamples), app.screen.query_one(PhasePlot)
        assert not panel.display and phases.display
        for event in (
            ev.WarmStartProgressed(0, "agent", 5, 20, 3.0, 2.5),
            ev.WarmStartSample(0, "agent", 5, 20, "add 2 and 3", "[wrong]", False, "gold: [add(a=2, b=3)]"),
            ev.WarmStartSample(0, "agent", 10, 20, "add 2 and 3", "[add(a=2, b=3)]", True, "gold: x"),
            ev.WarmStartSample(
                0,
                "simulator",
                4,
                20,
                "seed [/] \x1b]0;pwned\x07",
                "[@click=app.quit]x",
                False,
                "parse_error: no TASK line",
            ),
        ):
            app.post_message(M.wrap(event, app.runner))
            await pilot.pause()
        assert panel.display and not phases.display
        text = str(panel.render())
        assert "agent at step 10/20: solved" in text and "[wrong]" not in text  # the latest sample per role
        assert "simulator at step 4/20: invalid" in text and "parse_error: no TASK line" in text
        assert "[@click=app.quit]x" in text and "␛]0;pwned␇" in text  # shown as text: no markup, no escapes
        assert app.is_running  # the click action was never run
        log = "\n".join(line for line in app.screen.query_one("#log").lines)
        assert "warm start simulator 4/20 invalid" in log
        app.post_message(M.wrap(ev.EpochFinished(1, {"tokens_per_second": 900.0}), app.runner))
        await pilot.pause()
        assert phases.display and not panel.display
