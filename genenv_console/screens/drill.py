"""What is behind a point of a dashboard plot: an epoch's variation batches, or its held-out answers.

`enter` on the focused calibration plot opens `EpochBatchesScreen` for the epoch its cursor marks: each variation
batch with its seed task, how many variations were written and valid, p̂, R_env, whether the band kept it and the
prompt note the simulator was given; ``enter`` on a batch opens its seed and variations
(`genenv_console.screens.batch.BatchTasksScreen`). On the held-out plot it opens `HeldoutEpochScreen`: every
held-out task with the agent's greedy answer and verdict that epoch and the epoch before, ``f`` keeping only the
tasks that flipped and ``l`` stepping through the levels. Rows are built by plain functions (`batch_rows`,
`heldout_rows`) that tests
read directly; all task and answer text goes through the console's sanitiser and is drawn as literal text.
"""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Label

from genenv_console.messages import OpenBatch
from genenv_console.safe import clean
from genenv_console.screens.base import DrillModal, literal

BATCH_COLUMNS = ("batch", "bench", "seed task", "written", "valid", "p̂", "R_env", "band", "prompt note")
HELDOUT_COLUMNS = ("task", "level", "before", "now", "", "answer", "prompt")


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def batch_rows(view: Any, epoch: int) -> list[tuple[str, ...]]:
    """One row per variation batch of ``epoch`` in a `genenv_engine.storage.session_view.SessionView`."""
    rows = []
    for b in view.batches_of(epoch):
        note = b.prompt_note
        note_text = "" if note is None else (note.text or "")
        band = "-" if b.in_band is None else ("in" if b.in_band else "out")
        rows.append(
            (
                clean(b.id, 40, one_line=True),
                b.benchmark,
                clean(b.seed_task_id or "-", 30, one_line=True),
                "-" if b.n_generated is None else str(b.n_generated),
                "-" if b.n_valid is None else str(b.n_valid),
                _f(b.p_hat),
                _f(b.r_env, 3),
                band,
                clean(note_text, 60, one_line=True),
            )
        )
    return rows


def heldout_rows(
    tasks: list[Any],
    now: str,
    before: str | None,
    answers: dict[str, dict[str, Any]],
    flipped_only: bool = False,
    level: int | None = None,
) -> list[tuple[str, ...]]:
    """One row per held-out task: verdicts before and now (from the epochs' stored result strings, in held-out
    order), a flip mark, the agent's answer now and the prompt.

    >>> class T:
    ...     def __init__(self, i, level): self.id, self.level, self.prompt = f"t{i}", level, f"Q{i}"
    >>> rows = heldout_rows([T(0, 1), T(1, 2)], "10", "11", {"t0": {"response": "a"}}, flipped_only=True)
    >>> [(r[0], r[2], r[3], r[4]) for r in rows]
    [('t1', '✓', '✗', 'lost')]
    """
    rows = []
    for i, task in enumerate(tasks):
        if level is not None and task.level != level:
            continue
        a = now[i] == "1" if i < len(now) else None
        b = before[i] == "1" if before is not None and i < len(before) else None
        flip = "" if a is None or b is None or a == b else ("gained" if a else "lost")
        if flipped_only and not flip:
            continue
        answer = answers.get(task.id, {}).get("response", "")
        rows.append(
            (
                task.id,
                str(task.level),
                "-" if b is None else ("✓" if b else "✗"),
                "-" if a is None else ("✓" if a else "✗"),
                flip,
                clean(answer, 60, one_line=True),
                clean(task.prompt, 120, one_line=True),
            )
        )
    return rows


class EpochBatchesScreen(DrillModal):
    """The variation batches behind one epoch of the calibration plot; ``enter`` opens a batch's tasks."""

    BINDINGS = [
        *DrillModal.BINDINGS,
        Binding("enter", "open_batch", "The batch's seed and variations", key_display="⏎"),
    ]

    def __init__(
        self,
        epoch: int,
        rows: list[tuple[str, ...]],
        ids: list[str] | None = None,
        store: Any = None,
        group_size: int | None = None,
    ) -> None:
        super().__init__()
        self.epoch, self.rows = epoch, rows
        self.ids = ids
        """The batches' ids, row by row (the rows carry them cut for display); None: enter opens nothing."""
        self.store, self.group_size = store, group_size

    def compose(self) -> ComposeResult:
        with Vertical():
            kept = sum(r[7] == "in" for r in self.rows)
            yield Label(
                f"epoch {self.epoch}: {len(self.rows)} variation batches, {kept} kept by the band (escape closes)",
                id="drill-title",
            )
            yield DataTable(id="drill-table", cursor_type="row")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(*BATCH_COLUMNS)
        table.add_rows([literal(r) for r in self.rows])
        table.focus()

    @on(DataTable.RowSelected, "#drill-table")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_batch()

    def action_open_batch(self) -> None:
        """Open the seed task and variations of the batch under the cursor (the app opens it)."""
        row = self.query_one(DataTable).cursor_row
        if self.store is not None and self.ids is not None and 0 <= row < len(self.ids):
            self.post_message(OpenBatch(self.store, self.ids[row], self.group_size))


class HeldoutEpochScreen(DrillModal):
    """The held-out tasks behind one epoch of the held-out plot, with what flipped since the epoch before."""

    BINDINGS = [
        *DrillModal.BINDINGS,
        Binding("f", "toggle_flipped", "flipped only"),
        Binding("l", "next_level", "level"),
    ]

    def __init__(
        self, epoch: int, tasks: list[Any], now: str, before: str | None, answers: dict[str, dict[str, Any]]
    ) -> None:
        super().__init__()
        self.epoch, self.tasks, self.now, self.before, self.answers = epoch, tasks, now, before, answers
        self.flipped_only = False
        self.levels = sorted({t.level for t in tasks})
        self.level: int | None = None

    def rows(self) -> list[tuple[str, ...]]:
        return heldout_rows(self.tasks, self.now, self.before, self.answers, self.flipped_only, self.level)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("", id="drill-title")
            yield DataTable(id="drill-table", cursor_type="row")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*HELDOUT_COLUMNS)
        self.refill()
        self.query_one(DataTable).focus()

    def refill(self) -> None:
        rows = self.rows()
        table = self.query_one(DataTable)
        table.clear()
        table.add_rows([literal(r) for r in rows])
        solved = self.now.count("1")
        what = ("flipped since epoch " + str(self.epoch - 1)) if self.flipped_only else "all"
        level = f"L{self.level}" if self.level is not None else "every level"
        self.query_one("#drill-title", Label).update(
            f"held-out, epoch {self.epoch}: {solved}/{len(self.now)} right; showing {what}, {level} ({len(rows)} "
            "rows) · f flipped only · l level · escape closes"
        )

    def action_toggle_flipped(self) -> None:
        self.flipped_only = not self.flipped_only
        self.refill()

    def action_next_level(self) -> None:
        order = [None, *self.levels]
        self.level = order[(order.index(self.level) + 1) % len(order)]
        self.refill()
