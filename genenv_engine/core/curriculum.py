"""The alpha-curriculum: success rates, the simulator's reward R_env, the band filter, RWR weights.

Pure functions of floats, one per equation of the GenEnv paper (Eqs. 2-3 and the RWR weighting), and the grounded
reward (the agent's measured progress on siblings of a batch's tasks across its update), so they can be tested
against hand-computed values and reused by reports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def success_rate(successes: int, attempts: int) -> float | None:
    """Empirical success rate p_hat = k / n; None when nothing was attempted.

    >>> success_rate(3, 8)
    0.375
    >>> success_rate(0, 0) is None
    True
    """
    if attempts < 0 or successes < 0 or successes > attempts:
        raise ValueError(f"need 0 <= successes <= attempts, got {successes}/{attempts}")
    return successes / attempts if attempts else None


def alpha_reward(p_hat: float, alpha: float = 0.5, beta: float = 2.0) -> float:
    """The alpha-curriculum reward R_env = exp(-beta * (p_hat - alpha)^2).

    >>> alpha_reward(0.5)
    1.0
    >>> round(alpha_reward(0.4), 6)   # exp(-2 * 0.01)
    0.980199
    >>> round(alpha_reward(0.0, beta=10.0), 6)   # exp(-10 * 0.25)
    0.082085
    """
    return math.exp(-beta * (p_hat - alpha) ** 2)


def agent0_reward(p_hat: float, alpha: float = 0.5) -> float:
    """Agent0's curriculum reward 1 - 2 |p_hat - alpha| (its alpha is 0.5), clipped at 0 for other targets.

    >>> agent0_reward(0.5), agent0_reward(0.25), agent0_reward(1.0), agent0_reward(0.0, alpha=0.8)
    (1.0, 0.5, 0.0, 0.0)
    """
    return max(0.0, 1.0 - 2.0 * abs(p_hat - alpha))


def env_reward(p_hat: float, kind: str, alpha: float, beta: float) -> float:
    """R_env under the configured curriculum: ``alpha`` (Eq. 3), ``agent0`` or ``uniform`` (always 1).

    >>> env_reward(0.9, "uniform", 0.5, 2.0), round(env_reward(0.9, "agent0", 0.5, 2.0), 6)
    (1.0, 0.2)
    """
    if kind == "uniform":
        return 1.0
    if kind == "agent0":
        return agent0_reward(p_hat, alpha)
    if kind == "alpha":
        return alpha_reward(p_hat, alpha, beta)
    raise ValueError(f"unknown curriculum reward {kind!r}")


def grounded_reward(before: Sequence[bool], after: Sequence[bool]) -> float | None:
    """The grounded reward of a variation batch: the agent's greedy success on the batch's probe siblings after the
    epoch's agent update minus its success on the same siblings before it, R_grounded = success_after −
    success_before, in [-1, 1] (one answer per sibling each time; None without siblings).

    >>> grounded_reward([False, False, True, False], [True, True, True, False])
    0.5
    >>> grounded_reward([True, True], [False, True]), grounded_reward([], []) is None
    (-0.5, True)
    """
    if len(before) != len(after):
        raise ValueError(f"need one answer before and one after per sibling, got {len(before)} and {len(after)}")
    if not before:
        return None
    return (sum(map(bool, after)) - sum(map(bool, before))) / len(before)


def in_band(p_hat: float, alpha: float = 0.5, k_min: float = 0.1) -> bool:
    """Whether a batch is kept for the simulator update: |p_hat - alpha| <= k_min (with float slack).

    >>> in_band(0.6), in_band(0.4), in_band(0.61), in_band(0.375)
    (True, True, False, False)
    """
    return abs(p_hat - alpha) <= k_min + 1e-9


TARGET_BAND = 0.1
"""Half-width of the calibration target that studies report against: mean p-hat in [alpha - 0.1, alpha + 0.1]
(the paper's k_min)."""
HOLD_BAND = 0.05
"""Half-width of the tighter band a calibrated simulator is held to once it has reached the target."""


def first_in_band(series: Sequence[tuple[int, float | None]], alpha: float, band: float = TARGET_BAND) -> int | None:
    """First epoch whose mean p-hat lies in [alpha - band, alpha + band] (None: never).

    >>> first_in_band([(1, 0.2), (2, 0.45), (3, 0.5)], 0.5)
    2
    >>> first_in_band([(1, 0.2)], 0.5) is None
    True
    """
    for epoch, p in series:
        if p is not None and in_band(p, alpha, band):
            return epoch
    return None


def rwr_weights(rewards: Sequence[float], lam: float = 1.0) -> list[float]:
    """Reward-weighted-regression weights proportional to exp(lambda * R_env), normalised to mean 1.

    >>> [round(w, 4) for w in rwr_weights([1.0, 0.0], lam=1.0)]   # e/(e+1)*2, 1/(e+1)*2
    [1.4621, 0.5379]
    >>> rwr_weights([0.98, 0.98])
    [1.0, 1.0]
    >>> [round(w, 4) for w in rwr_weights([0.5, 0.0, 0.0])]   # grounded rewards: one batch's siblings improved
    [1.3556, 0.8222, 0.8222]
    """
    if not rewards:
        return []
    top = max(rewards)
    raw = [math.exp(lam * (r - top)) for r in rewards]  # shift by max for stability
    mean = sum(raw) / len(raw)
    return [w / mean for w in raw]


def calibration_error(p_hats: Sequence[float], alpha: float | Sequence[float] = 0.5) -> float | None:
    """Mean |p_hat - alpha| over variation batches (``alpha`` one target, or each batch's own); None when there
    are none.

    >>> calibration_error([0.25, 0.75, 0.5]), calibration_error([0.25, 0.75], [0.5, 0.25])
    (0.16666666666666666, 0.375)
    """
    targets = [alpha] * len(p_hats) if isinstance(alpha, (int, float)) else list(alpha)
    return sum(abs(p - a) for p, a in zip(p_hats, targets, strict=False)) / len(p_hats) if p_hats else None


def seed_level_weights(
    stats: dict[int, tuple[int, int, float]], alpha: float = 0.5, beta: float = 20.0, floor: float = 0.05
) -> dict[int, float]:
    """Sampling weights of seed difficulty levels for the ``alpha`` seed sampler, normalised to sum 1.

    ``stats[level] = (generated, valid, p_hat)``: how many variations of seeds at that level the simulator wrote
    in recent epochs, how many were valid, and the agent's pooled success p_hat on the valid ones. A level's
    weight is its expected share of valid tasks near alpha, ``(valid + 1) / (generated + 2) * exp(-beta *
    (p_hat - alpha)^2)``, floored at ``floor`` times the largest so no level stops being tried; a level with no
    valid variation yet is scored at p_hat = alpha (optimistic: it gets tried).

    >>> w = seed_level_weights({2: (20, 10, 1.0), 3: (20, 10, 0.55), 4: (20, 2, 0.5)})
    >>> {k: round(v, 3) for k, v in w.items()}
    {2: 0.037, 3: 0.748, 4: 0.214}
    >>> seed_level_weights({2: (0, 0, 0.0), 3: (0, 0, 0.0)})
    {2: 0.5, 3: 0.5}
    """
    raw = {}
    for level, (generated, valid, p_hat) in stats.items():
        p = p_hat if valid else alpha
        raw[level] = (valid + 1) / (generated + 2) * math.exp(-beta * (p - alpha) ** 2)
    top = max(raw.values(), default=0.0)
    raw = {k: max(v, floor * top) for k, v in raw.items()}
    total = sum(raw.values())
    return {k: v / total for k, v in sorted(raw.items())} if total else {}


def is_success(reward: float, threshold: float) -> bool:
    """A rollout counts toward p_hat when its reward reaches the threshold (soft rewards).

    >>> is_success(0.6, 0.5), is_success(0.4, 0.5), is_success(1.0, 1.0)
    (True, False, True)
    """
    return reward >= threshold - 1e-12
