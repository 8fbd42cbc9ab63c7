"""Pure formatting of the published figures: rounding halves away from zero, signed differences with a typographic
minus, rates without their leading zero, minutes, thousands, dated folders, the spread over seeds and its t-test."""

from __future__ import annotations

import math
import re
import statistics
from decimal import ROUND_HALF_UP, Decimal

DATED_FOLDER = re.compile(r"^(\d{4}-\d\d-\d\d)[a-z]?$")
"""A dated results folder's name: the date, then a letter telling folders of one day apart."""


def rounded(value: float, places: int) -> str:
    """``value`` to ``places`` decimals, halves away from zero, after dropping float noise (a share of 400 tasks
    such as 43/400 - 0/400 is printed as the fraction it is).

    >>> rounded(0.1075, 3), rounded(0.0375, 3), rounded(-0.0375, 3), rounded(0.43 - 0.3225, 3)
    ('0.108', '0.038', '-0.038', '0.108')
    """
    exact = Decimal(repr(round(value, 10)))
    return str(exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def signed(value: float, places: int = 3) -> str:
    """A difference with its sign, a typographic minus and ``places`` decimals.

    >>> signed(0.1075), signed(-0.005), signed(0.0), signed(-0.0075, 4)
    ('+0.108', '−0.005', '+0.000', '−0.0075')
    """
    text = rounded(value, places)
    return text.replace("-", "−") if text.startswith("-") else "+" + text


def bare(value: float, places: int = 3) -> str:
    """A rate or standard error without its leading zero: ``.017``.

    >>> bare(0.01734), bare(0.0061, 4), bare(1.5, 1)
    ('.017', '.0061', '1.5')
    """
    text = rounded(value, places)
    return text[1:] if text.startswith("0.") else text


def minutes(seconds: float) -> str:
    """Seconds as minutes with one decimal.

    >>> minutes(507.6), minutes(1700.2), minutes(1071.0)
    ('8.5 min', '28.3 min', '17.9 min')
    """
    return f"{rounded(seconds / 60, 1)} min"


def thousands(value: float) -> str:
    """A whole number with thousands separators.

    >>> thousands(1032.9), thousands(400)
    ('1,033', '400')
    """
    return f"{round(value):,}"


def day(folder: str) -> str:
    """The date of a dated results folder (a letter after the date tells folders of one day apart).

    >>> day("2026-12-05c"), day("2026-12-02")
    ('2026-12-05', '2026-12-02')
    """
    match = DATED_FOLDER.match(folder)
    if not match:
        raise ValueError(f"not a dated folder: {folder!r}")
    return match.group(1)


def seed_spread(diffs: list[float]) -> tuple[float, float, float]:
    """Mean, sample sd and the mean in units of its standard error over seeds (sd / sqrt(n)).

    >>> [round(x, 4) for x in seed_spread([-0.0075, -0.0075, -0.0125, -0.0125, 0.0025])]
    [-0.0075, 0.0061, -2.7386]
    """
    mean, sd = statistics.mean(diffs), statistics.stdev(diffs)
    return mean, sd, (mean / (sd / len(diffs) ** 0.5) if sd else 0.0)


def t_two_sided(t: float, df: int) -> float:
    """The two-sided p-value of Student's t with ``df`` degrees of freedom (the closed series for whole ``df``,
    Abramowitz and Stegun 26.7.3-4), for a mean over seeds in units of its standard error (`seed_spread`).

    >>> round(t_two_sided(2.7386, 4), 3), round(t_two_sided(2.776, 4), 3), round(t_two_sided(12.706, 1), 3)
    (0.052, 0.05, 0.05)
    >>> round(t_two_sided(-2.228, 10), 3), t_two_sided(0.0, 3)
    (0.05, 1.0)
    """
    theta = math.atan(abs(t) / math.sqrt(df))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    term, series = 1.0, 1.0
    if df % 2:
        for k in range(1, (df - 1) // 2):
            term *= cos2 * 2 * k / (2 * k + 1)
            series += term
        inside = theta + (sin * math.cos(theta) * series if df > 1 else 0.0)
        return max(0.0, 1 - 2 / math.pi * inside)
    for k in range(1, df // 2):
        term *= cos2 * (2 * k - 1) / (2 * k)
        series += term
    return max(0.0, 1 - sin * series)


def joined(values: list[str]) -> str:
    """Values listed the way the pages list them.

    >>> joined(["+0.1", "−0.2", "+0.3"]), joined(["a", "b"])
    ('+0.1, −0.2, +0.3', 'a, b')
    """
    return ", ".join(values)
