"""The status bar: session, epoch, phase, progress, elapsed time, the rollout workers' throughput, whether the
run is paused, and the latest epoch's plugin faults when it had any."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from genenv_console.safe import clean

RUN_LABELS = {
    "idle": ("idle — r to run", "dim"),
    "running": ("▶ running", "bold green"),
    "pausing": ("⏸ pausing… (at the next batch)", "bold yellow"),
    "paused": ("⏸ PAUSED — space to resume", "bold black on yellow"),
    "stopping": ("■ stopping… (at the next batch)", "bold yellow"),
    "stopped": ("■ stopped — r to resume", "bold"),
    "finished": ("✔ finished", "bold green"),
    "failed": ("✖ failed — r to resume", "bold white on red"),
    "attached": ("◉ following another engine — space pauses it, s stops it", "bold cyan"),
    "attached-paused": ("⏸ pause asked of the other engine — space resumes it", "bold yellow"),
}
"""Label and style of each run state."""


def format_elapsed(seconds: float | None) -> str:
    """Elapsed time as h:mm:ss or m:ss ('-' when not running).

    >>> format_elapsed(None), format_elapsed(75.2), format_elapsed(3725)
    ('-', '1:15', '1:02:05')
    """
    if seconds is None:
        return "-"
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class StatusBar(Widget):
    """One line describing the run; the app sets its attributes."""

    session: reactive[str] = reactive("")
    epoch: reactive[int | None] = reactive(None)
    target: reactive[int] = reactive(0)
    phase: reactive[str] = reactive("")
    progress: reactive[tuple[str, int, int] | None] = reactive(None)
    elapsed: reactive[float | None] = reactive(None)
    run: reactive[str] = reactive("idle")
    pause_after_epoch: reactive[bool] = reactive(False)
    worker_line: reactive[str] = reactive("")
    """The latest epoch's rollout workers (`genenv_console.state.RunState.rollout_workers`), "" before any (not
    ``workers``: Textual's widgets have their own)."""
    fault_line: reactive[str] = reactive("")
    """The latest epoch's plugin faults per benchmark (`genenv_console.state.RunState.plugin_faults`), "" if none."""

    def render(self) -> Text:
        """The bar's text."""
        sep = (" │ ", "dim")
        # a finished run's epoch counter is one past its target: never show "epoch 5/4"
        epoch = "-" if self.epoch is None else str(min(self.epoch, self.target) if self.target else self.epoch)
        session = clean(self.session, 80, one_line=True) if self.session else "no session"
        parts: list[tuple[str, str] | str] = [
            ("genenv ", "bold"),
            (session, "bold cyan"),
            sep,
            f"epoch {epoch}/{self.target}",
            sep,
        ]
        if self.progress is not None:
            name, done, total = self.progress
            parts.append(f"{name} {done}/{total}")
        else:
            parts.append(self.phase or "-")
        parts += [sep, f"elapsed {format_elapsed(self.elapsed)}", sep, RUN_LABELS.get(self.run, (self.run, ""))]
        if self.pause_after_epoch:
            parts += [sep, ("pause after epoch", "yellow")]
        if self.fault_line:
            parts += [sep, (f"plugin faults: {clean(self.fault_line, 120, one_line=True)}", "bold white on red")]
        if self.worker_line:  # last: a narrow terminal cuts it before the run state
            parts += [sep, (f"rollout workers {self.worker_line}", "dim")]
        return Text.assemble(*parts)

    @property
    def text(self) -> str:
        """The bar as plain text (what a test or a screen reader sees)."""
        return self.render().plain
