"""The sessions screen: the session folders under the sessions root, and a form to create a new one.

Each row reads the session's own config and store (epochs done / target, status). Enter resumes
the highlighted session; the form builds a `RunConfig` from a preset plus the typed values (any
bad value is reported with the field's name) and asks the app to create and run it. ``m`` marks
sessions (the first column shows each mark's order) and ``C`` opens the marked 2-4 in the compare screen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, DataTable, Input, Label, Select, Static

from genenv_console.compare import MAX_RUNS, MIN_RUNS
from genenv_console.data import SessionInfo, list_sessions
from genenv_console.messages import CompareSessions, CreateSession, OpenSession
from genenv_console.safe import safe_text
from genenv_console.widgets.key_bar import KeyBar
from genenv_engine.config import SIMULATOR_MODES, ConfigError, RunConfig, load_config, preset_names

FORM_FIELDS = (
    ("benchmarks", "benchmarks (comma-separated)", "benchmarks"),
    ("alpha", "α (target success)", "curriculum.alpha"),
    ("beta", "β (R_env sharpness)", "curriculum.beta"),
    ("k_min", "k_min (band half-width)", "curriculum.k_min"),
    ("lambda", "λ (RWR temperature)", "simulator.rwr_lambda"),
    ("epochs", "epochs", "epochs"),
)
"""(widget id, label, config key) of the create form's text fields."""


def form_defaults(config: RunConfig) -> dict[str, str]:
    """The create form's text values for a config."""
    return {
        "benchmarks": ",".join(config.benchmarks),
        "alpha": str(config.curriculum.alpha),
        "beta": str(config.curriculum.beta),
        "k_min": str(config.curriculum.k_min),
        "lambda": str(config.simulator.rwr_lambda),
        "epochs": str(config.epochs),
    }


def form_config(preset: str, values: dict[str, str], mode: str) -> RunConfig:
    """Build the RunConfig the form describes; raises ConfigError naming the bad field."""
    overrides: dict[str, Any] = {"simulator.mode": mode}
    for wid, _, key in FORM_FIELDS:
        text = values[wid].strip()
        if key == "benchmarks":
            overrides[key] = [b.strip() for b in text.split(",") if b.strip()]
            continue
        try:
            overrides[key] = int(text) if key == "epochs" else float(text)
        except ValueError:
            raise ConfigError(key, f"must be a number, got {text!r}") from None
    return load_config(preset, overrides=overrides)


class SessionsScreen(Screen):
    """List, resume and create sessions."""

    CSS_PATH = "../styles/sessions.tcss"
    BINDINGS = [
        Binding("enter", "open", "Resume"),
        Binding("c", "focus_form", "Create…"),
        Binding("u", "reload", "Refresh"),
        Binding("m", "mark", "Mark to compare"),
        Binding("C", "compare", "Compare marked"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.sessions: list[SessionInfo] = []
        self.marked: list[Path] = []
        """The sessions marked for comparison, in the order they were marked."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="sessions-body"):
            with Vertical(id="sessions-left"):
                yield Label("Sessions", classes="title")
                yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
                yield Static("", id="sessions-root")
            with VerticalScroll(id="create-form"):
                yield Label("New session", classes="title")
                yield Label("preset", classes="field-label")
                yield Select(
                    [(p, p) for p in preset_names()],
                    value="tiny" if "tiny" in preset_names() else preset_names()[0],
                    allow_blank=False,
                    id="preset",
                )
                for wid, label, _ in FORM_FIELDS:
                    yield Label(label, classes="field-label")
                    yield Input(id=wid)
                yield Label("simulator mode", classes="field-label")
                yield Select([(m, m) for m in SIMULATOR_MODES], value="trained", allow_blank=False, id="mode")
                yield Static("", id="form-error")
                yield Button("Create & run", id="create", variant="primary")
        yield KeyBar()

    def on_mount(self) -> None:
        self._mark_column, *_ = self.query_one("#sessions-table", DataTable).add_columns(
            "cmp", "session", "preset", "mode", "benchmarks", "epochs", "status"
        )
        self._fill_form(str(self.query_one("#preset", Select).value))
        self.load()

    def on_screen_resume(self) -> None:
        self.load()
        self.query_one("#sessions-table", DataTable).focus()

    @property
    def root(self) -> Path:
        """The folder holding the sessions."""
        return Path(getattr(self.app, "sessions_root", "sessions"))

    def load(self) -> None:
        """Re-read the sessions under the root."""
        table = self.query_one("#sessions-table", DataTable)
        table.clear()
        self.sessions = list_sessions(self.root)
        listed = {s.path for s in self.sessions}
        self.marked = [p for p in self.marked if p in listed]
        current = getattr(self.app, "session_path", None)
        for s in self.sessions:
            name = s.path.name + (" ◀" if current is not None and Path(current) == s.path else "")
            cells = (name, s.preset, s.mode, s.benchmarks, f"{s.epochs_done}/{s.target}", s.status)
            table.add_row(
                safe_text(self._mark_cell(s.path)), *(safe_text(c, 200, one_line=True) for c in cells), key=str(s.path)
            )
        self._show_root()

    def _show_root(self) -> None:
        marks = f" · {len(self.marked)} marked, C compares" if self.marked else " · m marks to compare"
        self.query_one("#sessions-root", Static).update(
            safe_text(f"{len(self.sessions)} sessions in {self.root}/ · ⏎ resume · c create{marks}", 500)
        )

    def _mark_cell(self, path: Path) -> str:
        """The first column of a session's row: its place among the marked sessions, or nothing."""
        return f"[{self.marked.index(path) + 1}]" if path in self.marked else ""

    def action_mark(self) -> None:
        """Mark the highlighted session for comparison, or unmark it (at most `MAX_RUNS` marked)."""
        table = self.query_one("#sessions-table", DataTable)
        if not self.sessions or table.cursor_row is None or table.cursor_row >= len(self.sessions):
            return
        path = self.sessions[table.cursor_row].path
        if path in self.marked:
            self.marked.remove(path)
        elif len(self.marked) >= MAX_RUNS:
            self.notify(f"at most {MAX_RUNS} sessions compare at once: unmark one with m first", severity="warning")
            return
        else:
            self.marked.append(path)
        for s in self.sessions:
            table.update_cell(str(s.path), self._mark_column, safe_text(self._mark_cell(s.path)))
        self._show_root()

    def action_compare(self) -> None:
        """Compare the marked sessions (2 to `MAX_RUNS`), in the order they were marked."""
        if not MIN_RUNS <= len(self.marked) <= MAX_RUNS:
            self.notify(
                f"mark {MIN_RUNS} to {MAX_RUNS} sessions with m, then press C ({len(self.marked)} marked)",
                severity="warning",
            )
            return
        self.post_message(CompareSessions(list(self.marked)))

    def _fill_form(self, preset: str) -> None:
        try:
            defaults = form_defaults(load_config(preset))
        except ConfigError as exc:
            self.query_one("#form-error", Static).update(safe_text(exc, 500))
            return
        for wid, value in defaults.items():
            self.query_one(f"#{wid}", Input).value = value

    @on(Select.Changed, "#preset")
    def _preset_changed(self, event: Select.Changed) -> None:
        self._fill_form(str(event.value))

    def action_reload(self) -> None:
        """Re-read the session list."""
        self.load()

    def action_focus_form(self) -> None:
        """Jump to the create form."""
        self.query_one("#preset", Select).focus()

    @on(DataTable.RowSelected, "#sessions-table")
    def action_open(self) -> None:
        """Resume the highlighted session."""
        table = self.query_one("#sessions-table", DataTable)
        if not self.sessions or table.cursor_row is None or table.cursor_row >= len(self.sessions):
            return
        self.post_message(OpenSession(self.sessions[table.cursor_row].path))

    @on(Button.Pressed, "#create")
    def create(self) -> None:
        """Validate the form and ask the app to create and run the session."""
        values = {wid: self.query_one(f"#{wid}", Input).value for wid, _, _ in FORM_FIELDS}
        try:
            config = form_config(
                str(self.query_one("#preset", Select).value), values, str(self.query_one("#mode", Select).value)
            )
        except ConfigError as exc:
            self.query_one("#form-error", Static).update(safe_text(f"✘ {exc}", 500))
            return
        self.query_one("#form-error", Static).update("")
        self.post_message(CreateSession(config))
