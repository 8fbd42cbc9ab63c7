"""What the drill-down screens share: the `DrillModal` base, literal table cells, a task row's verdict and `post_read`.

The epoch drills (`genenv_console.screens.drill`), a batch's tasks and a task's GRPO groups
(`genenv_console.screens.batch`), the lineage tree (`genenv_console.screens.lineage`) and the funnel build on these
and never on each other: a screen that opens another posts a request (`genenv_console.messages.OpenBatch` and its
siblings) and the app pushes the screen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.screen import ModalScreen


def post_read(pump: Any, read: Callable[[], Any], message: Callable[..., Message], empty: Any, failed: str) -> None:
    """From a thread worker: post ``message(read())`` to ``pump`` (a screen or the app), or ``message(empty,
    "<failed>: <error>")`` when the read fails (a damaged store is shown on the screen, never a crash)."""
    try:
        pump.post_message(message(read()))
    except Exception as exc:  # noqa: BLE001 - see above
        pump.post_message(message(empty, f"{failed}: {exc}"))


def literal(row: tuple[str, ...]) -> tuple[Text, ...]:
    """A table row's cells as rich `Text`, which a `DataTable` draws as written (it parses a plain string as markup).

    >>> [c.plain for c in literal(("[b]x[/b]", ""))]
    ['[b]x[/b]', '']
    """
    return tuple(Text(c) for c in row)


def verdict(row: dict[str, Any]) -> str:
    """The validator's verdict on a task row, and its status when not active.

    >>> verdict({"valid": True, "status": "pinned"}), verdict({"valid": False, "reason": "parse_error: x"})
    ('valid, pinned', '✗ parse_error: x')
    """
    reason = row.get("reason")
    out = "valid" if row.get("valid") else (f"✗ {reason}" if reason else "✗")
    status = row.get("status") or "active"
    return out if status == "active" else f"{out}, {status}"


class DrillModal(ModalScreen[None]):
    """A modal table over the dashboard (escape or q closes it, ? lists its keys): the base of the drill-down screens
    and the funnel."""

    BINDINGS = [Binding("escape,q", "dismiss_screen", "Close"), Binding("question_mark", "app.help", "Help")]
    DEFAULT_CSS = """
    DrillModal { align: center middle; }
    DrillModal > Vertical { width: 96%; height: 90%; border: round $accent; background: $surface; }
    DrillModal DataTable { height: 1fr; }
    """

    def action_dismiss_screen(self) -> None:
        self.dismiss(None)

    def post_read(self, read: Callable[[], Any], message: Callable[..., Message], empty: Any, failed: str) -> None:
        """From a thread worker: `post_read` to this screen."""
        post_read(self, read, message, empty, failed)
