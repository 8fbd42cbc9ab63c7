"""Success estimators (`genenv_engine.core.estimators`) against a test double agent of known success rates: tasks
whose true success probabilities are fixed, its attempts drawn as Bernoulli trials with fixed seeds, the same batches
scored in several retest rounds. An estimator must agree with itself across rounds more than the raw p-hat does at
the same attempts (`genenv_engine.core.reliability`), and its mean must stay near the truth."""

from __future__ import annotations

import math
import random
from statistics import fmean

import pytest

from genenv_engine.core.estimators import ESTIMATORS, MAX_STRENGTH, Tally, raw, shrunk
from genenv_engine.core.reliability import icc1, pearson

LEVEL_RATES = {1: 0.85, 2: 0.65, 3: 0.4, 4: 0.2}
"""The test double's true success at each level's typical task."""


class KnownRatesAgent:
    """Test double: an agent whose success probability at every task is known. Batches of 1 to 3 tasks around a
    seed's level, each task's true rate its level's `LEVEL_RATES` moved by ``spread`` on the logit scale (0: the
    level says everything); replayed base tasks at each level's typical rate. ``attempt`` draws a round."""

    def __init__(self, seed: int, batches: int = 40, spread: float = 0.5, levels: dict[int, float] = LEVEL_RATES):
        rng = random.Random(seed)
        self.batches: list[list[tuple[int, float]]] = []
        for _ in range(batches):
            seed_level = rng.choice(sorted(levels))
            tasks = []
            for _ in range(rng.choice([1, 2, 3])):
                level = min(max(levels), max(min(levels), seed_level + rng.choice([-1, 0, 0, 1])))
                logit = math.log(levels[level] / (1 - levels[level])) + rng.gauss(0, spread)
                tasks.append((level, 1 / (1 + math.exp(-logit))))
            self.batches.append(tasks)
        self.replay = [(level, rate) for level, rate in levels.items() for _ in range(8)]

    @property
    def truth(self) -> list[float]:
        """Each batch's true success rate (its tasks' mean: every task gets the same attempts)."""
        return [fmean(rate for _, rate in tasks) for tasks in self.batches]

    def attempt(self, k: int, rng: random.Random) -> tuple[list[list[Tally]], list[Tally]]:
        """One round: ``k`` Bernoulli attempts at every batch task and every replayed base task."""

        def tally(level: int, rate: float, generated: bool) -> Tally:
            return Tally("bench", level, sum(rng.random() < rate for _ in range(k)), k, generated)

        batches = [[tally(level, rate, True) for level, rate in tasks] for tasks in self.batches]
        return batches, [tally(level, rate, False) for level, rate in self.replay]


def measure(agent: KnownRatesAgent, k: int, rounds: int = 6, seed: int = 0) -> dict[str, dict[str, float]]:
    """Per estimator (and ``raw``): the test-retest ICC(1) over ``rounds`` rounds, the mean correlation of a round
    with the true rates, and the bias of its mean over the batches."""
    rng = random.Random(seed)
    measured = [agent.attempt(k, rng) for _ in range(rounds)]
    truth = agent.truth
    out = {}
    for name, estimate in [("raw", None), *ESTIMATORS.items()]:
        values = [
            [float(v) for v in ([raw(b) for b in batches] if estimate is None else estimate(batches, history).values)]
            for batches, history in measured
        ]
        out[name] = {
            "icc": icc1(values) or 0.0,
            "validity": fmean(pearson(v, truth) or 0.0 for v in values),
            "bias": fmean(fmean(v) for v in values) - fmean(truth),
        }
    return out


# The figures at each k, from the fixed seeds: ICC of raw p-hat, shrunk, predicted.
LEVELS_TELL = {2: (0.509, 0.893, 0.936), 4: (0.663, 0.946, 0.967), 8: (0.803, 0.959, 0.971)}


@pytest.mark.parametrize("k", sorted(LEVELS_TELL))
def test_estimators_are_more_reliable_than_raw_p_hat_at_the_same_attempts(k):
    figures = measure(KnownRatesAgent(seed=1), k)
    raw_icc, shrunk_icc, predicted_icc = LEVELS_TELL[k]
    assert figures["raw"]["icc"] == pytest.approx(raw_icc, abs=0.001)
    assert figures["shrunk"]["icc"] == pytest.approx(shrunk_icc, abs=0.001)
    assert figures["predicted"]["icc"] == pytest.approx(predicted_icc, abs=0.001)
    for name in ESTIMATORS:
        mine = figures[name]
        assert mine["icc"] > figures["raw"]["icc"] + 0.1  # reliable ...
        assert mine["validity"] > figures["raw"]["validity"]  # ... and closer to the truth, not just steadier
        assert abs(mine["bias"]) < 0.02


def test_where_levels_tell_nothing_the_estimators_stay_near_raw_p_hat():
    """Every level alike and tasks far apart: the prior explains nothing, M is small, and the estimators neither
    gain much nor lose much."""
    flat = {level: 0.5 for level in LEVEL_RATES}
    figures = measure(KnownRatesAgent(seed=2, spread=1.5, levels=flat), 8)
    assert figures["raw"]["icc"] == pytest.approx(0.728, abs=0.001)
    for name in ESTIMATORS:
        assert abs(figures[name]["icc"] - figures["raw"]["icc"]) < 0.05
        assert figures[name]["validity"] > figures["raw"]["validity"] - 0.03
        assert abs(figures[name]["bias"]) < 0.03


def test_a_level_with_no_other_task_falls_back_to_its_benchmark_and_older_history_counts_less():
    batches = [[Tally("b", 1, s, 8)] for s in (6, 7, 6, 7)] + [[Tally("b", 2, s, 8)] for s in (2, 3, 2, 3)]
    batches.append([Tally("b", 3, 4, 8)])
    alone = shrunk(batches).values[-1]
    assert alone is not None and 0.5 < alone < 36 / 64  # no other level-3 task: toward the benchmark's 36/64
    recent = shrunk(batches, [Tally("b", 3, 0, 8, age=0)] * 4).values[-1]
    old = shrunk(batches, [Tally("b", 3, 0, 8, age=3)] * 4).values[-1]
    assert recent is not None and old is not None
    assert recent < old < 0.5  # level 3 measured hard pulls it down, less when long ago
    assert recent == pytest.approx(0.1026, abs=1e-4) and old == pytest.approx(0.3636, abs=1e-4)


def test_a_prior_is_never_worth_more_than_the_attempts_behind_it():
    """Eight batches alike and one apart: tau^2 is 0 and M reaches its cap, but each batch's prior is the other
    batches' pooled rate, measured on 64 attempts, so the estimates keep the p-hats' order."""
    successes = (3, 4, 5, 4, 4, 5, 3, 4, 6)
    est = shrunk([[Tally("b", 1, s, 8)] for s in successes])
    assert est.strength["b"] == MAX_STRENGTH
    values = [float(v) for v in est.values]
    for i, j in [(i, j) for i in range(9) for j in range(9) if successes[i] < successes[j]]:
        assert values[i] < values[j]
    assert max(values) - min(values) < 0.001  # ... yet barely apart: all but the noise is shared


def test_a_batch_without_attempts_has_no_estimate():
    for estimate in ESTIMATORS.values():
        assert estimate([[Tally("b", 1, 3, 4)], []], ()).values[1] is None
