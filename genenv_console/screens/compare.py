"""The compare screen: 2-4 sessions side by side, their calibration and held-out curves overlaid.

Opened from the sessions screen (``m`` marks sessions, ``C`` compares the marked ones) or with
``genenv-console --compare DIR DIR …``. A thread worker reads the sessions read-only
(`genenv_console.compare.read_runs`: no lease, no write) and posts `ComparisonRead`; the screen then sets
both plots' data (one line per session, labelled by its folder name) and fills the two tables: held-out at epoch 0
and last with the change, and each session's funnel over its epochs (`genenv_console.compare_funnel.funnel_screen_rows`:
drafts, kept/drafts, trained and the top rejection reasons, read by `genenv_engine.storage.store.read_only_funnel` in
the same worker). Every cell is drawn as literal text; the tables take at most 40% of the height, the plots the rest.
``x`` writes the Markdown report (`genenv_console.compare.write_report`) in a worker and says where it went.
"""

from __future__ import annotations

from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Label, Static

from genenv_console.compare import TABLE_COLUMNS, CompareRun, read_runs, series, summary_rows, table_cells, write_report
from genenv_console.compare_funnel import SCREEN_COLUMNS, funnel_screen_rows
from genenv_console.messages import ComparisonExported, ComparisonRead
from genenv_console.safe import clean, safe_text
from genenv_console.widgets.key_bar import KeyBar
from genenv_console.widgets.plots import CompareCurvePlot, CompareCurves


def calibration_curves(runs: list[CompareRun]) -> CompareCurves:
    """The calibration plot's data: each session's mean p̂ per epoch, with α and its band when all share them."""
    targets = {(r.alpha, r.k_min) for r in runs}
    alpha, k_min = next(iter(targets)) if len(targets) == 1 else (None, None)
    return CompareCurves("calibration: mean p̂ of generated tasks", tuple(series(runs, "calibration")), alpha, k_min)


def heldout_curves(runs: list[CompareRun]) -> CompareCurves:
    """The held-out plot's data: each session's held-out success per epoch (epoch 0: the warm start)."""
    return CompareCurves("held-out success", tuple(series(runs, "heldout")))


class CompareScreen(Screen):
    """Several sessions' curves overlaid, a summary table, a funnel table and an export of all three."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("x", "export_report", "Export comparison"),
        Binding("u", "reload", "Reload"),
    ]
    DEFAULT_CSS = """
    CompareScreen #compare-title { height: 1; padding: 0 1; text-style: bold; }
    CompareScreen #compare-plots { height: 1fr; }
    CompareScreen CompareCurvePlot { width: 1fr; border: round $primary-darken-2; }
    CompareScreen #compare-table { height: auto; max-height: 20vh; }
    CompareScreen #compare-funnel { height: auto; max-height: 20vh; }
    CompareScreen #compare-status { height: 1; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, paths: list[Path], runs: list[CompareRun] | None = None) -> None:
        """``runs``: the sessions already read (`genenv_console.compare.read_runs`), so the screen opens drawn
        once; without them it reads them itself in a thread worker."""
        super().__init__()
        self.paths = [Path(p) for p in paths]
        self.given = runs
        self.runs: list[CompareRun] = []
        self.error = ""
        self.exported: Path | None = None

    def compose(self) -> ComposeResult:
        yield Label(safe_text(self._title(), 400, one_line=True), id="compare-title")
        with Horizontal(id="compare-plots"):
            yield CompareCurvePlot(id="compare-calibration")
            yield CompareCurvePlot(id="compare-heldout")
        yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        yield DataTable(id="compare-funnel", cursor_type="row", zebra_stripes=True)
        yield Static("reading the sessions…", id="compare-status")
        yield KeyBar()

    def _title(self) -> str:
        return "compare: " + " · ".join(p.name for p in self.paths)

    def on_mount(self) -> None:
        self.query_one("#compare-table", DataTable).add_columns(*TABLE_COLUMNS)
        self.query_one("#compare-funnel", DataTable).add_columns(*SCREEN_COLUMNS)
        if self.given is not None:
            self.show_runs(self.given)
        else:
            self.read_sessions()

    @work(thread=True, exclusive=True, exit_on_error=False, group="compare-read")
    def read_sessions(self) -> None:
        """Read every session read-only in a thread; post `ComparisonRead` (with the error, if one failed)."""
        try:
            self.post_message(ComparisonRead(read_runs(self.paths)))
        except Exception as exc:  # noqa: BLE001 - a bad session is shown on the screen, never a crash
            self.post_message(ComparisonRead([], f"cannot read the sessions: {exc}"))

    @on(ComparisonRead)
    def _read(self, message: ComparisonRead) -> None:
        message.stop()
        self.show_runs(message.runs, message.error)

    def show_runs(self, runs: list[CompareRun], error: str = "") -> None:
        """Draw the sessions read (or the error that stopped the read)."""
        self.error = error
        status = self.query_one("#compare-status", Static)
        if error:
            status.update(safe_text(f"✘ {error}", 500, one_line=True))
            self.notify(clean(error, 500, one_line=True), markup=False, severity="error")
            return
        self.runs = list(runs)
        self.query_one("#compare-calibration", CompareCurvePlot).data = calibration_curves(self.runs)
        self.query_one("#compare-heldout", CompareCurvePlot).data = heldout_curves(self.runs)
        table = self.query_one("#compare-table", DataTable)
        table.clear()
        for row in summary_rows(self.runs):
            table.add_row(*(safe_text(c, 200, one_line=True) for c in table_cells(row)))
        funnel = self.query_one("#compare-funnel", DataTable)
        funnel.clear()
        for cells in funnel_screen_rows([r.name for r in self.runs], [r.funnel for r in self.runs]):
            funnel.add_row(*(safe_text(c, 300, one_line=True) for c in cells))
        status.update(
            safe_text(
                f"{len(self.runs)} sessions, read-only · x writes the comparison report · escape goes back",
                300,
                one_line=True,
            )
        )

    def action_back(self) -> None:
        """Back to the screen the comparison was opened from (the sessions screen when it was opened directly)."""
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        else:
            self.app.switch_mode("sessions")

    def action_reload(self) -> None:
        """Read the sessions again (a running one has moved on)."""
        self.query_one("#compare-status", Static).update("reading the sessions…")
        self.read_sessions()

    def action_export_report(self) -> None:
        """Write the comparison report (Markdown) next to the first session."""
        if not self.runs:
            self.notify("nothing to export yet: the sessions are still being read", severity="warning")
            return
        self.export_report(list(self.runs))

    @work(thread=True, exclusive=True, exit_on_error=False, group="compare-export")
    def export_report(self, runs: list[CompareRun]) -> None:
        """Write the report in a thread; post `ComparisonExported`."""
        try:
            self.post_message(ComparisonExported(write_report(runs)))
        except OSError as exc:
            self.post_message(ComparisonExported(None, f"cannot write the comparison report: {exc}"))

    @on(ComparisonExported)
    def _exported(self, message: ComparisonExported) -> None:
        message.stop()
        if message.path is None:
            self.notify(clean(message.error, 500, one_line=True), markup=False, severity="error")
            return
        self.exported = message.path
        self.notify(clean(f"comparison report: {message.path}", 500, one_line=True), markup=False, timeout=15)
        self.query_one("#compare-status", Static).update(safe_text(f"wrote {message.path}", 500, one_line=True))
