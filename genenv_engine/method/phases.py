"""The steps of one epoch as Algorithm 1 names them, the functions the co-evolution core
(`genenv_engine.method.coevolution`) and the native loop (`genenv_engine.method.loop.run_epoch`) call in order:
`generate` and `validate` (by the run's task source), `training_tasks` (the fresh tasks and a replay sample),
`rollout` (the native trainer's k attempts per task, by the executor), `score` (each variation batch's p-hat and
reward from the stored attempts, whoever made them), `update_agent` (the agent's update: `grpo` natively),
`update_simulator` (RWR), `heldout` (greedy held-out success) and `checkpoint`. Each takes the epoch's context
(`Epoch`), returns what a later step reads, and records its own figures in the epoch's metrics (``ep.metrics``).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from genenv_engine.backends.base import Sampling
from genenv_engine.core.curriculum import calibration_error
from genenv_engine.core.events import (
    AttemptsScored,
    BatchProgressed,
    CheckpointSaved,
    EventSink,
    HeldoutEvaluated,
    PhaseTimer,
    PolicyUpdated,
)
from genenv_engine.core.records import ScoredBatch, Task
from genenv_engine.environments.base import Environment
from genenv_engine.executors.base import RolloutExecutor
from genenv_engine.method.faults import Faults, draft_faults, heldout_summary, merge_faults, rollout_faults, usable
from genenv_engine.method.protocols import AgentLearner, Drafts, Epoch, FreshTasks, SimulatorReward, Strategies
from genenv_engine.method.simulator_update import simulator_update
from genenv_engine.method.strategies import replay_budget
from genenv_engine.storage.session import Session
from genenv_engine.training import simulator as sim
from genenv_engine.training.agent import Attempt, TaskAttempts, evaluate, grpo_groups, heldout_tasks
from genenv_engine.training.roles import Roles, save_roles

_T = TypeVar("_T")


def generate(ep: Epoch) -> Drafts:
    """1. The task source writes this epoch's drafts (the simulator: ``simulator.variations`` of each drawn seed);
    the levels of the seeds drawn join the metrics (``seed_levels_drawn``)."""
    drafts = ep.plan.tasks.generate(ep)
    if drafts.seed_levels_drawn:
        ep.metrics["seed_levels_drawn"] = drafts.seed_levels_drawn
    return drafts


def validate(ep: Epoch, drafts: Drafts) -> FreshTasks:
    """2. The environment validates the drafts (strict parse, schema, the recomputed gold, duplicates capped) and
    stores every one with its verdict; the valid ones are the epoch's fresh tasks. The validation's figures join the
    metrics."""
    fresh = ep.plan.tasks.validate(ep, drafts)
    ep.metrics.update(fresh.metrics)
    return fresh


@dataclass
class Rollouts:
    """Step 3's result: every attempted task, those the agent's update trains on (`genenv_engine.method.faults.usable`),
    the fresh tasks' scored variation batches, and the plugin faults counted so far."""

    scored: list[TaskAttempts]
    trained: list[TaskAttempts]
    batches: list[ScoredBatch]
    faults: Faults


def training_tasks(ep: Epoch, fresh: FreshTasks) -> list[Task]:
    """The tasks the agent attempts this epoch: the fresh tasks first, then a replay sample of D_train
    (`replay_tasks`)."""
    fresh_ids = {t.id for t in fresh.tasks}
    return fresh.tasks + replay_tasks(ep.session, ep.envs, fresh_ids, ep.rng, len(fresh.tasks), ep.plan)


def rollout(ep: Epoch, tasks: list[Task]) -> list[TaskAttempts]:
    """3. The native trainer's rollouts: the agent attempts every task k times (by the executor), each attempt
    scored by the task's environment; the caller stores them (`store_attempts`)."""
    with PhaseTimer(ep.emit, ep.epoch, "rollout", ep.seconds):
        scored = attempt(ep.session, ep.executor, tasks, ep.epoch, ep.emit, ep.check)
    ep.metrics["rollout_workers"] = ep.executor.last_stats if scored else []
    return scored


def score(ep: Epoch, fresh: FreshTasks, scored: list[TaskAttempts], notes: dict[str, str | None]) -> Rollouts:
    """p-hat per variation batch of the fresh tasks from the epoch's attempts (``scored``), its reward and whether
    the simulator's update keeps it (``notes``: each batch's prompt note, stored with it). A plugin's faults are
    counted (the task source's draws add theirs) and kept out of the agent's update and the batches' p-hat."""
    session, metrics = ep.session, ep.metrics
    fresh_ids = {t.id for t in fresh.tasks}
    faults = merge_faults(draft_faults({}, (g.task for g in fresh.generations)), metrics.pop("plugin_faults", {}))
    rollout_faults(faults, scored)
    trained = usable(scored)
    batch_metrics, batches = score_batches(
        session,
        [s for s in trained if s.task.id in fresh_ids],
        fresh.batch_of,
        ep.epoch,
        ep.emit,
        notes,
        ep.plan.reward,
    )
    metrics.update(batch_metrics)
    metrics["tasks_trained"] = len(scored)
    metrics["tasks_trained_by_origin"] = dict(Counter(t.task.origin for t in scored))
    ep.check()
    return Rollouts(scored, trained, batches, faults)


def update_agent(ep: Epoch, roles: Roles, trained: list[TaskAttempts], learn: AgentLearner) -> None:
    """4. The agent's update by ``learn`` (natively `grpo`; an outside trainer's weights adopted); the agent's
    backend and the executor's workers take the new weights."""
    with PhaseTimer(ep.emit, ep.epoch, "agent_update", ep.seconds) as phase:
        phase.info = learn(ep, roles, trained)
        roles.agent_backend.sync()
        ep.executor.sync(ep.epoch)
    ep.emit(PolicyUpdated(ep.epoch, "agent", phase.info))
    ep.metrics["agent_update"] = phase.info


def grpo(ep: Epoch, roles: Roles, trained: list[TaskAttempts]) -> dict[str, Any]:
    """The native trainer's update: GRPO on the rolled-out groups."""
    return dict(roles.grpo.update(grpo_groups(roles.agent, trained), ep.rng, ep.check))


def update_simulator(
    ep: Epoch, roles: Roles, generations: list[sim.Generation], batches: list[ScoredBatch], faults: Faults
) -> None:
    """5. The simulator's RWR update on the kept (in-band) batches, when the task source trains it; the sibling
    draws a plugin's fault left out are counted in ``faults``."""
    with PhaseTimer(ep.emit, ep.epoch, "simulator_update", ep.seconds) as phase:
        phase.info = simulator_update(
            ep.session, roles, ep.envs, generations, batches, ep.epoch, ep.rng, ep.check, ep.plan
        )
        if phase.info.get("steps"):  # the weights moved: this epoch's are the next version
            ep.executor.sync_simulator(ep.epoch)
    if phase.info.get("steps"):
        ep.emit(PolicyUpdated(ep.epoch, "simulator", phase.info))
    ep.metrics["simulator_update"] = phase.info
    for name, kinds in (phase.info.get("sibling_faults") or {}).items():
        merge_faults(faults, {name: {"siblings": kinds}})


def heldout(ep: Epoch, roles: Roles, faults: Faults) -> None:
    """6. Greedy held-out success on every benchmark (`evaluate_heldout`); the epoch's plugin faults, when there are
    any, join the metrics (without, the stored rows say none)."""
    metrics = ep.metrics
    metrics["heldout"], metrics["heldout_by_level"], metrics["heldout_correct"] = evaluate_heldout(
        ep.session, roles, ep.envs, ep.epoch, ep.emit, ep.check, ep.seconds, faults
    )
    if merge_faults(faults, metrics.pop("plugin_faults", {})):
        metrics["plugin_faults"] = faults


def checkpoint(ep: Epoch, roles: Roles) -> None:
    """7. Both roles saved as the epoch's checkpoint, atomically."""
    with PhaseTimer(ep.emit, ep.epoch, "checkpoint", ep.seconds):
        path = ep.session.write_checkpoint(ep.epoch, lambda tmp: save_roles(roles, tmp))
    ep.emit(CheckpointSaved(ep.epoch, str(path)))


# --- the replay sample ----------------------------------------------------------------------------------------


def replay_tasks(
    session: Session,
    envs: dict[str, Environment],
    exclude: set[str],
    rng: random.Random,
    n_fresh: int,
    plan: Strategies,
) -> list[Task]:
    """Sample D_train = base data plus the earlier generated pool (unless the task source replays none); pinned
    tasks and new edits always ride along."""
    cfg, store = session.config, session.store
    n = replay_budget(cfg, plan.tasks, n_fresh, len(envs))
    base = base_tasks(session, envs, plan)
    pool = [t for t in store.pool(list(cfg.benchmarks)) if t.id not in exclude and t.status != "pinned"]
    n_pool = min(len(pool), round(n * (1 - cfg.agent.base_fraction))) if plan.tasks.replays_pool else 0
    chosen = fill_sample(rng, base, n - n_pool) + rng.sample(pool, n_pool)
    must = store.pinned_tasks() + unused_edits(session)
    seen = {t.id for t in chosen} | exclude
    for t in must:
        if t.id not in seen:
            seen.add(t.id)
            chosen.append(t)
    return [t for t in chosen if t.status != "banned"]


def base_tasks(session: Session, envs: dict[str, Environment], plan: Strategies) -> list[Task]:
    """The replay source's choices less the tasks the user banned, pinned (always added) or edited (superseded)."""
    skip = session.store.inactive_train_ids()
    return [t for env in envs.values() for t in plan.replay.choices(env) if t.id not in skip]


def fill_sample(rng: random.Random, tasks: list[_T], n: int) -> list[_T]:
    """``n`` of ``tasks`` drawn without replacement; when ``n`` is more than there are, every task as many whole
    times as fit and a sample of the rest, so that a small base pool (``agent.base_pool``) is replayed to the
    same number of tasks as a large one (equal agent compute).

    >>> [len(fill_sample(random.Random(0), list("abc"), n)) for n in (2, 3, 7)]
    [2, 3, 7]
    >>> drawn = fill_sample(random.Random(0), list("abc"), 7)  # each twice, and one of them a third time
    >>> sorted(drawn.count(t) for t in "abc")
    [2, 2, 3]
    >>> fill_sample(random.Random(0), [], 4)
    []
    """
    if not tasks or n <= len(tasks):
        return rng.sample(tasks, min(len(tasks), n))
    whole, rest = divmod(n, len(tasks))
    return list(tasks) * whole + rng.sample(tasks, rest)


def unused_edits(session: Session) -> list[Task]:
    """Hand-edited tasks no epoch has trained on yet (so an edit made while paused is used next)."""
    rows = session.store.query_tasks(origin="edited", valid=True, limit=10_000, order="id")
    unused = [
        session.store.get_task(r["id"])
        for r in rows
        if not r.get("n_rollouts") and r.get("superseded_by") is None and r.get("status") != "banned"
    ]
    return [t for t in unused if t is not None]


# --- attempts and their scores --------------------------------------------------------------------------------


def attempt(
    session: Session,
    executor: RolloutExecutor,
    tasks: list[Task],
    epoch: int,
    emit: EventSink,
    check: Callable[[], None],
) -> list[TaskAttempts]:
    """k scored rollouts per task, by the executor, stamped with the policy version that sampled them."""
    cfg = session.config

    def progress(done: int, total: int) -> None:
        emit(BatchProgressed(epoch, "rollout", done, total))
        check()

    if not tasks:
        return []
    sampling = Sampling(temperature=cfg.agent.temperature, max_new_tokens=cfg.agent.max_new_tokens)
    return executor.rollout(
        tasks, cfg.agent.rollouts, sampling, cfg.agent.success_threshold, epoch=epoch, progress=progress
    )


def attempt_rows(task_id: str, attempts: list[Attempt], epoch: int, purpose: str = "train") -> list[dict[str, Any]]:
    """The rollout rows of ``attempts`` at ``task_id`` as ``epoch`` stores them: each with its reward and the policy
    version that sampled it."""
    return [
        {
            "task_id": task_id,
            "epoch": epoch,
            "response": a.completion.text,
            "reward": a.reward,
            "success": a.success,
            "error_type": a.result.error_type,
            "purpose": purpose,
            "policy_version": a.policy_version,
        }
        for a in attempts
    ]


def store_attempts(session: Session, scored: list[TaskAttempts], epoch: int, purpose: str = "train") -> None:
    """Store every attempt of ``scored`` as a rollout of ``epoch`` (`attempt_rows`)."""
    session.store.insert_rollouts([row for s in scored for row in attempt_rows(s.task.id, s.attempts, epoch, purpose)])


def score_batches(
    session: Session,
    fresh: list[TaskAttempts],
    batch_of: dict[str, str],
    epoch: int,
    emit: EventSink,
    notes: dict[str, str | None],
    reward: SimulatorReward,
) -> tuple[dict[str, Any], list[ScoredBatch]]:
    """p-hat per variation batch, R_env and whether the simulator's update keeps it, by the run's ``reward``
    (stored as the epoch's log, with the alpha it was scored against and, for a batch written this epoch, its prompt
    note from ``notes``, and returned to the simulator update); calibration metrics of the epoch."""
    cur = session.config.curriculum
    store = session.store
    by_batch: dict[str, list[TaskAttempts]] = {}
    for s in fresh:
        by_batch.setdefault(batch_of.get(s.task.id, s.task.id), []).append(s)
    batches = []
    for batch_id, items in by_batch.items():
        p_hat = pooled(items)
        if p_hat is None:  # a batch whose tasks got no rollouts (k = 0) has nothing to score
            continue
        r_env, kept = reward.score(p_hat, items[0].task.benchmark)
        batches.append(
            ScoredBatch(
                id=batch_id,
                epoch=epoch,
                benchmark=items[0].task.benchmark,
                seed_task_id=items[0].task.parent_id,
                n_tasks=len(items),
                p_hat=p_hat,
                r_env=r_env,
                in_band=kept,
            )
        )
    store.set_r_env((s.task.id, b.r_env) for b in batches for s in by_batch[b.id])
    rows = [{**b.row(), "alpha": cur.alpha_for(b.benchmark)} for b in batches]
    style = session.config.simulator.prompt
    store.upsert_batches(
        [{**r, "prompt_note": sim.note_fields(style, notes[r["id"]])} for r in rows if r["id"] in notes]
    )
    store.upsert_batches([r for r in rows if r["id"] not in notes])  # a static batch scored again keeps its note
    p_hats, r_envs = [b.p_hat for b in batches], [b.r_env for b in batches]
    emit(AttemptsScored(epoch, len(fresh), sum(len(s.attempts) for s in fresh), pooled(fresh) or 0.0, p_hats, r_envs))
    by_bench: dict[str, float | None] = {}
    for name in sorted({s.task.benchmark for s in fresh}):
        by_bench[name] = pooled([s for s in fresh if s.task.benchmark == name])
    return {
        "generated_success": pooled(fresh),
        "generated_success_by_benchmark": by_bench,
        "calibration_error": calibration_error(p_hats, [cur.alpha_for(b.benchmark) for b in batches]),
        "batches": len(batches),
        "in_band_fraction": (sum(b.in_band for b in batches) / len(batches)) if batches else None,
        "batch_p_hats": [round(p, 4) for p in p_hats],
        "task_p_hats": [round(s.p_hat, 4) for s in fresh],
        "r_env_mean": sum(r_envs) / len(r_envs) if r_envs else None,
    }, batches


def pooled(items: list[TaskAttempts]) -> float | None:
    """The success rate of all of ``items``' attempts pooled (None without an attempt)."""
    tries = sum(len(s.attempts) for s in items)
    return sum(s.successes for s in items) / tries if tries else None


def evaluate_heldout(
    session: Session,
    roles: Roles,
    envs: dict[str, Environment],
    epoch: int,
    emit: EventSink,
    check: Callable[[], None],
    seconds: dict[str, float],
    faults: Faults,
) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, str]]:
    """Greedy held-out success per benchmark, per difficulty bucket, and per task (a ``0``/``1`` string in
    held-out order, for paired comparisons of two epochs or two arms on the same tasks); the answers a plugin's
    fault failed are counted in ``faults``."""
    cfg = session.config
    tasks = heldout_tasks(envs, cfg.heldout_size)

    def progress(done: int, total: int) -> None:
        emit(BatchProgressed(epoch, "heldout_eval", done, total))
        check()

    with PhaseTimer(emit, epoch, "heldout_eval", seconds):
        _, scored = evaluate(
            roles.agent_backend,
            roles.agent,
            envs,
            tasks,
            cfg.agent.max_new_tokens,
            cfg.agent.success_threshold,
            progress,
        )
    store_attempts(session, scored, epoch, "heldout")  # the greedy answers: the console shows what changed
    rollout_faults(faults, scored, "heldout")
    rates, by_level, correct = heldout_summary(envs, scored)
    emit(HeldoutEvaluated(epoch, rates))
    return rates, by_level, correct
