"""Property-based checks (hypothesis) of the reports' text escaping on random and hostile strings.

Whatever a task holds (markup of any kind, ANSI/OSC escapes, NUL, bidirectional overrides, lone
surrogates, very long text), the Markdown and HTML reports must render it without error, show it
literally (HTML: no tag or entity from the text survives unescaped; Markdown: no raw HTML, code
fences never closed early) and let no control or bidi character through.
"""

from __future__ import annotations

import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from genenv_engine.reports.blocks import Code, Para, Table, visible
from genenv_engine.reports.html import esc, render_html
from genenv_engine.reports.markdown import code_block, md_text, render_markdown

FRAGMENTS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    "[x](javascript:y)",
    "```",
    "`",
    "|",
    "&amp;",
    "\x1b]0;title\x07",
    "\x1b[2J",
    "\x00",
    "\u202e",
    "\u2066",
    "\x85",
    "\r\n",
    "\ud800",
    "\\",
    "*_#~!",
]
hostile = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=30)), max_size=10).map("".join)

BAD = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")


@settings(max_examples=2000, deadline=None)
@given(hostile)
def test_html_escape_is_literal_and_visible(text):
    out = esc(text)
    assert "<" not in out and ">" not in out and '"' not in out and not BAD.search(out)
    assert html.unescape(out) == visible(text)  # the reader sees exactly the (made-visible) text


@settings(max_examples=2000, deadline=None)
@given(hostile)
def test_markdown_inline_and_code_are_literal(text):
    inline = md_text(text)
    assert "<" not in inline and "\n" not in inline and not BAD.search(inline)
    block = code_block(text)
    fence = block.split("text\n", 1)[0]
    body = block[len(fence) + 5 : -len(fence) - 1]
    assert fence not in body and not BAD.search(block.replace("\n", " ").replace("\t", " "))


@settings(max_examples=200, deadline=None)
@given(hostile, hostile)
def test_whole_documents_render_and_encode(prompt, answer):
    blocks = [
        Para([prompt, ("b", answer), ("code", prompt)]),
        Table(["prompt", "answer"], [[prompt, answer]]),
        Code("prompt", prompt),
        Code("answer", answer),
    ]
    page = render_html(prompt, blocks, {})
    md = render_markdown(prompt, blocks, {})
    page.encode("utf-8"), md.encode("utf-8")  # what writing the files does: no lone surrogate survives
    assert "<script" not in page and "<img" not in page  # Markdown keeps them, but only inside code spans/fences
    assert not BAD.search(page.replace("\n", " ").replace("\t", " "))
    assert not BAD.search(md.replace("\n", " ").replace("\t", " "))
