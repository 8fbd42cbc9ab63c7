"""The blocks a report is made of (headings, paragraphs, notes, tables, images, code, bullets), format-neutral,
and the text helpers that fill their cells: `visible` (invisible characters made visible), `num`, `duration`,
`status_text`, and `Builder`, the list a report's sections append blocks to.

Block text is plain text: `genenv_engine.reports.markdown` and `genenv_engine.reports.html` escape it for their
format, so task text can never become markup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from genenv_engine.reports.session_data import EpochData


@dataclass
class Heading:
    level: int
    text: str
    anchor: str
    toc: bool = True
    """Listed in the HTML table of contents (task-level headings are not)."""


@dataclass
class Para:
    """A paragraph: plain strings, with ("b", text) for bold and ("code", text) for inline code."""

    parts: list[str | tuple[str, str]]

    def render(self, text: Callable[[str], str], bold: Callable[[str], str], code: Callable[[str], str]) -> str:
        """The paragraph in one output format: each part through the function for its kind, joined.

        >>> Para(["a ", ("b", "B"), " ", ("code", "c")]).render(str.lower, str.upper, lambda t: f"`{t}`")
        'a B `c`'
        """
        return "".join(
            text(part) if isinstance(part, str) else (bold if part[0] == "b" else code)(part[1]) for part in self.parts
        )


@dataclass
class Note:
    """A call-out; ``kind`` is ``warn`` (partial epochs, crashes) or ``info``."""

    text: str
    kind: str = "info"


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    anchor: str = ""
    marks: list[str] = field(default_factory=list)
    """Per row, a CSS-ish mark (``partial``) or ``""``."""


@dataclass
class Image:
    key: str
    alt: str


@dataclass
class Code:
    """Literal text (task prompts and answers), shown verbatim."""

    label: str
    text: str


@dataclass
class Bullets:
    items: list[str]


Block = Heading | Para | Note | Table | Image | Code | Bullets


# -- formatting ------------------------------------------------------------------------------------

DASH = "—"
_BIDI = {0x200E, 0x200F, 0x061C, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


def visible(text: str) -> str:
    r"""Make invisible characters visible: C0/C1 controls (but newline and tab) as control pictures or
    ``<U+XXXX>``, and bidirectional overrides as ``<U+XXXX>`` so they cannot reorder what a reader sees;
    line/paragraph separators and lone surrogates (which no UTF-8 file or terminal can take) likewise.

    >>> visible("a\x1b[1mb\tc\u202ed\x85\n")
    'a␛[1mb\tc<U+202E>d<U+0085>\n'
    >>> visible("x\u2028y\ud800")
    'x<U+2028>y<U+D800>'
    """
    out = []
    for ch in text:
        cp = ord(ch)
        if ch in "\n\t":
            out.append(ch)
        elif cp < 0x20:
            out.append(chr(0x2400 + cp))
        elif cp == 0x7F:
            out.append("\u2421")
        elif 0x80 <= cp < 0xA0 or cp in _BIDI or cp in (0x2028, 0x2029) or 0xD800 <= cp < 0xE000:
            out.append(f"<U+{cp:04X}>")
        else:
            out.append(ch)
    return "".join(out)


def num(value: Any, digits: int = 3) -> str:
    """A number for a table cell: fixed decimals, a dash for missing.

    >>> num(0.4375), num(None), num(3), num(12.0, 1)
    ('0.438', '—', '3', '12.0')
    """
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    try:
        return f"{float(value):.{digits}f}"
    except (TypeError, ValueError):
        return str(value)


def duration(seconds: float | None) -> str:
    """Seconds as a short human duration.

    >>> duration(42.25), duration(3725), duration(None)
    ('42.2 s', '1 h 02 min 05 s', '—')
    """
    if seconds is None:
        return DASH
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min {s:02d} s" if h else f"{m} min {s:02d} s"


def status_text(e: EpochData) -> str:
    """The status cell of an epoch: partial and running epochs are marked loudly."""
    if e.status == "done":
        return "done"
    if e.status == "partial":
        return "PARTIAL (stopped or crashed mid-epoch)"
    return f"PARTIAL ({e.status}: no end recorded)"


def epoch_mark(e: EpochData) -> str:
    """A table row's mark for epoch ``e``: ``partial`` unless it finished."""
    return "" if e.complete else "partial"


def counts_text(d: dict[str, Any]) -> str:
    """Counts by key as one cell, sorted by key; a dash when there are none.

    >>> counts_text({"b": 2, "a": 1}), counts_text({})
    ('a: 1, b: 2', '—')
    """
    return ", ".join(f"{k}: {v}" for k, v in sorted(d.items())) if d else DASH


# -- building --------------------------------------------------------------------------------------


class Builder:
    """The blocks of a report in order, as its sections add them."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)


__all__ = [
    "Block",
    "Builder",
    "Bullets",
    "Code",
    "DASH",
    "Heading",
    "Image",
    "Note",
    "Para",
    "Table",
    "counts_text",
    "duration",
    "epoch_mark",
    "num",
    "status_text",
    "visible",
]
