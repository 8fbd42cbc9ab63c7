"""The engine's strategies beside the paper's method, registered by name on import (through the engine's own
``genenv.strategies`` entry point, as a plugin's strategies are):

- replays ``train_subset`` (train tasks at ``agent.base_levels``, or a fixed pool of ``agent.base_pool``, as the
  `chain` preset replays its lowest levels) and ``unseen`` (``agent.unseen_tasks`` new tasks no split has: the
  ablation bench's oracle arm), both by `base_choices`;
- task source ``sampler`` (``simulator.mode = "sampler"``): no simulator; the benchmark's own generator writes the
  fresh tasks at the difficulty cells a sampler picks (`genenv_engine.method.samplers`: the ablation bench's
  difficulty-sampler arms).
"""

from __future__ import annotations

import random
from collections import Counter

from genenv_engine.core.errors import ConfigError
from genenv_engine.core.events import PhaseTimer
from genenv_engine.core.records import Task
from genenv_engine.environments.base import Environment
from genenv_engine.method.protocols import Drafts, Epoch, FreshTasks, ValidationMetrics
from genenv_engine.method.strategies import SimulatorTasks, TrainReplay, register

# --- replays --------------------------------------------------------------------------------------------------


def base_choices(
    env: Environment,
    levels: tuple[int, ...] = (),
    source: str = "train",
    unseen: int = 0,
    *,
    pool: int = 0,
    seed: int = 0,
) -> list[Task]:
    """The tasks the agent's base replay draws from: the train split (all of it, or its tasks at ``levels``), or
    with ``source="unseen"`` ``unseen`` new tasks at ``levels`` that no split has (`Environment.unseen_tasks`).
    ``pool`` > 0 keeps ``pool`` of the train tasks, drawn once with ``seed`` (the same ones every epoch).

    Raises ``ConfigError`` (``agent.base_levels``) when no train task has one of the levels, and
    (``agent.base_source``) when the benchmark cannot generate new tasks.
    """
    train = env.split_at_levels("train", levels, "agent.base_levels")
    if source == "train":
        if pool and pool < len(train):
            return random.Random(f"base_pool/{env.name}/{seed}").sample(train, pool)
        return train
    try:
        return env.unseen_tasks(unseen, levels)
    except NotImplementedError as exc:
        raise ConfigError("agent.base_source", f"'unseen' needs a generated benchmark: {exc}") from None


@register("replay", "train_subset")
class SubsetReplay(TrainReplay):
    """The base replay draws from the train tasks at ``agent.base_levels``, or a fixed pool of ``agent.base_pool``
    of them (`base_choices`)."""

    def choices(self, env: Environment) -> list[Task]:
        a = self.config.agent
        return base_choices(env, a.base_levels, a.base_source, a.unseen_tasks, pool=a.base_pool, seed=self.config.seed)


@register("replay", "unseen")
class UnseenReplay(SubsetReplay):
    """The base replay draws from ``agent.unseen_tasks`` new tasks at ``agent.base_levels`` that no split has,
    stored at epoch 0 like a split."""

    def stored(self, env: Environment) -> list[Task]:
        return self.choices(env)


# --- task source ----------------------------------------------------------------------------------------------


@register("tasks", "sampler")
class SamplerTasks(SimulatorTasks):
    """No simulator: the benchmark's generator writes the fresh tasks at the cells the configured sampler draws
    (`genenv_engine.method.samplers.sampler_tasks`), stored in their cell batches; valid by construction, so
    validation passes them through (`Drafts.written`)."""

    def check(self, env: Environment) -> None:
        if not hasattr(env, "task_at"):
            raise ConfigError("simulator.mode", f"'sampler' needs a generated benchmark; {env.name}'s data is fixed")

    def generate(self, ep: Epoch) -> Drafts:
        """Draw this epoch's cells and their tasks (timed ``generate``), store them in their cell batches; the
        sampler's own figures (its weights, a plugin's faults) join the epoch's metrics."""
        from genenv_engine.method.samplers import sampler_tasks

        with PhaseTimer(ep.emit, ep.epoch, "generate", ep.seconds):
            cfg, store, envs = self.config, ep.session.store, ep.envs
            taken = {t.prompt for t in store.pool(list(cfg.benchmarks))}
            tasks, batch_of, info = sampler_tasks(cfg, envs, store.batches(), ep.epoch, ep.rng, taken)
            by_batch: dict[str, list[Task]] = {}
            for t in tasks:
                by_batch.setdefault(batch_of[t.id], []).append(t)
            for batch_id, mine in by_batch.items():
                store.insert_tasks(mine, batch_id=batch_id)
            ep.metrics.update(info)
            places = [p.get("drafts", {}) for p in info.get("plugin_faults", {}).values()]
            failed = {kind: sum(p.get(kind, 0) for p in places) for kind in ("plugin_error", "plugin_timeout")}
            drafts = len(tasks) + sum(failed.values())  # a plugin's draw that failed is left out, counted
            metrics: ValidationMetrics = {
                "generated": drafts,
                "valid": len(tasks),
                "valid_fraction": len(tasks) / drafts if drafts else None,
                "unique_fraction": None,
                "invalid_reasons": {k: n for k, n in failed.items() if n},
                "difficulty_mix": dict(sorted(Counter(envs[t.benchmark].bucket(t) for t in tasks).items())),
            }
        return Drafts(written=FreshTasks(tasks, batch_of, [], metrics))
