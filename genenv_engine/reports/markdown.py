"""Write a report document as GitHub-flavoured Markdown, with its figures as PNG files beside it.

Nothing from a session becomes Markdown or HTML markup: inline text (table cells, headings, notes)
has Markdown control characters backslash-escaped and ``& < > "`` written as entities (Markdown
renderers pass raw HTML through), and task text goes into fenced code blocks whose fence is longer
than any backtick run inside, so it renders literally.
"""

from __future__ import annotations

import re

from genenv_engine.reports.blocks import Block, Bullets, Code, Heading, Image, Note, Para, Table, visible

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
_ESCAPE = set("\\`*_[]|#~!")


def md_text(text: str) -> str:
    r"""Escape text for inline Markdown: control characters backslash-escaped, HTML characters as entities,
    newlines as spaces.

    >>> md_text("a*b_c|d <script> [x](y) `z` # h")
    'a\\*b\\_c\\|d &lt;script&gt; \\[x\\](y) \\`z\\` \\# h'
    """
    out = []
    for ch in visible(str(text)).replace("\n", " ").replace("\t", " "):
        if ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ch in _ESCAPE:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run in ``text`` (at least three).

    >>> fence_for("no ticks"), fence_for("a ```` b")
    ('```', '`````')
    """
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def code_block(text: str) -> str:
    """``text`` as a fenced code block that renders literally."""
    body = visible(text.replace("\r\n", "\n"))
    fence = fence_for(body)
    return f"{fence}text\n{body}\n{fence}"


def _inline_code(text: str) -> str:
    text = visible(text).replace("\n", " ")
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _para(p: Para) -> str:
    return p.render(md_text, lambda t: f"**{md_text(t)}**", _inline_code)


def _table(t: Table) -> str:
    lines = ["| " + " | ".join(md_text(h) for h in t.headers) + " |", "|" + "|".join(" --- " for _ in t.headers) + "|"]
    for row in t.rows:
        cells = [md_text(c) if c != "" else " " for c in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_markdown(title: str, blocks: list[Block], images: dict[str, str]) -> str:
    """The Markdown text of a report; ``images`` maps an image key to its file name beside the report."""
    out = [f"# {md_text(title)}", ""]
    for block in blocks:
        if isinstance(block, Heading):
            out += [f"{'#' * min(block.level, 6)} {md_text(block.text)}", ""]
        elif isinstance(block, Para):
            out += [_para(block), ""]
        elif isinstance(block, Note):
            label = "Warning" if block.kind == "warn" else "Note"
            out += [f"> **{label}:** {md_text(block.text)}", ""]
        elif isinstance(block, Table):
            out += [_table(block), ""]
        elif isinstance(block, Image):
            if block.key in images:
                out += [f"![{md_text(block.alt)}]({images[block.key]})", ""]
        elif isinstance(block, Code):
            out += [f"*{md_text(block.label)}:*", "", code_block(block.text), ""]
        elif isinstance(block, Bullets):
            out += [f"- {md_text(item)}" for item in block.items] + [""]
    return "\n".join(out).rstrip() + "\n"
