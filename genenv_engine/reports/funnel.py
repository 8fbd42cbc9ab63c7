"""The report's funnel tables: per benchmark, one row per epoch from drafts to trained tasks.

Rows come from `genenv_engine.storage.store.Store.funnel` (kept on `SessionData.funnel`): how many tasks the simulator
wrote, how many the validator admitted, how many the duplicate cap kept (the tasks stored as valid), how many
distinct tasks the agent trained on and where they came from, with the rejection reasons and the difficulty
level mix at each stage. Plain text cells; the renderers escape them.
"""

from __future__ import annotations

from typing import Any

FUNNEL_HEADERS = [
    "epoch",
    "drafts",
    "passed validator",
    "kept by duplicate cap",
    "trained",
    "rejected by reason",
    "trained by source",
    "levels: drafts",
    "levels: passed",
    "levels: kept",
    "levels: trained",
]


def counts_text(counts: dict[str, int]) -> str:
    """A count dict as one cell, largest first then by name; a dash when empty.

    >>> counts_text({"parse_error": 2, "duplicate": 3}), counts_text({})
    ('duplicate 3, parse_error 2', '—')
    """
    if not counts:
        return "—"
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def levels_text(counts: dict[str, int]) -> str:
    """A level mix as one cell, in level order.

    >>> levels_text({"L2": 3, "L1": 1})
    'L1 1, L2 3'
    """
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "—"


def funnel_rows(entries: list[dict[str, Any]]) -> dict[str, list[list[str]]]:
    """Per benchmark (sorted), the funnel table's rows (`FUNNEL_HEADERS`), one per epoch in order."""
    out: dict[str, list[list[str]]] = {}
    for e in sorted(entries, key=lambda e: (e["benchmark"], e["epoch"])):
        lv = e["levels"]
        out.setdefault(e["benchmark"], []).append(
            [
                str(e["epoch"]),
                str(e["drafts"]),
                str(e["passed"]),
                str(e["valid"]),
                str(e["trained"]),
                counts_text(e["rejected"]),
                counts_text(e["trained_by_source"]),
                levels_text(lv["drafts"]),
                levels_text(lv["passed"]),
                levels_text(lv["valid"]),
                levels_text(lv["trained"]),
            ]
        )
    return out
