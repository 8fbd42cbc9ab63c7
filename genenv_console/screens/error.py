"""A modal that shows an engine error; the app keeps running and the session stays resumable."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from genenv_console.safe import safe_text


class ErrorScreen(ModalScreen[None]):
    """Show an error message and its details until dismissed."""

    CSS_PATH = "../styles/error.tcss"
    BINDINGS = [Binding("escape,enter", "close", "Close")]

    def __init__(self, title: str, details: str) -> None:
        super().__init__()
        self.title_text = title
        self.details = details

    def compose(self) -> ComposeResult:
        with Vertical(id="error-dialog"):
            yield Label(safe_text(self.title_text, 500), id="error-title")
            with VerticalScroll(id="error-scroll"):
                yield Static(safe_text(self.details, 20_000), id="error-details")
            yield Label("The epoch was marked partial: press r to resume the session.", id="error-hint")
            yield Button("OK", id="error-ok", variant="error")

    def on_mount(self) -> None:
        self.query_one("#error-ok", Button).focus()

    @on(Button.Pressed, "#error-ok")
    def action_close(self) -> None:
        """Close the modal."""
        self.dismiss(None)
