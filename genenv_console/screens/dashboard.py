"""The dashboard: status bar (with the latest epoch's rollout workers), five live plots and the event log.

During the warm start the throughput plot's cell shows the warm start's loss curves instead (both
roles, steps/s and ETA) and the phase plot's cell each role's latest greedy sample (the agent's answer to a
held-out task, the simulator's variation of a seed); both switch back once an epoch has a throughput to show.

The app folds engine events into a `RunState` and hands it down with `show_state`; the screen
only copies the parts that changed onto its widgets' attributes, and each plot redraws itself. ``F`` opens the
funnel (`genenv_console.screens.funnel`) at the epoch a plot's cursor marks.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.screen import Screen
from textual.widgets import Log

from genenv_console.safe import clean
from genenv_console.state import RunState
from genenv_console.widgets.key_bar import KeyBar
from genenv_console.widgets.plots import (
    CalibrationPlot,
    HeldoutPlot,
    PhasePlot,
    PHatHistogram,
    ThroughputPlot,
    WarmStartPlot,
)
from genenv_console.widgets.samples import WarmStartSamples
from genenv_console.widgets.status_bar import StatusBar

LOG_LINES = 2000
"""Lines the event log keeps."""


class DashboardScreen(Screen):
    """Live view of the run."""

    CSS_PATH = "../styles/dashboard.tcss"
    BINDINGS = [Binding("F", "funnel", "Funnel: drafts → admitted → trained, at the plot cursor's epoch", show=False)]

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Grid(id="plots"):
            yield CalibrationPlot(id="calibration")
            yield HeldoutPlot(id="heldout")
            yield PHatHistogram(id="histogram")
            yield PhasePlot(id="phases")
            yield WarmStartSamples(id="samples")
            yield ThroughputPlot(id="throughput")
            yield WarmStartPlot(id="warmstart")
            yield Log(id="log", max_lines=LOG_LINES)
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#log", Log).border_title = "events"
        self.query_one(WarmStartSamples).border_title = "warm start: what each role writes now"
        state = getattr(self.app, "state", None)
        self.query_one(WarmStartPlot).display = False
        self.query_one(WarmStartSamples).display = False
        if state is not None:
            self.show_state(state, {"status", "plots", "warm"})
        for line in getattr(self.app, "log_lines", []):
            self.log_line(line)

    def funnel_epoch(self) -> int | None:
        """The epoch the funnel opens at: the focused plot's cursor, then the calibration's, then the held-out's."""
        plots = [self.query_one(CalibrationPlot), self.query_one(HeldoutPlot)]
        plots.sort(key=lambda plot: not plot.has_focus)
        return next((plot.cursor for plot in plots if plot.cursor is not None), None)

    def action_funnel(self) -> None:
        """Open the funnel of the plot cursor's epoch (the last epoch when no cursor was moved)."""
        from genenv_console.screens.funnel import FunnelScreen

        store = getattr(self.app, "ui_store", None)
        if store is None:
            self.notify("no session is open", severity="warning")
            return
        self.app.push_screen(FunnelScreen(store, self.funnel_epoch()))

    def show_state(self, state: RunState, changed: set[str]) -> None:
        """Copy the changed parts of the run state onto the widgets."""
        if not self.is_mounted:
            return
        if "status" in changed:
            bar = self.query_one(StatusBar)
            bar.session, bar.epoch, bar.target = state.session, state.epoch, state.target_epochs
            bar.phase, bar.progress, bar.run = state.phase, state.progress, state.run
            bar.pause_after_epoch = state.pause_after_epoch
            bar.worker_line = state.rollout_workers()
            bar.fault_line = state.plugin_faults()
        if "plots" in changed:
            self.query_one(CalibrationPlot).data = state.calibration()
            self.query_one(HeldoutPlot).data = state.heldout()
            self.query_one(PHatHistogram).data = state.histogram()
            self.query_one(PhasePlot).data = state.phase_seconds()
            self.query_one(ThroughputPlot).data = state.throughput()
        if "warm" in changed or "plots" in changed:
            warm = state.warm_start()
            show_warm = bool(warm.points) and not state.throughput()
            if show_warm:
                self.query_one(WarmStartPlot).data = warm
                self.query_one(WarmStartSamples).data = warm
            self.query_one(WarmStartPlot).display = show_warm
            self.query_one(WarmStartSamples).display = show_warm
            self.query_one(ThroughputPlot).display = not show_warm
            self.query_one(PhasePlot).display = not show_warm

    def show_elapsed(self, seconds: float) -> None:
        """Set the status bar's elapsed time."""
        if self.is_mounted:
            self.query_one(StatusBar).elapsed = seconds

    def log_line(self, line: str) -> None:
        """Append one line to the event log (through the console's sanitiser: one line, controls visible)."""
        if self.is_mounted:
            self.query_one("#log", Log).write_line(clean(line, 1000, one_line=True))

    def clear_log(self) -> None:
        """Empty the event log (another session was opened)."""
        if self.is_mounted:
            self.query_one("#log", Log).clear()
