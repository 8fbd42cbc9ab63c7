"""The funnel section of the comparison report: what each compared session's simulator wrote, what validation and
the duplicate cap admitted, and what its agent trained on.

Each session's entries are `genenv_engine.storage.store.Store.funnel`'s (read read-only by
`genenv_engine.storage.store.read_only_funnel`). `funnel_total_rows` sums them per session and benchmark over the
epochs; `funnel_epoch_rows` gives one row per epoch with one cell per session (and benchmark), ``kept/drafts →
trained``; `funnel_screen_rows` gives the compare screen's compact table (drafts, kept/drafts, trained, top rejection
reasons). Plain text cells (session names made safe to draw); the Markdown renderer escapes them. Nothing here imports
Textual.
"""

from __future__ import annotations

from typing import Any

from genenv_console.safe import clean
from genenv_engine.reports.funnel import counts_text

TOTAL_COLUMNS = (
    "session",
    "bench",
    "epochs",
    "drafts",
    "passed validator",
    "kept by duplicate cap",
    "kept / drafts",
    "trained",
    "rejected by reason",
    "trained by source",
)
"""Column labels of the funnel totals table."""

SCREEN_COLUMNS = ("session", "bench", "drafts", "valid (kept/drafts)", "trained", "top rejections")
"""Column labels of the compare screen's funnel table."""

TOP_REASONS = 2
"""Rejection reasons the compare screen's funnel table names per row (the most frequent)."""


def _sum_counts(dicts: list[dict[str, int]]) -> dict[str, int]:
    """Count dicts added key by key.

    >>> _sum_counts([{"a": 1}, {"a": 2, "b": 1}])
    {'a': 3, 'b': 1}
    """
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


def funnel_total_rows(names: list[str], funnels: list[list[dict[str, Any]]]) -> list[list[str]]:
    """Per session (in order) and benchmark, its funnel summed over the epochs (`TOTAL_COLUMNS`); ``trained``
    adds each epoch's distinct trained tasks. A session with no funnel gets one row of dashes.

    >>> e = {"epoch": 1, "benchmark": "b", "drafts": 4, "passed": 3, "valid": 2, "trained": 5,
    ...      "rejected": {"parse_error": 1, "duplicate": 1}, "trained_by_source": {"fresh": 2, "base": 3}}
    >>> funnel_total_rows(["run"], [[e, {**e, "epoch": 2}]])
    [['run', 'b', '2', '8', '6', '4', '0.500', '10', 'duplicate 2, parse_error 2', 'base 6, fresh 4']]
    """
    rows = []
    for name, entries in zip(names, funnels, strict=False):
        shown = clean(name, 60, one_line=True)
        benches = sorted({e["benchmark"] for e in entries})
        if not benches:
            rows.append([shown, "-", "0", *["-"] * (len(TOTAL_COLUMNS) - 3)])
        for bench in benches:
            es = [e for e in entries if e["benchmark"] == bench]
            drafts, passed, kept, trained = (sum(e[k] for e in es) for k in ("drafts", "passed", "valid", "trained"))
            share = f"{kept / drafts:.3f}" if drafts else "-"
            rows.append(
                [
                    shown,
                    clean(bench, 20, one_line=True),
                    str(len(es)),
                    str(drafts),
                    str(passed),
                    str(kept),
                    share,
                    str(trained),
                    clean(counts_text(_sum_counts([e["rejected"] for e in es])), 300, one_line=True),
                    counts_text(_sum_counts([e["trained_by_source"] for e in es])),
                ]
            )
    return rows


def top_reasons(counts: dict[str, int], n: int = TOP_REASONS, limit: int = 40) -> str:
    """The ``n`` most frequent reasons with their counts (ties by name, each made safe to draw and cut at ``limit``
    characters), ``+k more`` when others were left out; a dash when there are none.

    >>> top_reasons({"parse_error": 2, "duplicate_cap": 3, "bad_args": 1}), top_reasons({})
    ('duplicate_cap 3, parse_error 2, +1 more', '—')
    """
    if not counts:
        return "—"
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = [f"{clean(k or '(no reason)', limit, one_line=True)} {v}" for k, v in ranked[:n]]
    return ", ".join(shown + ([f"+{len(ranked) - n} more"] if len(ranked) > n else []))


def funnel_screen_rows(names: list[str], funnels: list[list[dict[str, Any]]]) -> list[list[str]]:
    """Per session (in order) and benchmark, its funnel summed over the epochs, as the compare screen shows it
    (`SCREEN_COLUMNS`): drafts, kept/drafts, trained (each epoch's distinct trained tasks, added up) and the
    `TOP_REASONS` most frequent rejection reasons. A session with no funnel gets one row of dashes.

    >>> e = {"epoch": 1, "benchmark": "b", "drafts": 4, "valid": 2, "trained": 5, "rejected": {"parse_error": 2}}
    >>> funnel_screen_rows(["run", "new"], [[e, {**e, "epoch": 2}], []])
    [['run', 'b', '8', '0.500', '10', 'parse_error 4'], ['new', '-', '-', '-', '-', '-']]
    """
    rows = []
    for name, entries in zip(names, funnels, strict=False):
        shown = clean(name, 60, one_line=True)
        benches = sorted({e["benchmark"] for e in entries})
        if not benches:
            rows.append([shown, *["-"] * (len(SCREEN_COLUMNS) - 1)])
        for bench in benches:
            es = [e for e in entries if e["benchmark"] == bench]
            drafts, kept, trained = (sum(e[k] for e in es) for k in ("drafts", "valid", "trained"))
            rows.append(
                [
                    shown,
                    clean(bench, 20, one_line=True),
                    str(drafts),
                    f"{kept / drafts:.3f}" if drafts else "-",
                    str(trained),
                    top_reasons(_sum_counts([e["rejected"] for e in es])),
                ]
            )
    return rows


def funnel_epoch_rows(names: list[str], funnels: list[list[dict[str, Any]]]) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of the per-epoch funnel: one row per epoch any session has, one column per session (and
    benchmark, when the sessions cover more than one), each cell ``kept/drafts → trained`` ('-' when that session
    has no funnel that epoch).

    >>> e = {"epoch": 1, "benchmark": "b", "drafts": 8, "valid": 6, "trained": 14}
    >>> funnel_epoch_rows(["x", "y"], [[e], [{**e, "epoch": 2, "valid": 7}]])
    (['epoch', 'x', 'y'], [['1', '6/8 → 14', '-'], ['2', '-', '7/8 → 14']])
    """
    benches = sorted({e["benchmark"] for entries in funnels for e in entries})
    columns = [
        (i, bench) for i in range(len(names)) for bench in benches if any(e["benchmark"] == bench for e in funnels[i])
    ]
    headers = ["epoch"] + [
        clean(names[i], 40, one_line=True) + (f" {bench}" if len(benches) > 1 else "") for i, bench in columns
    ]
    by_key = {(i, e["epoch"], e["benchmark"]): e for i, entries in enumerate(funnels) for e in entries}
    epochs = sorted({e["epoch"] for entries in funnels for e in entries})
    rows = []
    for epoch in epochs:
        cells = []
        for i, bench in columns:
            e = by_key.get((i, epoch, bench))
            cells.append("-" if e is None else f"{e['valid']}/{e['drafts']} → {e['trained']}")
        rows.append([str(epoch), *cells])
    return headers, rows
