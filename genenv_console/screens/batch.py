"""Behind one variation batch: its seed task and variations, and a task's GRPO groups side by side.

``enter`` on a row of the epoch batches screen (`genenv_console.screens.drill.EpochBatchesScreen`) opens
`BatchTasksScreen`: the batch's seed task, then every variation the simulator wrote in it, each with its level, the
simulator version that wrote it, the validator's verdict, p̂, R_env and how many of its training rollouts succeeded.
``enter`` on a task opens `GroupScreen`: the task's GRPO groups (each epoch's training rollouts in groups of k), one
row per rollout with its reward, success, error type, group-normalised advantage and the policy version that
sampled it; ``l`` opens the task's lineage tree (`genenv_console.screens.lineage`). Each screen reads through a
store verb in a thread worker; rows are built by plain functions (`batch_task_rows`, `group_rows`) that tests read
directly, and every cell is drawn as literal text.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Label, Static

from genenv_console.data import fmt, task_detail
from genenv_console.messages import BatchTasksRead, OpenDrill, OpenLineage, TaskGroupsRead
from genenv_console.safe import clean, safe_text
from genenv_console.screens.base import DrillModal, literal, verdict

BATCH_TASK_COLUMNS = ("", "task", "level", "sim v", "verdict", "p̂", "R_env", "trained ✓", "prompt")
GROUP_COLUMNS = ("group", "epoch", "#", "", "reward", "advantage", "policy v", "error", "response")


def batch_task_rows(rows: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """One row per task of `genenv_engine.storage.store.Store.batch_tasks` (`BATCH_TASK_COLUMNS`).

    >>> batch_task_rows([{"role": "variation", "id": "g/1", "level": 2, "simulator_version": 0, "valid": True,
    ...                   "p_hat": 0.5, "r_env": 1.0, "train_rollouts": 4, "train_successes": 2, "prompt": "Q"}])
    [('var', 'g/1', '2', '0', 'valid', '0.50', '1.000', '2/4', 'Q')]
    """
    out = []
    for r in rows:
        trained = f"{r.get('train_successes') or 0}/{r['train_rollouts']}" if r.get("train_rollouts") else "-"
        out.append(
            (
                "seed" if r.get("role") == "seed" else "var",
                clean(r["id"], 40, one_line=True),
                fmt(r.get("level")),
                fmt(r.get("simulator_version")),
                clean(verdict(r), 40, one_line=True),
                fmt(r.get("p_hat")),
                fmt(r.get("r_env"), 3),
                trained,
                clean(r.get("prompt"), 120, one_line=True),
            )
        )
    return out


def group_rows(groups: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """One row per rollout of `genenv_console.data.grpo_groups` groups (`GROUP_COLUMNS`), group by group.

    >>> group_rows([{"epoch": 1, "mean_reward": 0.5, "advantages": [0.7071, -0.7071], "rollouts": [
    ...     {"reward": 1.0, "success": True, "policy_version": 0, "response": "a"},
    ...     {"reward": 0.0, "success": False, "error_type": "wrong_name", "response": "b"}]}])[1]
    ('', '', '2', '✘', '0.00', '-0.71', '-', 'wrong_name', 'b')
    """
    out = []
    for g_index, g in enumerate(groups, 1):
        for i, (r, adv) in enumerate(zip(g["rollouts"], g["advantages"], strict=False)):
            head = (f"{g_index} (mean {g['mean_reward']:.2f})", f"e{g['epoch']}") if i == 0 else ("", "")
            out.append(
                (
                    *head,
                    str(i + 1),
                    "✔" if r.get("success") else "✘",
                    fmt(r.get("reward")),
                    f"{adv:+.2f}",
                    fmt(r.get("policy_version")),
                    clean(r.get("error_type") or "-", 30, one_line=True),
                    clean(r.get("response") or "", 100, one_line=True),
                )
            )
    return out


class BatchTasksScreen(DrillModal):
    """A variation batch's seed task and variations."""

    BINDINGS = [
        *DrillModal.BINDINGS,
        Binding("enter", "open_groups", "The task's GRPO groups", key_display="⏎"),
        Binding("l", "lineage", "The task's lineage tree"),
    ]

    def __init__(self, store: Any, batch_id: str, group_size: int | None = None) -> None:
        super().__init__()
        self.store, self.batch_id, self.group_size = store, batch_id, group_size
        self.tasks: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(safe_text(f"reading batch {self.batch_id}…", 200, one_line=True), id="drill-title")
            yield DataTable(id="drill-table", cursor_type="row")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*BATCH_TASK_COLUMNS)
        self.query_one(DataTable).focus()
        self.read_tasks()

    @work(thread=True, exclusive=True, exit_on_error=False, group="batch-read")
    def read_tasks(self) -> None:
        """Read the batch's tasks in a thread; post `BatchTasksRead` (with the error, if the read failed)."""
        self.post_read(lambda: self.store.batch_tasks(self.batch_id), BatchTasksRead, [], "cannot read the batch")

    @on(BatchTasksRead)
    def _read(self, message: BatchTasksRead) -> None:
        message.stop()
        title = self.query_one("#drill-title", Label)
        if message.error:
            title.update(safe_text(f"✘ {message.error}", 500, one_line=True))
            return
        self.tasks = message.rows
        table = self.query_one(DataTable)
        table.clear()
        for task, row in zip(self.tasks, self.rows(), strict=False):
            table.add_row(*literal(row), key=task["id"])
        variations = [t for t in self.tasks if t["role"] == "variation"]
        valid = sum(bool(t["valid"]) for t in variations)
        title.update(
            safe_text(
                f"batch {self.batch_id}: its seed and {len(variations)} variations ({valid} valid) · "
                "⏎ GRPO groups · l lineage · escape closes",
                300,
                one_line=True,
            )
        )

    def rows(self) -> list[tuple[str, ...]]:
        return batch_task_rows(self.tasks)

    def selected_id(self) -> str | None:
        """The id of the task under the cursor."""
        table = self.query_one(DataTable)
        return self.tasks[table.cursor_row]["id"] if 0 <= table.cursor_row < len(self.tasks) else None

    @on(DataTable.RowSelected, "#drill-table")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_groups()

    def action_open_groups(self) -> None:
        """Open the selected task's GRPO groups (the app opens them)."""
        task_id = self.selected_id()
        if task_id is not None:
            self.post_message(OpenDrill(self.store, task_id, self.group_size))

    def action_lineage(self) -> None:
        """Open the selected task's lineage tree (the app opens it); a node picked there opens in the tasks screen."""
        task_id = self.selected_id()
        if task_id is not None:
            self.post_message(OpenLineage(self.store, task_id))


class GroupScreen(DrillModal):
    """One task's GRPO groups: its training rollouts in groups of k, side by side, with their advantages."""

    DEFAULT_CSS = """
    GroupScreen #group-prompt { height: auto; max-height: 4; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, store: Any, task_id: str, group_size: int | None = None) -> None:
        super().__init__()
        self.store, self.task_id, self.group_size = store, task_id, group_size
        self.detail: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(safe_text(f"reading {self.task_id}…", 200, one_line=True), id="drill-title")
            yield Static("", id="group-prompt")
            yield DataTable(id="drill-table", cursor_type="row")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*GROUP_COLUMNS)
        self.query_one(DataTable).focus()
        self.read_groups()

    @work(thread=True, exclusive=True, exit_on_error=False, group="groups-read")
    def read_groups(self) -> None:
        """Read the task, its rollouts and GRPO groups in a thread; post `TaskGroupsRead`."""
        self.post_read(
            lambda: task_detail(self.store, self.task_id, group_size=self.group_size),
            TaskGroupsRead,
            None,
            "cannot read the task",
        )

    def groups(self) -> list[dict[str, Any]]:
        return (self.detail or {}).get("groups") or []

    def rows(self) -> list[tuple[str, ...]]:
        return group_rows(self.groups())

    @on(TaskGroupsRead)
    def _read(self, message: TaskGroupsRead) -> None:
        message.stop()
        title = self.query_one("#drill-title", Label)
        if message.error or message.detail is None:
            title.update(safe_text(f"✘ {message.error or f'no task {self.task_id}'}", 500, one_line=True))
            return
        self.detail = message.detail
        task, stats = self.detail["task"], self.detail["stats"]
        table = self.query_one(DataTable)
        table.clear()
        table.add_rows([literal(r) for r in self.rows()])
        groups = self.groups()
        if groups:
            what = (
                f"{len(groups)} GRPO group{'s' * (len(groups) != 1)} of {self.group_size} (trained on in the "
                "epoch named; advantage = group-normalised reward)"
            )
        elif self.group_size is None:
            what = "no GRPO groups: the session's rollouts per task are unknown"
        else:
            what = f"no GRPO groups: none of its {self.detail['n_rollouts']} rollouts trained the agent"
        title.update(
            safe_text(
                f"{task.id} · p̂ {fmt(stats.get('p_hat'))} · {verdict({**stats, **task.to_row()})}: "
                f"{what} · escape closes",
                400,
                one_line=True,
            )
        )
        self.query_one("#group-prompt", Static).update(
            Text.assemble(("prompt: ", "bold"), clean(task.prompt, 300, one_line=True))
        )
