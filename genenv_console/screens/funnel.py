"""The funnel of one epoch: what the simulator wrote, what validation and the duplicate cap admitted, what the agent
trained on.

``F`` on the dashboard opens `FunnelScreen` at the epoch the focused plot's cursor marks (the calibration plot's,
then the held-out plot's, else the last epoch); ``←``/``→`` step through the epochs. A thread worker reads
`genenv_engine.storage.store.Store.funnel` and posts `FunnelRead`. One row per benchmark: drafts, passed the validator,
kept by the duplicate cap, trained (distinct tasks), the rejection reasons, where the trained tasks came from and
the level mix at each stage. Rows are built by `funnel_rows` (tests read it directly); every cell is drawn as
literal text.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Label

from genenv_console.messages import FunnelRead
from genenv_console.safe import clean, safe_text
from genenv_console.screens.base import DrillModal
from genenv_engine.reports.funnel import counts_text, levels_text

FUNNEL_COLUMNS = (
    "bench",
    "drafts",
    "passed",
    "kept",
    "trained",
    "rejected by reason",
    "trained by source",
    "levels: drafts",
    "levels: kept",
    "levels: trained",
)


def funnel_rows(entries: list[dict[str, Any]], epoch: int) -> list[tuple[str, ...]]:
    """One row per benchmark of ``epoch`` (`FUNNEL_COLUMNS`), from `Store.funnel` entries.

    >>> e = {"epoch": 1, "benchmark": "b", "drafts": 3, "passed": 2, "valid": 2, "trained": 4,
    ...      "rejected": {"parse_error": 1}, "trained_by_source": {"base": 2, "fresh": 2},
    ...      "levels": {"drafts": {"L1": 3}, "passed": {"L1": 2}, "valid": {"L1": 2}, "trained": {"L1": 4}}}
    >>> funnel_rows([e], 1)
    [('b', '3', '2', '2', '4', 'parse_error 1', 'base 2, fresh 2', 'L1 3', 'L1 2', 'L1 4')]
    """
    rows = []
    for e in sorted((e for e in entries if e["epoch"] == epoch), key=lambda e: e["benchmark"]):
        lv = e["levels"]
        rows.append(
            (
                clean(e["benchmark"], 30, one_line=True),
                str(e["drafts"]),
                str(e["passed"]),
                str(e["valid"]),
                str(e["trained"]),
                clean(counts_text(e["rejected"]), 200, one_line=True),
                counts_text(e["trained_by_source"]),
                levels_text(lv["drafts"]),
                levels_text(lv["valid"]),
                levels_text(lv["trained"]),
            )
        )
    return rows


class FunnelScreen(DrillModal):
    """Drafts → admitted → trained of one epoch, per benchmark."""

    BINDINGS = [
        *DrillModal.BINDINGS,
        Binding("left", "step(-1)", "Previous epoch", priority=True),
        Binding("right", "step(1)", "Next epoch", priority=True),
    ]

    def __init__(self, store: Any, epoch: int | None = None) -> None:
        super().__init__()
        self.store, self.epoch = store, epoch
        self.entries: list[dict[str, Any]] = []
        self.epochs: list[int] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("reading the funnel…", id="funnel-title")
            yield DataTable(id="funnel-table", cursor_type="row")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(*FUNNEL_COLUMNS)
        table.focus()
        self.read_funnel()

    @work(thread=True, exclusive=True, exit_on_error=False, group="funnel-read")
    def read_funnel(self) -> None:
        """Read every epoch's funnel in a thread; post `FunnelRead` (with the error, if the read failed)."""
        self.post_read(self.store.funnel, FunnelRead, [], "cannot read the funnel")

    @on(FunnelRead)
    def _read(self, message: FunnelRead) -> None:
        message.stop()
        if message.error:
            self.query_one("#funnel-title", Label).update(safe_text(f"✘ {message.error}", 500, one_line=True))
            return
        self.entries = message.entries
        self.epochs = sorted({e["epoch"] for e in self.entries})
        if self.epoch not in self.epochs:
            self.epoch = self.epochs[-1] if self.epochs else None
        self.refill()

    def rows(self) -> list[tuple[str, ...]]:
        return [] if self.epoch is None else funnel_rows(self.entries, self.epoch)

    def refill(self) -> None:
        rows = self.rows()
        table = self.query_one(DataTable)
        table.clear()
        table.add_rows([tuple(Text(c) for c in r) for r in rows])
        if self.epoch is None:
            title = "funnel: no epoch wrote or trained on a task yet · escape closes"
        else:
            title = (
                f"funnel, epoch {self.epoch} ({self.epochs.index(self.epoch) + 1}/{len(self.epochs)}): drafts → "
                "passed validator → kept by duplicate cap → trained · ←/→ epoch · escape closes"
            )
        self.query_one("#funnel-title", Label).update(title)

    def action_step(self, step: int) -> None:
        """Show the previous or next epoch that has a funnel."""
        if self.epoch in self.epochs:
            i = max(0, min(len(self.epochs) - 1, self.epochs.index(self.epoch) + step))
            self.epoch = self.epochs[i]
            self.refill()
