"""How reliable a noisy score is, measured as psychometrics measures a test: the agreement of repeated
measurements of the same items (`retest_correlation`, `icc1`), of two disjoint halves of one measurement stepped up
to its full length (`split_half`, `spearman_brown`), the agreement of their orders (`spearman`), and the
reliability that binomial sampling alone leaves to a batch's p-hat (`binomial_reliability`).

A reliability is the share of a score's variance across items that is the items' true differences rather than
measurement noise: near 1 the score orders items as their truth does; near 0 it orders them by chance, and a learner
weighted by it (the simulator's RWR weights) learns noise. Pure functions over plain sequences.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import combinations

TINY = 1e-18
"""Variance at or below this per item is none: float rounding (a mean of equal numbers that is off by an ulp) is not
a difference between items."""


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's correlation of two equally long sequences; None when either has no variance (or under 2 items).

    >>> pearson([1, 2, 3], [2, 4, 6]), pearson([1, 2, 3], [3, 2, 1]), pearson([1, 1, 1], [1, 2, 3])
    (1.0, -1.0, None)
    >>> pearson([0.6065306597126334] * 12, list(range(12))) is None  # equal up to rounding
    True
    """
    if len(x) != len(y):
        raise ValueError(f"pearson needs sequences of one length, got {len(x)} and {len(y)}")
    if len(x) < 2:
        return None
    mx, my = _mean(x), _mean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx <= TINY * len(x) or syy <= TINY * len(y):
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank.

    >>> ranks([0.5, 0.1, 0.5, 0.9])
    [2.5, 1.0, 2.5, 4.0]
    """
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson's on the ranks); None as `pearson`.

    >>> spearman([1, 2, 3, 4], [10, 20, 30, 1000]), spearman([1, 2, 3], [1, 1, 1])
    (1.0, None)
    """
    return pearson(ranks(x), ranks(y))


def retest_correlation(
    rounds: Sequence[Sequence[float]],
    correlation: Callable[[Sequence[float], Sequence[float]], float | None] = pearson,
) -> float | None:
    """The mean ``correlation`` (Pearson's; `spearman` for the agreement of their orders) over every pair of
    rounds, each round one score per item (the same items in the same order); None when no pair has one.

    >>> retest_correlation([[0.1, 0.5, 0.9], [0.2, 0.5, 0.8], [0.1, 0.6, 0.9]]) > 0.95
    True
    >>> retest_correlation([[0.1, 0.9], [0.9, 0.1]])
    -1.0
    >>> retest_correlation([[1.0, 2.0, 3.0], [1.1, 2.5, 2.9], [3.0, 2.0, 1.0]], spearman)
    -0.3333333333333333
    """
    pairs = [correlation(a, b) for a, b in combinations(rounds, 2)]
    known = [r for r in pairs if r is not None]
    return _mean(known) if known else None


def icc1(rounds: Sequence[Sequence[float]]) -> float | None:
    """The one-way random-effects intraclass correlation ICC(1) of single measurements: (MSB - MSW) / (MSB +
    (m - 1) MSW) over n items measured in m rounds; None under 2 items or 2 rounds, or with no variance at all.

    >>> icc1([[1, 2, 3], [1, 2, 3]])
    1.0
    >>> round(icc1([[0, 1, 0, 1], [1, 0, 1, 0]]), 3)
    -1.0
    """
    m, n = len(rounds), len(rounds[0]) if rounds else 0
    if m < 2 or n < 2 or any(len(r) != n for r in rounds):
        return None
    item_means = [_mean([r[i] for r in rounds]) for i in range(n)]
    grand = _mean(item_means)
    msb = m * sum((mu - grand) ** 2 for mu in item_means) / (n - 1)
    msw = sum((r[i] - item_means[i]) ** 2 for r in rounds for i in range(n)) / (n * (m - 1))
    if msb + (m - 1) * msw <= TINY:
        return None
    return (msb - msw) / (msb + (m - 1) * msw)


def spearman_brown(r: float, factor: float = 2.0) -> float:
    """The reliability of a measurement ``factor`` times as long as one of reliability ``r``.

    >>> spearman_brown(0.5), spearman_brown(0.5, 1), round(spearman_brown(0.2, 4), 3)
    (0.6666666666666666, 0.5, 0.5)
    """
    return factor * r / (1 + (factor - 1) * r)


def split_half(first: Sequence[float], second: Sequence[float]) -> float | None:
    """The reliability of a score made of two halves (e.g. two disjoint halves of a grounded reward's probes), each
    half one score per item: their correlation stepped up to the full length; None as `pearson`.

    >>> round(split_half([0.1, 0.4, 0.8, 0.9], [0.2, 0.3, 0.9, 0.8]), 3)
    0.974
    """
    r = pearson(first, second)
    return None if r is None else spearman_brown(r)


def binomial_reliability(
    batches: Sequence[Sequence[float]], attempts: int, estimated_from: int | None = None
) -> float | None:
    """The reliability that sampling alone leaves to batch p-hats: each batch a sequence of its tasks' true success
    rates, each task tried ``attempts`` times. The true score of a batch is its tasks' mean rate; the noise of its
    p-hat has variance sum p(1 - p) / (attempts * B^2). Returns var(true) / (var(true) + mean noise variance); None
    under 2 batches or with no variance. With ``estimated_from``, the rates are themselves estimates, each from that
    many attempts: their own sampling variance is taken out of var(true) (at least 0), which would otherwise count
    noise as signal.

    >>> round(binomial_reliability([[0.1] * 4, [0.9] * 4], 8), 3)
    0.991
    >>> round(binomial_reliability([[0.4, 0.6], [0.5, 0.5], [0.6, 0.4]], 4), 3)
    0.0
    >>> binomial_reliability([[0.45], [0.55]], 8, estimated_from=48)  # a spread that 48 attempts give by chance
    0.0
    """
    if len(batches) < 2 or attempts < 1:
        return None
    true = [_mean(b) for b in batches]
    mu = _mean(true)
    var_true = sum((t - mu) ** 2 for t in true) / (len(true) - 1)
    if estimated_from:
        var_true = max(
            0.0, var_true - _mean([sum(p * (1 - p) for p in b) / (estimated_from * len(b) ** 2) for b in batches])
        )
    noise = _mean([sum(p * (1 - p) for p in b) / (attempts * len(b) ** 2) for b in batches])
    if var_true + noise <= TINY:
        return None
    return var_true / (var_true + noise)
