"""The co-evolution core: the environment side of Algorithm 1 over one session, which any agent trainer feeds.

`CoEvolution` opens or continues a session (``with CoEvolution(session) as coevo: coevo.start()``: its lease, pause
and stop requests from another process, plugin time limits; a new session's epoch 0 is the warm start and a held-out
evaluation) and runs every later epoch in three calls:

- `CoEvolution.begin_epoch` writes and validates the simulator's drafts (`phases.generate`, `phases.validate`) and
  draws the replay sample: the epoch's training tasks, fresh ones first;
- `CoEvolution.record_attempts` stores attempts the native trainer made and scored (`phases.rollout`);
  `CoEvolution.record` stores the rewards of attempts a trainer outside genenv made, scored by the task's
  environment. A reward for a task of an epoch already closed (a trainer that reads its data ahead) is stored apart,
  as a ``late`` rollout of the open epoch, and counted; one for a task no epoch issued is counted and named once;
- `CoEvolution.end_epoch` computes each variation batch's p-hat and R_env from what was recorded (`phases.score`),
  runs the agent's update (an `AgentLearner`: genenv's GRPO, or an outside trainer's weights adopted), the
  simulator's RWR update, the held-out evaluation and the checkpoint, and finishes the epoch's metrics and events.

The native loop (`genenv_engine.method.loop`) and the trainer integrations (`genenv_engine.integrations`) call the
same three. Leaving the ``with`` block ends the run: normally with ``RunFinished``; on a stop request with the epoch
marked partial (resumable) and ``RunStopped``; on a failure with the epoch marked partial and ``RunFailed`` (an
exception raised in a plugin's code becomes one line naming it, `genenv_engine.core.limits.plugin_failure`).
"""

from __future__ import annotations

import json
import random
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import torch

from genenv_engine.backends.base import Completion
from genenv_engine.core.curriculum import is_success
from genenv_engine.core.events import (
    CheckpointSaved,
    EpochFinished,
    EpochStarted,
    Event,
    EventSink,
    PhaseFinished,
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
from genenv_engine.core.records import CheckResult, Task
from genenv_engine.environments import environments_of
from genenv_engine.environments.base import Environment
from genenv_engine.environments.plugin_worker import release_plugins, time_limit_plugins
from genenv_engine.executors import make_executor, preflight
from genenv_engine.executors.base import RolloutExecutor
from genenv_engine.method.faults import Faults, merge_faults
from genenv_engine.method.phases import (
    Rollouts,
    attempt_rows,
    checkpoint,
    evaluate_heldout,
    generate,
    heldout,
    score,
    store_attempts,
    training_tasks,
    update_agent,
    update_simulator,
    validate,
)
from genenv_engine.method.protocols import AgentLearner, Epoch, FreshTasks, Strategies
from genenv_engine.method.simulator_update import simulator_version
from genenv_engine.method.strategies import resolve
from genenv_engine.storage.remote import RequestWatcher
from genenv_engine.storage.session import Session
from genenv_engine.training.agent import Attempt, TaskAttempts
from genenv_engine.training.roles import BackendFactory, Roles, load_roles, save_roles

QUIET_EVENTS = {"BatchProgressed", "WarmStartProgressed"}
"""High-rate events that are forwarded but not written to the store."""


class UnknownTask(UserWarning):
    """Rewards recorded for a task id no epoch of this run issued: counted in the epoch's metrics, not stored."""


@dataclass
class OpenEpoch:
    """An epoch between `CoEvolution.begin_epoch` and `CoEvolution.end_epoch`."""

    step: Epoch
    fresh: FreshTasks
    notes: dict[str, str | None]
    tasks: dict[str, Task]
    """The training tasks handed out by id: the fresh tasks, then the replay sample."""
    tokens_before: int
    scored: list[TaskAttempts] = field(default_factory=list)
    """The native trainer's attempts, as `phases.rollout` returned them (a task drawn twice is two groups)."""
    recorded: dict[str, TaskAttempts] = field(default_factory=dict)
    """Task id -> the attempts recorded for it from outside (`CoEvolution.record`), pooled, in first-record order."""
    late: dict[int, int] = field(default_factory=dict)
    """Earlier epoch -> its tasks' attempts recorded after it closed (stored as ``late`` rollouts of this one)."""
    unknown: int = 0
    """Attempts recorded for task ids no epoch issued (not stored)."""


class CoEvolution:
    """The environment side of GenEnv over one session: the simulator, the validators, the store and the events,
    fed by whichever trainer trains the agent (the module docstring gives the calls in order)."""

    def __init__(
        self,
        session: Session,
        sink: EventSink = null_sink,
        control: RunControl | None = None,
        backend_factory: BackendFactory | None = None,
    ) -> None:
        """Nothing happens until the ``with`` block is entered; ``backend_factory`` replaces the configured
        generation backends (tests use scripted doubles through it)."""
        self.session = session
        self.sink = sink
        self.control = control or RunControl()
        self.backend_factory = backend_factory
        self.emit: EventSink = sink
        self.envs: dict[str, Environment] = {}
        self.epoch = 0
        """The epoch open now, else the next one to run."""
        self.summary: dict[str, Any] = {}
        """What the run did, once the ``with`` block is left: ``epochs_done`` (and ``stopped_at`` after a stop)."""
        self._stack = ExitStack()
        self._started = False
        self._plan: Strategies | None = None
        self._roles: Roles | None = None
        self._executor: RolloutExecutor | None = None
        self._open: OpenEpoch | None = None
        self._issued: dict[int, set[str]] = {}
        self._unplaced: dict[int, int] = {}
        self._named: set[str] = set()

    # --- the run's lifetime -------------------------------------------------------------------------------------

    def __enter__(self) -> CoEvolution:
        """Take the session's lease (unless the caller holds it), follow pause/stop requests from another process,
        check the session's paths and package versions, and build its environments (plugins time-limited)."""
        session, stack = self.session, self._stack
        try:
            if session.held is None:
                stack.enter_context(session.lease("genenv engine"))
            watcher = RequestWatcher(session.path, self.control).start()
            stack.callback(watcher.close)
            cfg = session.config.check_paths()  # a session resumed elsewhere needs its model and data paths here
            session.check_releases()  # and the package versions its stored tasks came from
            self.emit = _recorder(session, self.sink)
            torch.set_num_threads(cfg.runtime.threads)
            self.envs = environments_of(cfg)
            time_limit_plugins(self.envs, cfg.simulator.plugin_timeout)  # 0: a plugin's calls run here, unlimited
            stack.callback(release_plugins, self.envs)
        except BaseException:
            stack.close()
            raise
        return self

    def start(self) -> None:
        """Resolve the run's strategies, check them against every environment, drop a partial epoch left by a stop
        or crash, and bring the roles in: a new session's epoch 0 (warm start, held-out evaluation, checkpoint) or
        the last finished epoch's checkpoint."""
        session, cfg, store = self.session, self.session.config, self.session.store
        self._plan = plan = resolve(cfg)  # the run's task source, seed sampler, replay source and prompt note
        for env in self.envs.values():
            # a seed or base level the split lacks, or an unseen pool the benchmark cannot write, fails here, before
            # the warm start (the unseen pool is built once per environment and reused by every epoch)
            plan.check(env)
        preflight(cfg)  # a Ray cluster that cannot be joined fails here, before the warm start or any epoch is begun
        start = store.last_finished_epoch() + 1
        if any(m["epoch"] >= start for m in store.epoch_metrics()):
            store.log_event("PartialEpochDiscarded", start, {"reason": "resumed after a stop or crash mid-epoch"})
            store.drop_epochs_from(start)
        _record_environment(session)
        self.emit(RunStarted(start, str(session.path), cfg.to_dict(), start))
        self.epoch, self._started = start, True
        if start == 0:
            self._roles = _epoch_zero(
                session, self.envs, self.emit, self.control.checker(self.emit, 0), self.backend_factory, plan
            )
            self.epoch = 1
        else:
            self._roles = load_roles(session, start - 1, backend_factory=self.backend_factory)
        self._executor = make_executor(
            cfg,
            self._roles,
            self.envs,
            self.epoch - 1,
            self.emit,
            simulator_version=simulator_version(store, self.epoch),
        )

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """End the run (see the module docstring); a stop request is handled here, anything else raised again."""
        store, stopped = self.session.store, isinstance(exc, StopRequested)
        # raised in a plugin's code: one line naming it (in the run's failure event, and raised instead of ``exc``)
        failure = plugin_failure(exc, self.envs.values()) if isinstance(exc, Exception) and not stopped else None
        try:
            if self._started and isinstance(exc, Exception):
                store.mark_partial(self.epoch)
                if stopped:
                    self.emit(RunStopped(self.epoch, "stop requested"))
                    self.summary = {"stopped_at": self.epoch, "epochs_done": self.epoch - 1}
                else:
                    named = failure or (exc if isinstance(exc, PluginError | PluginFailed) else None)
                    line = str(named) if named else "".join(traceback.format_exception_only(exc)).strip()
                    self.emit(RunFailed(self.epoch, line))
        finally:
            if self._executor is not None:
                self._executor.close()
                self._executor = None
            if exc is None and self._started:
                self._log_unplaced()
                if self._open is not None:  # the trainer stopped inside an epoch: it is redone on resume
                    store.mark_partial(self.epoch)
                    self.emit(RunStopped(self.epoch, "the trainer ended before the epoch did"))
                    self.summary = {"stopped_at": self.epoch, "epochs_done": self.epoch - 1}
                else:
                    self.emit(RunFinished(self.epoch - 1, self.epoch - 1))
                    self.summary = {"epochs_done": self.epoch - 1}
            try:
                if failure is not None:
                    raise failure from exc
            finally:
                self._stack.close()
        return stopped and self._started

    @property
    def finished(self) -> bool:
        """Whether every epoch the session's config asks for is done."""
        return self._open is None and self.epoch > self.session.config.epochs

    @property
    def roles(self) -> Roles:
        """Both roles as of the last finished epoch (after `start`)."""
        if self._roles is None:
            raise RuntimeError("CoEvolution.start() has not run: enter the with block and call start() first")
        return self._roles

    @property
    def step(self) -> Epoch:
        """The open epoch's context (between `begin_epoch` and `end_epoch`)."""
        return self._require_open().step

    # --- one epoch ----------------------------------------------------------------------------------------------

    def begin_epoch(self) -> list[Task]:
        """Open the next epoch: 1. the simulator writes its drafts, 2. the environment validates them; returns the
        tasks the agent trains on this epoch, the fresh tasks first, then the replay sample (pinned tasks and
        unused hand edits included)."""
        roles, executor, plan = self.roles, self._executor, self._plan
        if self._open is not None:
            raise RuntimeError(f"epoch {self.epoch} is open: end_epoch() it first")
        assert executor is not None and plan is not None  # set together with the roles
        session, epoch, emit = self.session, self.epoch, self.emit
        check = self.control.checker(emit, epoch)
        for backend in (roles.agent_backend, roles.simulator_backend):
            backend.tick = check  # pause/stop also between decoding steps
        check()
        cfg, store = session.config, session.store
        rng = random.Random(f"{cfg.seed}/{epoch}")
        torch.manual_seed(cfg.seed * 100_003 + epoch)
        store.start_epoch(epoch)
        emit(EpochStarted(epoch))
        tokens_before = roles.tokens_generated()
        step = Epoch(session, executor, self.envs, epoch, rng, emit, check, {}, {}, plan)
        drafts = generate(step)  # 1. the simulator writes n variations of each drawn seed
        fresh = validate(step, drafts)  # 2. the environment validates them: the valid ones are the fresh tasks
        tasks = training_tasks(step, fresh)  # and a replay sample of D_train joins them
        self._open = OpenEpoch(step, fresh, drafts.notes, {t.id: t for t in tasks}, tokens_before)
        self._issued[epoch] = set(self._open.tasks)
        return tasks

    def record_attempts(self, scored: list[TaskAttempts]) -> None:
        """Store the native trainer's scored attempts (`phases.rollout`) as the open epoch's rollouts."""
        op = self._require_open()
        store_attempts(self.session, scored, op.step.epoch)
        self.session.store.add_rollout_stats((s.task.id, s.p_hat, len(s.attempts)) for s in scored)
        op.scored.extend(scored)

    def record(
        self,
        task_id: str,
        rewards: Sequence[float],
        *,
        epoch: int | None = None,
        responses: Sequence[str] | None = None,
        successes: Sequence[bool] | None = None,
        errors: Sequence[str | None] | None = None,
    ) -> str:
        """Store attempts at ``task_id`` that a trainer outside genenv made, each scored by the task's environment
        (``rewards``: R_agent; ``successes``: whether each counts toward p-hat, by default the reward against
        ``agent.success_threshold``; ``responses`` and ``errors``: the answers and their checker errors).

        ``epoch`` is the epoch that issued the task (default: the open one). Returns where the attempts went:
        ``"recorded"`` (the open epoch's: its p-hat counts them), ``"late"`` (a task of an epoch already closed:
        stored as ``late`` rollouts of the open epoch and counted in its ``late_rollouts``, never in a p-hat) or
        ``"unknown"`` (a task no epoch of this run issued: counted in ``unknown_rollouts``, named once in an
        `UnknownTask` warning, not stored)."""
        n = len(rewards)
        threshold = self.session.config.agent.success_threshold
        oks = list(successes) if successes is not None else [is_success(r, threshold) for r in rewards]
        texts = list(responses) if responses is not None else [""] * n
        kinds = list(errors) if errors is not None else [None] * n
        if not len(oks) == len(texts) == len(kinds) == n:
            raise ValueError(f"record({task_id!r}): rewards, responses, successes and errors differ in length")
        tag = self.epoch if epoch is None else int(epoch)
        op = self._open
        new = [
            Attempt(Completion(text, []), CheckResult(ok, float(r), {}, kind), float(r), bool(ok))
            for r, ok, text, kind in zip(rewards, oks, texts, kinds, strict=True)
        ]
        if op is not None and tag == op.step.epoch and task_id in op.tasks:
            group = op.recorded.get(task_id)
            if group is None:
                task = op.tasks[task_id]
                group = op.recorded[task_id] = TaskAttempts(task, task.prompt, [])
            group.attempts.extend(new)
            store_attempts(self.session, [TaskAttempts(group.task, group.prompt, new)], tag)
            return "recorded"
        if tag < self.epoch and task_id in self._issued.get(tag, ()):
            if op is None:  # between epochs: counted, shown when the run ends
                self._unplaced[tag] = self._unplaced.get(tag, 0) + n
            else:
                op.late[tag] = op.late.get(tag, 0) + n
                self.session.store.insert_rollouts(attempt_rows(task_id, new, op.step.epoch, "late"))
            return "late"
        self.count_unknown(task_id, n, tag)
        return "unknown"

    def count_unknown(self, task_id: str, n: int, epoch: int | None = None) -> None:
        """Count ``n`` attempts at ``task_id``, which no epoch of this run issued, in the open epoch's
        ``unknown_rollouts`` (nothing is stored); the first time an id comes, an `UnknownTask` warning names it."""
        op = self._open
        if op is not None:
            op.unknown += n
        if task_id not in self._named:
            self._named.add(task_id)
            warnings.warn(
                f"{n} rewards for task {task_id!r} (epoch {self.epoch if epoch is None else epoch}) were not "
                f"recorded: no epoch of this run issued it (open epoch: {op.step.epoch if op else 'none'}); they "
                "are counted as unknown_rollouts",
                UnknownTask,
                stacklevel=3,
            )

    def end_epoch(self, learn: AgentLearner, seconds: dict[str, float] | None = None) -> dict[str, Any]:
        """Close the open epoch: p-hat per variation batch and R_env from what was recorded, 4. the agent's update
        (``learn``), 5. the simulator's RWR update on the kept batches, 6. held-out evaluation, 7. checkpoint; stores
        and returns the epoch's metrics. ``seconds``: time spent outside genenv, added to the phase times (an
        outside trainer's own, as ``trainer``)."""
        op = self._require_open()
        step, roles, store, cfg = op.step, self.roles, self.session.store, self.session.config
        plan = step.plan
        recorded = list(op.recorded.values())
        if recorded:
            store.add_rollout_stats((s.task.id, s.p_hat, len(s.attempts)) for s in recorded)
        for phase, spent in (seconds or {}).items():  # an outside trainer's time, as a phase of its own
            step.seconds[phase] = step.seconds.get(phase, 0.0) + spent
            self.emit(PhaseFinished(step.epoch, phase, spent, {}))
        rolled = score(step, op.fresh, op.scored + recorded, op.notes)  # p-hat per batch, R_env, band filter
        plan.reward.before(step, roles, op.fresh.tasks, op.fresh.batch_of)  # a reward measured across the update
        update_agent(step, roles, rolled.trained, learn)  # 4. the agent's update
        batches = plan.reward.after(step, roles, rolled.batches)  # ... and the batches scored again after it
        update_simulator(step, roles, op.fresh.generations, batches, rolled.faults)  # 5. RWR on the kept batches
        heldout(step, roles, rolled.faults)  # 6. held-out evaluation on every benchmark
        checkpoint(step, roles)  # 7. both roles saved, atomically

        metrics, secs = step.metrics, step.seconds
        busy = sum(secs.get(p, 0.0) for p in ("generate", "rollout", "heldout_eval"))
        tokens = roles.tokens_generated() - op.tokens_before
        metrics.update(
            {
                "phase_seconds": {k: round(v, 3) for k, v in secs.items()},
                "tokens_generated": tokens,
                "tokens_per_second": round(tokens / busy, 1) if busy else None,
                "pool_size": len(store.pool(list(cfg.benchmarks))),
                "simulator_fingerprint": roles.simulator.fingerprint(),
                "agent_fingerprint": roles.agent.fingerprint(),
            }
        )
        if recorded or op.late or op.unknown:
            metrics.setdefault("rollout_workers", [])
            metrics["rollouts_recorded"] = sum(len(s.attempts) for s in recorded)
            metrics["late_rollouts"] = {str(e): n for e, n in sorted(op.late.items())}
            metrics["unknown_rollouts"] = op.unknown
            metrics.update(_coverage(op, rolled))
        store.finish_epoch(step.epoch, metrics)
        self.emit(EpochFinished(step.epoch, metrics))
        self._open = None
        self.epoch += 1
        return metrics

    def _require_open(self) -> OpenEpoch:
        if self._open is None:
            raise RuntimeError(f"no epoch is open: call begin_epoch() first (next epoch: {self.epoch})")
        return self._open

    def _log_unplaced(self) -> None:
        """Count the late attempts that arrived when no epoch was open (after the last one closed)."""
        if self._unplaced:
            late = {str(e): n for e, n in sorted(self._unplaced.items())}
            self.session.store.log_event("LateRolloutsUnplaced", self.epoch - 1, {"late_rollouts": late})


def _coverage(op: OpenEpoch, rolled: Rollouts) -> dict[str, Any]:
    """What an outside trainer's epoch scored its batches from: the usable attempts behind each batch's p-hat (in
    ``batch_p_hats`` order), and the epoch's tasks and fresh batches that none reached (a trainer that filtered
    groups, or stopped before it came to them; a batch without any has no p-hat)."""
    fresh, batch_of = {t.id for t in op.fresh.tasks}, op.fresh.batch_of
    attempts: dict[str, int] = {}
    for s in rolled.trained:
        if s.task.id in fresh:
            batch = batch_of.get(s.task.id, s.task.id)
            attempts[batch] = attempts.get(batch, 0) + len(s.attempts)
    scored = {s.task.id for s in rolled.trained}
    return {
        "batch_attempts": [attempts.get(b.id, 0) for b in rolled.batches],
        "unscored_tasks": sum(task not in scored for task in op.tasks),
        "unscored_batches": len({batch_of.get(t, t) for t in fresh} - set(attempts)),
    }


def _record_environment(session: Session) -> None:
    """Store the software versions and the machine of this run (the report shows them)."""
    from genenv_engine.core.machine import local_machine, local_versions

    machine = local_machine()
    machine["torch_threads"] = str(torch.get_num_threads())
    if torch.cuda.is_available():
        machine["gpu"] = torch.cuda.get_device_name(0)
    session.store.set_meta("versions", json.dumps(local_versions()))
    session.store.set_meta("machine", json.dumps(machine))


def _recorder(session: Session, sink: EventSink) -> EventSink:
    """Write events to the store and the JSONL log, then forward them."""
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
        folder, info = warm_start(cfg, envs, emit, check, plan.note.pair_note)
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
