"""The tasks screen: a page of tasks from SQLite with filters and word search, a detail pane, edit/pin/ban.

Only one page (`genenv_console.data.PAGE_SIZE` rows) is ever read and put in the table; moving
the cursor shows that task's prompt, gold, checker, verdict, p-hat, R_env, rollouts and lineage.
Edits go through the environment's validator in `EditScreen`; pin and ban set the task's status. ``l`` opens the
selected task's lineage tree (`genenv_console.screens.lineage`); a task picked there, or handed to
`TasksScreen.reveal`, is shown on the page that holds it (a thread worker finds it with `Store.task_position`,
clearing the filters when they hide it).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Input, Select, Static

from genenv_console.data import (
    PAGE_SIZE,
    TABLE_COLUMNS,
    EditResult,
    TaskFilter,
    TaskPage,
    apply_edit,
    fmt,
    prompt_width,
    table_line,
    table_row,
    task_detail,
    task_page,
    toggle_status,
)
from genenv_console.messages import OpenLineage, TaskLocated, TaskRevised, TaskStatusChanged
from genenv_console.safe import clean, safe_text
from genenv_console.screens.edit import EditScreen
from genenv_console.widgets.key_bar import KeyBar
from genenv_engine.config import RunConfig
from genenv_engine.core.records import ORIGINS, STATUSES
from genenv_engine.storage.store import Store


def _number(text: str, cast: type) -> Any:
    """Parse a filter box: None when empty or not a number."""
    try:
        return cast(text.strip()) if text.strip() else None
    except ValueError:
        return None


def detail_text(detail: dict[str, Any] | None) -> Text:
    """The detail pane's content for one task (all session text through the console's sanitiser)."""
    if detail is None:
        return Text("no task selected", style="dim")
    task, stats = detail["task"], detail["stats"]
    out = Text()

    def field(label: str, value: object, style: str = "") -> None:
        out.append(f"{label}: ", style="bold")
        out.append(f"{clean(value, 500)}\n", style=style)

    field("id", task.id, "bold cyan")
    field("benchmark", f"{task.benchmark}   origin {task.origin}   epoch {task.epoch}   level {task.level}")
    status = task.status + (f" (superseded by {stats['superseded_by']})" if stats.get("superseded_by") else "")
    field("status", status, "bold red" if task.status == "banned" else "bold yellow" if task.status == "pinned" else "")
    field("checker", task.checker)
    if task.simulator_version is not None or task.generator:
        field(
            "written by",
            f"{task.generator or 'simulator'}, weights version {fmt(task.simulator_version)} "
            "(the epoch of the simulator update that made them; 0: the warm start)",
        )
    field("valid", "yes" if task.valid else f"no: {task.reason}", "green" if task.valid else "bold red")
    field("p̂", f"{fmt(stats.get('p_hat'))}   R_env {fmt(stats.get('r_env'), 3)}   rollouts {detail['n_rollouts']}")
    out.append("\nprompt\n", style="bold underline")
    out.append(f"{clean(task.prompt)}\n")
    out.append("\ngold answer\n", style="bold underline")
    out.append(f"{clean(task.answer)}\n")
    out.append(f"\nrollouts ({detail['n_rollouts']}, last {len(detail['rollouts'])})\n", style="bold underline")
    for r in detail["rollouts"]:
        mark = ("✔", "green") if r.get("success") else ("✘", "red")
        out.append(f"{mark[0]} ", style=mark[1])
        version = f" v{r['policy_version']}" if r.get("policy_version") is not None else ""
        out.append(
            f"e{r.get('epoch')}{version} reward {fmt(r.get('reward'))}  "
            f"{clean(r.get('response') or '', 80, one_line=True)}\n"
        )
    if not detail["rollouts"]:
        out.append("none yet\n", style="dim")
    groups = detail.get("groups") or []
    if groups:
        out.append(
            f"\nGRPO groups ({len(groups)}: trained on in the epoch named; advantage = group-normalised reward)\n",
            style="bold underline",
        )
        for g in groups[-6:]:
            flat = " (all rewards equal: no gradient)" if all(abs(a) < 1e-9 for a in g["advantages"]) else ""
            out.append(f"epoch {g['epoch']}: mean reward {fmt(g['mean_reward'])}{flat}\n", style="bold")
            for r, adv in zip(g["rollouts"], g["advantages"], strict=False):
                mark = ("✔", "green") if r.get("success") else ("✘", "red")
                out.append(f"  {mark[0]} ", style=mark[1])
                version = f"v{r['policy_version']}" if r.get("policy_version") is not None else "v-"
                error = r.get("error_type") or "-"
                out.append(
                    f"adv {adv:+.2f}  reward {fmt(r.get('reward'))}  {version}  {clean(error, 20)}  "
                    f"{clean(r.get('response') or '', 60, one_line=True)}\n"
                )
    out.append("\nlineage\n", style="bold underline")
    for depth, t in enumerate(detail["lineage"]):
        out.append(("  " * depth) + ("└ " if depth else ""))
        out.append(clean(t.id, 200, one_line=True), style="cyan")
        out.append(f"  [{clean(t.origin, 40)}, e{t.epoch}] {clean(t.prompt, 60, one_line=True)}\n", style="dim")
    return out


class TasksScreen(Screen):
    """Browse, search, inspect and hand-edit the session's tasks."""

    CSS_PATH = "../styles/tasks.tcss"
    BINDINGS = [
        Binding("enter", "edit", "Edit", key_display="⏎"),
        Binding("p", "pin", "Pin"),
        Binding("b", "ban", "Ban"),
        Binding("l", "lineage", "Lineage tree", show=False),  # named on the page line: the key bar is full
        Binding("slash", "search", "Search", key_display="/"),
        Binding("right_square_bracket", "page(1)", "Next page", key_display="]", show=False),
        Binding("left_square_bracket", "page(-1)", "Prev page", key_display="[", show=False),
        Binding("u", "reload", "Refresh", show=False),
        Binding("escape", "focus_table", "Table", show=False),
    ]

    def __init__(self, store: Store | None = None, config: RunConfig | None = None) -> None:
        super().__init__()
        self.store = store
        """The app's UI-thread store of the open session (None before one is open)."""
        self.config = config
        """The open session's config: its benchmarks fill the filter, its seed and data dirs check edits."""
        self.filters = TaskFilter()
        self.page = 0
        self.current: TaskPage | None = None
        self._drawn_width: int | None = None
        """The prompt column's width the rows were last drawn with."""
        self.selected_id: str | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="filters"):
            yield Input(placeholder="search prompt/answer…  (/)", id="search")
            yield Select([], prompt="bench", id="benchmark")
            yield Select([(o, o) for o in ORIGINS], prompt="origin", id="origin")
            yield Select([(s, s) for s in STATUSES], prompt="status", id="status-filter")
            yield Select([("valid", True), ("invalid", False)], prompt="valid?", id="valid")
            yield Input(placeholder="epoch", id="epoch", classes="narrow", type="integer")
            yield Input(placeholder="p̂ ≥", id="p_min", classes="narrow", type="number")
            yield Input(placeholder="p̂ ≤", id="p_max", classes="narrow", type="number")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield DataTable(id="table", cursor_type="row", zebra_stripes=True)
                yield Static("", id="page-info")
            with VerticalScroll(id="detail-pane"):
                yield Static(detail_text(None), id="detail")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_column(table_line(TABLE_COLUMNS), key="task")
        self.set_benchmarks()
        self.load_page()

    def on_screen_resume(self) -> None:
        # show the screen at once, then bring the page up to date (the engine may have added tasks)
        self.query_one(DataTable).focus()
        self.call_after_refresh(self.load_page)

    def show_session(self, store: Store, config: RunConfig) -> None:
        """Browse another session: the app hands over its store and config (and the page reloads if shown)."""
        self.store, self.config = store, config
        self.page, self.selected_id = 0, None
        if self.is_mounted:
            self.set_benchmarks()
            self.load_page()

    def set_benchmarks(self) -> None:
        """Offer the session's benchmarks in the benchmark filter."""
        names = list(self.config.benchmarks) if self.config is not None else []
        self.query_one("#benchmark", Select).set_options([(n, n) for n in names])

    # -- loading -------------------------------------------------------------------------------

    def load_page(self, keep: str | None = None) -> None:
        """Query the current page with the current filters and show it (keeping ``keep`` selected if there)."""
        table = self.query_one(DataTable)
        store = self.store
        table.clear()
        if store is None:
            self.current = None
            self.query_one("#page-info", Static).update("no session open")
            self.show_detail(None)
            return
        self.current = task_page(store, self.filters, self.page)
        self.page = self.current.page
        width = self.prompt_chars()
        self._drawn_width = width
        for row in self.current.rows:
            table.add_row(Text(table_line(table_row(row), width)), key=row["id"])
        info = f"page {self.current.page + 1}/{self.current.pages} · {self.current.total:,} tasks"
        active = {k: v for k, v in asdict(self.filters).items() if v not in (None, "")}
        if active:
            info += " · " + " ".join(f"{k}={v}" for k, v in active.items())
        keys = "   [ ] page · ⏎ edit · p pin · b ban · l lineage"
        self.query_one("#page-info", Static).update(safe_text(info + keys, 500))
        ids = [r["id"] for r in self.current.rows]
        target = keep if keep in ids else (self.selected_id if self.selected_id in ids else None)
        if target is not None:
            table.move_cursor(row=ids.index(target))
        self.show_detail(target or (ids[0] if ids else None))

    def prompt_chars(self) -> int:
        """The prompt column's width: what the table's width leaves after the other columns."""
        table = self.query_one(DataTable)
        return prompt_width(table.size.width or 110)

    def on_resize(self) -> None:
        """Redraw the rows when the table's width changed the prompt column's."""
        if self.current is not None and self._drawn_width != self.prompt_chars():
            self.load_page(keep=self.selected_id)

    def show_detail(self, task_id: str | None) -> None:
        """Fill the detail pane for one task."""
        self.selected_id = task_id
        k = self.config.agent.rollouts if getattr(self, "config", None) is not None else None
        detail = task_detail(self.store, task_id, group_size=k) if (self.store is not None and task_id) else None
        self.query_one("#detail", Static).update(detail_text(detail))

    @on(DataTable.RowHighlighted, "#table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value != self.selected_id:
            self.show_detail(event.row_key.value)

    @on(DataTable.RowSelected, "#table")
    def _selected(self, event: DataTable.RowSelected) -> None:
        self.action_edit()

    # -- filters -------------------------------------------------------------------------------

    def read_filters(self) -> TaskFilter:
        """The filter widgets' values as `TaskFilter`."""

        def pick(selector: str) -> Any:
            value = self.query_one(selector, Select).value
            return None if value is Select.NULL else value

        return TaskFilter(
            benchmark=pick("#benchmark"),
            origin=pick("#origin"),
            status=pick("#status-filter"),
            valid=pick("#valid"),
            epoch=_number(self.query_one("#epoch", Input).value, int),
            p_min=_number(self.query_one("#p_min", Input).value, float),
            p_max=_number(self.query_one("#p_max", Input).value, float),
            text=self.query_one("#search", Input).value.strip() or None,
        )

    @on(Select.Changed)
    @on(Input.Changed, "#epoch, #p_min, #p_max")
    @on(Input.Submitted, "#search")
    def _filters_changed(self) -> None:
        filters = self.read_filters()
        if filters != self.filters:
            self.filters, self.page = filters, 0
            self.load_page()

    @on(Input.Changed, "#search")
    def _search_typed(self, event: Input.Changed) -> None:
        if not event.value.strip() and self.filters.text:
            self._filters_changed()

    # -- actions -------------------------------------------------------------------------------

    def action_page(self, step: int) -> None:
        """Show the next (1) or previous (-1) page."""
        self.page += step
        self.load_page()

    def action_reload(self) -> None:
        """Re-read the current page."""
        self.load_page()

    def action_search(self) -> None:
        """Focus the search box."""
        self.query_one("#search", Input).focus()

    def action_focus_table(self) -> None:
        """Back to the table."""
        self.query_one(DataTable).focus()

    def action_edit(self) -> None:
        """Open the selected task in the hand-edit modal."""
        store, task_id = self.store, self.selected_id
        if store is None or task_id is None:
            return
        task = store.get_task(task_id)
        if task is None:
            return
        config = self.config
        seed, data_dirs = (config.seed, dict(config.data_dirs)) if config is not None else (0, {})

        def save(prompt: str, answer: str) -> EditResult:
            return apply_edit(store, task_id, prompt, answer, seed=seed, data_dirs=data_dirs)

        def done(result: EditResult | None) -> None:
            if result is not None and result.ok and result.task is not None:
                self.post_message(TaskRevised(task_id, result.task.id))
                self.load_page(keep=result.task.id)
                self.query_one(DataTable).focus()

        self.app.push_screen(EditScreen(task, save), done)

    def action_lineage(self) -> None:
        """Open the selected task's lineage tree: its seed and everything the simulator wrote from it (the app opens
        it; a node picked there comes back through `reveal`)."""
        if self.store is not None and self.selected_id is not None:
            self.post_message(OpenLineage(self.store, self.selected_id))

    def reveal(self, task_id: str) -> None:
        """Show ``task_id`` selected on the page that holds it (the filters cleared if they hide it)."""
        if self.store is not None:
            self.locate(self.store, task_id, self.filters)

    @work(thread=True, exclusive=True, exit_on_error=False, group="tasks-locate")
    def locate(self, store: Store, task_id: str, filters: TaskFilter) -> None:
        """Find the task's place under ``filters`` (else under no filter) in a thread; post `TaskLocated`."""
        position = store.task_position(task_id, filters)
        if position is None and filters != TaskFilter():
            filters, position = TaskFilter(), store.task_position(task_id)
        self.post_message(TaskLocated(task_id, position, filters))

    @on(TaskLocated)
    def _located(self, message: TaskLocated) -> None:
        message.stop()
        if message.position is None:
            self.notify(clean(f"no task {message.task_id}", 300, one_line=True), markup=False, severity="warning")
            return
        if message.filters != self.filters:
            self.clear_filters()
        self.page = message.position // PAGE_SIZE
        self.load_page(keep=message.task_id)
        self.query_one(DataTable).focus()

    def clear_filters(self) -> None:
        """Empty every filter widget and the filters they stand for."""
        self.filters = TaskFilter()
        for select in self.query(Select):
            select.clear()
        for box in self.query(Input):
            box.value = ""

    def _toggle(self, status: str) -> None:
        if self.store is None or self.selected_id is None:
            return
        new = toggle_status(self.store, self.selected_id, status)
        self.post_message(TaskStatusChanged(self.selected_id, new))
        self.load_page(keep=self.selected_id)

    def action_pin(self) -> None:
        """Pin the selected task (always in the agent's pool), or unpin it."""
        self._toggle("pinned")

    def action_ban(self) -> None:
        """Ban the selected task (never used again), or lift the ban."""
        self._toggle("banned")
