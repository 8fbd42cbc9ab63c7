"""Steering a running engine from another process: pause, resume and stop requests through the session folder.

A console attached to a session that a headless ``genenv run`` holds (`genenv_engine.storage.lease`) cannot reach that
process's `RunControl`. It writes a request to ``<session>/control.json`` instead (`request`: one small JSON,
written to a temporary file and renamed, so the engine never reads half of one), and the engine, which watches the
file while it runs (`RequestWatcher`, a daemon thread polling a few times a second), applies it to its own control:
the same pause/stop the console's keys give an engine of its own, taking effect at the next batch boundary. Each
applied request is removed; a request left when no engine runs is removed by the next run without being applied.
Requests are plain data: nothing in them is executed.

>>> import tempfile
>>> from genenv_engine.core.events import RunControl
>>> folder = Path(tempfile.mkdtemp())
>>> control = RunControl()
>>> watcher = RequestWatcher(folder, control)
>>> request(folder, "pause"); watcher.poll(); control.paused, pending(folder)
(True, None)
>>> request(folder, "stop"); watcher.poll(); control.stop_requested
True
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from pathlib import Path
from typing import Any

from genenv_engine.core.events import RunControl

CONTROL_NAME = "control.json"
"""The request file in a session folder."""
ACTIONS = ("pause", "resume", "stop")
POLL_SECONDS = 0.25
"""How often a running engine looks for a request (well under one batch)."""


def request(folder: str | Path, action: str, by: str = "genenv-console") -> None:
    """Ask the engine running the session in ``folder`` to ``pause``, ``resume`` or ``stop``."""
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
    folder = Path(folder)
    body = {
        "action": action,
        "by": by,
        "pid": os.getpid(),
        "at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    tmp = folder / f".{CONTROL_NAME}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(body))
    os.replace(tmp, folder / CONTROL_NAME)


def pending(folder: str | Path) -> dict[str, Any] | None:
    """The request waiting in ``folder`` (None when there is none, or it is not a readable request)."""
    try:
        data = json.loads((Path(folder) / CONTROL_NAME).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("action") in ACTIONS else None


def clear(folder: str | Path) -> None:
    """Remove any waiting request (a run starting drops what was asked of an earlier one)."""
    try:
        (Path(folder) / CONTROL_NAME).unlink()
    except FileNotFoundError:
        pass


class RequestWatcher:
    """Applies the session folder's requests to a running engine's `RunControl` (`start` runs `poll` in a daemon
    thread until `close`)."""

    def __init__(self, folder: str | Path, control: RunControl) -> None:
        self.folder, self.control = Path(folder), control
        self.applied: list[dict[str, Any]] = []
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> None:
        """Apply the waiting request, if any, and remove it."""
        req = pending(self.folder)
        if req is None:
            return
        clear(self.folder)
        getattr(self.control, req["action"])()
        self.applied.append(req)

    def start(self) -> RequestWatcher:
        clear(self.folder)
        self._thread = threading.Thread(target=self._loop, name="genenv-remote-control", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._done.wait(POLL_SECONDS):
            try:
                self.poll()
            except OSError:
                pass  # a folder briefly unreadable: look again at the next poll

    def close(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
