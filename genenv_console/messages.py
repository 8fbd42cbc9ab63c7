"""Textual messages: one past-tense message per engine event, plus the console's own requests and facts.

The engine's sink runs in the worker thread; it wraps each `genenv_engine.core.events.Event` in the
message class of the same name (``RunPaused`` -> `RunPaused`) and posts it to the app, which is
thread-safe. Handlers on the UI thread then own every change to widgets and UI state.
Screens never push each other: one that opens another posts a request (`OpenBatch`, `OpenDrill`,
`OpenLineage`, `OpenTask`) and the app pushes the screen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.message import Message

from genenv_engine.config import RunConfig
from genenv_engine.core import events as engine_events


class EngineMessage(Message):
    """Base class of the messages that wrap one engine event."""

    def __init__(self, event: engine_events.Event, runner: object = None) -> None:
        super().__init__()
        self.event = event
        self.runner = runner
        """The `EngineRunner` that posted it (the app ignores a previous run's stragglers)."""

    @property
    def epoch(self) -> int:
        """The epoch the event belongs to."""
        return self.event.epoch


class RunStarted(EngineMessage):
    """The engine opened the session and is about to run ``start_epoch``."""


class WarmStartProgressed(EngineMessage):
    """A warm-start SFT step finished (throttled)."""


class WarmStartSample(EngineMessage):
    """A role's greedy sample partway through its warm start (what it writes now)."""


class EpochStarted(EngineMessage):
    """An epoch began."""


class PhaseStarted(EngineMessage):
    """A timed phase began."""


class PhaseFinished(EngineMessage):
    """A timed phase finished."""


class BatchProgressed(EngineMessage):
    """A batch of a phase finished (throttled)."""


class TasksGenerated(EngineMessage):
    """The simulator's generations of one benchmark were validated."""


class AttemptsScored(EngineMessage):
    """The agent's rollouts of the fresh tasks were scored: batch p-hats and R_env."""


class PolicyUpdated(EngineMessage):
    """The agent (GRPO) or the simulator (RWR) was updated."""


class HeldoutEvaluated(EngineMessage):
    """Held-out success per benchmark was measured."""


class CheckpointSaved(EngineMessage):
    """An epoch's checkpoint was written."""


class EpochFinished(EngineMessage):
    """An epoch completed with its metrics."""


class RunPaused(EngineMessage):
    """The engine is blocked at a check, waiting for resume."""


class RunResumed(EngineMessage):
    """The engine continued after a pause."""


class RunStopped(EngineMessage):
    """The engine stopped on request; the session is resumable."""


class RunFinished(EngineMessage):
    """The engine reached the session's target epoch."""


class RunFailed(EngineMessage):
    """The engine raised; the epoch is marked partial and the session is resumable."""


class WorkerRestarted(EngineMessage):
    """Ray restarted a worker and re-ran its unfinished batches (Ray runs only)."""


class WorkerTimedOut(EngineMessage):
    """A Ray worker call ran past ``ray.call_timeout``: its worker was restarted (Ray runs only)."""


ENGINE_MESSAGES: dict[str, type[EngineMessage]] = {cls.__name__: cls for cls in EngineMessage.__subclasses__()}
"""Message class per engine event class name."""


def wrap(event: engine_events.Event, runner: object = None) -> EngineMessage:
    """The console message for an engine event (an unknown kind gets the base class)."""
    return ENGINE_MESSAGES.get(event.kind, EngineMessage)(event, runner)


class EngineIdled(Message):
    """The engine worker's thread is done (finished, stopped or failed); a new run may start."""

    def __init__(self, runner: object = None) -> None:
        super().__init__()
        self.runner = runner


class OpenSession(Message):
    """Request: resume the session in this folder."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path


class CompareSessions(Message):
    """Request: open the compare screen on these session folders, in order."""

    def __init__(self, paths: list[Path]) -> None:
        super().__init__()
        self.paths = paths


class CreateSession(Message):
    """Request: create a session from this config and run it."""

    def __init__(self, config: RunConfig) -> None:
        super().__init__()
        self.config = config


class TaskRevised(Message):
    """A hand edit was validated and stored as a new revision."""

    def __init__(self, old_id: str, new_id: str) -> None:
        super().__init__()
        self.old_id = old_id
        self.new_id = new_id


class TaskStatusChanged(Message):
    """A task was pinned, banned or set back to active."""

    def __init__(self, task_id: str, status: str) -> None:
        super().__init__()
        self.task_id = task_id
        self.status = status


class ExportWritten(Message):
    """The session's metrics and tasks were exported as JSON lines."""

    def __init__(self, paths: list[Path], tasks: int) -> None:
        super().__init__()
        self.paths = paths
        self.tasks = tasks


class ComparisonRead(Message):
    """The sessions of a comparison were read (``runs``: `genenv_console.compare.CompareRun`, in order), or
    could not be (``error``)."""

    def __init__(self, runs: list, error: str = "") -> None:
        super().__init__()
        self.runs = runs
        self.error = error


class ComparisonExported(Message):
    """The comparison report was written to ``path`` (None, with ``error``, when it could not be)."""

    def __init__(self, path: Path | None, error: str = "") -> None:
        super().__init__()
        self.path = path
        self.error = error


class FunnelRead(Message):
    """The session's funnel was read (``entries``: `genenv_engine.storage.store.Store.funnel`), or could not be
    (``error``)."""

    def __init__(self, entries: list, error: str = "") -> None:
        super().__init__()
        self.entries = entries
        self.error = error


class BatchTasksRead(Message):
    """The tasks behind a variation batch were read (``rows``: `genenv_engine.storage.store.Store.batch_tasks`), or
    could not be (``error``)."""

    def __init__(self, rows: list, error: str = "") -> None:
        super().__init__()
        self.rows = rows
        self.error = error


class TaskGroupsRead(Message):
    """A task's detail with its GRPO groups was read (``detail``: `genenv_console.data.task_detail`; None for an
    unknown task), or could not be (``error``)."""

    def __init__(self, detail: dict | None, error: str = "") -> None:
        super().__init__()
        self.detail = detail
        self.error = error


class LineageRead(Message):
    """A lineage tree was read (``nodes``: `genenv_engine.storage.store.Store.lineage_tree`), or could not be
    (``error``)."""

    def __init__(self, nodes: list, error: str = "") -> None:
        super().__init__()
        self.nodes = nodes
        self.error = error


class TaskLocated(Message):
    """Where a task stands in the tasks table: its ``position`` under ``filters`` (a
    `genenv_engine.storage.store.TaskFilter`; the filters were cleared when the task did not match the shown ones), or
    None for a task the store does not hold."""

    def __init__(self, task_id: str, position: int | None, filters: object) -> None:
        super().__init__()
        self.task_id = task_id
        self.position = position
        self.filters = filters


class EpochDrillRead(Message):
    """What a picked plot epoch opens was read (``drill``: `genenv_console.drill_read.EpochDrill`; None when the
    epoch has no held-out results), or could not be (``error``)."""

    def __init__(self, plot: str, epoch: int, drill: object | None, error: str = "") -> None:
        super().__init__()
        self.plot, self.epoch, self.drill, self.error = plot, epoch, drill, error


class OpenBatch(Message):
    """Request: open a variation batch's seed task and variations (``store``: the session's
    `genenv_engine.storage.store.Store`; ``group_size``: the agent's rollouts per task, None when unknown)."""

    def __init__(self, store: Any, batch_id: str, group_size: int | None) -> None:
        super().__init__()
        self.store, self.batch_id, self.group_size = store, batch_id, group_size


class OpenDrill(Message):
    """Request: open the drill below a batch's task, its GRPO groups (``group_size``: rollouts per group)."""

    def __init__(self, store: Any, task_id: str, group_size: int | None) -> None:
        super().__init__()
        self.store, self.task_id, self.group_size = store, task_id, group_size


class OpenLineage(Message):
    """Request: open a task's lineage tree, read from ``store``."""

    def __init__(self, store: Any, task_id: str) -> None:
        super().__init__()
        self.store, self.task_id = store, task_id


class OpenTask(Message):
    """Request: show a task in the tasks screen, selected on the page that holds it."""

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id
