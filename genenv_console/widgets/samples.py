"""The warm start's samples panel: what each role writes right now (its latest greedy sample), shown in the
phase plot's place while the warm start runs, next to the loss curves.

Samples are model output and task text, so every string goes through the console's sanitiser and is shown
as a rich `Text` (never parsed as markup).
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from genenv_console.safe import clean
from genenv_console.state import WarmStart


def samples_text(data: WarmStart | None, width: int = 300) -> Text:
    """The panel's text: per role, the step, the verdict, the prompt shown and the text written.

    >>> from genenv_engine.core.events import WarmStartSample
    >>> s = WarmStartSample(0, "agent", 88, 700, "add 2 and 3", "[add(2, 3)]\\x1b[2J", False, "gold: [add(a=2, b=3)]")
    >>> print(samples_text(WarmStart({}, {}, {"agent": s})).plain)
    agent at step 88/700: wrong
      task: add 2 and 3
      wrote: [add(2, 3)]␛[2J
      gold: [add(a=2, b=3)]
    """
    if data is None or not data.samples:
        return Text("warm-start samples: the first arrives after an eighth of each role's steps")
    out = Text()
    for role, sample in data.samples.items():
        if out:
            out.append("\n")
        out.append(f"{clean(role, 40, one_line=True)} at step {sample.step}/{sample.steps}: ", style="bold")
        out.append(sample.verdict, style="green" if sample.ok else "red")
        out.append(f"\n  {'task' if role == 'agent' else 'seed'}: {clean(sample.prompt, width, one_line=True)}")
        out.append(f"\n  wrote: {clean(sample.text, width, one_line=True)}")
        if sample.detail:
            out.append(f"\n  {clean(sample.detail, width, one_line=True)}", style="dim")
    return out


class WarmStartSamples(Static):
    """Each role's latest warm-start sample; the dashboard sets ``data``."""

    data: reactive[WarmStart | None] = reactive(None, always_update=True)

    def watch_data(self, data: WarmStart | None) -> None:
        self.update(samples_text(data))
