"""The genenv console app: screens, key bindings, commands, and the handlers that own all UI state.

The engine runs in the runner's thread worker and reports through messages; `@on` handlers here
fold them into the `RunState` and hand it down to the dashboard. The UI thread keeps its own read
connection to the session's store (``ui_store``) for the tasks and sessions screens and for hand
edits. Engine errors end up in an `ErrorScreen`, never as a crash; the session stays resumable.
"""

from __future__ import annotations

import time
import traceback
from collections import deque
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from textual import events, on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from genenv_console.attach import AttachMixin
from genenv_console.compare import read_runs
from genenv_console.data import export_jsonl
from genenv_console.drill_read import EpochDrill, read_epoch_drill, session_environments
from genenv_console.latency import LatencyProbe
from genenv_console.messages import (
    CompareSessions,
    CreateSession,
    EngineIdled,
    EngineMessage,
    EpochDrillRead,
    ExportWritten,
    OpenBatch,
    OpenDrill,
    OpenLineage,
    OpenSession,
    OpenTask,
    TaskRevised,
    TaskStatusChanged,
)
from genenv_console.runner import EngineRunner, EngineWorkerMixin
from genenv_console.safe import clean
from genenv_console.screens.base import post_read
from genenv_console.screens.batch import BatchTasksScreen, GroupScreen
from genenv_console.screens.compare import CompareScreen
from genenv_console.screens.dashboard import LOG_LINES, DashboardScreen
from genenv_console.screens.drill import EpochBatchesScreen, HeldoutEpochScreen
from genenv_console.screens.error import ErrorScreen
from genenv_console.screens.help import HelpScreen, binding_rows
from genenv_console.screens.lineage import LineageScreen
from genenv_console.screens.sessions import SessionsScreen
from genenv_console.screens.tasks import TasksScreen
from genenv_console.state import RunState, describe, history_lines
from genenv_console.widgets.plots import PlotPicked
from genenv_engine.config import ConfigError, RunConfig, config_from_file
from genenv_engine.core.errors import SessionBusy
from genenv_engine.storage import lease
from genenv_engine.storage.session import Session
from genenv_engine.storage.session_view import SessionView
from genenv_engine.storage.store import Store

if TYPE_CHECKING:  # roles imports torch; the console starts without it
    from genenv_engine.training.roles import BackendFactory


class GenEnvConsole(AttachMixin, EngineWorkerMixin, App[None]):
    """Watch, pause, inspect and steer a GenEnv co-evolution run."""

    CSS_PATH = "styles/app.tcss"
    TITLE = "genenv console"
    SCREENS = {"dashboard": DashboardScreen, "tasks": TasksScreen, "sessions": SessionsScreen}
    MODES = {"dashboard": "dashboard", "tasks": "tasks", "sessions": "sessions"}
    DEFAULT_MODE = "dashboard"
    BINDINGS = [
        Binding("space", "toggle_pause", "Pause/Resume"),
        Binding("P", "pause_after_epoch", "Pause after epoch"),
        Binding("s", "stop", "Stop"),
        Binding("r", "run", "Run/Resume"),
        Binding("d", "show('dashboard')", "Dashboard"),
        Binding("t", "show('tasks')", "Tasks"),
        Binding("o", "show('sessions')", "Sessions"),
        Binding("x", "export", "Export"),
        Binding("plus", "more_epochs", "+1 epoch", show=False, key_display="+"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        session_path: Path | None = None,
        sessions_root: Path = Path("sessions"),
        backend_factory: BackendFactory | None = None,
        autostart: bool = True,
        compare: list[Path] | None = None,
    ) -> None:
        super().__init__()
        self.initial_compare = [Path(p) for p in compare] if compare else None
        """Sessions to open the compare screen on at start (``--compare``), instead of a session."""
        self.sessions_root = Path(sessions_root)
        self.backend_factory = backend_factory
        self.autostart = autostart
        self.initial_session = session_path
        self.session_path: Path | None = None
        self.session_config: RunConfig | None = None
        self.ui_store: Store | None = None
        self.state = RunState()
        self.log_lines: deque[str] = deque(maxlen=LOG_LINES)
        self.runner: EngineRunner | None = None
        self.pending: tuple[Path, bool] | None = None
        self.latency = LatencyProbe()
        self._engine: Worker | None = None
        self._started_at: float | None = None
        self._environments: tuple[Path | None, dict] | None = None
        """The open session's folder and its environments (`session_environments`), built once per session."""

    # -- lifecycle -----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Leave the current screen's own 'go to' key out of the footer (it would do nothing there)."""
        if action == "show" and parameters and parameters[0] == self.current_mode:
            return False
        return True

    def on_mount(self) -> None:
        self.set_interval(self.latency.interval, self.latency.tick)
        self.set_interval(1.0, self._tick_elapsed)
        if self.initial_session is not None:
            self.open_session(self.initial_session, self.autostart)
        else:
            self.switch_mode("sessions")
            if self.initial_compare:
                self.push_screen(CompareScreen(self.initial_compare))

    def on_unmount(self) -> None:
        """Never leave the engine thread behind: a closing app stops it (the session stays resumable)."""
        if self.runner is not None:
            self.runner.control.stop()
        if self.ui_store is not None:
            self.ui_store.close()

    async def on_event(self, event: events.Event) -> None:
        """Time every key from its creation until the screen has repainted after each step of its handling."""
        await super().on_event(event)
        if isinstance(event, events.Key):  # a key arrives here first and again when it bubbles back
            self.call_after_refresh(self.latency.key_shown, id(event), event.time, event.key)

    def _tick_elapsed(self) -> None:
        if self.state.active and self._started_at is not None:
            self.dashboard.show_elapsed(time.monotonic() - self._started_at)

    @property
    def dashboard(self) -> DashboardScreen:
        """The dashboard screen (one instance for the app's life)."""
        return self.get_screen("dashboard", DashboardScreen)

    # -- sessions ------------------------------------------------------------------------------

    def open_session(self, path: Path, autostart: bool = False) -> None:
        """Show ``path``'s session (stopping a running one first) and optionally start its engine."""
        path = Path(path)
        if self.state.active:
            if path == self.session_path:
                self.switch_mode("dashboard")
                return
            self.pending = (path, autostart)
            self.action_stop()
            self.notify(
                clean(f"stopping {self.state.session} before opening {path.name}", 500, one_line=True), markup=False
            )
            return
        try:
            config = config_from_file(path / "config.toml")
        except (ConfigError, OSError) as exc:
            self.notify(clean(f"cannot open {path}: {exc}", 500, one_line=True), markup=False, severity="error")
            return
        self._stop_following()
        if self.ui_store is not None:
            self.ui_store.close()
        self.session_path = path
        self.session_config = config
        self.ui_store = Store(path / "genenv.db")
        pause_after = self.state.pause_after_epoch
        self.state = RunState.from_view(path.name, SessionView.from_store(self.ui_store, config, path))
        self.state.pause_after_epoch = pause_after
        self.log_lines = deque(history_lines(self.ui_store), maxlen=LOG_LINES)
        self.sub_title = path.name
        dash = self.dashboard
        dash.clear_log()
        for line in self.log_lines:
            dash.log_line(line)
        dash.show_state(self.state, {"status", "plots"})
        self.get_screen("tasks", TasksScreen).show_session(self.ui_store, config)
        self.switch_mode("dashboard")
        self.prepare_heldout()
        if self.attach_if_held():  # another engine runs it: follow that one rather than start one
            return
        if autostart:
            self.start_run()

    @on(OpenSession)
    def _open_requested(self, message: OpenSession) -> None:
        self.open_session(message.path, autostart=True)

    @on(CompareSessions)
    def _compare_requested(self, message: CompareSessions) -> None:
        self._open_comparison(list(message.paths))

    @work(thread=True, exclusive=True, exit_on_error=False, group="compare-open")
    def _open_comparison(self, paths: list[Path]) -> None:
        """Read the sessions in a thread, then open the compare screen drawn once with them (a read that fails
        opens the screen without them: it reads again and shows the error)."""
        try:
            runs = read_runs(paths)
        except Exception:  # noqa: BLE001 - see the docstring
            runs = None
        self.call_from_thread(lambda: self.push_screen(CompareScreen(paths, runs)))

    @on(CreateSession)
    def _create_requested(self, message: CreateSession) -> None:
        try:
            session = Session.create(message.config, root=self.sessions_root)
        except OSError as exc:  # e.g. a session of that name was created this very second
            self.notify(clean(f"cannot create the session: {exc}", 500, one_line=True), markup=False, severity="error")
            return
        session.store.close()
        self.notify(clean(f"created {session.path}", 500, one_line=True), markup=False)
        self.open_session(session.path, autostart=True)

    # -- the engine ----------------------------------------------------------------------------

    def start_run(self) -> None:
        """Start (or resume) the open session's run in the engine worker."""
        if self.session_path is None or self.state.active:
            return
        self.runner = EngineRunner(self.post_message, self.backend_factory)
        self.runner.pause_after_epoch = self.state.pause_after_epoch
        self.state.run, self.state.error = "running", ""
        self._started_at = time.monotonic()
        self.dashboard.show_state(self.state, {"status"})
        self._engine = self.run_engine(self.runner, self.session_path)

    @on(EngineMessage)
    def _engine_event(self, message: EngineMessage) -> None:
        if message.runner is not self.runner:
            return  # a previous run's last words
        event = message.event
        changed = self.state.apply(event)
        if event.kind == "RunStarted":
            self._started_at = time.monotonic()
        line = describe(event)
        if line:
            self.log_lines.append(line)
            self.dashboard.log_line(line)
        self.dashboard.show_state(self.state, changed)
        self.latency.recording = self.state.run == "running"

    @on(EngineIdled)
    def _engine_idled(self, message: EngineIdled) -> None:
        if message.runner is self.runner and self.state.active:
            self.state.run = "stopped"
            self.dashboard.show_state(self.state, {"status"})
        self.latency.recording = False
        if self.pending is not None and not self.state.active:
            path, autostart = self.pending
            self.pending = None
            self.open_session(path, autostart)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Turn a failed engine or export worker into a modal or a notification, never a crash."""
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        details = "".join(traceback.format_exception(error)) if isinstance(error, BaseException) else str(error)
        if event.worker.group == "export":
            self.notify(clean(f"export failed: {error}", 500, one_line=True), markup=False, severity="error")
            return
        if event.worker is not self._engine:
            return
        if isinstance(error, SessionBusy):  # another engine runs the open session; the refusal changed nothing
            self.state.run = "stopped"
            self.dashboard.show_state(self.state, {"status"})
            self.notify(clean(str(error), 500, one_line=True), markup=False, severity="error", timeout=15)
            return
        self.state.run = "failed"
        self.state.error = self.state.error or str(error)
        self.dashboard.show_state(self.state, {"status"})
        self.push_screen(ErrorScreen(f"The engine stopped with an error: {self.state.error}", details))

    @on(PlotPicked)
    def _plot_picked(self, message: PlotPicked) -> None:
        """Open what is behind the picked epoch: its batches (calibration) or its held-out answers (held-out), read
        in a thread worker (`genenv_console.drill_read`)."""
        if self.ui_store is None or self.session_path is None or self.session_config is None:
            return
        if message.plot in ("calibration", "heldout"):
            self._read_drill(message.plot, message.epoch)

    def _session_environments(self) -> dict:
        """The open session's environments, built once per session (see `prepare_heldout`)."""
        path, config = self.session_path, self.session_config
        if (self._environments is None or self._environments[0] != path) and config is not None:
            self._environments = (path, session_environments(config))
        return self._environments[1] if self._environments else {}

    @work(thread=True, exclusive=True, exit_on_error=False, group="heldout-splits")
    def prepare_heldout(self) -> None:
        """Build the open session's environments ahead of the first held-out drill (a damaged config or
        environment is reported by that drill, not here)."""
        try:
            self._session_environments()
        except Exception:  # noqa: BLE001 - see the docstring
            pass

    @work(thread=True, exclusive=True, exit_on_error=False, group="drill-read")
    def _read_drill(self, plot: str, epoch: int) -> None:
        post_read(
            self,
            lambda: read_epoch_drill(
                self.ui_store, self.session_config, self.session_path, plot, epoch, self._session_environments
            ),
            partial(EpochDrillRead, plot, epoch),
            None,
            f"cannot read epoch {epoch}",
        )

    @on(EpochDrillRead)
    def _drill_read(self, message: EpochDrillRead) -> None:
        drill = message.drill
        if message.error:
            self.notify(clean(message.error, 500, one_line=True), markup=False, severity="error")
        elif not isinstance(drill, EpochDrill):
            self.notify(f"epoch {message.epoch} has no held-out results", severity="warning")
        elif drill.plot == "calibration":
            self.push_screen(
                EpochBatchesScreen(
                    drill.epoch,
                    drill.rows,
                    drill.ids,
                    self.ui_store,
                    self.session_config.agent.rollouts if self.session_config else None,
                )
            )
        else:
            self.push_screen(HeldoutEpochScreen(drill.epoch, drill.tasks, drill.now or "", drill.before, drill.answers))

    @on(OpenBatch)
    def _open_batch(self, message: OpenBatch) -> None:
        self.push_screen(BatchTasksScreen(message.store, message.batch_id, message.group_size))

    @on(OpenDrill)
    def _open_drill(self, message: OpenDrill) -> None:
        self.push_screen(GroupScreen(message.store, message.task_id, message.group_size))

    @on(OpenLineage)
    def _open_lineage(self, message: OpenLineage) -> None:
        self.push_screen(LineageScreen(message.store, message.task_id))

    @on(OpenTask)
    def _open_task(self, message: OpenTask) -> None:
        self.open_task(message.task_id)

    def open_task(self, task_id: str) -> None:
        """Show one task in the tasks screen: the page that holds it, selected, its detail beside."""
        self.switch_mode("tasks")
        screen = self.get_screen("tasks", TasksScreen)
        self.call_after_refresh(screen.reveal, task_id)

    # -- actions -------------------------------------------------------------------------------

    def action_toggle_pause(self) -> None:
        """Pause at the next batch, or resume."""
        if self.attached is not None:
            self.steer_attached("resume" if self._asked_pause else "pause")
            return
        if self.runner is None or not self.state.active:
            self.notify("no run in progress: r starts one", severity="warning")
            return
        if self.state.run == "running":
            self.runner.control.pause()
            self.state.request_pause()
        elif self.state.run in ("pausing", "paused"):
            self.runner.control.resume()
            self.state.request_resume()
        self.dashboard.show_state(self.state, {"status"})
        self.latency.recording = self.state.run == "running"

    def action_pause_after_epoch(self) -> None:
        """Toggle pausing as soon as the current epoch finishes."""
        self.state.pause_after_epoch = not self.state.pause_after_epoch
        if self.runner is not None:
            self.runner.pause_after_epoch = self.state.pause_after_epoch
        self.dashboard.show_state(self.state, {"status"})
        self.notify("pause after this epoch: " + ("on" if self.state.pause_after_epoch else "off"))

    def action_stop(self) -> None:
        """Stop at the next batch; the epoch is marked partial and the session stays resumable."""
        if self.attached is not None:
            self.steer_attached("stop")
            return
        if self.runner is None or not self.state.active:
            return
        self.runner.control.stop()
        self.state.request_stop()
        self.dashboard.show_state(self.state, {"status"})

    def action_run(self) -> None:
        """Resume the open session from its last finished epoch."""
        if self.attached is not None:
            self.notify(
                clean(
                    f"{lease.describe(self.attached)} runs the open session: space pauses it, s stops it",
                    300,
                    one_line=True,
                ),
                markup=False,
                severity="warning",
            )
        elif self.state.active:
            self.notify("already running", severity="warning")
        elif self.session_path is None:
            self.switch_mode("sessions")
        else:
            self.start_run()

    def action_more_epochs(self) -> None:
        """Raise the session's target by one epoch (only while the engine is idle)."""
        if self.session_path is None or self.state.active:
            return
        session = Session.open(self.session_path)
        session.set_epochs(session.config.epochs + 1)
        session.store.close()
        self.session_config = session.config
        self.state.target_epochs = session.config.epochs
        self.dashboard.show_state(self.state, {"status"})

    def action_show(self, mode: str) -> None:
        """Switch to the dashboard, tasks or sessions screen."""
        if mode != self.current_mode:
            self.switch_mode(mode)

    def action_export(self) -> None:
        """Write the session report (report/report.md and report.html) and the JSONL export of metrics and tasks."""
        if self.session_path is None:
            return
        self.notify("exporting…")
        self.export_session(self.session_path)

    @work(thread=True, exclusive=True, exit_on_error=False, group="export")
    def export_session(self, path: Path) -> None:
        """Export in a thread with its own store connection."""
        from genenv_engine.reports import build_report

        paths, n = export_jsonl(path)
        report = build_report([path])
        self.post_message(ExportWritten([*paths, *report.values()], n))

    @on(ExportWritten)
    def _exported(self, message: ExportWritten) -> None:
        report = [p for p in message.paths if p.suffix == ".html"]
        where = f"; report: {report[0]}" if report else ""
        text = f"exported {message.tasks:,} tasks to {message.paths[0].parent}{where}"
        self.notify(clean(text, 500, one_line=True), markup=False)

    @on(TaskRevised)
    def _revised(self, message: TaskRevised) -> None:
        line = f"edit: {message.old_id} → {message.new_id} (used by the next epoch)"
        self.log_lines.append(line)
        self.dashboard.log_line(line)
        self.notify(clean(line, 300, one_line=True), markup=False)

    @on(TaskStatusChanged)
    def _status_changed(self, message: TaskStatusChanged) -> None:
        line = f"task {message.task_id} is now {message.status}"
        self.log_lines.append(line)
        self.dashboard.log_line(line)
        self.notify(clean(line, 300, one_line=True), markup=False)

    def action_help(self) -> None:
        """Show every key binding."""
        sections = [("everywhere", binding_rows(self.BINDINGS) + [("ctrl+p", "Command palette")])]
        screen = self.screen
        if getattr(screen, "BINDINGS", None) and not isinstance(screen, HelpScreen):
            sections.append((type(screen).__name__.replace("Screen", "").lower(), binding_rows(screen.BINDINGS)))
        if screen is self.dashboard:
            sections.append(
                (
                    "a focused plot (tab or click): calibration, held-out",
                    [
                        ("←/→", "Pick an epoch"),
                        (
                            "enter",
                            "Open what is behind it: the epoch's batches, or "
                            "its held-out answers (f flipped only, l level)",
                        ),
                        ("enter", "On a batch: its seed and variations; on one of those: its GRPO groups"),
                    ],
                )
            )
        self.push_screen(HelpScreen(sections))

    async def action_quit(self) -> None:
        """Stop the engine (leaving the session resumable) and exit."""
        if self.runner is not None and self.state.active:
            self.runner.control.stop()
        self.exit()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The command palette: the main actions next to Textual's own."""
        yield from super().get_system_commands(screen)
        yield SystemCommand("Pause / resume", "Pause the run at the next batch, or resume it", self.action_toggle_pause)
        yield SystemCommand(
            "Pause after this epoch", "Pause as soon as the current epoch finishes", self.action_pause_after_epoch
        )
        yield SystemCommand("Stop the run", "Stop at the next batch; the session stays resumable", self.action_stop)
        yield SystemCommand("Run / resume the session", "Continue from the last finished epoch", self.action_run)
        yield SystemCommand(
            "Add an epoch", "Raise the session's target epochs by one (when idle)", self.action_more_epochs
        )
        yield SystemCommand(
            "Export metrics and tasks",
            "Write export/metrics.jsonl, tasks.jsonl (admitted) and rejected.jsonl",
            self.action_export,
        )
        yield SystemCommand("Dashboard", "Live plots and the event log", lambda: self.action_show("dashboard"))
        yield SystemCommand("Tasks", "Browse, search, edit, pin and ban tasks", lambda: self.action_show("tasks"))
        yield SystemCommand("Sessions", "Resume or create a session", lambda: self.action_show("sessions"))
        yield SystemCommand("Key bindings", "Show the help screen", self.action_help)
