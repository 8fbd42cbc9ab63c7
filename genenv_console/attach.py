"""Following a session that another process runs: the console attached to a headless ``genenv run``.

When the session the console opens is held by another live engine (its lease, `genenv_engine.storage.lease`), the
console does not start one of its own: it follows the holder. Once a second it re-reads the session through the
store (read-only: the epochs, batches and events the engine has landed), so the plots, the event log and the
status bar move as the headless run goes on, and it steers that engine through the session folder
(`genenv_engine.storage.remote`): space asks it to pause or resume, ``s`` to stop, each at its next batch. When the
other engine ends, the console shows the session at rest and ``r`` resumes it here.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from genenv_console.safe import clean
from genenv_console.state import RunState, history_lines_after
from genenv_engine.storage import lease, remote
from genenv_engine.storage.session_view import SessionView

FOLLOW_SECONDS = 1.0
"""How often an attached console re-reads the session."""


class AttachMixin:
    """Adds following another engine's run to the app (which owns ``session_path``, ``ui_store``, ``state``,
    ``dashboard`` and ``log_lines``)."""

    attached: dict[str, Any] | None = None
    """The record of the engine being followed (PID, host, since, what), None when not attached."""
    _follow_timer: Any = None
    _follow_after: int = 0
    _asked_pause: bool = False

    def attach_if_held(self) -> bool:
        """Start following when another live process holds the open session; whether it does."""
        holder = lease.holder(self.session_path) if self.session_path is not None else None
        if not holder or (holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname()):
            return False
        self.attached, self._asked_pause = holder, False
        self._follow_after = self.ui_store.last_event_id()
        self.state.run = "attached"
        who = lease.describe(holder)
        self.dashboard.log_line(clean(f"following {who}: space pauses or resumes it, s stops it", 300, one_line=True))
        self.dashboard.show_state(self.state, {"status"})
        if self._follow_timer is None:
            self._follow_timer = self.set_interval(FOLLOW_SECONDS, self.follow)
        return True

    def follow(self) -> None:
        """One refresh of an attached console: new epochs, batches and event lines; detach when the holder ends."""
        if self.attached is None or self.session_path is None or self.ui_store is None:
            self._stop_following()
            return
        ended = lease.holder(self.session_path) is None
        pause_after = self.state.pause_after_epoch
        self.state = RunState.from_view(
            self.session_path.name, SessionView.from_store(self.ui_store, self.session_config, self.session_path)
        )
        self.state.pause_after_epoch = pause_after
        lines, self._follow_after = history_lines_after(self.ui_store, self._follow_after)
        for line in lines:
            self.log_lines.append(line)
            self.dashboard.log_line(line)
        if ended:
            self.dashboard.log_line("the other engine has let go of the session: r resumes it here")
            self._stop_following()
        else:
            self.state.run = "attached-paused" if self._asked_pause else "attached"
        self.dashboard.show_state(self.state, {"status", "plots"})

    def _stop_following(self) -> None:
        self.attached = None
        if self._follow_timer is not None:
            self._follow_timer.stop()
            self._follow_timer = None

    def steer_attached(self, action: str) -> None:
        """Ask the followed engine to ``pause``, ``resume`` or ``stop`` (at its next batch)."""
        remote.request(self.session_path, action)
        if action in ("pause", "resume"):
            self._asked_pause = action == "pause"
            self.state.run = "attached-paused" if self._asked_pause else "attached"
            self.dashboard.show_state(self.state, {"status"})
        self.notify(
            clean(f"asked {lease.describe(self.attached)} to {action} at its next batch", 300, one_line=True),
            markup=False,
        )
