"""The only bridge between the console and the engine: one thread worker running a session with its trainer
(`genenv_engine.integrations.trl_run.run_session`: genenv's loop, or TRL for a session TRL trains).

The worker (``@work(thread=True, exclusive=True, exit_on_error=False, group="engine")``) opens the
session in its own thread (so the engine owns its SQLite connection) and runs the loop with a sink
that wraps each event in a message and posts it to the app, the one thread-safe way to reach the UI.
High-rate progress events are throttled in the sink. The worker never touches a widget; pause,
resume and stop go through the engine's `RunControl`, which the loop checks between batches.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.message import Message

from genenv_console.messages import EngineIdled, wrap
from genenv_engine.core import events as ev
from genenv_engine.storage.session import Session

if TYPE_CHECKING:  # roles imports torch; the console starts without it
    from genenv_engine.training.roles import BackendFactory

THROTTLED = ("BatchProgressed", "WarmStartProgressed")
"""Events forwarded at most every `EngineRunner.min_interval` seconds (plus the last of a phase)."""


class EngineRunner:
    """One run of the engine: its control flags and the sink that turns events into messages."""

    def __init__(
        self, post: Callable[[Message], Any], backend_factory: BackendFactory | None = None, min_interval: float = 0.1
    ) -> None:
        self.post = post
        self.backend_factory = backend_factory
        self.control = ev.RunControl()
        self.min_interval = min_interval
        self.pause_after_epoch = False
        """When set, the sink pauses the engine as soon as an epoch finishes (before the next one starts)."""
        self._last_sent: dict[str, float] = {}

    def sink(self, event: ev.Event) -> None:
        """EventSink called in the engine thread: throttle, apply epoch-end pauses, post a message."""
        if event.kind in THROTTLED:
            key = f"{event.kind}:{getattr(event, 'phase', getattr(event, 'role', ''))}"
            done = getattr(event, "done", getattr(event, "step", 0))
            total = getattr(event, "total", getattr(event, "steps", 0))
            now = time.monotonic()
            if done < total and now - self._last_sent.get(key, 0.0) < self.min_interval:
                return
            self._last_sent[key] = now
        if event.kind == "EpochFinished" and self.pause_after_epoch:
            self.control.pause()
        self.send(wrap(event, self))

    def send(self, message: Message) -> None:
        """Post to the app; after the app has closed there is nobody to tell."""
        try:
            self.post(message)
        except RuntimeError:  # the app's event loop is already closed (quit while the engine was stopping)
            pass

    def run(self, session_path: Path) -> dict[str, Any]:
        """Open the session in this thread and run it to its target epoch (or a stop) with the trainer it was run
        with (genenv's own, or TRL's: `genenv_engine.integrations.trl_run.run_session`)."""
        from genenv_engine.integrations.trl_run import run_session

        session = Session.open(session_path, check=True)
        try:
            with session.lease("genenv-console"):  # refuses, changing nothing, while another engine runs it
                session.prepare_resume()  # stale temp folders; fall back from a damaged checkpoint (logged)
                return run_session(session, self.sink, self.control, self.backend_factory)
        finally:
            session.store.close()


class EngineWorkerMixin:
    """Adds the engine worker to the app; the app's handlers own everything it reports."""

    @work(thread=True, exclusive=True, exit_on_error=False, group="engine", name="engine")
    def run_engine(self, runner: EngineRunner, session_path: Path) -> dict[str, Any] | None:
        """Run the engine in a thread; an exception ends the worker in the ERROR state (the app shows a modal)."""
        try:
            return runner.run(session_path)
        finally:
            runner.send(EngineIdled(runner))
