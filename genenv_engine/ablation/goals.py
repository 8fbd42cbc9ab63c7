"""Per-seed calibration and diversity goals of a simulator arm, checked on the bench's epoch rows.

The ablation tables give each arm's seed-mean curves; a mean over seeds can sit at alpha while every seed misses it
(one too hard, one too easy). The goals the simulator is held to are per seed (a simulator that calibrates
without collapsing): mean p-hat of the epoch's valid generated tasks within alpha +- 0.1 by epoch 2, within
alpha +- 0.05 from epoch 4 on, the pool-wide uniqueness of each epoch's valid tasks (share whose near-duplicate key
no earlier task had) at least 0.5, and no difficulty level above 70 % of an epoch's valid tasks. This module checks
them, one row per arm x seed, and renders that as the ablation report's "Calibration goals" section.
"""

from __future__ import annotations

from typing import Any

from genenv_engine.core.curriculum import HOLD_BAND, TARGET_BAND, first_in_band

ENTER_BAND, ENTER_BY = TARGET_BAND, 2
"""Mean p-hat within alpha +- ENTER_BAND by epoch ENTER_BY."""


HOLD_FROM = 4
"""Mean p-hat within alpha +- HOLD_BAND (`genenv_engine.core.curriculum`) at every epoch from HOLD_FROM on."""


UNIQUE_MIN = 0.5
"""Least pool-wide uniqueness of an epoch's valid generated tasks."""


LEVEL_MAX = 0.7
"""Largest share one difficulty level may take of an epoch's valid generated tasks."""


def largest_share(mix: dict[str, int]) -> float | None:
    """The largest level's share of a difficulty mix (None when it is empty).

    >>> largest_share({"L1": 1, "L2": 3}), largest_share({}) is None
    (0.75, True)
    """
    total = sum(mix.values())
    return max(mix.values()) / total if total else None


def seed_goals(epochs: list[dict[str, Any]], alpha: float) -> dict[str, Any]:
    """The goals checked on one arm x seed's epoch rows (epoch 0, the warm start, is skipped).

    A goal with no data to judge (no valid task in any epoch, no epoch from HOLD_FROM) is ``None``, not met.

    >>> rows = [{"epoch": 1, "p_hat": 0.3, "pool_unique_fraction": 0.9, "difficulty_mix": {"L1": 2, "L2": 2}},
    ...         {"epoch": 2, "p_hat": 0.45, "pool_unique_fraction": 0.6, "difficulty_mix": {"L2": 3, "L3": 1}},
    ...         {"epoch": 4, "p_hat": 0.53, "pool_unique_fraction": 0.4, "difficulty_mix": {"L3": 4}}]
    >>> g = seed_goals(rows, 0.5)
    >>> g["first_in_band"], g["in_band_by_2"], g["held_from_4"], g["min_unique"], g["max_level_share"], g["met"]
    (2, True, True, 0.4, 1.0, False)
    """
    rows = [e for e in epochs if e["epoch"] > 0]
    series = [(e["epoch"], e.get("p_hat")) for e in rows]
    first = first_in_band(series, alpha, ENTER_BAND)
    late = [p for epoch, p in series if epoch >= HOLD_FROM and p is not None]
    uniques = [e["pool_unique_fraction"] for e in rows if e.get("pool_unique_fraction") is not None]
    shares = [s for e in rows if (s := largest_share(e.get("difficulty_mix") or {})) is not None]
    goals = {
        "in_band_by_2": first is not None and first <= ENTER_BY,
        "held_from_4": all(abs(p - alpha) <= HOLD_BAND for p in late) if late else None,
        "unique_kept": min(uniques) >= UNIQUE_MIN if uniques else None,
        "levels_mixed": max(shares) <= LEVEL_MAX if shares else None,
    }
    return {
        "p_hat": series,
        "first_in_band": first,
        "mean_abs_gap": (
            sum(abs(p - alpha) for _, p in series if p is not None) / max(1, sum(p is not None for _, p in series))
        )
        if any(p is not None for _, p in series)
        else None,
        "min_unique": min(uniques) if uniques else None,
        "max_level_share": max(shares) if shares else None,
        **goals,
        "met": all(v is True for v in goals.values()),
    }


def goals_table(runs: dict[str, dict[str, dict[str, Any]]], alpha: float) -> list[dict[str, Any]]:
    """One row per arm x seed that generated tasks (arms without a simulator have no p-hat to calibrate)."""
    out = []
    for arm, by_seed in runs.items():
        for seed, run in sorted(by_seed.items(), key=lambda kv: int(kv[0])):
            if any(e.get("p_hat") is not None for e in run["epochs"]):
                out.append({"arm": arm, "seed": int(seed), **seed_goals(run["epochs"], alpha)})
    return out


def _mark(ok: bool | None) -> str:
    return {True: "yes", False: "no", None: "–"}[ok]


def markdown(runs: dict[str, dict[str, dict[str, Any]]], alpha: float) -> list[str]:
    """The report section: one line per arm x seed with its p-hat curve and each goal met or not."""
    rows = goals_table(runs, alpha)
    if not rows:
        return []
    lines = [
        "## Calibration goals (per seed)",
        "",
        f"Goals: mean p̂ within α ± {ENTER_BAND} by epoch {ENTER_BY}; within α ± {HOLD_BAND} at every epoch "
        f"from {HOLD_FROM}; pool-wide uniqueness of each epoch's valid tasks ≥ {UNIQUE_MIN}; no level above "
        f"{LEVEL_MAX:.0%} of an epoch's valid tasks. α = {alpha}.",
        "",
        "| arm | seed | mean p̂ e1, e2, … | mean abs(p̂−α) | first epoch in α±0.1 | in band by e2 | "
        "within ±0.05 from e4 | min unique (pool) | largest level share | all met |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        curve = " ".join("–" if p is None else f"{p:.2f}" for _, p in r["p_hat"])
        gap = "–" if r["mean_abs_gap"] is None else f"{r['mean_abs_gap']:.3f}"
        unique = "–" if r["min_unique"] is None else f"{r['min_unique']:.2f}"
        share = "–" if r["max_level_share"] is None else f"{r['max_level_share']:.2f}"
        lines.append(
            f"| {r['arm']} | {r['seed']} | {curve} | {gap} | {r['first_in_band'] or '–'} | "
            f"{_mark(r['in_band_by_2'])} | {_mark(r['held_from_4'])} | {unique} "
            f"({_mark(r['unique_kept'])}) | {share} ({_mark(r['levels_mixed'])}) | {_mark(r['met'])} |"
        )
    return lines + [""]
