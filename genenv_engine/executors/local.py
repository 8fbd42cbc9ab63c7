"""The in-process executor (the default): the simulator's drafts and the agent's rollouts on the controller's own
backends, and the validation of the drafts by the controller's own environments (one pass, as before executors).

With ``runtime.rollout_batch = 0`` and ``runtime.generate_batch = 0`` it is exactly the engine before executors
existed: one `genenv_engine.training.simulator.sample` call per benchmark and one
`genenv_engine.training.agent.rollout` call, on the torch sampling streams the epoch seeded. With either > 0 it runs
the seeded batches of `genenv_engine.executors.base` one after the other, under a forked torch RNG so the
controller's stream is left as the Ray executor leaves it: the reference the Ray executor is tested against.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from genenv_engine.backends.base import Sampling
from genenv_engine.core.records import Task
from genenv_engine.executors.base import (
    GenerateJob,
    GenerateProgress,
    Progress,
    batch_seed,
    sample_batch,
    sample_jobs,
    seed_batches,
    seeded,
    stamp,
    stamp_drafts,
    task_batches,
)
from genenv_engine.training import simulator as sim
from genenv_engine.training.agent import TaskAttempts, rollout


class LocalExecutor:
    """Rollouts in this process on ``roles.agent_backend``."""

    workers = 1

    def __init__(
        self,
        config: Any,
        roles: Any,
        envs: dict[str, Any],
        version: int = 0,
        emit: Any = None,
        simulator_version: int = 0,
    ) -> None:
        self.config, self.roles, self.envs, self.version = config, roles, envs, version
        self.simulator_version = simulator_version
        self.last_stats: list[dict[str, float]] = []
        """The last rollout's work, one entry (this process): batches, tasks, tokens, seconds."""

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
        """k scored rollouts per task, in order, stamped with the current version."""
        backend, policy = self.roles.agent_backend, self.roles.agent
        size = self.config.rollout_batch_tasks()
        tokens, start = backend.tokens_generated, time.monotonic()
        if not size:
            out = rollout(backend, policy, self.envs, tasks, k, sampling, threshold, progress=progress)
            batches = 1
        else:
            out, parts = [], task_batches(tasks, size)
            with torch.random.fork_rng(devices=[]):
                for i, batch in enumerate(parts):
                    s = seeded(sampling, batch_seed(self.config.seed, epoch, i))
                    out.extend(rollout(backend, policy, self.envs, batch, k, s, threshold))
                    if progress:
                        progress(len(out) * k, len(tasks) * k)
            batches = len(parts)
        self.last_stats = [
            {
                "batches": batches,
                "tasks": len(out),
                "seconds": round(time.monotonic() - start, 3),
                "tokens": backend.tokens_generated - tokens,
            }
        ]
        return stamp(out, self.version)

    def generate(
        self,
        jobs: list[GenerateJob],
        sampling: Sampling,
        *,
        epoch: int,
        style: str,
        progress: GenerateProgress | None = None,
    ) -> list[sim.Draft]:
        """The jobs' drafts on ``roles.simulator_backend``, stamped with the current simulator version: one stream
        per job, or (``runtime.generate_batch`` > 0) the seeded batches one after the other."""
        backend, policy = self.roles.simulator_backend, self.roles.simulator
        size = self.config.runtime.generate_batch
        if not size:
            return sample_jobs(
                backend,
                policy,
                self.envs,
                jobs,
                sampling,
                epoch=epoch,
                style=style,
                version=self.simulator_version,
                progress=progress,
            )
        drafts = []
        with torch.random.fork_rng(devices=[]):
            for job, i, first, seeds in seed_batches(jobs, size):
                s = seeded(sampling, batch_seed(self.config.seed, epoch, i, f"generate/{job.benchmark}"))
                drafts.extend(
                    sample_batch(
                        backend, policy, self.envs[job.benchmark], job, first, seeds, s, epoch=epoch, style=style
                    )
                )
                if progress:
                    progress(job.benchmark, (first + len(seeds)) * job.n, len(job.seeds) * job.n)
        return stamp_drafts(drafts, self.simulator_version)

    def validate(
        self, drafts: list[sim.Draft], *, epoch: int, generator: str, origin: str, style: str
    ) -> list[sim.Generation]:
        """Every draft validated here by its benchmark's environment, in order."""
        return sim.validate_drafts(self.envs, drafts, epoch=epoch, generator=generator, origin=origin, style=style)

    def sync(self, version: int) -> None:
        """The backend shares the trainer's model (or syncs itself): only the version changes."""
        self.version = version

    def sync_simulator(self, version: int) -> None:
        """The simulator's backend shares the trainer's model (or syncs itself): only the version changes."""
        self.simulator_version = version

    def close(self) -> None:
        """Nothing to release."""
