"""The console's one sanitiser for text that comes from a session: task prompts and answers, rollout
responses, validator reasons, ids, search text and error messages.

Generated text is untrusted. Textual parses plain strings given to most widgets as markup (an
unbalanced ``[/]`` raises `MarkupError`, ``[@click=…]`` becomes an action, ``[bold red]`` is drawn),
and control characters reach the terminal as they are (an OSC sequence retitles the window,
``ESC[2J`` clears the screen). So every such string goes through `clean` (control, C1 and
bidirectional-override characters made visible with the reports' `visible`, very long text cut
with a marker) and is handed to widgets as a rich `Text` (`safe_text`), which is never parsed as
markup. Nothing here imports Textual.
"""

from __future__ import annotations

from rich.text import Text

from genenv_engine.reports.blocks import visible

MAX_CHARS = 4000
"""Longest text shown in one place (the detail pane's prompt, answer, a rollout); longer text is cut."""


def clean(text: object, limit: int = MAX_CHARS, *, one_line: bool = False) -> str:
    r"""``text`` made safe to show: invisible characters visible, at most ``limit`` characters kept.

    Tabs become four spaces; ``one_line`` turns every run of whitespace (newlines included) into one
    space, for cells and snippets, whose cut is marked by a bare ``…``; other cut text says how much is left.

    >>> clean("[bold]x\x1b]0;pwned\x07\u202e")
    '[bold]x␛]0;pwned␇<U+202E>'
    >>> clean("abcdef", 3)
    'abc… [3 more characters]'
    >>> clean("a\n\n b", one_line=True), clean("abcdef", 3, one_line=True)
    ('a b', 'abc…')
    """
    s = "" if text is None else str(text)
    cut = len(s) - limit
    if cut > 0:
        s = s[:limit]
    s = visible(s).replace("\t", "    ")
    if one_line:
        s = " ".join(s.split())
    if cut > 0:
        s += "…" if one_line else f"… [{cut:,} more characters]"
    return s


def safe_text(text: object, limit: int = MAX_CHARS, *, one_line: bool = False, style: str = "") -> Text:
    """`clean` text as a rich `Text`, which widgets draw literally (never parsed as markup).

    >>> safe_text("[red]hi[/]").plain
    '[red]hi[/]'
    """
    return Text(clean(text, limit, one_line=one_line), style=style)
