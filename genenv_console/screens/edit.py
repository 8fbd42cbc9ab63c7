"""The hand-edit modal: change a task's prompt and answer; the environment validates before anything is saved.

The modal only collects text; the ``save`` callback (from the tasks screen) validates and stores.
A rejected edit keeps the modal open with the validator's reason and stores nothing.
"""

from __future__ import annotations

from typing import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, TextArea

from genenv_engine.records import Task

from genenv_console.data import EditResult


class EditScreen(ModalScreen[EditResult | None]):
    """Edit one task; dismisses with the stored revision, or None when cancelled."""

    CSS_PATH = "../styles/edit.tcss"
    BINDINGS = [
        Binding("ctrl+s", "save", "Validate & save", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, task: Task, save: Callable[[str, str], EditResult]) -> None:
        super().__init__()
        self.edited = task
        self.save = save

    def compose(self) -> ComposeResult:
        with Vertical(id="edit-dialog"):
            task = self.edited
            yield Label(f"Edit {task.id}  ({task.benchmark}, origin {task.origin})", id="edit-title")
            yield Label("prompt", classes="field-label")
            yield TextArea(self.edited.prompt, id="edit-prompt", soft_wrap=True, show_line_numbers=False)
            yield Label("gold answer", classes="field-label")
            yield Input(self.edited.answer, id="edit-answer")
            yield Static("", id="edit-error")
            yield Static("ctrl+s validate & save as a new revision · esc cancel", id="edit-help")
            with Horizontal(id="edit-buttons"):
                yield Button("Validate & save", id="edit-save", variant="primary")
                yield Button("Cancel", id="edit-cancel")

    def on_mount(self) -> None:
        self.query_one("#edit-prompt", TextArea).focus()

    @property
    def error(self) -> str:
        """The error currently shown (empty when none)."""
        return str(self.query_one("#edit-error", Static).render())

    @on(Button.Pressed, "#edit-save")
    @on(Input.Submitted, "#edit-answer")
    def action_save(self) -> None:
        """Validate and store the edit; show the reason and keep the modal open if it is rejected."""
        prompt = self.query_one("#edit-prompt", TextArea).text
        answer = self.query_one("#edit-answer", Input).value
        result = self.save(prompt, answer)
        if result.ok:
            self.dismiss(result)
        else:
            error = self.query_one("#edit-error", Static)
            error.update(f"✘ not saved — {result.error}")
            error.add_class("shown")

    @on(Button.Pressed, "#edit-cancel")
    def action_cancel(self) -> None:
        """Close without saving."""
        self.dismiss(None)
