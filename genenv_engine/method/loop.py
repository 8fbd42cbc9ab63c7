"""The co-evolution controller: one function per epoch that reads like the paper's Algorithm 1.

`run` opens or continues a session: epoch 0 is the warm start and a held-out evaluation; every
later epoch is `run_epoch`, whose timed phases are generate -> validate -> rollout -> agent update
-> simulator update -> held-out eval -> checkpoint. Where the fresh tasks come from, how seeds are drawn, what
the replay draws from, the note a simulator prompt carries and the simulator's reward (with its hooks before and
after the agent's update) are the strategies the run resolved once from its config (`genenv_engine.method.strategies`),
called without branching on settings. The loop emits typed events, checks the
`RunControl` between phases and batches (pause/stop), and stores everything in the session's
SQLite store, so a crash or a stop leaves a resumable session. A plugin's fault fails its item and is counted
(`genenv_engine.method.faults`: ``plugin_faults`` in each epoch's metrics and line); any other exception raised in a
plugin's code stops the run with one line naming it (`genenv_engine.core.limits.plugin_failure`).
"""

from __future__ import annotations

import random
import time
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from genenv_engine.backends.base import Sampling
from genenv_engine.config import RunConfig, replace_config
from genenv_engine.core.curriculum import calibration_error
from genenv_engine.core.events import (
    AttemptsScored,
    BatchProgressed,
    CheckpointSaved,
    EpochFinished,
    EpochStarted,
    Event,
    EventSink,
    HeldoutEvaluated,
    PhaseTimer,
    PolicyUpdated,
    RunControl,
    RunFailed,
    RunFinished,
    RunStarted,
    RunStopped,
    StopRequested,
    null_sink,
)
from genenv_engine.core.limits import PluginError, PluginFailed, plugin_failure
from genenv_engine.core.records import ScoredBatch, Task
from genenv_engine.environments import environments_of
from genenv_engine.environments.base import Environment
from genenv_engine.environments.plugin_worker import release_plugins, time_limit_plugins
from genenv_engine.executors import make_executor, preflight
from genenv_engine.executors.base import RolloutExecutor
from genenv_engine.method.faults import Faults, draft_faults, heldout_summary, merge_faults, rollout_faults, usable
from genenv_engine.method.simulator_update import simulator_update, simulator_version
from genenv_engine.method.strategies import Epoch, Strategies, replay_budget, resolve
from genenv_engine.storage.remote import RequestWatcher
from genenv_engine.storage.session import Session
from genenv_engine.training import simulator as sim
from genenv_engine.training.agent import TaskAttempts, evaluate, grpo_groups, heldout_tasks
from genenv_engine.training.roles import BackendFactory, Roles, load_roles, save_roles

QUIET_EVENTS = {"BatchProgressed", "WarmStartProgressed"}
"""High-rate events that are forwarded but not written to the store."""


def run(
    session: Session,
    sink: EventSink = null_sink,
    control: RunControl | None = None,
    backend_factory: BackendFactory | None = None,
) -> dict[str, Any]:
    """Run (or continue) the session up to ``config.epochs``; returns a short summary.

    Holds the session's lease throughout (taken here unless the caller holds it): a second engine on the same
    session raises `genenv_engine.core.errors.SessionBusy` before it changes anything."""
    control = control or RunControl()
    if session.held is None:
        with session.lease("genenv engine"):
            return _run_watched(session, sink, control, backend_factory)
    return _run_watched(session, sink, control, backend_factory)


def _run_watched(
    session: Session, sink: EventSink, control: RunControl, backend_factory: BackendFactory | None
) -> dict[str, Any]:
    """The run, with pause/resume/stop requests from another process (`genenv_engine.storage.remote`) applied to
    ``control`` while it lasts."""
    watcher = RequestWatcher(session.path, control).start()
    try:
        return _run_leased(session, sink, control, backend_factory)
    finally:
        watcher.close()


def _run_leased(
    session: Session, sink: EventSink, control: RunControl, backend_factory: BackendFactory | None
) -> dict[str, Any]:
    cfg = session.config.check_paths()  # a session resumed on another machine needs its model and data paths here
    session.check_releases()  # and the package versions its stored tasks came from
    emit = _recorder(session, sink)
    torch.set_num_threads(cfg.model.threads)
    envs = environments_of(cfg)
    time_limit_plugins(envs, cfg.simulator.plugin_timeout)  # 0: a plugin's calls run here, unlimited
    try:
        return _run_envs(session, cfg, envs, emit, control, backend_factory)
    except Exception as exc:
        failure = plugin_failure(exc, envs.values())  # raised in a plugin's code: one line, not a traceback
        if failure is None:
            raise
        raise failure from exc
    finally:
        release_plugins(envs)


def _run_envs(
    session: Session,
    cfg: RunConfig,
    envs: dict[str, Environment],
    emit: EventSink,
    control: RunControl,
    backend_factory: BackendFactory | None,
) -> dict[str, Any]:
    plan = resolve(cfg)  # the run's task source, seed sampler, replay source and prompt note
    for env in envs.values():
        # a seed or base level the split lacks, or an unseen pool the benchmark cannot write, fails here, before
        # the warm start (the unseen pool is built once per environment and reused by every epoch)
        plan.check(env)
    preflight(cfg)  # a Ray cluster that cannot be joined fails here, before the warm start or any epoch is begun
    store = session.store
    start = store.last_finished_epoch() + 1
    if any(m["epoch"] >= start for m in store.epoch_metrics()):
        store.log_event("PartialEpochDiscarded", start, {"reason": "resumed after a stop or crash mid-epoch"})
        store.drop_epochs_from(start)
    _record_environment(session)
    emit(RunStarted(start, str(session.path), cfg.to_dict(), start))
    epoch = start
    executor = None
    try:
        if start == 0:
            roles = _epoch_zero(session, envs, emit, control.checker(emit, 0), backend_factory, plan)
            epoch = 1
        else:
            roles = load_roles(session, start - 1, backend_factory=backend_factory)
        executor = make_executor(cfg, roles, envs, epoch - 1, emit, simulator_version=simulator_version(store, epoch))
        while epoch <= session.config.epochs:
            check = control.checker(emit, epoch)
            for backend in (roles.agent_backend, roles.simulator_backend):
                backend.tick = check  # pause/stop also between decoding steps
            check()
            run_epoch(session, roles, envs, epoch, emit, check, executor, plan)
            epoch += 1
    except StopRequested:
        store.mark_partial(epoch)
        emit(RunStopped(epoch, "stop requested"))
        return {"stopped_at": epoch, "epochs_done": epoch - 1}
    except Exception as exc:
        store.mark_partial(epoch)
        failure = plugin_failure(exc, envs.values()) or (exc if isinstance(exc, PluginError | PluginFailed) else None)
        emit(RunFailed(epoch, str(failure) if failure else "".join(traceback.format_exception_only(exc)).strip()))
        raise
    finally:
        if executor is not None:
            executor.close()
    emit(RunFinished(epoch - 1, epoch - 1))
    return {"epochs_done": epoch - 1}


def _record_environment(session: Session) -> None:
    """Store the software versions and the machine of this run (the report shows them)."""
    import json

    from genenv_engine.core.machine import local_machine, local_versions

    machine = local_machine()
    machine["torch_threads"] = str(torch.get_num_threads())
    if torch.cuda.is_available():
        machine["gpu"] = torch.cuda.get_device_name(0)
    session.store.set_meta("versions", json.dumps(local_versions()))
    session.store.set_meta("machine", json.dumps(machine))


def _recorder(session: Session, sink: EventSink) -> EventSink:
    """Write events to the store and the JSONL log, then forward them."""
    import json

    log = session.log_path()

    def emit(event: Event) -> None:
        if event.kind not in QUIET_EVENTS:
            payload = event.payload()
            session.store.log_event(event.kind, event.epoch, payload)
            with log.open("a") as fh:
                fh.write(json.dumps({"ts": time.time(), "kind": event.kind, **payload}, default=str) + "\n")
        sink(event)

    return emit


def _epoch_zero(
    session: Session,
    envs: dict[str, Environment],
    emit: EventSink,
    check: Callable[[], None],
    backend_factory: BackendFactory | None,
    plan: Strategies,
) -> Roles:
    """Store the built-in splits, warm-start both roles (cached), evaluate, and checkpoint epoch 0."""
    from genenv_engine.training.warmstart import warm_start

    store, cfg = session.store, session.config
    store.start_epoch(0)
    emit(EpochStarted(0))
    seconds: dict[str, float] = {}
    for env in envs.values():
        for tasks in env.splits().values():
            store.insert_tasks(tasks)
        store.insert_tasks(plan.replay.stored(env))  # a base pool no split holds, stored so rollouts can name it
    with PhaseTimer(emit, 0, "warm_start", seconds) as phase:
        folder, info = warm_start(cfg, envs, emit, check)
        phase.info = info
    roles = load_roles(session, 0, warm_start_dir=folder, backend_factory=backend_factory)
    faults: Faults = {}
    for name, kinds in (info.get("simulator_pairs_failed") or {}).items():  # the pairs its warm start left out
        merge_faults(faults, {name: {"siblings": kinds}})
    heldout, by_level, correct = _heldout(session, roles, envs, 0, emit, check, seconds, faults)
    with PhaseTimer(emit, 0, "checkpoint", seconds):
        path = session.write_checkpoint(0, lambda tmp: save_roles(roles, tmp))
    emit(CheckpointSaved(0, str(path)))
    metrics = {
        "heldout": heldout,
        "heldout_by_level": by_level,
        "heldout_correct": correct,
        **({"plugin_faults": faults} if faults else {}),
        "phase_seconds": seconds,
        "warm_start": info,
        "simulator_fingerprint": roles.simulator.fingerprint(),
        "agent_fingerprint": roles.agent.fingerprint(),
    }
    store.finish_epoch(0, metrics)
    emit(EpochFinished(0, metrics))
    return roles


def run_epoch(
    session: Session,
    roles: Roles,
    envs: dict[str, Environment],
    epoch: int,
    emit: EventSink,
    check: Callable[[], None],
    executor: RolloutExecutor | None = None,
    plan: Strategies | None = None,
) -> dict[str, Any]:
    """One epoch of Algorithm 1: generate, validate, roll out, update both policies, evaluate, checkpoint.

    ``check`` is called between phases and batches (it blocks while paused and raises StopRequested);
    ``executor`` writes and validates the drafts and runs the rollout phase's generation and scoring (default: in
    this process); ``plan``: the run's strategies (default: resolved from the session's config)."""
    cfg, store = session.config, session.store
    plan = plan or resolve(cfg)
    executor = executor or make_executor(
        replace_config(cfg, ray=replace_config(cfg.ray, address="")),
        roles,
        envs,
        epoch - 1,
        emit,
        simulator_version=simulator_version(store, epoch),
    )
    rng = random.Random(f"{cfg.seed}/{epoch}")
    torch.manual_seed(cfg.seed * 100_003 + epoch)
    store.start_epoch(epoch)
    emit(EpochStarted(epoch))
    seconds: dict[str, float] = {}
    tokens_before = roles.tokens_generated()
    metrics: dict[str, Any] = {}

    # 1-2. the task source's fresh tasks: the simulator writes n variations per seed, the environment validates them
    step = Epoch(session, executor, envs, epoch, rng, emit, check, seconds, metrics, plan)
    fresh, batch_of, gens = plan.tasks.fresh(step)

    # 3. the agent attempts every fresh task and a replay sample of D_train, k times each
    replay = _replay_tasks(session, envs, {t.id for t in fresh}, rng, len(fresh), plan)
    with PhaseTimer(emit, epoch, "rollout", seconds):
        scored = _rollout(session, executor, fresh + replay, epoch, emit, check)
    # a plugin's faults: counted (the sampler's draws and the grounded reward's probes add theirs), kept out of
    # the agent's update and the batches' p-hat
    faults = merge_faults(draft_faults({}, (g.task for g in gens)), metrics.pop("plugin_faults", {}))
    rollout_faults(faults, scored)
    fresh_ids = {t.id for t in fresh}
    trained = usable(scored)
    batch_metrics, batches = _score_batches(
        session, [s for s in trained if s.task.id in fresh_ids], batch_of, epoch, emit, step.notes, plan
    )
    metrics.update(batch_metrics)
    metrics["tasks_trained"] = len(scored)
    metrics["tasks_trained_by_origin"] = dict(Counter(t.task.origin for t in scored))
    metrics["rollout_workers"] = executor.last_stats if scored else []
    check()
    plan.reward.before(step, roles, fresh, batch_of)  # a reward measured across the agent's update: its first half

    # 4. agent: GRPO on the rolled-out groups
    with PhaseTimer(emit, epoch, "agent_update", seconds) as phase:
        phase.info = roles.grpo.update(grpo_groups(roles.agent, trained), rng, check)
        roles.agent_backend.sync()
        executor.sync(epoch)
    emit(PolicyUpdated(epoch, "agent", phase.info))
    metrics["agent_update"] = phase.info
    batches = plan.reward.after(step, roles, batches)  # ... and its second: the batches scored again

    # 5. simulator: reward-weighted regression on the kept (in-band) batches (when the task source trains it)
    with PhaseTimer(emit, epoch, "simulator_update", seconds) as phase:
        phase.info = simulator_update(session, roles, envs, gens, batches, epoch, rng, check, plan)
        if phase.info.get("steps"):  # the weights moved: this epoch's are the next version
            executor.sync_simulator(epoch)
    if phase.info.get("steps"):
        emit(PolicyUpdated(epoch, "simulator", phase.info))
    metrics["simulator_update"] = phase.info
    for name, kinds in (phase.info.get("sibling_faults") or {}).items():
        merge_faults(faults, {name: {"siblings": kinds}})

    # 6. held-out evaluation on every enabled benchmark
    metrics["heldout"], metrics["heldout_by_level"], metrics["heldout_correct"] = _heldout(
        session, roles, envs, epoch, emit, check, seconds, faults
    )
    if merge_faults(faults, metrics.pop("plugin_faults", {})):  # stored when there are any (else the rows say none)
        metrics["plugin_faults"] = faults

    # 7. checkpoint, atomically
    with PhaseTimer(emit, epoch, "checkpoint", seconds):
        path = session.write_checkpoint(epoch, lambda tmp: save_roles(roles, tmp))
    emit(CheckpointSaved(epoch, str(path)))

    busy = sum(seconds.get(p, 0.0) for p in ("generate", "rollout", "heldout_eval"))
    tokens = roles.tokens_generated() - tokens_before
    metrics.update(
        {
            "phase_seconds": {k: round(v, 3) for k, v in seconds.items()},
            "tokens_generated": tokens,
            "tokens_per_second": round(tokens / busy, 1) if busy else None,
            "pool_size": len(store.pool(list(cfg.benchmarks))),
            "simulator_fingerprint": roles.simulator.fingerprint(),
            "agent_fingerprint": roles.agent.fingerprint(),
        }
    )
    store.finish_epoch(epoch, metrics)
    emit(EpochFinished(epoch, metrics))
    return metrics


def _replay_tasks(
    session: Session,
    envs: dict[str, Environment],
    exclude: set[str],
    rng: random.Random,
    n_fresh: int,
    plan: Strategies | None = None,
) -> list[Task]:
    """Sample D_train = base data plus the earlier generated pool (unless the task source replays none); pinned
    tasks and new edits always ride along."""
    cfg, store = session.config, session.store
    plan = plan or resolve(cfg)
    n = replay_budget(cfg, n_fresh, len(envs))
    base = _base_tasks(session, envs, plan)
    pool = [t for t in store.pool(list(cfg.benchmarks)) if t.id not in exclude and t.status != "pinned"]
    n_pool = min(len(pool), round(n * (1 - cfg.agent.base_fraction))) if plan.tasks.replays_pool else 0
    chosen = fill_sample(rng, base, n - n_pool) + rng.sample(pool, n_pool)
    must = store.pinned_tasks() + _unused_edits(session)
    seen = {t.id for t in chosen} | exclude
    for t in must:
        if t.id not in seen:
            seen.add(t.id)
            chosen.append(t)
    return [t for t in chosen if t.status != "banned"]


def _base_tasks(session: Session, envs: dict[str, Environment], plan: Strategies | None = None) -> list[Task]:
    """The replay source's choices less the tasks the user banned, pinned (always added) or edited (superseded)."""
    skip = session.store.inactive_train_ids()
    replay = (plan or resolve(session.config)).replay
    return [t for env in envs.values() for t in replay.choices(env) if t.id not in skip]


def fill_sample(rng: random.Random, tasks: list[Task], n: int) -> list[Task]:
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


def _unused_edits(session: Session) -> list[Task]:
    """Hand-edited tasks no epoch has trained on yet (so an edit made while paused is used next)."""
    rows = session.store.query_tasks(origin="edited", valid=True, limit=10_000, order="id")
    unused = [
        session.store.get_task(r["id"])
        for r in rows
        if not r.get("n_rollouts") and r.get("superseded_by") is None and r.get("status") != "banned"
    ]
    return [t for t in unused if t is not None]


def _rollout(
    session: Session,
    executor: RolloutExecutor,
    tasks: list[Task],
    epoch: int,
    emit: EventSink,
    check: Callable[[], None],
) -> list[TaskAttempts]:
    """k rollouts per task (by the executor), stored with their rewards and the policy version that sampled them."""
    cfg = session.config

    def progress(done: int, total: int) -> None:
        emit(BatchProgressed(epoch, "rollout", done, total))
        check()

    sampling = Sampling(temperature=cfg.agent.temperature, max_new_tokens=cfg.agent.max_new_tokens)
    scored = (
        executor.rollout(
            tasks, cfg.agent.rollouts, sampling, cfg.agent.success_threshold, epoch=epoch, progress=progress
        )
        if tasks
        else []
    )
    rows = [
        {
            "task_id": s.task.id,
            "epoch": epoch,
            "response": a.completion.text,
            "reward": a.reward,
            "success": a.success,
            "error_type": a.result.error_type,
            "purpose": "train",
            "policy_version": a.policy_version,
        }
        for s in scored
        for a in s.attempts
    ]
    session.store.insert_rollouts(rows)
    session.store.add_rollout_stats((s.task.id, s.p_hat, len(s.attempts)) for s in scored)
    return scored


def _score_batches(
    session: Session,
    fresh: list[TaskAttempts],
    batch_of: dict[str, str],
    epoch: int,
    emit: EventSink,
    notes: dict[str, str | None] | None = None,
    plan: Strategies | None = None,
) -> tuple[dict[str, Any], list[ScoredBatch]]:
    """p-hat per variation batch, R_env and whether the simulator's update keeps it, by the run's reward
    (``plan.reward``; stored as the epoch's log, with the alpha it was scored against and, for a batch written this
    epoch, its prompt note from ``notes``, and returned to the simulator update); calibration metrics of the epoch."""
    cur = session.config.curriculum
    reward = (plan or resolve(session.config)).reward
    store = session.store
    by_batch: dict[str, list[TaskAttempts]] = {}
    for s in fresh:
        by_batch.setdefault(batch_of.get(s.task.id, s.task.id), []).append(s)
    batches = []
    for batch_id, items in by_batch.items():
        p_hat = _pooled(items)
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
    notes = notes or {}
    style = session.config.simulator.prompt
    store.upsert_batches(
        [{**r, "prompt_note": sim.note_fields(style, notes[r["id"]])} for r in rows if r["id"] in notes]
    )
    store.upsert_batches([r for r in rows if r["id"] not in notes])  # a static batch scored again keeps its note
    p_hats, r_envs = [b.p_hat for b in batches], [b.r_env for b in batches]
    emit(AttemptsScored(epoch, len(fresh), sum(len(s.attempts) for s in fresh), _pooled(fresh) or 0.0, p_hats, r_envs))
    by_bench: dict[str, float | None] = {}
    for name in sorted({s.task.benchmark for s in fresh}):
        by_bench[name] = _pooled([s for s in fresh if s.task.benchmark == name])
    return {
        "generated_success": _pooled(fresh),
        "generated_success_by_benchmark": by_bench,
        "calibration_error": calibration_error(p_hats, [cur.alpha_for(b.benchmark) for b in batches]),
        "batches": len(batches),
        "in_band_fraction": (sum(b.in_band for b in batches) / len(batches)) if batches else None,
        "batch_p_hats": [round(p, 4) for p in p_hats],
        "task_p_hats": [round(s.p_hat, 4) for s in fresh],
        "r_env_mean": sum(r_envs) / len(r_envs) if r_envs else None,
    }, batches


def _pooled(items: list[TaskAttempts]) -> float | None:
    tries = sum(len(s.attempts) for s in items)
    return sum(s.successes for s in items) / tries if tries else None


def _heldout(
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
    session.store.insert_rollouts(
        [  # the greedy answers, so the console can show what changed between epochs
            {
                "task_id": s.task.id,
                "epoch": epoch,
                "response": a.completion.text,
                "reward": a.reward,
                "success": a.success,
                "error_type": a.result.error_type,
                "purpose": "heldout",
            }
            for s in scored
            for a in s.attempts
        ]
    )
    rollout_faults(faults, scored, "heldout")
    rates, by_level, correct = heldout_summary(envs, scored)
    emit(HeldoutEvaluated(epoch, rates))
    return rates, by_level, correct
