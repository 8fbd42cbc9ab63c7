"""The simulator's validity per benchmark: how many tasks it drafted, how many the store kept as valid, and why
the others were rejected.

Each epoch row of a run carries ``validity``: per benchmark with drafts that epoch, its ``drafts``, ``valid`` and
``rejected`` (count per reason prefix), from the store's funnel (`genenv_engine.storage.store.funnel_validity` of
`genenv_engine.storage.store.Store.funnel`, which counts an epoch's generated tasks and a static augmentation).
`arm_validity` sums one arm's rows from epoch 1 on over every seed; `markdown` renders the report's "Validity by
benchmark" section. Rows without the field (run records written before it) count as no data, which is told apart from an
arm that wrote no drafts.
"""

from __future__ import annotations

from typing import Any

from genenv_engine.core.records import ADMISSIONS


def top_reasons(counts: dict[str, int]) -> dict[str, int]:
    """Reasons by count, most frequent first (ties by name).

    >>> top_reasons({"b": 1, "a": 1, "c": 4})
    {'c': 4, 'a': 1, 'b': 1}
    """
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def arm_validity(runs: list[dict[str, Any]], benchmarks: list[str]) -> dict[str, dict[str, Any]]:
    """Per benchmark, one arm's validity over its runs (seeds) and their epochs from 1 on: total ``drafts`` and
    ``valid``, ``valid_fraction`` (None without drafts), the ``rejected`` reasons summed (`top_reasons` order),
    and ``seeds`` / ``seeds_with_data``: the runs, and those whose rows carry validity (older records do not).

    >>> rows = [{"epoch": 0, "validity": {"b": {"drafts": 9, "valid": 9, "rejected": {}}}},
    ...         {"epoch": 1, "validity": {"b": {"drafts": 4, "valid": 3, "rejected": {"x": 1}}}},
    ...         {"epoch": 2, "validity": {}}]
    >>> arm_validity([{"epochs": rows}, {"epochs": [{"epoch": 1}]}], ["b"])["b"]
    {'drafts': 4, 'valid': 3, 'valid_fraction': 0.75, 'rejected': {'x': 1}, 'seeds': 2, 'seeds_with_data': 1}
    """
    out: dict[str, dict[str, Any]] = {}
    with_data = [r for r in runs if any("validity" in e for e in r["epochs"])]
    for bench in benchmarks:
        entries = [
            e["validity"][bench]
            for r in with_data
            for e in r["epochs"]
            if e["epoch"] >= 1 and bench in (e.get("validity") or {})
        ]
        drafts, valid = sum(v["drafts"] for v in entries), sum(v["valid"] for v in entries)
        rejected: dict[str, int] = {}
        for v in entries:
            for reason, n in v["rejected"].items():
                rejected[reason] = rejected.get(reason, 0) + n
        out[bench] = {
            "drafts": drafts,
            "valid": valid,
            "valid_fraction": valid / drafts if drafts else None,
            "rejected": top_reasons(rejected),
            "seeds": len(runs),
            "seeds_with_data": len(with_data),
        }
        if any("admitted" in v for v in entries):  # runs that count how each valid task was admitted
            out[bench]["admitted"] = {
                way: sum((v.get("admitted") or {}).get(way, 0) for v in entries) for way in ADMISSIONS
            }
    return out


TOP_REASONS = 3
"""How many rejection reasons a row of the Markdown section names."""


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or "(none given)"


def markdown(results: dict[str, Any]) -> list[str]:
    """The "Validity by benchmark" section: one row per arm × benchmark with drafts (epochs ≥ 1, all seeds), the
    valid fraction and the `TOP_REASONS` most frequent rejection reasons; arms with no drafts, and arms whose runs
    carry no validity, are named under the table instead. Empty when no arm has a summary."""
    s = results["summary"]
    rows, no_drafts, no_data = [], [], []
    for arm in results["arms"]:
        by_bench = (s.get(arm) or {}).get("validity")
        if not by_bench:
            if arm in s:
                no_data.append(arm)
            continue
        if not any(v["seeds_with_data"] for v in by_bench.values()):
            no_data.append(arm)
        elif not any(v["drafts"] for v in by_bench.values()):
            no_drafts.append(arm)
        else:
            rows += [(arm, bench, v) for bench, v in by_bench.items()]
    if not (rows or no_drafts or no_data):
        return []
    lines = [
        "## Validity by benchmark",
        "",
        "The simulator's drafts from epoch 1 on, summed over seeds: the share the store kept as valid, and the "
        f"{TOP_REASONS} most frequent rejection reasons (reason prefix: count).",
        "",
    ]
    if rows:
        ways = any("admitted" in v for _, _, v in rows)
        lines += [
            "| arm | benchmark | drafts | valid fraction (valid) |"
            + (" admitted as written / on the gold / mended |" if ways else "")
            + " top rejections | seeds |",
            "|---|---|---|---|" + ("---|" if ways else "") + "---|---|",
        ]
        for arm, bench, v in rows:
            frac = "–" if v["valid_fraction"] is None else f"{v['valid_fraction']:.3f} ({v['valid']})"
            reasons = ", ".join(f"{_cell(r)}: {n}" for r, n in list(v["rejected"].items())[:TOP_REASONS]) or "–"
            admitted = ""
            if ways:
                admitted = " / ".join(str(v["admitted"][w]) for w in ADMISSIONS) if "admitted" in v else "–"
                admitted = f" {admitted} |"
            lines.append(
                f"| {arm} | {bench} | {v['drafts']} | {frac} |{admitted} {reasons} | "
                f"{v['seeds_with_data']}/{v['seeds']} |"
            )
        lines.append("")
    if no_drafts:
        lines += [f"No drafts: {', '.join(no_drafts)}.", ""]
    if no_data:
        lines += [f"No validity data (run records written before it): {', '.join(no_data)}.", ""]
    return lines
