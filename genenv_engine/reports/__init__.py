"""Session reports: ``genenv report SESSION_DIR [SESSION_DIR ...] [--format md|html|both] [--out PATH]``.

A report tells a session's story from its folder alone: the run (config, versions, machine, time by
phase, tokens), difficulty calibration against alpha and the band (the paper's Fig. 7), the agent's
held-out progress, and the tasks (counts, a sample per difficulty bucket with lineage, every hand
edit, pin and ban). With several sessions it opens with a comparison table and overlaid curves
labelled by simulator mode (the paper's Fig. 6). Partial epochs are shown and marked as partial.

Output (``PATH`` is a folder): ``report.md`` with its figures as PNG files beside it, and/or
``report.html``, one self-contained page (figures embedded as data URIs, no external resource).
Default folder: ``<session>/report/`` for one session, ``reports/compare-<YYYYmmdd-HHMMSS>/`` under the
current directory for several.

Importing this package is cheap; matplotlib is imported only when figures are drawn.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Iterable
from pathlib import Path

FORMATS = ("md", "html")


def default_out(session_dirs: list[Path]) -> Path:
    """``<session>/report`` for one session, ``reports/compare-<time>`` for several."""
    if len(session_dirs) == 1:
        return Path(session_dirs[0]) / "report"
    return Path("reports") / f"compare-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def _formats(formats: Iterable[str] | str) -> list[str]:
    items = [formats] if isinstance(formats, str) else list(formats)
    out: list[str] = []
    for f in items:
        for name in FORMATS if f == "both" else (f,):
            if name not in FORMATS:
                raise ValueError(f"unknown report format {name!r}: use md, html or both")
            if name not in out:
                out.append(name)
    if not out:
        raise ValueError("no report format asked for")
    return out


def build_report(
    session_dirs: list[Path], formats: Iterable[str] | str = FORMATS, out: Path | None = None
) -> dict[str, Path]:
    """Write the report of one session (or a comparison of several); return ``{"md": path, "html": path}``
    for the formats asked for. Raises FileNotFoundError for a folder that is not a session."""
    from genenv_engine.reports import plots
    from genenv_engine.reports.data import load_session
    from genenv_engine.reports.document import build_document, labels_for
    from genenv_engine.reports.html import render_html
    from genenv_engine.reports.markdown import render_markdown

    dirs = [Path(d) for d in session_dirs]
    if not dirs:
        raise ValueError("name at least one session folder")
    wanted = _formats(formats)
    sessions = [load_session(d) for d in dirs]
    title, blocks = build_document(sessions)
    if len(sessions) == 1:
        figures = plots.session_figures(sessions[0])
    else:
        figures = plots.comparison_figures(sessions, labels_for(sessions))
        for i, s in enumerate(sessions, start=1):
            figures.update(plots.session_figures(s, prefix=f"s{i}_"))
    folder = Path(out) if out is not None else default_out(dirs)
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    if "md" in wanted:
        names = {}
        for key, png in figures.items():
            name = f"{key}.png"
            (folder / name).write_bytes(png)
            names[key] = name
        path = folder / "report.md"
        path.write_text(render_markdown(title, blocks, names), encoding="utf-8")
        written["md"] = path
    if "html" in wanted:
        path = folder / "report.html"
        path.write_text(render_html(title, blocks, figures), encoding="utf-8")
        written["html"] = path
    return written


def add_report_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``report`` command to a ``genenv`` argparse sub-parser set."""
    parser = subparsers.add_parser(
        "report",
        help="write a Markdown and/or self-contained HTML report of one or more sessions",
        description="Report a session (or compare several): config, calibration, held-out progress, tasks.",
    )
    parser.add_argument("sessions", nargs="+", type=Path, metavar="SESSION_DIR", help="session folder(s)")
    parser.add_argument("--format", choices=("md", "html", "both"), default="both", help="output format (default both)")
    parser.add_argument(
        "--out",
        type=Path,
        metavar="PATH",
        help="output folder (default <session>/report, or reports/compare-<time> for several)",
    )
    return parser


def run_report(args: argparse.Namespace) -> int:
    """Run ``genenv report`` from parsed arguments; print the written paths. Returns the exit code."""
    try:
        written = build_report(args.sessions, args.format, args.out)
    except (FileNotFoundError, ValueError) as exc:
        print(f"genenv: {exc}", file=sys.stderr)
        return 2
    for fmt, path in written.items():
        print(f"{fmt}: {path}")
    return 0


__all__ = ["FORMATS", "add_report_parser", "build_report", "default_out", "run_report"]
