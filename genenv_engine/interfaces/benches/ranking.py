"""``genenv bench ranking``: the paper's Theorem 1 checked numerically.

Two task families have success probabilities p1, p2 at distances Δ1 < Δ2 from α. After n rollouts
each, p̂_i = Binomial(n, p_i)/n, and R_env = exp(−β(p̂−α)²) mis-ranks them when
R_env(p̂1) ≤ R_env(p̂2), i.e. |p̂1−α| ≥ |p̂2−α| (β only rescales R_env). For each pair and n this
reports the exact mis-ranking probability (a sum over the two binomial distributions), a Monte
Carlo estimate of the same event, and the theorem's bound 4·exp(−(2/9)(Δ2−Δ1)²·n), which must be
at least the exact value.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from genenv_engine.interfaces.benches.common import rich_table

DEFAULT_PAIRS = ((0.5, 0.7), (0.4, 0.8), (0.55, 0.9), (0.45, 0.1))
"""(p1, p2) with α = 0.5: the first family is nearer α in each."""
DEFAULT_NS = (4, 8, 16, 32, 64, 128, 256, 512)


def _pmf(n: int, p: float) -> list[float]:
    """Binomial(n, p) probabilities of 0..n successes."""
    return [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]


def misrank_exact(p1: float, p2: float, n: int, alpha: float) -> float:
    """Pr[|p̂1−α| ≥ |p̂2−α|] with n rollouts of each family.

    >>> round(misrank_exact(0.5, 0.5, 4, 0.5), 4) > 0.5
    True
    >>> misrank_exact(0.5, 1.0, 2, 0.5)  # p̂2 is always 1: only |p̂1−α| = 0.5 mis-ranks
    0.5
    """
    a, b = _pmf(n, p1), _pmf(n, p2)
    dist2 = [abs(j / n - alpha) for j in range(n + 1)]
    total = 0.0
    for i, pa in enumerate(a):
        d1 = abs(i / n - alpha)
        total += pa * sum(pb for j, pb in enumerate(b) if dist2[j] <= d1 + 1e-12)
    return total


def misrank_monte_carlo(p1: float, p2: float, n: int, alpha: float, trials: int, seed: int) -> float:
    """The same probability estimated from ``trials`` simulated pairs of rollout batches."""
    import numpy as np

    rng = np.random.default_rng(seed)
    h1 = rng.binomial(n, p1, trials) / n
    h2 = rng.binomial(n, p2, trials) / n
    return float(np.mean(np.abs(h1 - alpha) >= np.abs(h2 - alpha) - 1e-12))


def bound(delta1: float, delta2: float, n: int) -> float:
    """Theorem 1: 4·exp(−(2/9)(Δ2−Δ1)²·n).

    >>> round(bound(0.0, 0.3, 100), 4)
    0.5413
    """
    return 4 * math.exp(-(2 / 9) * (delta2 - delta1) ** 2 * n)


def compute(
    pairs: list[tuple[float, float]], ns: list[int], alpha: float, trials: int, seed: int = 0
) -> dict[str, Any]:
    """The table of (p1, p2, Δ1, Δ2, n, Monte Carlo, exact, bound, holds) rows for every pair and n, and for
    each pair the smallest n at which the bound says anything (drops below 1)."""
    rows = []
    for p1, p2 in pairs:
        d1, d2 = abs(p1 - alpha), abs(p2 - alpha)
        if not d1 < d2:
            raise ValueError(f"pair ({p1}, {p2}): the first family must be nearer alpha={alpha}")
        for n in ns:
            exact = misrank_exact(p1, p2, n, alpha)
            b = bound(d1, d2, n)
            rows.append(
                {
                    "p1": p1,
                    "p2": p2,
                    "delta1": round(d1, 4),
                    "delta2": round(d2, 4),
                    "n": n,
                    "empirical": round(misrank_monte_carlo(p1, p2, n, alpha, trials, seed), 5) if trials else None,
                    "exact": round(exact, 6),
                    "bound": round(b, 6),
                    "bound_holds": exact <= b + 1e-12,
                }
            )
    informative = {
        f"{p1}:{p2}": math.ceil(9 * math.log(4) / (2 * (abs(p2 - alpha) - abs(p1 - alpha)) ** 2)) for p1, p2 in pairs
    }
    return {
        "alpha": alpha,
        "trials": trials,
        "table": rows,
        "bound_holds_everywhere": all(r["bound_holds"] for r in rows),
        "bound_below_one_from_n": informative,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``genenv bench ranking``."""
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument(
        "--pair",
        action="append",
        default=[],
        metavar="P1:P2",
        help="success probabilities of the nearer and the farther family (repeatable)",
    )
    parser.add_argument("--n", action="append", type=int, default=[], help="rollouts per family (repeatable)")
    parser.add_argument("--trials", type=int, default=20000, help="Monte Carlo trials per cell (0: exact only)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Entry point."""
    pairs = [tuple(float(x) for x in p.split(":")) for p in args.pair] or list(DEFAULT_PAIRS)
    return compute(pairs, args.n or list(DEFAULT_NS), args.alpha, args.trials)  # type: ignore[arg-type]


def table(result: dict[str, Any]):
    """Rich table: empirical and exact mis-ranking probability against the bound."""
    t = rich_table(
        f"Theorem 1: Pr[R_env mis-ranks] vs 4·exp(−(2/9)(Δ2−Δ1)²n), α={result['alpha']}",
        ("p1", "p2", "Δ1", "Δ2", "n", "empirical (MC)", "exact", "bound", "holds"),
        left=(),
    )
    for r in result["table"]:
        t.add_row(
            str(r["p1"]),
            str(r["p2"]),
            str(r["delta1"]),
            str(r["delta2"]),
            str(r["n"]),
            "-" if r["empirical"] is None else f"{r['empirical']:.4f}",
            f"{r['exact']:.4f}",
            f"{r['bound']:.4f}" if r["bound"] < 1e3 else f"{r['bound']:.3g}",
            "yes" if r["bound_holds"] else "NO",
        )
    return t
