"""The funnel arithmetic: an epoch's grouped draft and training counts folded into per-benchmark funnel entries
(drafts → passed the validator → kept by the duplicate cap → trained), and the validity report read from them.

Pure functions over rows; the queries that produce the rows are in `genenv_engine.storage.store.readers`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

CAP_REASONS = ("heldout_copy", "duplicate", "duplicate_cap")
"""Reason prefixes of the drafts that passed the validator but the duplicate cap rejected
(`genenv_engine.training.simulator.cap_duplicates`)."""
FUNNEL_STAGES = ("drafts", "passed", "valid", "trained")
"""The funnel's stages: written, admitted by the validator, kept by the duplicate cap (stored valid), trained on."""
TRAIN_SOURCES = ("fresh", "replayed", "pinned", "edited", "imported", "base")
"""Where a trained task came from: written that epoch (or a static batch scored that epoch), the earlier generated
pool, pinned (its status now), a hand edit, an imported task, the base data (train split or unseen pool)."""


def funnel_validity(funnel: list[dict[str, Any]]) -> dict[int, dict[str, dict[str, Any]]]:
    """Per epoch, per benchmark with at least one draft: ``drafts``, ``valid``, ``valid_fraction`` and ``rejected``
    from `Store.funnel` entries (a benchmark that only trained base tasks that epoch is left out): the validity
    report of ``genenv status --json``, the loggers and the ablation tables.

    >>> funnel = [{"epoch": 1, "benchmark": "bfcl", "drafts": 5, "valid": 3, "rejected": {"parse_error": 2}},
    ...           {"epoch": 1, "benchmark": "chain", "drafts": 0, "valid": 0, "rejected": {}}]
    >>> funnel_validity(funnel)
    {1: {'bfcl': {'drafts': 5, 'valid': 3, 'valid_fraction': 0.6, 'rejected': {'parse_error': 2}}}}
    """
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for e in funnel:
        if e["drafts"]:
            out.setdefault(e["epoch"], {})[e["benchmark"]] = {
                "drafts": e["drafts"],
                "valid": e["valid"],
                "valid_fraction": round(e["valid"] / e["drafts"], 4),
                "rejected": dict(e["rejected"]),
            }
    return out


def with_admitted(
    validity: dict[str, dict[str, Any]], admitted: dict[str, dict[str, int]]
) -> dict[str, dict[str, Any]]:
    """An epoch's validity per benchmark with how its valid tasks were admitted (the epoch metrics' ``admitted``:
    as written, on the recomputed gold, mended), where the run counted it.

    >>> with_admitted({"b": {"valid": 3}, "c": {"valid": 0}}, {"b": {"mended": 1, "as_written": 2}})
    {'b': {'valid': 3, 'admitted': {'mended': 1, 'as_written': 2}}, 'c': {'valid': 0}}
    """
    return {b: {**v, "admitted": dict(admitted[b])} if b in admitted else v for b, v in validity.items()}


def _add(counts: dict[str, int], key: str, n: int) -> None:
    counts[key] = counts.get(key, 0) + n


def _fold_funnel(drafts: Iterable[dict[str, Any]], trained: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`Store.funnel`'s entries from its two grouped queries' rows.

    >>> drafts = [{"epoch": 1, "benchmark": "b", "valid": 1, "reason": None, "level": 2, "n": 3},
    ...           {"epoch": 1, "benchmark": "b", "valid": 0, "reason": "parse_error", "level": None, "n": 2},
    ...           {"epoch": 1, "benchmark": "b", "valid": 0, "reason": "duplicate_cap", "level": 1, "n": 1}]
    >>> trained = [{"epoch": 1, "benchmark": "b", "origin": "generated", "source": "fresh", "level": 2, "n": 3,
    ...             "rollouts": 12}, {"epoch": 1, "benchmark": "b", "origin": "seed", "source": "base", "level": 1,
    ...             "n": 2, "rollouts": 8}]
    >>> (e,) = _fold_funnel(drafts, trained)
    >>> e["drafts"], e["passed"], e["valid"], e["trained"], e["train_rollouts"], e["rejected"]
    (6, 4, 3, 5, 20, {'duplicate_cap': 1, 'parse_error': 2})
    >>> e["trained_by_source"], e["levels"]["drafts"], e["levels"]["trained"]
    ({'base': 2, 'fresh': 3}, {'L1': 1, 'L2': 3, 'L?': 2}, {'L1': 2, 'L2': 3})
    """
    out: dict[tuple[int, str], dict[str, Any]] = {}

    def entry(row: dict[str, Any]) -> dict[str, Any]:
        key = (row["epoch"], row["benchmark"])
        if key not in out:
            out[key] = {
                "epoch": key[0],
                "benchmark": key[1],
                "drafts": 0,
                "passed": 0,
                "valid": 0,
                "rejected": {},
                "trained": 0,
                "train_rollouts": 0,
                "trained_by_origin": {},
                "trained_by_source": {},
                "levels": {stage: {} for stage in FUNNEL_STAGES},
            }
        return out[key]

    for row in drafts:
        e, n, level = entry(row), row["n"], "L?" if row["level"] is None else f"L{row['level']}"
        stages = ["drafts"]
        if row["valid"]:
            stages += ["passed", "valid"]
        else:
            _add(e["rejected"], row["reason"] or "", n)
            stages += ["passed"] if row["reason"] in CAP_REASONS else []
        for stage in stages:
            e[stage] += n
            _add(e["levels"][stage], level, n)
    for row in trained:
        e, n = entry(row), row["n"]
        e["trained"] += n
        e["train_rollouts"] += row["rollouts"]
        _add(e["trained_by_origin"], row["origin"] or "", n)
        _add(e["trained_by_source"], row["source"], n)
        _add(e["levels"]["trained"], "L?" if row["level"] is None else f"L{row['level']}", n)
    for e in out.values():
        for key in ("rejected", "trained_by_origin", "trained_by_source"):
            e[key] = dict(sorted(e[key].items()))
        e["levels"] = {stage: dict(sorted(c.items())) for stage, c in e["levels"].items()}
    return [out[k] for k in sorted(out)]
