"""Console-side data access: session listing, task pages and details, hand edits and JSONL export.

Plain functions over the engine's `Store` (the UI thread holds its own read connection; the
export runs in its own worker thread with its own). Nothing here imports Textual, so it is tested
directly and shared by the screens and the benchmarks.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genenv_console.safe import clean
from genenv_engine.config import ConfigError, config_from_file
from genenv_engine.core.records import Task
from genenv_engine.environments import get_environment
from genenv_engine.storage.store import Store, TaskFilter

PAGE_SIZE = 50
"""Task rows per page in the tasks table."""

EXPORT_PAGE = 1000
"""Task rows read per query while exporting."""


# -- sessions ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionInfo:
    """One row of the sessions screen."""

    path: Path
    preset: str
    mode: str
    benchmarks: str
    epochs_done: int
    target: int
    status: str


def session_info(folder: Path) -> SessionInfo | None:
    """Read a session folder's config and store (None when it is not a session)."""
    try:
        config = config_from_file(folder / "config.toml")
    except (ConfigError, OSError):
        return None
    done, status = -1, "new"
    if (folder / "genenv.db").exists():
        with Store(folder / "genenv.db") as store:
            done = store.last_finished_epoch()
            rows = store.epoch_metrics()
        if rows and rows[-1]["status"] in ("partial", "running"):
            status = f"{rows[-1]['status']} e{rows[-1]['epoch']}"
        elif done >= config.epochs:
            status = "done"
        elif rows:
            status = "resumable"
    return SessionInfo(
        folder, config.preset, config.simulator.mode, ",".join(config.benchmarks), max(done, 0), config.epochs, status
    )


def list_sessions(root: Path) -> list[SessionInfo]:
    """Every session folder directly under ``root``, newest name first."""
    if not root.is_dir():
        return []
    out = [session_info(p) for p in sorted(root.iterdir(), reverse=True) if (p / "config.toml").exists()]
    return [s for s in out if s is not None]


# -- task pages --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskPage:
    """One page of task rows and the total matching count."""

    rows: list[dict[str, Any]]
    total: int
    page: int
    page_size: int

    @property
    def pages(self) -> int:
        """Number of pages (at least 1)."""
        return max(1, -(-self.total // self.page_size))


def task_page(store: Store, filters: TaskFilter, page: int = 0, page_size: int = PAGE_SIZE) -> TaskPage:
    """Load one page of tasks (never more than ``page_size`` rows) and the matching count."""
    total = store.count_tasks(filters)
    pages = max(1, -(-total // page_size))
    page = min(max(page, 0), pages - 1)
    rows = store.query_tasks(filters, limit=page_size, offset=page * page_size)
    return TaskPage(rows, total, page, page_size)


def fmt(value: Any, digits: int = 2) -> str:
    """A table cell: '-' for None, fixed decimals for floats.

    >>> fmt(None), fmt(0.5), fmt(True), fmt(3)
    ('-', '0.50', 'yes', '3')
    """
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


TABLE_COLUMNS = ("id", "bench", "origin", "status", "ep", "valid", "p̂", "R_env", "roll", "prompt")
"""Column labels of the tasks table."""

COLUMN_WIDTHS = (18, 6, 9, 8, 3, 5, 4, 5, 4, 60)
"""Character width of each column of the tasks table; the prompt's is the default, the free width replaces it."""
MIN_PROMPT = 20
"""The narrowest the prompt column gets."""


def prompt_width(table_width: int) -> int:
    """The prompt column's width in a table ``table_width`` characters wide: all that the other columns leave.

    >>> prompt_width(110), prompt_width(60)
    (28, 20)
    """
    fixed = sum(COLUMN_WIDTHS[:-1]) + 2 * (len(COLUMN_WIDTHS) - 1)
    return max(MIN_PROMPT, table_width - fixed - 2)


def short_id(task_id: str, width: int = COLUMN_WIDTHS[0]) -> str:
    """A task id cut in the middle to ``width`` characters, keeping its start and its distinguishing end (the detail
    pane shows it whole).

    >>> short_id("bfcl/seed/00008"), short_id("gen/e12/bfcl/batch-0003/v2", 18)
    ('bfcl/seed/00008', 'gen/e12/…h-0003/v2')
    """
    if len(task_id) <= width:
        return task_id
    head = (width - 1) // 2
    return task_id[:head] + "…" + task_id[len(task_id) - (width - 1 - head) :]


def table_line(cells: tuple[str, ...], prompt: int | None = None) -> str:
    """One row of the tasks table as a single fixed-width line (one table cell renders ~10x faster than ten); the
    prompt column ``prompt`` characters wide (default: its width in `COLUMN_WIDTHS`).

    >>> table_line(("gen/e1/0", "bfcl", "generated", "active", "1", "yes", "0.50", "0.969", "4", "F: x"))[:39]
    'gen/e1/0            bfcl    generated  '
    """
    widths = COLUMN_WIDTHS[:-1] + ((prompt or COLUMN_WIDTHS[-1]),)
    out = []
    for i, (cell, width) in enumerate(zip(cells, widths, strict=False)):
        if i == 0:
            text = short_id(cell, width)
        else:
            text = cell if len(cell) <= width else cell[: width - 1] + "…"
        out.append(text.ljust(width))
    return "  ".join(out).rstrip()


def table_row(row: dict[str, Any], prompt_chars: int = 400) -> tuple[str, ...]:
    """The cells of one tasks-table row, every text cell through the console's sanitiser (one line each)."""
    status = row.get("status") or "active"
    if row.get("superseded_by"):
        status = "superseded"
    prompt = clean(row.get("prompt") or "", prompt_chars * 2, one_line=True)
    return (
        clean(row["id"], 200, one_line=True),
        clean(row.get("benchmark") or "", 40, one_line=True),
        clean(row.get("origin") or "", 40, one_line=True),
        clean(status, 40, one_line=True),
        fmt(row.get("epoch")),
        fmt(row.get("valid")),
        fmt(row.get("p_hat")),
        fmt(row.get("r_env"), 3),
        fmt(row.get("n_rollouts")),
        prompt[:prompt_chars],
    )


def task_detail(
    store: Store, task_id: str, max_rollouts: int = 20, group_size: int | None = None
) -> dict[str, Any] | None:
    """Everything the detail pane shows: the task row, its rollouts, its GRPO groups (with ``group_size``, the
    run's rollouts per task) and its lineage to the seed."""
    task = store.get_task(task_id)
    if task is None:
        return None
    stats = store.task_stats(task_id) or {}
    rollouts = store.rollouts_for(task_id)
    groups = grpo_groups(rollouts, group_size) if group_size else []
    return {
        "task": task,
        "stats": stats,
        "rollouts": rollouts[-max_rollouts:],
        "n_rollouts": len(rollouts),
        "groups": groups,
        "lineage": store.lineage(task_id),
    }


def grpo_groups(rollouts: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """A task's training rollouts as the GRPO groups they were: each epoch's rollouts in consecutive runs of ``k``
    (a task replayed twice in an epoch made two groups), each with its rewards' group-normalised advantages as the
    trainer computes them (`genenv_engine.core.algorithms.group_advantages`).

    >>> gs = grpo_groups([{"epoch": 1, "purpose": "train", "reward": r} for r in (1.0, 0.0)] +
    ...                  [{"epoch": 1, "purpose": "heldout", "reward": 1.0}], 2)
    >>> [(g["epoch"], [round(a, 3) for a in g["advantages"]]) for g in gs]
    [(1, [0.707, -0.707])]
    """
    import torch

    from genenv_engine.core.algorithms import group_advantages

    by_epoch: dict[int, list[dict[str, Any]]] = {}
    for r in rollouts:
        if r.get("purpose", "train") == "train":
            by_epoch.setdefault(r.get("epoch"), []).append(r)
    groups = []
    for epoch, rows in by_epoch.items():
        for i in range(0, len(rows) - k + 1, k):
            part = rows[i : i + k]
            rewards = torch.tensor([[float(r.get("reward") or 0.0) for r in part]])
            groups.append(
                {
                    "epoch": epoch,
                    "rollouts": part,
                    "advantages": group_advantages(rewards)[0].tolist(),
                    "mean_reward": float(rewards.mean()),
                }
            )
    return groups


# -- hand edits --------------------------------------------------------------------------------

_REVISION = re.compile(r"/r\d+$")


def next_revision_id(store: Store, task_id: str) -> str:
    """A fresh id for a revision of ``task_id``: ``<base>/r1``, ``<base>/r2``, ...

    ``<base>`` is the id without a trailing ``/r<n>``, so revising a revision counts on.
    """
    base = _REVISION.sub("", task_id)
    n = 1
    while store.get_task(f"{base}/r{n}") is not None:
        n += 1
    return f"{base}/r{n}"


@dataclass(frozen=True)
class EditResult:
    """Outcome of a hand edit: the stored revision, or why nothing was saved."""

    ok: bool
    error: str = ""
    task: Task | None = None


def apply_edit(
    store: Store, task_id: str, prompt: str, answer: str, seed: int = 0, data_dirs: dict[str, str] | None = None
) -> EditResult:
    """Validate an edited prompt/answer with the task's environment; store it as a revision when valid."""
    old = store.get_task(task_id)
    if old is None:
        return EditResult(False, f"no task {task_id}")
    stats = store.task_stats(task_id) or {}
    if stats.get("superseded_by"):
        return EditResult(False, f"{task_id} was already revised as {stats['superseded_by']}; edit that one")
    prompt, answer = prompt.strip(), answer.strip()
    if prompt == old.prompt and answer == old.answer:
        return EditResult(False, "nothing changed")
    if not prompt or not answer:
        return EditResult(False, "prompt and answer must not be empty")
    try:
        env = get_environment(old.benchmark, seed, data_dir=(data_dirs or {}).get(old.benchmark))
    except (ConfigError, KeyError) as exc:  # a plugin benchmark whose package is not installed here
        return EditResult(False, f"cannot check the edit here: {exc.args[0] if exc.args else exc}")
    new_id = next_revision_id(store, task_id)
    try:
        verdict = env.validate(prompt, answer, task_id=new_id, parent=old, epoch=old.epoch, generator="hand-edit")
    except Exception as exc:  # noqa: BLE001 - an environment's own code (a plugin's) may raise anything
        return EditResult(False, f"{old.benchmark}'s validate raised {type(exc).__name__}: {exc}")
    if not verdict.ok or verdict.task is None:
        return EditResult(False, f"invalid: {verdict.reason}")
    revised = store.revise_task(task_id, verdict.task.with_(status=old.status if old.status == "pinned" else "active"))
    return EditResult(True, "", revised)


def toggle_status(store: Store, task_id: str, status: str) -> str:
    """Set ``status`` (pinned or banned) on a task, or back to active if it already has it; return the new one."""
    task = store.get_task(task_id)
    if task is None:
        raise KeyError(task_id)
    new = "active" if task.status == status else status
    store.set_status(task_id, new)
    return new


# -- export ------------------------------------------------------------------------------------


def export_jsonl(session_dir: Path, page: int = EXPORT_PAGE) -> tuple[list[Path], int]:
    """Write ``export/metrics.jsonl``, ``export/tasks.jsonl`` (the admitted tasks: split tasks and valid generated
    ones, as ``genenv tasks export`` writes them) and ``export/rejected.jsonl`` (the rejected drafts with their
    reasons), tasks streamed in pages; return the paths and the number of tasks written to both."""
    from genenv_engine.interfaces.interop import admitted

    out = session_dir / "export"
    out.mkdir(exist_ok=True)
    metrics_path, tasks_path, rejected_path = out / "metrics.jsonl", out / "tasks.jsonl", out / "rejected.jsonl"
    n = 0
    with Store(session_dir / "genenv.db") as store:
        with metrics_path.open("w") as fh:
            for row in store.epoch_metrics():
                fh.write(json.dumps(row, default=str) + "\n")
        with tasks_path.open("w") as kept, rejected_path.open("w") as rejected:
            offset = 0
            while True:
                rows = store.query_tasks(limit=page, offset=offset, order="id")
                for row in rows:
                    (kept if admitted(row) else rejected).write(json.dumps(row, default=str) + "\n")
                n += len(rows)
                if len(rows) < page:
                    break
                offset += page
    return [metrics_path, tasks_path, rejected_path], n
