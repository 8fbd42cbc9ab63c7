"""Write a report document as one self-contained HTML page: inline CSS, figures as base64 data URIs.

The page loads nothing: no external URL, no script, and a Content-Security-Policy that forbids
both, so it opens anywhere offline. Every piece of text from a session goes through `html.escape`.
"""

from __future__ import annotations

import base64
import html
import re

from genenv_engine.reports.blocks import Block, Bullets, Code, Heading, Image, Note, Para, Table, visible

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1f21;
       max-width: 1180px; margin: 0 auto; padding: 1.5rem 2rem 4rem; background: #fff; }
h1 { font-size: 1.7rem; border-bottom: 2px solid #1f77b4; padding-bottom: .3rem; }
h2 { font-size: 1.35rem; margin-top: 2.4rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
h3 { font-size: 1.12rem; margin-top: 1.8rem; } h4, h5, h6 { font-size: 1rem; margin-top: 1.3rem; }
nav { background: #f6f8fa; border: 1px solid #e1e4e8; border-radius: 6px; padding: .6rem 1rem; }
nav ul { margin: .2rem 0; padding-left: 1.2rem; } nav a { color: #0b5cad; text-decoration: none; }
.scroll { overflow-x: auto; margin: .6rem 0 1rem; }
table { border-collapse: collapse; font-size: .86rem; }
th, td { border: 1px solid #d0d7de; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f0f3f6; } tr:nth-child(even) td { background: #fafbfc; }
tr.partial td { background: #fff4d6 !important; }
.badge { display: inline-block; background: #f5c542; color: #4a3a00; border-radius: 3px; padding: 0 .35rem;
         font-size: .75rem; font-weight: 600; margin-right: .3rem; }
.note { border-left: 4px solid #1f77b4; background: #eef5fb; padding: .5rem .8rem; margin: .8rem 0; }
.note.warn { border-color: #d4a000; background: #fff7dc; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #e1e4e8; }
figcaption { font-size: .82rem; color: #57606a; }
.code .label { font-size: .8rem; color: #57606a; margin-top: .5rem; }
pre { background: #f6f8fa; border: 1px solid #e1e4e8; border-radius: 4px; padding: .5rem .7rem;
      white-space: pre-wrap; word-break: break-word; font-size: .82rem; margin: .2rem 0 .6rem; }
code { background: #f0f3f6; padding: 0 .2rem; border-radius: 3px; }
"""


def esc(text: object) -> str:
    """HTML-escape text for element content and attribute values (invisible characters made visible first).

    >>> esc('<script>alert("1")</script> & co')
    '&lt;script&gt;alert(&quot;1&quot;)&lt;/script&gt; &amp; co'
    """
    return html.escape(visible(str(text)), quote=True)


def anchor_id(text: str) -> str:
    """A safe id attribute value.

    >>> anchor_id("s1-bucket-L<2>")
    's1-bucket-L-2'
    """
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


def data_uri(png: bytes) -> str:
    """A PNG as a ``data:image/png;base64,`` URI."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _para(p: Para) -> str:
    return f"<p>{p.render(esc, lambda t: f'<strong>{esc(t)}</strong>', lambda t: f'<code>{esc(t)}</code>')}</p>"


def _table(t: Table) -> str:
    ident = f' id="{anchor_id(t.anchor)}"' if t.anchor else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in t.headers)
    rows = []
    for i, row in enumerate(t.rows):
        mark = t.marks[i] if i < len(t.marks) else ""
        cls = f' class="{anchor_id(mark)}"' if mark else ""
        cells = "".join(f"<td>{esc(c)}</td>" for c in row)
        rows.append(f"<tr{cls}>{cells}</tr>")
    return (
        f'<div class="scroll"><table{ident}><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
    )


def render_html(title: str, blocks: list[Block], images: dict[str, bytes]) -> str:
    """The full HTML page of a report; ``images`` maps an image key to PNG bytes."""
    body: list[str] = []
    toc: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            level = min(block.level, 6)
            ident = anchor_id(block.anchor)
            body.append(f'<h{level} id="{ident}">{esc(block.text)}</h{level}>')
            if block.toc and level <= 3:
                indent = ' style="margin-left:1.2rem"' if level == 3 else ""
                toc.append(f'<li{indent}><a href="#{ident}">{esc(block.text)}</a></li>')
        elif isinstance(block, Para):
            body.append(_para(block))
        elif isinstance(block, Note):
            cls = "note warn" if block.kind == "warn" else "note"
            badge = '<span class="badge">PARTIAL</span>' if block.kind == "warn" else ""
            body.append(f'<div class="{cls}">{badge}{esc(block.text)}</div>')
        elif isinstance(block, Table):
            body.append(_table(block))
        elif isinstance(block, Image):
            if block.key in images:
                body.append(
                    f'<figure><img src="{data_uri(images[block.key])}" alt="{esc(block.alt)}">'
                    f"<figcaption>{esc(block.alt)}</figcaption></figure>"
                )
        elif isinstance(block, Code):
            body.append(
                f'<div class="code"><div class="label">{esc(block.label)}</div><pre>{esc(block.text)}</pre></div>'
            )
        elif isinstance(block, Bullets):
            body.append("<ul>" + "".join(f"<li>{esc(i)}</li>" for i in block.items) + "</ul>")
    nav = f"<nav><strong>Contents</strong><ul>{''.join(toc)}</ul></nav>" if toc else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"<h1>{esc(title)}</h1>\n{nav}\n" + "\n".join(body) + "\n</body>\n</html>\n"
    )
