"""A Ray worker's state and work, as a plain class (the Ray executor wraps it in ``ray.remote``).

A worker holds a copy of the agent policy with its own generation backend and its own environments (their
checkers and validators), and, when the run generates on the workers, a copy of the simulator with its own
backend (sent with the agent in one object, so LoRA roles sharing a base model share it here too). It runs whole
task batches: generate k completions per task, score them, return them with the policy version that sampled them
(`RolloutWorker.run`); whole batches of simulator drafts: parse and validate each with its benchmark's validator
(`RolloutWorker.validate`); and whole batches of seeds: write their variations with the simulator version named
(`RolloutWorker.generate`). Weights arrive through the object store: each sampling call names the version it
expects and carries (inside a list, so Ray does not fetch it unasked) the reference of that version's weights;
a worker on another version loads them first. A worker that Ray restarted comes back with the weights it was
created with and catches up on its next call, so a retried batch is never sampled with stale weights.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from genenv_engine.backends.base import Sampling
from genenv_engine.core.records import Task
from genenv_engine.executors.base import GenerateJob, sample_batch, stamp, stamp_drafts
from genenv_engine.training import simulator as sim
from genenv_engine.training.agent import rollout


def policy_weights(policy: Any) -> dict[str, torch.Tensor]:
    """What an update changes: the adapter's LoRA tensors (LoRA roles) or the whole state dict, on CPU."""
    if policy.adapter is not None:
        from peft import get_peft_model_state_dict

        state = get_peft_model_state_dict(policy.model, adapter_name=policy.adapter)
    else:
        state = policy.model.state_dict()
    return {k: v.detach().to("cpu", copy=True) for k, v in state.items()}


def load_policy_weights(policy: Any, weights: dict[str, torch.Tensor]) -> None:
    """Load `policy_weights` output into ``policy`` in place."""
    if policy.adapter is not None:
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(policy.model, weights, adapter_name=policy.adapter)
    else:
        policy.model.load_state_dict(weights)


def _load(policy: Any, backend: Any, weights: list[Any]) -> None:
    """Catch a worker's copy up: the weights behind the object reference ``weights[0]`` into ``policy``, then its
    backend synced."""
    import ray

    load_policy_weights(policy, ray.get(weights[0]))
    backend.sync()


def worker_environments(
    benchmarks: list[str],
    seed: int,
    data_dirs: dict[str, str],
    environments: dict[str, str],
    options: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The run's environments in a worker process, each benchmark that is not built in found as the run's config
    recorded it (``environments``, `RunConfig.environments`: a ``module:Class`` one is otherwise unknown to a
    process that did not read that config) and built with its ``options`` (`RunConfig.environments_options`)."""
    from genenv_engine.environments import get_environment, resolve_benchmarks

    resolve_benchmarks(benchmarks, environments)
    return {
        name: get_environment(name, seed, data_dir=data_dirs.get(name), options=(options or {}).get(name))
        for name in benchmarks
    }


class RolloutWorker:
    """One worker: an agent copy, its backend, the environments (and maybe a simulator copy with its backend);
    `run` scores one task batch, `validate` one batch of drafts, `generate` one batch of seeds.

    ``policies`` is ``(agent, simulator or None)``; ``version`` and ``simulator_version`` are their weights'."""

    def __init__(
        self,
        policies: tuple[Any, Any],
        version: int,
        backend: str,
        backend_options: dict[str, Any],
        benchmarks: list[str],
        seed: int,
        data_dirs: dict[str, str],
        threads: int,
        simulator_version: int = 0,
        environments: dict[str, str] | None = None,
        environments_options: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        from genenv_engine.backends import get_backend

        torch.set_num_threads(threads)
        self.policy, self.simulator = policies
        self.version, self.simulator_version = version, simulator_version
        self.backend = get_backend(backend, policy=self.policy, **backend_options)
        self.simulator_backend = (
            None if self.simulator is None else get_backend(backend, policy=self.simulator, **backend_options)
        )
        self.envs = worker_environments(benchmarks, seed, data_dirs, environments or {}, environments_options)
        self.pid = os.getpid()

    def run(
        self, weights: list[Any], version: int, tasks: list[Task], k: int, sampling: Sampling, threshold: float
    ) -> dict[str, Any]:
        """Score one batch with the weights of ``version`` (``weights[0]``: their object reference, or None when
        the worker was created with them)."""
        if version != self.version:
            _load(self.policy, self.backend, weights)
            self.version = version
        before, start = self.backend.tokens_generated, time.monotonic()
        scored = stamp(rollout(self.backend, self.policy, self.envs, tasks, k, sampling, threshold), self.version)
        return {
            "scored": scored,
            "version": self.version,
            "pid": self.pid,
            "tokens": self.backend.tokens_generated - before,
            "seconds": time.monotonic() - start,
        }

    def validate(self, drafts: list[sim.Draft], epoch: int, generator: str, origin: str, style: str) -> dict[str, Any]:
        """Validate one batch of drafts (`genenv_engine.training.simulator.validate_drafts`), in order."""
        start = time.monotonic()
        gens = sim.validate_drafts(self.envs, drafts, epoch=epoch, generator=generator, origin=origin, style=style)
        return {"generations": gens, "pid": self.pid, "seconds": time.monotonic() - start}

    def generate(
        self,
        weights: list[Any],
        version: int,
        job: GenerateJob,
        first: int,
        seeds: list[Task],
        sampling: Sampling,
        epoch: int,
        style: str,
    ) -> dict[str, Any]:
        """Write one batch of a job's drafts (seeds ``first`` onwards) with the simulator weights of ``version``
        (``weights[0]``: their object reference, or None when the worker was created with them)."""
        if self.simulator is None or self.simulator_backend is None:
            raise RuntimeError("this worker holds no simulator: the executor was built with runtime.generate_batch = 0")
        if version != self.simulator_version:
            _load(self.simulator, self.simulator_backend, weights)
            self.simulator_version = version
        before, start = self.simulator_backend.tokens_generated, time.monotonic()
        drafts = stamp_drafts(
            sample_batch(
                self.simulator_backend,
                self.simulator,
                self.envs[job.benchmark],
                job,
                first,
                seeds,
                sampling,
                epoch=epoch,
                style=style,
            ),
            self.simulator_version,
        )
        return {
            "drafts": drafts,
            "version": self.simulator_version,
            "pid": self.pid,
            "tokens": self.simulator_backend.tokens_generated - before,
            "seconds": time.monotonic() - start,
        }

    def info(self) -> dict[str, int]:
        """This worker's process id and weights versions."""
        return {"pid": self.pid, "version": self.version, "simulator_version": self.simulator_version}
