"""Statistics of the ablation tables: pure functions of numbers and ``0``/``1`` held-out strings.

Held-out results are strings with one character per task (``1``: solved), in the same task order at every epoch
of a seed, so changes and arm-against-arm differences are paired on the same tasks.
"""

from __future__ import annotations

import math
import statistics
from typing import Any


def mean_sd(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (None when undefined).

    >>> mean_sd([0.5, 0.7]) == (0.6, statistics.stdev([0.5, 0.7]))
    True
    >>> mean_sd([0.5]), mean_sd([])
    ((0.5, None), (None, None))
    """
    vals = [v for v in values if v is not None]
    if not vals:
        return None, None
    return sum(vals) / len(vals), (statistics.stdev(vals) if len(vals) > 1 else None)


def paired_change(before: str, after: str) -> tuple[float, float] | None:
    """Held-out change on the same tasks (``0``/``1`` strings): mean difference and its paired standard error.

    The standard error is sd(d_i) / sqrt(n) over per-task differences d_i in {-1, 0, 1}: tasks both epochs get
    right (or wrong) add no noise, which makes it smaller than the unpaired binomial one.

    >>> paired_change("1100", "1110")
    (0.25, 0.25)
    >>> paired_change("11", "1") is None
    True
    """
    if len(before) != len(after) or not before:
        return None
    d = [int(b) - int(a) for a, b in zip(before, after, strict=False)]
    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var / n)


def band_share(p_hats: list[float] | None, alpha: float, half_width: float) -> float | None:
    """The share of ``p_hats`` inside alpha ± ``half_width`` (`genenv_engine.core.curriculum.in_band`); None when there
    are none.

    >>> band_share([0.5, 0.25, 0.625, 1.0], 0.5, 0.125), band_share([], 0.5, 0.1)
    (0.5, None)
    """
    from genenv_engine.core.curriculum import in_band

    return sum(in_band(p, alpha, half_width) for p in p_hats) / len(p_hats) if p_hats else None


def binomial_se(p: float, n: int) -> float:
    """Standard error of a success rate measured on ``n`` tasks.

    >>> round(binomial_se(0.86, 400), 4)
    0.0173
    """
    return math.sqrt(p * (1 - p) / n)


def distinct_bigrams(texts: list[str]) -> float | None:
    """Distinct word bigrams over all bigrams of ``texts`` (1.0: no bigram repeats; near 0: one template).

    >>> distinct_bigrams(["add 3 and 5", "add 3 and 5"]), distinct_bigrams(["a b c", "c d e"])
    (0.5, 1.0)
    >>> distinct_bigrams(["a"]) is None
    True
    """
    grams = [tuple(words[i : i + 2]) for t in texts for words in [t.split()] for i in range(len(words) - 1)]
    return len(set(grams)) / len(grams) if grams else None


def level_rate(correct: str, buckets: list[str], level: str) -> float:
    picked = [c for c, b in zip(correct, buckets, strict=False) if b == level]
    return picked.count("1") / len(picked) if picked else math.nan


def level_rates(correct: str, buckets: list[str]) -> dict[str, float]:
    """Success per difficulty bucket of one ``0``/``1`` held-out string.

    >>> level_rates("1101", ["L1", "L1", "L2", "L2"])
    {'L1': 1.0, 'L2': 0.5}
    """
    return {level: level_rate(correct, buckets, level) for level in sorted(set(buckets))}


def by_level(before: str, after: str, buckets: list[str] | None) -> dict[str, dict[str, float]]:
    """The paired change of `paired_change` within each difficulty bucket (empty without buckets).

    >>> by_level("0011", "0111", ["L1", "L1", "L2", "L2"])["L1"]
    {'before': 0.0, 'after': 0.5, 'delta': 0.5, 'paired_se': 0.5, 'n': 2}
    """
    if not buckets or len(buckets) != len(before) or len(before) != len(after):
        return {}
    out = {}
    for level in sorted(set(buckets)):
        idx = [i for i, b in enumerate(buckets) if b == level]
        b, a = "".join(before[i] for i in idx), "".join(after[i] for i in idx)
        mean, se = paired_change(b, a)
        out[level] = {
            "before": b.count("1") / len(b),
            "after": a.count("1") / len(a),
            "delta": mean,
            "paired_se": se,
            "n": len(idx),
        }
    return out


def data_efficiency(genenv: list[tuple[int, float]], static: list[tuple[int, float]]) -> float | None:
    """Agent training tasks GenEnv needs to reach Static's final held-out, over Static's total.

    Series are (cumulative tasks trained, held-out) per epoch, mean over seeds, epoch 0 first. None when GenEnv
    never gets there, or when Static's final held-out is not above its epoch 0 (then there is nothing to reach).

    >>> data_efficiency([(0, .5), (96, .6), (192, .7)], [(0, .5), (96, .55), (192, .6)])
    0.5
    >>> data_efficiency([(0, .5), (96, .52)], [(0, .5), (96, .6)]) is None
    True
    >>> data_efficiency([(0, .5), (96, .45)], [(0, .5), (96, .4)]) is None   # Static got worse
    True
    """
    if not static or not genenv:
        return None
    target, total = static[-1][1], static[-1][0]
    if target <= static[0][1]:
        return None
    for tasks, value in genenv[1:]:
        if value >= target - 1e-12 and total:
            return tasks / total
    return None


def mean_series(runs: list[dict[str, Any]], key: Any) -> list[tuple[int, float | None, float | None]]:
    """Per epoch: mean and sd over the runs of ``key(row)`` (epochs every run finished)."""
    epochs = sorted(set.intersection(*[{r["epoch"] for r in run["epochs"]} for run in runs])) if runs else []
    out = []
    for e in epochs:
        vals = [key(r) for run in runs for r in run["epochs"] if r["epoch"] == e]
        m, sd = mean_sd([v for v in vals if v is not None])
        out.append((e, m, sd))
    return out
