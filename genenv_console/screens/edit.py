"""The hand-edit modal: change a task's prompt and answer; the environment validates before anything is saved.

The modal only collects text; the ``save`` callback (from the tasks screen) validates and stores.
A rejected edit keeps the modal open with the validator's reason and stores nothing.

The task's text is shown through the console's sanitiser: control and bidirectional characters
appear as visible symbols (and a notice says so; saving stores the text as shown), and a text
longer than `EDIT_MAX_CHARS` is shown cut and cannot be saved from here, so no edit ever stores
a silently truncated prompt.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, TextArea

from genenv_console.data import EditResult
from genenv_console.safe import clean, safe_text
from genenv_engine.core.records import Task

EDIT_MAX_CHARS = 20_000
"""Longest prompt or answer the modal edits; longer ones are shown cut and read-only."""


class EditScreen(ModalScreen[EditResult | None]):
    """Edit one task; dismisses with the stored revision, or None when cancelled."""

    CSS_PATH = "../styles/edit.tcss"
    BINDINGS = [Binding("ctrl+s", "save", "Validate & save", priority=True), Binding("escape", "cancel", "Cancel")]

    def __init__(self, task: Task, save: Callable[[str, str], EditResult]) -> None:
        super().__init__()
        self.edited = task
        self.save = save
        self.too_long = max(len(task.prompt), len(task.answer)) > EDIT_MAX_CHARS
        self.prompt_shown = clean(task.prompt, EDIT_MAX_CHARS)
        self.answer_shown = clean(task.answer, EDIT_MAX_CHARS, one_line=True)
        self.altered = (self.prompt_shown, self.answer_shown) != (task.prompt, task.answer)

    def compose(self) -> ComposeResult:
        with Vertical(id="edit-dialog"):
            task = self.edited
            yield Label(
                safe_text(f"Edit {task.id}  ({task.benchmark}, origin {task.origin})", 300, one_line=True),
                id="edit-title",
            )
            yield Label("prompt", classes="field-label")
            yield TextArea(
                self.prompt_shown, id="edit-prompt", soft_wrap=True, show_line_numbers=False, read_only=self.too_long
            )
            yield Label("gold answer", classes="field-label")
            yield Input(self.answer_shown, id="edit-answer", disabled=self.too_long)
            notice = ""
            if self.too_long:
                notice = f"too long to edit here (over {EDIT_MAX_CHARS:,} characters): shown cut, read-only"
            elif self.altered:
                notice = (
                    "invisible or control characters are shown as symbols (␛, <U+…>); saving stores the text as shown"
                )
            yield Static(notice, id="edit-notice", markup=False)
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
        if self.too_long:
            result = EditResult(False, f"this task is longer than {EDIT_MAX_CHARS:,} characters; not editable here")
        elif self.altered and (prompt, answer) == (self.prompt_shown, self.answer_shown):
            result = EditResult(False, "nothing changed")
        else:
            result = self.save(prompt, answer)
        if result.ok:
            self.dismiss(result)
        else:
            error = self.query_one("#edit-error", Static)
            error.update(safe_text(f"✘ not saved — {result.error}", 1000))
            error.add_class("shown")

    @on(Button.Pressed, "#edit-cancel")
    def action_cancel(self) -> None:
        """Close without saving."""
        self.dismiss(None)
