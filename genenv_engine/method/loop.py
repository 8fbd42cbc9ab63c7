"""The co-evolution controller: one function per epoch that reads like the paper's Algorithm 1.

`run` opens or continues a session: epoch 0 is the warm start and a held-out evaluation; every later epoch is
`run_epoch`, which calls the epoch's steps in order (`genenv_engine.method.phases`): generate -> validate ->
rollout -> agent update -> simulator update -> held-out eval -> checkpoint. Where the fresh tasks come from, how
seeds are drawn, what the replay draws from, the note a simulator prompt carries and the simulator's reward (with
its hooks before and after the agent's update) are the strategies the run resolved once from its config
(`genenv_engine.method.strategies`), called without branching on settings. The loop emits typed events, checks the
`RunControl` between phases and batches (pause/stop), and stores everything in the session's SQLite store, so a
crash or a stop leaves a resumable session. A plugin's fault fails its item and is counted
(`genenv_engine.method.faults`: ``plugin_faults`` in each epoch's metrics and line); any other exception raised in a
plugin's code stops the run with one line naming it (`genenv_engine.core.limits.plugin_failure`).
"""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch

from genenv_engine.config import RunConfig
from genenv_engine.core.events import (
    CheckpointSaved,
    EpochFinished,
    EpochStarted,
    Event,
    EventSink,
    PhaseTimer,
    RunControl,
    RunFailed,
    RunFinished,
    RunStarted,
    RunStopped,
    StopRequested,
    null_sink,
)
from genenv_engine.core.limits import PluginError, PluginFailed, plugin_failure
from genenv_engine.environments import environments_of
from genenv_engine.environments.base import Environment
from genenv_engine.environments.plugin_worker import release_plugins, time_limit_plugins
from genenv_engine.executors import make_executor, preflight
from genenv_engine.executors.base import RolloutExecutor
from genenv_engine.method.faults import Faults, merge_faults
from genenv_engine.method.phases import (
    checkpoint,
    evaluate_heldout,
    generate,
    heldout,
    rollout,
    update_agent,
    update_simulator,
    validate,
)
from genenv_engine.method.protocols import Epoch, Strategies
from genenv_engine.method.simulator_update import simulator_version
from genenv_engine.method.strategies import resolve
from genenv_engine.storage.remote import RequestWatcher
from genenv_engine.storage.session import Session
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
    from genenv_engine.training.warmstart.stages import warm_start

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
    heldout, by_level, correct = evaluate_heldout(session, roles, envs, 0, emit, check, seconds, faults)
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
    executor: RolloutExecutor,
    plan: Strategies,
) -> dict[str, Any]:
    """One epoch of Algorithm 1 (`genenv_engine.method.phases`): generate, validate, roll out, update both
    policies, evaluate, checkpoint; returns the epoch's metrics.

    ``check`` is called between phases and batches (it blocks while paused and raises StopRequested);
    ``executor`` writes and validates the drafts and runs the rollout phase's generation and scoring; ``plan``: the
    run's strategies."""
    cfg, store = session.config, session.store
    rng = random.Random(f"{cfg.seed}/{epoch}")
    torch.manual_seed(cfg.seed * 100_003 + epoch)
    store.start_epoch(epoch)
    emit(EpochStarted(epoch))
    tokens_before = roles.tokens_generated()
    step = Epoch(session, executor, envs, epoch, rng, emit, check, {}, {}, plan)

    drafts = generate(step)  # 1. the simulator writes n variations of each drawn seed
    fresh = validate(step, drafts)  # 2. the environment validates them: the valid ones are the fresh tasks
    rolled = rollout(step, fresh, drafts.notes)  # 3. k attempts at each fresh task and a replay sample; p-hat, R_env
    plan.reward.before(step, roles, fresh.tasks, fresh.batch_of)  # a reward measured across the agent's update
    update_agent(step, roles, rolled.trained)  # 4. GRPO
    batches = plan.reward.after(step, roles, rolled.batches)  # ... and the batches scored again after it
    update_simulator(step, roles, fresh.generations, batches, rolled.faults)  # 5. RWR on the kept batches
    heldout(step, roles, rolled.faults)  # 6. held-out evaluation on every benchmark
    checkpoint(step, roles)  # 7. both roles saved, atomically

    metrics, seconds = step.metrics, step.seconds
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
