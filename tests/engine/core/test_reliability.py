"""Reliability statistics (`genenv_engine.core.reliability`) against a test double of known success rates: batches of
tasks whose true rates are fixed, their p-hats drawn again and again as an agent's attempts would be."""

from __future__ import annotations

import random

import pytest

from genenv_engine.core.reliability import (
    binomial_reliability,
    icc1,
    pearson,
    retest_correlation,
    spearman,
    split_half,
)


def _batches(n: int, tasks: int, rng: random.Random) -> list[list[float]]:
    return [[rng.random() for _ in range(tasks)] for _ in range(n)]


def _p_hats(batches: list[list[float]], attempts: int, rng: random.Random) -> list[float]:
    """One measurement: each task tried ``attempts`` times, each batch's p-hat the share of successes."""
    return [
        sum(rng.random() < p for p in batch for _ in range(attempts)) / (attempts * len(batch)) for batch in batches
    ]


@pytest.mark.parametrize("attempts", [1, 4, 16])
def test_measured_retest_agreement_matches_what_sampling_alone_allows(attempts):
    rng = random.Random(attempts)
    batches = _batches(300, 4, rng)
    rounds = [_p_hats(batches, attempts, rng) for _ in range(6)]
    expected = binomial_reliability(batches, attempts)
    assert expected is not None
    assert icc1(rounds) == pytest.approx(expected, abs=0.06)
    assert retest_correlation(rounds) == pytest.approx(expected, abs=0.06)


def test_more_attempts_or_more_tasks_per_batch_make_the_p_hat_more_reliable():
    rng = random.Random(0)
    small = _batches(200, 2, rng)
    values = [binomial_reliability(small, k) for k in (1, 2, 4, 8, 16)]
    assert values == sorted(values) and values[0] < 0.5 < values[-1]
    # batches of identical true rates carry no signal whatever the attempts
    flat = [[0.5, 0.5]] * 20
    assert binomial_reliability(flat, 64) == 0.0


def test_split_half_steps_up_the_halves_agreement():
    rng = random.Random(3)
    batches = _batches(300, 8, rng)
    first = _p_hats([b[:4] for b in batches], 4, rng)
    second = _p_hats([b[4:] for b in batches], 4, rng)
    half = pearson(first, second)
    full = split_half(first, second)
    assert half is not None and full is not None and full > half
    assert full == pytest.approx(2 * half / (1 + half))


def test_rank_agreement_ignores_monotone_rescaling_and_pure_noise_has_none():
    rng = random.Random(5)
    x = [rng.random() for _ in range(500)]
    assert spearman(x, [v**3 for v in x]) == pytest.approx(1.0)
    noise = [rng.random() for _ in range(500)]
    assert abs(spearman(x, noise) or 0.0) < 0.15
