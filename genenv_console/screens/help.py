"""The help screen: every key binding of the app and of the screen it was opened from."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, Static

ABOUT = (
    "genenv console: the agent and the environment simulator co-evolve in a background thread.\n"
    "The dashboard plots calibration (generated p̂ vs α), held-out success, the p̂ histogram with R_env,\n"
    "phase times and throughput. Pause with space (takes effect between batches), inspect and edit tasks\n"
    "on the tasks screen, resume; edits and pins are used by the next epoch. ctrl+p opens the command palette.\n"
    "On the sessions screen m marks 2-4 sessions and C compares curves and funnels (read-only); x there exports it.\n"
    "F on the dashboard opens the funnel (drafts → admitted → trained) at the plot cursor's epoch; ←/→ step epochs.\n"
    "enter on a calibration epoch lists its batches, on a batch its seed and variations, on a task its GRPO groups;\n"
    "l on the tasks screen (or a batch's tasks) draws the task's lineage tree, whose enter opens a task here."
)


class HelpScreen(ModalScreen[None]):
    """List key bindings; any of escape, q or ? closes it."""

    CSS_PATH = "../styles/help.tcss"
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        with Vertical(id="help-dialog"):
            yield Label("Keys", id="help-title")
            yield Static(ABOUT, id="help-about")
            yield DataTable(id="help-table", show_cursor=False)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("where", "key", "action")
        for section, rows in self.sections:
            for key, description in rows:
                table.add_row(section, key, description)

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss(None)


def binding_rows(bindings: list) -> list[tuple[str, str]]:
    """(key, description) pairs for a BINDINGS list (tuples or Binding objects)."""
    rows = []
    for b in bindings:
        binding = b if isinstance(b, Binding) else Binding(*b)
        if binding.description:  # shown here even when left out of the footer
            rows.append((binding.key_display or binding.key.replace("_", " "), binding.description))
    return rows
