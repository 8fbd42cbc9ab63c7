"""The Ray executor: the agent's rollouts on worker actors, one task batch per actor call.

At start it joins Ray (``ray = "local"``: a new local instance on this machine; an address: that cluster; an
already initialised Ray in this process is reused) and creates ``ray_workers`` actors, each a
`genenv_engine.executors.worker.RolloutWorker` holding a copy of the agent (sent once through the object store),
its generation backend and the environments' checkers. Each rollout's seeded task batches
(`genenv_engine.executors.base`) go round-robin to the actors and come back in task order; the tokens they sampled
are added to the controller's backend counter, so throughput metrics count them. After every agent update `sync`
puts the new weights into the object store under the next version; each call names the version, the actor loads
those weights when it holds another, and a result whose version is not the controller's raises `StaleWeights`.

Faults are Ray's: actors restart (``max_restarts``) and their unfinished calls are retried (``max_task_retries``),
so a killed worker's batch is run again, once, by the restarted actor, which loads the current weights first; a
new process id on a worker's results is logged as a `WorkerRestarted` event. Workers build the configured backend
(``config.backend``): a ``backend_factory`` given to `genenv_engine.loop.run` (test doubles) applies to the
controller's roles only. Ray is imported only in here and in the worker, inside functions.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict
from typing import Any

from genenv_engine.agent import TaskAttempts
from genenv_engine.backends.base import Sampling
from genenv_engine.events import WorkerRestarted
from genenv_engine.executors.base import Progress, batch_seed, seeded, task_batches
from genenv_engine.executors.worker import RolloutWorker, policy_weights
from genenv_engine.records import Task

MAX_RESTARTS = 4
"""How often Ray may restart one worker actor."""
MAX_TASK_RETRIES = 4
"""How often Ray re-runs a worker's unfinished call after a restart."""


class StaleWeights(RuntimeError):
    """A worker returned rollouts sampled with weights other than the controller's current version."""


def connect(address: str, workers: int) -> bool:
    """Join Ray unless this process already has; True when this call started it (and close should stop it)."""
    import ray

    if ray.is_initialized():
        return False
    if address == "local":
        ray.init(address="local", num_cpus=max(workers, os.cpu_count() or 1), include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    else:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    return True


class RayExecutor:
    """Rollouts on ``config.ray_workers`` Ray actors."""

    def __init__(self, config: Any, roles: Any, envs: dict[str, Any], version: int = 0, emit: Any = None) -> None:
        import ray

        self.config, self.roles, self.version, self.emit = config, roles, version, emit
        self.workers = config.ray_workers
        self._started = connect(config.ray, self.workers)
        options = asdict(config.vllm) if config.backend == "vllm" else {}
        actor = ray.remote(max_restarts=MAX_RESTARTS, max_task_retries=MAX_TASK_RETRIES, num_cpus=1)(RolloutWorker)
        policy = ray.put(roles.agent)
        self.actors = [actor.remote(policy, version, config.backend, options, list(config.benchmarks), config.seed,
                                    dict(config.data_dirs), config.model.threads) for _ in range(self.workers)]
        self._policy = policy  # kept alive: a restarted actor is rebuilt from it
        self._weights: Any = None
        self.pids = [info["pid"] for info in ray.get([a.info.remote() for a in self.actors])]
        self.last_stats: list[dict[str, float]] = []
        """The last rollout's work per worker: batches, tasks, tokens, seconds spent generating and scoring."""
        self.restarts = 0

    def rollout(self, tasks: list[Task], k: int, sampling: Sampling, threshold: float, *, epoch: int,
                progress: Progress | None = None) -> list[TaskAttempts]:
        """Send the seeded batches round-robin to the workers; return their rollouts in task order."""
        import ray

        batches = task_batches(tasks, self.config.rollout_batch_tasks())
        refs = [self.actors[i % self.workers].run.remote([self._weights], self.version, batch, k,
                                                         seeded(sampling, batch_seed(self.config.seed, epoch, i)),
                                                         threshold)
                for i, batch in enumerate(batches)]
        index = {ref: i for i, ref in enumerate(refs)}
        self.last_stats = [{"batches": 0, "tasks": 0, "seconds": 0.0, "tokens": 0} for _ in self.actors]
        results: list[list[TaskAttempts] | None] = [None] * len(refs)
        pending, done = list(refs), 0
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                i = index[ready[0]]
                results[i] = self._take(i % self.workers, ray.get(ready[0]), epoch)
                done += len(batches[i]) * k
                if progress:
                    progress(done, len(tasks) * k)
        finally:
            for ref in pending:  # a stop or a failure mid-rollout: drop the rest
                with contextlib.suppress(Exception):
                    ray.cancel(ref)
        return [s for part in results for s in part or []]

    def _take(self, worker: int, out: dict[str, Any], epoch: int) -> list[TaskAttempts]:
        """Check one batch's result and account for it."""
        if out["version"] != self.version:
            raise StaleWeights(f"worker {worker} sampled with weights version {out['version']}, "
                               f"the controller holds {self.version}")
        if out["pid"] != self.pids[worker]:
            self.restarts += 1
            if self.emit is not None:
                self.emit(WorkerRestarted(epoch, worker, self.pids[worker], out["pid"]))
            self.pids[worker] = out["pid"]
        stats = self.last_stats[worker]
        stats["batches"] += 1
        stats["tasks"] += len(out["scored"])
        stats["tokens"] += out["tokens"]
        stats["seconds"] = round(stats["seconds"] + out["seconds"], 3)
        self.roles.agent_backend.tokens_generated += out["tokens"]
        return out["scored"]

    def sync(self, version: int) -> None:
        """Put the updated agent weights into the object store as ``version``; workers load them on their next call."""
        import ray

        self._weights = ray.put(policy_weights(self.roles.agent))
        self.version = version

    def close(self) -> None:
        """End the actors, and Ray itself when this executor started it."""
        import ray

        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []
        if self._started:
            ray.shutdown()
