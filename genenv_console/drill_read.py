"""What a picked point of a dashboard plot opens, read in a thread worker.

``enter`` on a focused plot posts `genenv_console.widgets.plots.PlotPicked`; the app reads what is behind that
epoch here, off the UI thread, and opens the drill-down screen when `EpochDrillRead` arrives. The calibration plot
reads only that epoch's variation batches (not the session's every batch); the held-out plot needs the held-out
tasks in the order the stored result strings follow, which building the environments gives. That is the slow
part (most of a second), so the app builds them once per session, in a worker started when the session opens
(`session_environments`), and every held-out drill of the session reuses them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_console.screens.drill import batch_rows
from genenv_engine.config import RunConfig
from genenv_engine.storage.session_view import SessionView


@dataclass(frozen=True)
class EpochDrill:
    """What one picked epoch opens: its batches' rows and ids (calibration), or the held-out tasks with that
    epoch's and the previous epoch's result strings and the stored answers (held-out)."""

    plot: str
    epoch: int
    rows: list[tuple[str, ...]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    tasks: list[Any] = field(default_factory=list)
    now: str | None = None
    before: str | None = None
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)


def session_environments(config: RunConfig) -> dict[str, Any]:
    """The session's environments with their splits made (each computes them once), for `read_epoch_drill`."""
    from genenv_engine.environments import environments_of

    envs = environments_of(config)
    for env in envs.values():
        env.splits()
    return envs


def read_epoch_drill(
    store: Any, config: RunConfig, path: Path | None, plot: str, epoch: int, environments: Callable[[], dict[str, Any]]
) -> EpochDrill | None:
    """Read what ``epoch`` of ``plot`` (``calibration`` or ``heldout``) opens; None when that epoch has no held-out
    results. ``environments`` gives `session_environments` (cached by the caller)."""
    if plot == "calibration":
        view = SessionView.from_rows(config, (), store.batches(epoch), path)
        return EpochDrill(plot, epoch, rows=batch_rows(view, epoch), ids=[b.id for b in view.batches_of(epoch)])
    rows = {m["epoch"]: m for m in store.epoch_metrics() if m["epoch"] in (epoch, epoch - 1)}

    def correct(e: int) -> str | None:
        return "".join((rows.get(e) or {}).get("heldout_correct", {}).values()) or None

    now = correct(epoch)
    if now is None:
        return None
    per_benchmark = len(next(iter(rows[epoch]["heldout_correct"].values())))
    from genenv_engine.training.agent import heldout_tasks

    tasks = heldout_tasks(environments(), per_benchmark)  # the order every result string follows
    return EpochDrill(
        plot, epoch, tasks=tasks, now=now, before=correct(epoch - 1), answers=store.heldout_answers(epoch)
    )
