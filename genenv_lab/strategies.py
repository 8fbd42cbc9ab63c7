"""The study variants of the epoch's strategies (`genenv_engine.method.strategies`), registered by name on import
through the lab's ``genenv.strategies`` entry point:

- seed sampler ``alpha`` (``simulator.seed_sampling``): seed levels weighted by how close their recent variation
  batches came to alpha (`seed_level_stats`, `genenv_engine.core.curriculum.seed_level_weights`, `draw_seeds`;
  sharpness ``study.seed_beta``);
- notes (``simulator.note``) ``steer``, the compact prompt's direction word (`steer_schedule`; its warm-start pairs
  ask for the level change they show, `direction`; ``study.steer_hold``, ``study.steer_relabel``), and
  ``fixed_line``, the instruct prompt's "not measured yet" line every epoch;
- reward ``grounded`` (``curriculum.reward``: the agent's measured progress on siblings of a batch's tasks across its
  update), which lives in `genenv_lab.grounded`, registered by its import here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from genenv_engine.config import RunConfig
from genenv_engine.config.checks import check
from genenv_engine.core.curriculum import seed_level_weights
from genenv_engine.core.records import Task
from genenv_engine.method.strategies import Epoch, NoNote, UniformSeeds, register
from genenv_engine.training import simulator as sim
from genenv_lab import grounded  # noqa: F401  (its import registers the ``grounded`` reward)
from genenv_lab.settings import lab_settings

SEED_WINDOW = 2
"""Epochs of variation batches the ``alpha`` seed sampler pools per level (the latest ones)."""


# --- notes ---------------------------------------------------------------------------------------------------

STEER_WORDS = ("easier", "same", "harder")
"""The ``steer`` note's directions."""


def direction(source_level: int, sibling_level: int) -> str:
    """The direction a (seed -> sibling) pair shows: the sibling's level against its source's.

    >>> direction(2, 3), direction(3, 3), direction(4, 3)
    ('harder', 'same', 'easier')
    """
    return STEER_WORDS[(sibling_level > source_level) - (sibling_level < source_level) + 1]


def steer_word(rate: float | None, alpha: float, band: float, held: str = "same") -> str:
    """The direction an epoch asks for: ``harder`` when the agent's measured success is above alpha + band,
    ``easier`` below alpha - band, and ``held`` (``same`` unless told) inside the band or when nothing is measured.

    >>> steer_word(0.8, 0.5, 0.1), steer_word(0.55, 0.5, 0.1), steer_word(0.2, 0.5, 0.1), steer_word(None, 0.5, 0.1)
    ('harder', 'same', 'easier', 'same')
    >>> steer_word(0.55, 0.5, 0.1, held="easier")
    'easier'
    """
    if rate is None or abs(rate - alpha) <= band:
        return held
    return "harder" if rate > alpha else "easier"


def steer_schedule(rates: Sequence[float | None], alpha: float, band: float, hold: bool) -> str:
    """The word for the epoch after ``rates`` (the benchmark's measured success at each earlier epoch, oldest
    first). Without ``hold`` only the last rate counts, and a rate in the band asks for ``same`` (the seed's level,
    which is where a too-easy or too-hard mix came from); with ``hold`` a rate in the band keeps the word that got
    it there, so the controller does not swing back each time it reaches alpha.

    >>> steer_schedule([0.2, 0.45], 0.5, 0.1, hold=False), steer_schedule([0.2, 0.45], 0.5, 0.1, hold=True)
    ('same', 'easier')
    >>> steer_schedule([], 0.5, 0.1, hold=True), steer_schedule([0.2, 0.45, 0.9, None], 0.5, 0.1, hold=True)
    ('same', 'harder')
    """
    if not hold:
        return steer_word(rates[-1] if rates else None, alpha, band)
    word = "same"
    for rate in rates:
        word = steer_word(rate, alpha, band, held=word)
    return word


@register("note", "steer")
class SteerNote(NoNote):
    """The compact prompt's direction word: in an epoch, `steer_schedule` of the agent's measured success (band
    ``curriculum.k_min``, ``study.steer_hold``); in a (seed -> sibling) pair, the level change it shows, so the
    warm start teaches the word; with ``study.steer_relabel`` the RWR update trains a task under the change it
    shows."""

    def __init__(self, config: RunConfig) -> None:
        check(
            config.simulator.prompt == "compact",
            "simulator.note",
            "steer is the compact prompt's note (the instruct prompt carries the success line itself)",
        )
        super().__init__(config)
        self.settings = lab_settings(config)

    def text(self, benchmark: str, rates: Sequence[float | None]) -> str | None:
        cfg = self.config
        alpha = cfg.curriculum.alpha_for(benchmark)
        return steer_schedule(rates, alpha, cfg.curriculum.k_min, self.settings.steer_hold)

    def pair_note(self, source: Task, sibling: Task) -> str | None:
        return direction(source.level, sibling.level)

    def hindsight(self, seed: Task, task: Task) -> str | None:
        if self.settings.steer_relabel and seed.level and task.level:  # 0: level unknown
            return direction(seed.level, task.level)
        return None


@register("note", "fixed_line")
class FixedLine(NoNote):
    """The instruct prompt's success line as the warm start wrote it ("not measured yet"), every epoch."""

    def __init__(self, config: RunConfig) -> None:
        check(
            config.simulator.prompt == "instruct",
            "simulator.note",
            "fixed_line is the instruct prompt's line: it needs simulator.prompt = 'instruct'",
        )
        super().__init__(config)

    def text(self, benchmark: str, rates: Sequence[float | None]) -> str | None:
        return sim.success_note(benchmark, None, self.config.curriculum.alpha_for(benchmark))


# --- seed sampler ---------------------------------------------------------------------------------------------


def seed_level_stats(
    batches: list[dict[str, Any]], level_of: dict[str, int], epoch: int, window: int = SEED_WINDOW
) -> dict[int, tuple[int, int, float]]:
    """Per seed level, ``(generated, valid, p_hat)`` over the variation batches of the ``window`` epochs before
    ``epoch``: p_hat is the valid tasks' success pooled by their count (0.0 with none); every level in
    ``level_of`` appears, unmeasured ones as ``(0, 0, 0.0)``.

    >>> rows = [{"epoch": 1, "seed_task_id": "a", "n_generated": 4, "n_valid": 2, "p_hat": 0.5},
    ...         {"epoch": 2, "seed_task_id": "a", "n_generated": 4, "n_valid": 1, "p_hat": 1.0},
    ...         {"epoch": 2, "seed_task_id": "b", "n_generated": 4, "n_valid": 0, "p_hat": None}]
    >>> seed_level_stats(rows, {"a": 3, "b": 4, "c": 2}, epoch=3)
    {2: (0, 0, 0.0), 3: (8, 3, 0.6666666666666666), 4: (4, 0, 0.0)}
    >>> seed_level_stats(rows, {"a": 3, "b": 4}, epoch=3, window=1)[3]
    (4, 1, 1.0)
    """
    sums = {level: [0, 0, 0.0] for level in sorted(set(level_of.values()))}
    for b in batches:
        level = level_of.get(b["seed_task_id"])
        if level is None or not epoch - window <= b["epoch"] < epoch:
            continue
        acc = sums[level]
        acc[0] += b["n_generated"]
        acc[1] += b["n_valid"]
        if b["n_valid"] and b["p_hat"] is not None:
            acc[2] += b["p_hat"] * b["n_valid"]
    return {level: (g, v, total / v if v else 0.0) for level, (g, v, total) in sums.items()}


def draw_seeds(seeds: list[Task], n: int, rng, weights: dict[int, float]) -> list[Task]:
    """``n`` distinct seeds (or all of them), each drawn by first picking a level with probability proportional to
    ``weights`` among the levels that still have seeds left, then a seed of that level uniformly."""
    pools: dict[int, list[Task]] = {}
    for t in seeds:
        pools.setdefault(t.level, []).append(t)
    pools = {level: rng.sample(tasks, len(tasks)) for level, tasks in sorted(pools.items())}
    out: list[Task] = []
    while len(out) < n:
        levels = [level for level, tasks in pools.items() if tasks]
        if not levels:
            break
        w = [weights.get(level, 0.0) for level in levels]
        level = rng.choices(levels, w if sum(w) > 0 else None)[0]
        out.append(pools[level].pop())
    return out


@register("seeds", "alpha")
class AlphaSeeds(UniformSeeds):
    """Seeds drawn level first, each level weighted by its recent batches' closeness to alpha
    (``study.seed_beta``); the weights go into the epoch's metrics."""

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.beta = lab_settings(config).seed_beta

    def draw(self, ep: Epoch, name: str, seeds: list[Task]) -> list[Task]:
        cfg = self.config
        level_of = {t.id: t.level for t in seeds}
        stats = seed_level_stats(ep.session.store.batches(), level_of, ep.epoch)
        weights = seed_level_weights(stats, cfg.curriculum.alpha_for(name), self.beta)
        ep.metrics.setdefault("seed_level_weights", {})[name] = {f"L{k}": round(v, 3) for k, v in weights.items()}
        return draw_seeds(seeds, cfg.simulator.seeds_per_epoch, ep.rng, weights)
