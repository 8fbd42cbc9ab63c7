"""A one-line footer of the active key bindings, drawn as a single widget.

Textual's `Footer` recomposes one widget per binding every time the bindings change (each screen
switch and focus change), which doubled the cost of switching screens while the engine trains.
This bar shows the same bindings (those with ``show=True`` that the focused chain allows) as text.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget


class KeyBar(Widget):
    """The footer: ``key description`` pairs of the focused chain's shown bindings, then the palette key."""

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $panel;
        color: $foreground;
    }
    """

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, lambda _screen: self.refresh())

    def pairs(self) -> list[tuple[str, str, bool]]:
        """(key label, description, enabled) of every binding the bar shows."""
        seen: set[str] = set()
        out = []
        for active in self.screen.active_bindings.values():
            binding = active.binding
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            out.append((self.app.get_key_display(binding), binding.description, active.enabled))
        return out

    def render(self) -> Text:
        """The bar's text."""
        text = Text(no_wrap=True, overflow="ellipsis")
        for key, description, enabled in self.pairs():
            text.append(f" {key} ", style="bold reverse" if enabled else "dim reverse")
            text.append(f" {description} ", style="" if enabled else "dim")
        text.append(" ^p palette ", style="dim")
        return text
