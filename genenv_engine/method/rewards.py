"""Simulator rewards whose p-hat is a more reliable estimate of a batch's success (``curriculum.reward =
"shrunk"`` or ``"predicted"``), registered on import through the engine's ``genenv.strategies`` entry point.

Each scores a batch with the alpha-curriculum's R_env = exp(-beta (p~ - alpha)^2) and keeps it for the simulator's
update by the band around alpha (`CurriculumConfig.keeps`), as ``alpha`` does, but p~ is an estimate of the batch's
success rate from `genenv_engine.core.estimators` instead of its raw p-hat:

- ``shrunk``: empirical-Bayes shrinkage toward the success of the other generated tasks at the batch's tasks'
  levels (this epoch's other batches and earlier epochs', older ones weighted less);
- ``predicted``: a blend with a difficulty predictor (logistic in level and origin) fitted on every training
  rollout so far, the replayed base tasks' too.

Both use only attempts the loop makes anyway (the epoch's rollouts and the earlier epochs' stored ones), so the
agent's compute is the alpha reward's; each batch's own p-hat stays stored as measured (the ``batches`` table's
``p_hat``) and only its R_env and band flag follow the estimate. Nothing is kept in memory between epochs: every
epoch reads its history from the session's store (`Store.training_tallies`), so a resumed run scores as an
uninterrupted one does; only the last `HORIZON` epochs are read, as older ones weigh next to nothing. The batches
are scored on their raw p-hat first (`EstimatedReward.score`) and on the estimate once the epoch's rollouts are all
stored (`EstimatedReward.after`, before the simulator's update reads them); the epoch's metrics get
``reward_estimate`` (the estimator, each batch's estimate by batch id and the prior strength per benchmark).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from genenv_engine.config import RunConfig
from genenv_engine.core.curriculum import alpha_reward
from genenv_engine.core.estimators import ESTIMATORS, HORIZON, Tally
from genenv_engine.core.records import ScoredBatch, Task
from genenv_engine.environments.base import Environment
from genenv_engine.method.protocols import Epoch
from genenv_engine.method.strategies import register
from genenv_engine.storage.store import GENERATED_ORIGINS

if TYPE_CHECKING:
    from genenv_engine.training.roles import Roles


def tally(row: dict[str, Any], epoch: int) -> Tally:
    """A `Store.training_tallies` row as a `Tally` aged from ``epoch`` (a task the simulator wrote, or a static
    augmentation's, is generated).

    >>> row = {"benchmark": "bfcl", "level": 2, "origin": "seed", "epoch": 1, "attempts": 8, "successes": 3}
    >>> tally(row, 3)
    Tally(benchmark='bfcl', level=2, successes=3, attempts=8, generated=False, age=2)
    """
    return Tally(
        benchmark=str(row["benchmark"]),
        level=None if row["level"] is None else int(row["level"]),
        successes=int(row["successes"]),
        attempts=int(row["attempts"]),
        generated=row["origin"] in GENERATED_ORIGINS,
        age=epoch - int(row["epoch"]),
    )


def split_tallies(
    rows: Sequence[dict[str, Any]], epoch: int, batch_ids: Sequence[str], exclude: frozenset[str] = frozenset()
) -> tuple[list[list[Tally]], list[Tally]]:
    """The tallies of ``epoch``'s batches (``batch_ids``, in order: each one's tasks' attempts of that epoch) and
    every other tally up to ``epoch`` (the history). Rows of task ids in ``exclude`` are left out of both (the
    reliability bench scores those tasks itself).

    >>> rows = [{"task_id": "a", "benchmark": "b", "level": 1, "origin": "generated", "batch_id": "B", "epoch": 2,
    ...          "attempts": 4, "successes": 1},
    ...         {"task_id": "r", "benchmark": "b", "level": 1, "origin": "seed", "batch_id": None, "epoch": 2,
    ...          "attempts": 4, "successes": 3}]
    >>> batches, history = split_tallies(rows, 2, ["B", "C"])
    >>> [len(b) for b in batches], [t.generated for t in history]
    ([1, 0], [False])
    """
    index = {b: i for i, b in enumerate(batch_ids)}
    batches: list[list[Tally]] = [[] for _ in batch_ids]
    history: list[Tally] = []
    for row in rows:
        if row["task_id"] in exclude or int(row["epoch"]) > epoch:
            continue
        if int(row["epoch"]) == epoch and row["batch_id"] in index:
            batches[index[row["batch_id"]]].append(tally(row, epoch))
        else:
            history.append(tally(row, epoch))
    return batches, history


@register("reward", *ESTIMATORS)
class EstimatedReward:
    """The alpha reward of each batch's estimated success (the module docstring); the estimator is the one
    `ESTIMATORS` names ``curriculum.reward``."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.name = config.curriculum.reward
        self.estimator = ESTIMATORS[self.name]

    def check(self, env: Environment) -> None:
        """Nothing to check: any benchmark's batches have a p-hat (a benchmark without levels is one level)."""

    def _reward(self, p: float, benchmark: str) -> tuple[float, bool]:
        cur = self.config.curriculum
        return alpha_reward(p, cur.alpha_for(benchmark), cur.beta), cur.keeps(p, benchmark)

    def score(self, p_hat: float, benchmark: str) -> tuple[float, bool]:
        """A batch's R_env and band flag on its raw p-hat, until `after` scores the estimate.

        >>> from genenv_engine.config import load_config
        >>> r, kept = EstimatedReward(load_config("tiny", overrides={"curriculum.reward": "shrunk"})).score(0.4, "bfcl")
        >>> round(r, 6), kept
        (0.980199, True)
        """
        return self._reward(p_hat, benchmark)

    def before(self, ep: Epoch, roles: Roles, fresh: list[Task], batch_of: dict[str, str]) -> None:
        """Nothing to measure before the agent's update: the estimate reads the stored rollouts."""

    def after(self, ep: Epoch, roles: Roles, batches: list[ScoredBatch]) -> list[ScoredBatch]:
        """The batches scored on their estimated success (a batch the store holds no attempt of keeps its p-hat),
        their R_env and band flag stored on them and their tasks."""
        if not batches:
            return batches
        rows = ep.session.store.training_tallies(ep.epoch, since=ep.epoch - HORIZON + 1)
        mine, history = split_tallies(rows, ep.epoch, [b.id for b in batches])
        found = self.estimator(mine, history)
        estimates = [b.p_hat if v is None else v for b, v in zip(batches, found.values, strict=True)]
        scored = []
        for b, p in zip(batches, estimates, strict=True):
            r_env, kept = self._reward(p, b.benchmark)
            scored.append(replace(b, r_env=r_env, in_band=kept))
        store, cur = ep.session.store, self.config.curriculum
        store.upsert_batches([{**b.row(), "alpha": cur.alpha_for(b.benchmark)} for b in scored])
        by_id = {b.id: b.r_env for b in scored}
        store.set_r_env(
            (r["task_id"], by_id[r["batch_id"]]) for r in rows if r["epoch"] == ep.epoch and r["batch_id"] in by_id
        )
        ep.metrics["r_env_mean"] = sum(by_id.values()) / len(by_id)
        ep.metrics["in_band_fraction"] = sum(b.in_band for b in scored) / len(scored)
        ep.metrics["reward_estimate"] = {
            "estimator": self.name,
            "batch_estimates": {b.id: round(p, 4) for b, p in zip(batches, estimates, strict=True)},
            "strength": {k: round(v, 3) for k, v in sorted(found.strength.items())},
        }
        return scored
