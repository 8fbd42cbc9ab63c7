"""Typed events the engine emits through a callback, and the pause/stop control a front end holds.

Events are past-tense facts (``EpochFinished``) sent to an `EventSink`, a plain callable, so the
headless CLI prints them, the console posts them as Textual messages, and tests collect them.
`RunControl` is checked by the loop between phases and batches: pausing blocks there, stopping
raises `StopRequested`, so a front end's pause takes effect within one batch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    """Base class of engine events."""

    epoch: int

    @property
    def kind(self) -> str:
        """The event's class name (``EpochFinished``)."""
        return type(self).__name__

    def payload(self) -> dict[str, Any]:
        """The event's fields as a JSON-able dict."""
        return asdict(self)


@dataclass(frozen=True)
class RunStarted(Event):
    session: str
    config: dict[str, Any]
    start_epoch: int


@dataclass(frozen=True)
class WarmStartProgressed(Event):
    """A warm-start SFT step of ``role`` finished (every ~2 % of the steps): its loss and the seconds since that
    role's SFT started, from which front ends show steps/s and an ETA."""

    role: str
    step: int
    steps: int
    loss: float
    elapsed: float = 0.0

    @property
    def steps_per_second(self) -> float | None:
        """Steps done per second so far (None before any time has passed).

        >>> WarmStartProgressed(0, "agent", 50, 700, 1.2, 10.0).steps_per_second
        5.0
        """
        return self.step / self.elapsed if self.elapsed > 0 else None

    @property
    def eta(self) -> float | None:
        """Seconds left for this role at the rate so far.

        >>> WarmStartProgressed(0, "agent", 50, 700, 1.2, 10.0).eta
        130.0
        """
        rate = self.steps_per_second
        return (self.steps - self.step) / rate if rate else None


@dataclass(frozen=True)
class WarmStartSample(Event):
    """What a role writes greedily partway through its warm start (a few per role): the agent's answer to one
    held-out task, checked (``ok`` = solved, ``detail`` = the gold answer), or the simulator's variation of one
    seed, validated (``ok`` = a valid task, ``detail`` = why not). ``prompt`` is the task or seed shown;
    all three texts are model output or task text, so front ends sanitise them before display."""

    role: str
    step: int
    steps: int
    prompt: str
    text: str
    ok: bool
    detail: str = ""

    @property
    def verdict(self) -> str:
        """How ``ok`` reads for this role: ``solved``/``wrong`` (the agent), ``valid``/``invalid`` (the simulator).

        >>> WarmStartSample(0, "agent", 1, 8, "q", "a", True).verdict, (
        ...     WarmStartSample(0, "simulator", 1, 8, "q", "a", False).verdict
        ... )
        ('solved', 'invalid')
        """
        good, bad = ("solved", "wrong") if self.role == "agent" else ("valid", "invalid")
        return good if self.ok else bad


@dataclass(frozen=True)
class EpochStarted(Event):
    pass


@dataclass(frozen=True)
class PhaseStarted(Event):
    phase: str


@dataclass(frozen=True)
class PhaseFinished(Event):
    phase: str
    seconds: float
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BatchProgressed(Event):
    phase: str
    done: int
    total: int


@dataclass(frozen=True)
class TasksGenerated(Event):
    benchmark: str
    generated: int
    valid: int
    reasons: dict[str, int]


@dataclass(frozen=True)
class AttemptsScored(Event):
    tasks: int
    rollouts: int
    success: float
    p_hats: list[float]
    r_envs: list[float]


@dataclass(frozen=True)
class PolicyUpdated(Event):
    role: str
    metrics: dict[str, float]


@dataclass(frozen=True)
class HeldoutEvaluated(Event):
    results: dict[str, float]


@dataclass(frozen=True)
class CheckpointSaved(Event):
    path: str


@dataclass(frozen=True)
class EpochFinished(Event):
    metrics: dict[str, Any]


@dataclass(frozen=True)
class RunPaused(Event):
    pass


@dataclass(frozen=True)
class RunResumed(Event):
    pass


@dataclass(frozen=True)
class RunStopped(Event):
    reason: str


@dataclass(frozen=True)
class RunFinished(Event):
    epochs_done: int


@dataclass(frozen=True)
class RunFailed(Event):
    error: str


@dataclass(frozen=True)
class WorkerRestarted(Event):
    """A Ray worker came back in a new process (Ray restarted the actor and retried its batch, or a timed-out call
    had it restarted)."""

    worker: int
    old_pid: int
    new_pid: int


@dataclass(frozen=True)
class WorkerTimedOut(Event):
    """A Ray worker call ran past ``ray.call_timeout``: the worker was killed and restarted; the batch is sent once
    more (``retried``) or the epoch stops (`genenv_engine.executors.ray_exec.WorkerTimeout`)."""

    worker: int
    phase: str
    """``generate``, ``validate`` or ``rollout``."""
    batch: int
    seconds: float
    """The limit the call ran past."""
    attempt: int
    retried: bool


EventSink = Callable[[Event], None]


def null_sink(event: Event) -> None:
    """An EventSink that ignores everything."""


class StopRequested(Exception):
    """Raised inside the loop when the front end asked to stop."""


class RunControl:
    """Thread-safe pause/stop flags a front end holds; the engine asks `checker` for the check it calls
    between phases and batches (the control itself knows no sink and no epoch)."""

    def __init__(self) -> None:
        self._running = threading.Event()
        self._running.set()
        self._stop = threading.Event()

    def pause(self) -> None:
        """Ask the engine to pause at its next check."""
        self._running.clear()

    def resume(self) -> None:
        """Let a paused engine continue."""
        self._running.set()

    def stop(self) -> None:
        """Ask the engine to stop at its next check (a paused engine wakes up to stop)."""
        self._stop.set()
        self._running.set()

    @property
    def paused(self) -> bool:
        """Whether a pause was asked for."""
        return not self._running.is_set()

    @property
    def stop_requested(self) -> bool:
        """Whether a stop was asked for."""
        return self._stop.is_set()

    def checker(self, sink: EventSink = null_sink, epoch: int = 0) -> Callable[[], None]:
        """The check for one epoch: it blocks while paused (emitting RunPaused/RunResumed for ``epoch``
        through ``sink``) and raises StopRequested if asked to stop."""

        def check() -> None:
            if self._stop.is_set():
                raise StopRequested()
            if not self._running.is_set():
                sink(RunPaused(epoch))
                while not self._running.wait(timeout=0.1):
                    pass
                if self._stop.is_set():
                    raise StopRequested()
                sink(RunResumed(epoch))

        return check


class PhaseTimer:
    """Context manager that times a phase and emits PhaseStarted/PhaseFinished."""

    def __init__(self, sink: EventSink, epoch: int, phase: str, seconds: dict[str, float]) -> None:
        self.sink, self.epoch, self.phase, self.seconds = sink, epoch, phase, seconds
        self.info: dict[str, Any] = {}

    def __enter__(self) -> PhaseTimer:
        self.start = time.perf_counter()
        self.sink(PhaseStarted(self.epoch, self.phase))
        return self

    def __exit__(self, *exc: object) -> None:
        elapsed = time.perf_counter() - self.start
        self.seconds[self.phase] = self.seconds.get(self.phase, 0.0) + elapsed
        if exc[0] is None:
            self.sink(PhaseFinished(self.epoch, self.phase, elapsed, self.info))
