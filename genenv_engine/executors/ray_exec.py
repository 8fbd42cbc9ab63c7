"""The Ray executor: the agent's rollouts, the validation of the simulator's drafts and (with ``runtime.generate_batch``
set) the drafts' generation on worker actors, one batch per actor call.

At start it joins Ray (``ray.address = "local"``: a new Ray instance on the machine running genenv; an address:
that cluster, once a trial driver in a child process has joined it (`genenv_engine.executors.ray_join`); an already
initialised Ray in this process is reused) and creates ``ray.workers`` actors, each a
`genenv_engine.executors.worker.RolloutWorker` holding a copy of the agent (sent once through the object store),
its generation backend and the environments' checkers and validators, and, when it generates, a copy of the
simulator with its own backend. A generation's seeded seed batches and a rollout's seeded task batches
(`genenv_engine.executors.base`), and a validation's batches of ``ray.validate_batch`` drafts, go round-robin to the
actors (batch i to actor i mod workers), each actor with at most one call in flight (its next batch is sent when
its last result is back), and the results come back in order; the tokens the workers sampled are added to the
controller's backend counters, so throughput metrics count them. After every agent update `sync`, and after
every simulator update `sync_simulator` (when the workers generate), puts the new weights into the object store
under the next version; each sampling call names the version, the actor loads those weights when it holds
another, and a result whose version is not the controller's raises `StaleWeights`.

Faults are Ray's: actors restart (``max_restarts``) and their unfinished calls are retried (``max_task_retries``),
so a killed worker's batch is run again, once, by the restarted actor, which loads the current weights first; a
new process id on a worker's results is logged as a `WorkerRestarted` event. Timeouts are the executor's: with
``ray.call_timeout`` set, a call still running that long after it was sent is cancelled, its worker killed, and,
once Ray has restarted it, the batch is sent again, once (`TIMEOUT_ATTEMPTS`); a second timeout raises
`WorkerTimeout` (the config field's docstring says why a timeout stops the epoch instead of scoring the tasks as
failures). Each timeout is logged as a `WorkerTimedOut` event. Workers build the configured backend
(``config.runtime.backend``): a ``backend_factory`` given to `genenv_engine.method.loop.run` (test doubles) applies to
the controller's roles only. Ray is imported only in here and in the worker, inside functions.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from genenv_engine.backends.base import Sampling
from genenv_engine.backends.openmp import SETUP_HOOK
from genenv_engine.core.errors import ConfigError
from genenv_engine.core.events import WorkerRestarted, WorkerTimedOut
from genenv_engine.core.records import Task
from genenv_engine.executors.base import (
    GenerateJob,
    GenerateProgress,
    Progress,
    batch_seed,
    sample_jobs,
    seed_batches,
    seeded,
    task_batches,
)
from genenv_engine.executors.ray_join import check_joinable, check_reachable
from genenv_engine.executors.worker import RolloutWorker, policy_weights
from genenv_engine.training import simulator as sim
from genenv_engine.training.agent import TaskAttempts

MAX_RESTARTS = 4
"""How often Ray may restart one worker actor."""
MAX_TASK_RETRIES = 4
"""How often Ray re-runs a worker's unfinished call after a restart."""
TIMEOUT_ATTEMPTS = 2
"""How many times one batch may run past ``ray.call_timeout`` before `WorkerTimeout` stops the epoch: the first
timeout restarts the worker and sends the batch again (a stall of the machine or node gets a second chance), the
second gives up (a batch whose check is slow on its inputs is as slow again: it is the same seeded work)."""

RESTART_WAIT = 600.0
"""Seconds the executor waits for Ray to restart a worker it killed after a timeout."""


class StaleWeights(RuntimeError):
    """A worker returned rollouts sampled with weights other than the controller's current version."""


class WorkerTimeout(RuntimeError):
    """A worker call ran past ``ray.call_timeout`` on each of its `TIMEOUT_ATTEMPTS` attempts."""


START_SECONDS = 180.0
"""How long the workers may take to start and answer (loading torch and the roles' weights) before the cluster is
taken to be unusable from this driver: a head that answers but a node it advertises that cannot be reached leaves
them pending for ever."""


_JOINED: set[str] = set()
"""Cluster addresses a trial driver of this process has joined (`preflight`): `connect` does not try them again."""


def preflight(address: str) -> None:
    """Raise `ConfigError` (``ray.address``, one line) when the ``ray`` extra is missing, or when ``address`` is a
    cluster whose head does not answer (`check_reachable`) or which a driver started here cannot join
    (`check_joinable`); remember an address that passed, so that the executor's `connect` joins it without a
    second trial. Nothing is joined in this process. ``local`` needs only the extra."""
    if "ray" not in sys.modules and importlib.util.find_spec("ray") is None:
        raise ConfigError(
            "ray.address", f"--ray {address} needs the ray extra (pip install -e '.[ray]'); nothing was run"
        )
    if address == "local":
        return
    check_reachable(address)
    import ray

    if not ray.is_initialized() and address not in _JOINED:
        check_joinable(address)
        _JOINED.add(address)


def connect(address: str, workers: int) -> bool:
    """Join Ray unless this process already has; True when this call started it (and close should stop it).
    An unreachable or refusing cluster, or one a driver started here cannot join (`check_joinable`), raises
    `ConfigError` (``ray.address``) with one line. Each worker process this driver starts chooses its OpenMP spin
    (`genenv_engine.backends.openmp.choose_spin`) before it loads torch, unless it inherited one."""
    preflight(address)  # also when this process already joined a cluster: the one asked for must answer
    import ray

    if ray.is_initialized():
        return False
    setup = {"worker_process_setup_hook": SETUP_HOOK}
    try:
        if address == "local":
            ray.init(
                address="local",
                num_cpus=max(workers, os.cpu_count() or 1),
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                runtime_env=setup,
            )
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False, runtime_env=setup)
    except (ConnectionError, TimeoutError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            "ray.address", f"the Ray cluster at {address} did not take this driver ({first[:200]}); nothing was run"
        ) from None
    return True


@dataclass
class _Call:
    """One batch in flight on one actor."""

    index: int
    worker: int
    attempt: int
    deadline: float | None


class RayExecutor:
    """Rollouts, draft validation and (``runtime.generate_batch`` > 0) generation on ``config.ray.workers`` Ray actors.

    ``worker`` is the actor class (`RolloutWorker`; tests pass a test double built on it)."""

    def __init__(
        self,
        config: Any,
        roles: Any,
        envs: dict[str, Any],
        version: int = 0,
        emit: Any = None,
        simulator_version: int = 0,
        worker: type = RolloutWorker,
    ) -> None:
        import ray

        self.config, self.roles, self.version, self.emit = config, roles, version, emit
        self.envs, self.simulator_version = envs, simulator_version
        self.workers = config.ray.workers
        self.generates = config.runtime.generate_batch > 0
        """Whether the workers write the simulator's drafts (else the controller does, on its own backend)."""
        self._started = connect(config.ray.address, self.workers)
        options = asdict(config.vllm) if config.runtime.backend == "vllm" else {}
        actor = ray.remote(max_restarts=MAX_RESTARTS, max_task_retries=MAX_TASK_RETRIES, num_cpus=1)(worker)
        policies = ray.put((roles.agent, roles.simulator if self.generates else None))  # one object: a shared base
        self.actors = [
            actor.remote(
                policies,
                version,
                config.runtime.backend,
                options,
                list(config.benchmarks),
                config.seed,
                dict(config.data_dirs),
                config.runtime.threads,
                simulator_version=simulator_version,
                environments=dict(config.environments),
                environments_options=dict(config.environments_options),
            )
            for _ in range(self.workers)
        ]
        self._policies = policies  # kept alive: a restarted actor is rebuilt from it
        self._weights: Any = None
        self._simulator_weights: Any = None
        self.pids = self._started_pids(config.ray.address)
        self.last_stats: list[dict[str, float]] = []
        """The last rollout's work per worker: batches, tasks, tokens, seconds spent generating and scoring."""
        self.restarts = 0
        self.timeouts = 0

    def _started_pids(self, address: str) -> list[int]:
        """Each worker's process id, once all have started; `ConfigError` (``ray.address``) with one line, after
        ending them, when they have not within `START_SECONDS`."""
        import ray
        from ray.exceptions import GetTimeoutError

        try:
            return [info["pid"] for info in ray.get([a.info.remote() for a in self.actors], timeout=START_SECONDS)]
        except GetTimeoutError:
            self.close()
            raise ConfigError(
                "ray.address",
                f"the Ray cluster at {address} took this driver, but its "
                f"{self.workers} workers did not start within {START_SECONDS:.0f} s (is every node "
                "it advertises reachable from the machine running genenv? `ray status` there shows "
                "their addresses); nothing was run",
            ) from None

    def rollout(
        self,
        tasks: list[Task],
        k: int,
        sampling: Sampling,
        threshold: float,
        *,
        epoch: int,
        progress: Progress | None = None,
    ) -> list[TaskAttempts]:
        """Send the seeded batches round-robin to the workers; return their rollouts in task order."""
        batches = task_batches(tasks, self.config.rollout_batch_tasks())
        jobs = [
            (
                [self._weights],
                self.version,
                batch,
                k,
                seeded(sampling, batch_seed(self.config.seed, epoch, i)),
                threshold,
            )
            for i, batch in enumerate(batches)
        ]
        self.last_stats = [{"batches": 0, "tasks": 0, "seconds": 0.0, "tokens": 0} for _ in self.actors]
        done = 0

        def take(i: int, worker: int, out: dict[str, Any]) -> list[TaskAttempts]:
            nonlocal done
            scored = self._take(worker, out, epoch)
            done += len(batches[i]) * k
            if progress:
                progress(done, len(tasks) * k)
            return scored

        results = self._map("rollout", epoch, "run", jobs, [_tasks_label([t.id for t in b]) for b in batches], take)
        return [s for part in results for s in part]

    def generate(
        self,
        jobs: list[GenerateJob],
        sampling: Sampling,
        *,
        epoch: int,
        style: str,
        progress: GenerateProgress | None = None,
    ) -> list[sim.Draft]:
        """The jobs' drafts: with ``runtime.generate_batch`` > 0 the seeded seed batches round-robin on the workers,
        back in order; else on the controller's simulator backend, one stream per job."""
        if not self.generates:
            return sample_jobs(
                self.roles.simulator_backend,
                self.roles.simulator,
                self.envs,
                jobs,
                sampling,
                epoch=epoch,
                style=style,
                version=self.simulator_version,
                progress=progress,
            )
        batches = seed_batches(jobs, self.config.runtime.generate_batch)
        args = [
            (
                [self._simulator_weights],
                self.simulator_version,
                GenerateJob(job.benchmark, [], job.n, job.prefix, job.note, job.grammar),
                first,
                seeds,
                seeded(sampling, batch_seed(self.config.seed, epoch, i, f"generate/{job.benchmark}")),
                epoch,
                style,
            )
            for job, i, first, seeds in batches
        ]
        done: dict[str, int] = {}

        def take(i: int, worker: int, out: dict[str, Any]) -> list[sim.Draft]:
            self._accept(worker, out, epoch, self.simulator_version, "wrote drafts with simulator")
            self.roles.simulator_backend.tokens_generated += out["tokens"]
            job, seeds = batches[i][0], batches[i][3]
            done[job.benchmark] = done.get(job.benchmark, 0) + len(seeds) * job.n
            if progress:
                progress(job.benchmark, done[job.benchmark], len(job.seeds) * job.n)
            return out["drafts"]

        results = self._map(
            "generate",
            epoch,
            "generate",
            args,
            [_tasks_label([s.id for s in seeds]) for _, _, _, seeds in batches],
            take,
        )
        return [d for part in results for d in part]

    def validate(
        self, drafts: list[sim.Draft], *, epoch: int, generator: str, origin: str, style: str
    ) -> list[sim.Generation]:
        """Send batches of ``ray.validate_batch`` drafts round-robin to the workers; return the generations in order."""
        batches = task_batches(drafts, self.config.ray.validate_batch)
        jobs = [(batch, epoch, generator, origin, style) for batch in batches]

        def take(i: int, worker: int, out: dict[str, Any]) -> list[sim.Generation]:
            self._check_pid(worker, out["pid"], epoch)
            return out["generations"]

        results = self._map(
            "validate", epoch, "validate", jobs, [_tasks_label([d.task_id for d in b]) for b in batches], take
        )
        return [g for part in results for g in part]

    def _map(
        self,
        phase: str,
        epoch: int,
        method: str,
        jobs: list[tuple],
        labels: list[str],
        take: Callable[[int, int, dict[str, Any]], Any],
    ) -> list[Any]:
        """Run ``jobs[i]`` (the arguments of the worker's ``method``) on actor i mod workers, one call in flight
        per actor, under ``ray.call_timeout``; ``take(i, worker, result)`` turns each result into what is returned,
        in job order, as it arrives (it may raise: a stop or a failure cancels the calls in flight)."""
        import ray

        limit = self.config.ray.call_timeout
        queues = [deque(range(w, len(jobs), self.workers)) for w in range(self.workers)]
        calls: dict[Any, _Call] = {}

        def send(worker: int, index: int, attempt: int) -> None:
            ref = getattr(self.actors[worker], method).remote(*jobs[index])
            calls[ref] = _Call(index, worker, attempt, time.monotonic() + limit if limit else None)

        for w, queue in enumerate(queues):
            if queue:
                send(w, queue.popleft(), 1)
        results: list[Any] = [None] * len(jobs)
        try:
            while calls:
                deadlines = [c.deadline for c in calls.values() if c.deadline is not None]
                wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
                ready, _ = ray.wait(list(calls), num_returns=1, timeout=wait)
                if ready:
                    call = calls.pop(ready[0])
                    out = ray.get(ready[0])
                    if queues[call.worker]:
                        send(call.worker, queues[call.worker].popleft(), 1)
                    results[call.index] = take(call.index, call.worker, out)
                    continue
                now = time.monotonic()
                for ref, call in [(r, c) for r, c in calls.items() if c.deadline is not None and c.deadline <= now]:
                    del calls[ref]
                    retry = call.attempt < TIMEOUT_ATTEMPTS
                    self.timeouts += 1
                    if self.emit is not None:
                        self.emit(WorkerTimedOut(epoch, call.worker, phase, call.index, limit, call.attempt, retry))
                    self._restart(call.worker, ref, epoch)
                    if not retry:
                        raise WorkerTimeout(
                            f"{phase} batch {call.index} of epoch {epoch} ({labels[call.index]}) ran past "
                            f"ray.call_timeout = {limit:g} s on worker {call.worker}, {call.attempt} times (the worker "
                            "was restarted each time); the epoch is stopped and the session resumable: raise "
                            "ray.call_timeout, or look at the checker on these tasks"
                        )
                    send(call.worker, call.index, call.attempt + 1)
        finally:
            for ref in calls:  # a stop or a failure mid-way: drop the rest
                with contextlib.suppress(Exception):
                    ray.cancel(ref)
        return results

    def _restart(self, worker: int, ref: Any, epoch: int) -> None:
        """Stop a call that ran past its limit: cancel it (so Ray does not retry it) and kill its actor (a running
        call cannot be interrupted otherwise), then wait until Ray has restarted the actor, so that the next call's
        limit counts from a live worker."""
        import ray

        with contextlib.suppress(Exception):
            ray.cancel(ref)
        ray.kill(self.actors[worker], no_restart=False)
        ray.wait([ref], timeout=RESTART_WAIT)  # resolved (cancelled) once the old process is gone
        info = ray.get(self.actors[worker].info.remote(), timeout=RESTART_WAIT)
        self._check_pid(worker, info["pid"], epoch)

    def _take(self, worker: int, out: dict[str, Any], epoch: int) -> list[TaskAttempts]:
        """Check one rollout batch's result and account for it."""
        self._accept(worker, out, epoch, self.version, "sampled with")
        stats = self.last_stats[worker]
        stats["batches"] += 1
        stats["tasks"] += len(out["scored"])
        stats["tokens"] += out["tokens"]
        stats["seconds"] = round(stats["seconds"] + out["seconds"], 3)
        self.roles.agent_backend.tokens_generated += out["tokens"]
        return out["scored"]

    def _accept(self, worker: int, out: dict[str, Any], epoch: int, version: int, what: str) -> None:
        """A sampling result is usable only when made with the controller's ``version`` of the weights
        (`StaleWeights` otherwise); a new process id on it is logged (`_check_pid`)."""
        if out["version"] != version:
            raise StaleWeights(
                f"worker {worker} {what} weights version {out['version']}, the controller holds {version}"
            )
        self._check_pid(worker, out["pid"], epoch)

    def _check_pid(self, worker: int, pid: int, epoch: int) -> None:
        """Log a `WorkerRestarted` when a worker's result comes from a new process."""
        if pid != self.pids[worker]:
            self.restarts += 1
            if self.emit is not None:
                self.emit(WorkerRestarted(epoch, worker, self.pids[worker], pid))
            self.pids[worker] = pid

    def sync(self, version: int) -> None:
        """Put the updated agent weights into the object store as ``version``; workers load them on their next call."""
        import ray

        self._weights = ray.put(policy_weights(self.roles.agent))
        self.version = version

    def sync_simulator(self, version: int) -> None:
        """The simulator was updated: when the workers generate, put its weights into the object store as
        ``version`` (workers load them on their next call); drafts carry ``version`` from now on."""
        import ray

        if self.generates:
            self._simulator_weights = ray.put(policy_weights(self.roles.simulator))
        self.simulator_version = version

    def close(self) -> None:
        """End the actors, and Ray itself when this executor started it."""
        import ray

        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []
        if self._started:
            ray.shutdown()


def _tasks_label(ids: list[str]) -> str:
    """How an error names a batch: its size and first and last task ids.

    >>> _tasks_label(["a/1", "a/2", "a/3"]), _tasks_label(["a/1"])
    ('3 tasks a/1 .. a/3', '1 task a/1')
    """
    return f"{len(ids)} tasks {ids[0]} .. {ids[-1]}" if len(ids) > 1 else f"1 task {ids[0]}"
