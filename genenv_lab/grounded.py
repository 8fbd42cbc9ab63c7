"""The grounded simulator reward (``curriculum.reward = "grounded"``): a variation batch is credited with the agent's
measured progress on procedural siblings of its tasks across the epoch's agent update.

Before the agent's update, `SIBLINGS` (m = 4) siblings of each valid fresh task of batch b are drawn by the
environment's own sibling generator (`probe_siblings`: the task's level, prompts that no stored task of the session has,
so never trained on), and the agent answers each once, greedily; after the update it answers the same siblings again.
R_grounded(b) = success after − success before on b's siblings (`genenv_engine.core.curriculum.grounded_reward`), in
[-1, 1]; every batch is kept (no band filter), and the simulator's update weights it by exp(lambda R_grounded)
normalised to mean 1 over the update's examples (`genenv_engine.core.curriculum.rwr_weights`, the alpha reward's path,
each valid task of b carrying b's weight). One GRPO update covers all of an epoch's batches, so each batch is credited
with the whole epoch's update, not with its own tasks' share of it.

The siblings are stored as tasks of origin and split ``probe`` (parent: the task probed) with their greedy answers as
rollouts of purpose ``probe_before`` and ``probe_after``: these evaluation generations, at most 2 × m × the epoch's
valid fresh tasks, are the simulator's cost, counted from the store (`genenv_engine.storage.store`), never taken from
the agent's training budget. Until the agent's update a batch's stored R_env is 0 (nothing measured yet).
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from genenv_engine.config import RunConfig
from genenv_engine.core.curriculum import grounded_reward
from genenv_engine.core.errors import ConfigError
from genenv_engine.core.events import BatchProgressed, PhaseTimer
from genenv_engine.core.records import ScoredBatch, Task
from genenv_engine.environments.base import Environment
from genenv_engine.environments.plugin_worker import one_sibling
from genenv_engine.method.faults import add_fault, rollout_faults
from genenv_engine.method.strategies import Epoch, register
from genenv_engine.training.agent import evaluate

if TYPE_CHECKING:
    from genenv_engine.training.roles import Roles

SIBLINGS = 4
"""m: the siblings drawn per valid fresh task."""
SIBLING_TRIES = 20
"""Draws of the sibling generator per sibling before it is left out (a task with fewer siblings is still probed)."""
PURPOSES = ("probe_before", "probe_after")
"""The rollout purposes of the siblings' greedy answers, before and after the agent's update."""
PHASE = "probe"
"""The timed phase of both evaluations."""


def probe_siblings(
    env: Environment, task: Task, m: int, rng: random.Random, taken: set[str], epoch: int, faults: dict | None = None
) -> list[Task]:
    """Up to ``m`` siblings of ``task`` from ``env.sibling`` at the task's level whose prompts are not in ``taken``
    (the prompts of every stored task of the session, and the siblings drawn before: each joins it); ids
    ``<task id>/probe-e<epoch>-<j>``, origin and split ``probe``, parent ``task``. A plugin's sibling that raises or
    runs past its time limit is left out and counted in ``faults`` (``plugin_faults``: benchmark -> where -> kind)."""
    out: list[Task] = []
    for j in range(m):
        task_id = f"{task.id}/probe-e{epoch}-{j}"
        for _ in range(SIBLING_TRIES):
            sibling, fault = one_sibling(env, task, rng, task_id)
            if sibling is None:
                add_fault(faults if faults is not None else {}, env.name, "siblings", fault)
                break
            if sibling.level == task.level and sibling.prompt not in taken:
                taken.add(sibling.prompt)
                out.append(
                    replace(
                        sibling,
                        origin="probe",
                        split="probe",
                        parent_id=task.id,
                        epoch=epoch,
                        generator="probe",
                        status="active",
                    )
                )
                break
    return out


def batch_rewards(batch_of: dict[str, str], before: dict[str, bool], after: dict[str, bool]) -> dict[str, float | None]:
    """R_grounded per batch from each sibling's batch (``batch_of``: sibling id -> batch id) and its greedy success
    before and after the update (None for a batch without siblings).

    >>> batch_rewards({"a": "b1", "b": "b1", "c": "b2"}, {"a": False, "b": True, "c": True},
    ...               {"a": True, "b": True, "c": True})
    {'b1': 0.5, 'b2': 0.0}
    """
    ids: dict[str, list[str]] = {}
    for sibling, batch in batch_of.items():
        ids.setdefault(batch, []).append(sibling)
    return {batch: grounded_reward([before[i] for i in mine], [after[i] for i in mine]) for batch, mine in ids.items()}


@register("reward", "grounded")
class GroundedReward:
    """R_grounded of each batch, measured on its tasks' siblings before and after the agent's update (module
    docstring); the batches are scored 0 until then."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.name = config.curriculum.reward
        self.pending: tuple[int, list[Task], dict[str, str], dict[str, bool], dict[str, str]] | None = None
        """This epoch's (epoch, siblings, each sibling's batch, each one's success before the update, each fresh
        task's batch)."""

    def check(self, env: Environment) -> None:
        if not callable(getattr(env, "sibling", None)):
            raise ConfigError(
                "curriculum.reward",
                f"'grounded' needs a benchmark with procedural siblings; {env.name} has no sibling generator",
            )

    def score(self, p_hat: float, benchmark: str) -> tuple[float, bool]:
        """Nothing measured before the agent's update: R_env 0, and every batch kept.

        >>> from genenv_engine.config import load_config
        >>> GroundedReward(load_config("micro", overrides={"curriculum.reward": "grounded"})).score(0.9, "bfcl")
        (0.0, True)
        """
        return 0.0, True

    def _answer(self, ep: Epoch, roles: Roles, tasks: list[Task], purpose: str) -> dict[str, bool]:
        """The agent's greedy success on each of ``tasks``, its answers stored as rollouts of ``purpose``."""
        cfg = self.config

        def progress(done: int, total: int) -> None:
            ep.emit(BatchProgressed(ep.epoch, PHASE, done, total))
            ep.check()

        with PhaseTimer(ep.emit, ep.epoch, PHASE, ep.seconds):
            _, scored = evaluate(
                roles.agent_backend,
                roles.agent,
                ep.envs,
                tasks,
                cfg.agent.max_new_tokens,
                cfg.agent.success_threshold,
                progress,
            )
        rollout_faults(ep.metrics.setdefault("plugin_faults", {}), scored, "probes")
        ep.session.store.insert_rollouts(
            [
                {
                    "task_id": s.task.id,
                    "epoch": ep.epoch,
                    "response": a.completion.text,
                    "reward": a.reward,
                    "success": a.success,
                    "error_type": a.result.error_type,
                    "purpose": purpose,
                }
                for s in scored
                for a in s.attempts
            ]
        )
        return {s.task.id: bool(s.successes) for s in scored}

    def before(self, ep: Epoch, roles: Roles, fresh: list[Task], batch_of: dict[str, str]) -> None:
        """Draw and store the siblings of this epoch's valid fresh tasks; the agent answers them."""
        self.pending = None
        store = ep.session.store
        rng = random.Random(f"grounded/{self.config.seed}/{ep.epoch}")  # its own stream: the epoch's rng is untouched
        taken = {name: store.task_prompts(name) for name in ep.envs}
        siblings: list[Task] = []
        of_batch: dict[str, str] = {}
        for task in fresh:
            if not task.valid or task.id not in batch_of:
                continue
            mine = probe_siblings(
                ep.envs[task.benchmark],
                task,
                SIBLINGS,
                rng,
                taken[task.benchmark],
                ep.epoch,
                ep.metrics.setdefault("plugin_faults", {}),
            )
            siblings += mine
            of_batch.update((s.id, batch_of[task.id]) for s in mine)
        if not siblings:
            ep.metrics["grounded"] = _summary([], {}, {}, {})
            return
        store.insert_tasks(siblings)
        self.pending = (ep.epoch, siblings, of_batch, self._answer(ep, roles, siblings, PURPOSES[0]), dict(batch_of))

    def after(self, ep: Epoch, roles: Roles, batches: list[ScoredBatch]) -> list[ScoredBatch]:
        """The agent answers the same siblings again; each batch gets R_grounded (0 without siblings), stored on the
        batch and its tasks, and the epoch's metrics get ``grounded``."""
        if self.pending is None or self.pending[0] != ep.epoch:
            return batches
        _, siblings, of_batch, before, task_batch = self.pending
        self.pending = None
        after = self._answer(ep, roles, siblings, PURPOSES[1])
        rewards = batch_rewards(of_batch, before, after)
        scored = [replace(b, r_env=float(rewards.get(b.id) or 0.0), in_band=True) for b in batches]
        store, cur = ep.session.store, self.config.curriculum
        store.upsert_batches([{**b.row(), "alpha": cur.alpha_for(b.benchmark)} for b in scored])
        by_id = {b.id: b.r_env for b in scored}
        store.set_r_env((task_id, by_id[batch]) for task_id, batch in task_batch.items() if batch in by_id)
        ep.metrics["r_env_mean"] = sum(by_id.values()) / len(by_id) if by_id else None
        ep.metrics["grounded"] = _summary(siblings, before, after, rewards)
        return scored


def _summary(
    siblings: list[Task], before: dict[str, bool], after: dict[str, bool], rewards: dict[str, float | None]
) -> dict[str, Any]:
    """The epoch's ``grounded`` metrics: siblings, tasks probed, greedy success before and after, evaluation
    generations, and each batch's R_grounded (None without siblings).

    >>> t = Task(id="s", benchmark="bfcl", prompt="p", answer="a", parent_id="x")
    >>> _summary([t], {"s": False}, {"s": True}, {"b": 1.0})["generations"]
    2
    """
    n = len(siblings)
    return {
        "siblings": n,
        "tasks_probed": len({s.parent_id for s in siblings}),
        "success_before": sum(before.values()) / n if n else None,
        "success_after": sum(after.values()) / n if n else None,
        "generations": 2 * n,
        "batch_rewards": {b: r for b, r in sorted(rewards.items())},
    }
