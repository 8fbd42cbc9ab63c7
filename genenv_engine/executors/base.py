"""The executor interface, and the seeded batches both executors share.

An executor writes the simulator's drafts (`generate`, for the jobs the controller chose: which seeds, how many
variations), validates them with the environments' validators (`validate`), generates and scores the agent's k
rollouts per task (`rollout`), learns of every agent and simulator update (`sync`, `sync_simulator`, with the new
version: the epoch whose update produced the weights) and stamps each rollout and draft with the version of the
weights that sampled it.

With ``runtime.rollout_batch`` > 0 (always on Ray) the tasks are cut into batches of that many tasks in order, and
each batch is one `genenv_engine.training.agent.rollout` call sampled with its own seed from (run seed, epoch, batch
index). With ``runtime.generate_batch`` > 0 each job's seeds are cut into batches of that many, and each batch is one
`genenv_engine.training.simulator.sample` call sampled with its own seed from (run seed, epoch, benchmark, batch index),
its task ids those the unbatched call gives. The hf backend's draws depend on the batch (its sampling noise is
drawn for the whole decoding batch), so a rollout or a draft is reproduced exactly when the same batch meets
the same seed and weights: which executor, worker or order runs the batches does not matter. Validation is
deterministic (no sampling, no clocks: `genenv_engine.core.limits`), so its results do not depend on who runs it or
how the drafts are batched.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from genenv_engine.backends.base import GenerationBackend, Sampling
from genenv_engine.core.records import Task
from genenv_engine.environments.base import Environment
from genenv_engine.training import simulator as sim
from genenv_engine.training.agent import TaskAttempts
from genenv_engine.training.policy import Policy
from genenv_engine.training.simulator import Draft, Generation

Progress = Callable[[int, int], None]
"""``progress(done, total)`` in prompts, called between batches (the loop's pause/stop check runs there)."""
GenerateProgress = Callable[[str, int, int], None]
"""``progress(benchmark, done, total)`` in simulator prompts of that benchmark, called between batches."""


@dataclass(frozen=True)
class GenerateJob:
    """One benchmark's share of an epoch's generation, as the controller chose it: ``n`` variations of each seed."""

    benchmark: str
    seeds: list[Task]
    n: int
    prefix: str | None = None
    """Task id prefix (`genenv_engine.training.simulator.sample`'s ``id_prefix``; None:
    ``gen/e<epoch>/<benchmark>``)."""
    note: str | None = None
    """The instruct prompt's recent-success line."""
    grammar: str | None = None
    """The Lark grammar the drafts are sampled under (`genenv_engine.training.simulator.job_grammar`); None: free
    text."""


class RolloutExecutor(Protocol):
    """What the controller needs from an executor."""

    version: int
    """Version of the agent weights the executor generates with."""
    simulator_version: int
    """Version of the simulator weights it writes drafts with."""
    workers: int
    """How many generation workers it runs (1 in-process)."""
    last_stats: list[dict[str, float]]
    """The last rollout's work per worker: ``batches``, ``tasks``, ``tokens``, ``seconds`` (stored in the epoch's
    metrics as ``rollout_workers``)."""

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
        """k scored rollouts per task, in task order, each stamped with `version`."""
        ...

    def generate(
        self,
        jobs: list[GenerateJob],
        sampling: Sampling,
        *,
        epoch: int,
        style: str,
        progress: GenerateProgress | None = None,
    ) -> list[Draft]:
        """The jobs' drafts, job after job, each seed's n variations in order, stamped with `simulator_version`."""
        ...

    def validate(self, drafts: list[Draft], *, epoch: int, generator: str, origin: str, style: str) -> list[Generation]:
        """Each draft parsed and validated by its benchmark's environment (`genenv_engine.training.simulator.validate`),
        in the drafts' order."""
        ...

    def sync(self, version: int) -> None:
        """The agent was updated: generate with its current weights, as ``version``, from now on."""
        ...

    def sync_simulator(self, version: int) -> None:
        """The simulator was updated: write drafts with its current weights, as ``version``, from now on."""
        ...

    def close(self) -> None:
        """Release the workers (no-op in-process)."""
        ...


def task_batches(tasks: list[Task], size: int) -> list[list[Task]]:
    """Consecutive batches of ``size`` tasks (the last may be shorter).

    >>> [len(b) for b in task_batches(list(range(10)), 4)]
    [4, 4, 2]
    """
    return [tasks[i : i + size] for i in range(0, len(tasks), size)]


def batch_seed(seed: int, epoch: int, index: int, kind: str = "rollout") -> int:
    """The sampling seed of batch ``index`` of ``epoch``'s ``kind`` (``rollout``, ``generate/<benchmark>``): fixed
    by the run's seed, not by who runs it.

    >>> batch_seed(0, 1, 0) == batch_seed(0, 1, 0), batch_seed(0, 1, 0) == batch_seed(0, 1, 1)
    (True, False)
    >>> batch_seed(0, 1, 0) == batch_seed(0, 1, 0, "generate/bfcl")
    False
    """
    return random.Random(f"{seed}/{epoch}/{kind}/{index}").randrange(2**31)


def seed_batches(jobs: list[GenerateJob], size: int) -> list[tuple[GenerateJob, int, int, list[Task]]]:
    """Each job's seeds cut into batches of ``size``, job after job: ``(job, batch index within the job, index of
    the batch's first seed, its seeds)``.

    >>> jobs = [GenerateJob("a", list("xyz"), 2), GenerateJob("b", list("uv"), 2)]
    >>> [(j.benchmark, i, first, "".join(part)) for j, i, first, part in seed_batches(jobs, 2)]
    [('a', 0, 0, 'xy'), ('a', 1, 2, 'z'), ('b', 0, 0, 'uv')]
    """
    return [
        (job, i, first, job.seeds[first : first + size])
        for job in jobs
        for i, first in enumerate(range(0, len(job.seeds), size))
    ]


def seeded(sampling: Sampling, seed: int) -> Sampling:
    """``sampling`` with its seed set."""
    from dataclasses import replace

    return replace(sampling, seed=seed)


def stamp(scored: list[TaskAttempts], version: int) -> list[TaskAttempts]:
    """Record ``version`` on every attempt that has none yet; returns ``scored``."""
    for s in scored:
        for a in s.attempts:
            if a.policy_version is None:
                a.policy_version = version
    return scored


def sample_batch(
    backend: GenerationBackend,
    policy: Policy,
    env: Environment,
    job: GenerateJob,
    first: int,
    seeds: list[Task],
    sampling: Sampling,
    *,
    epoch: int,
    style: str,
) -> list[Draft]:
    """One batch of a job (seeds ``first`` onwards): its drafts, with the ids the unbatched job gives them."""
    return sim.sample(
        backend,
        policy,
        env,
        seeds,
        job.n,
        replace(sampling, grammar=job.grammar),
        epoch=epoch,
        id_prefix=job.prefix,
        style=style,
        note=job.note,
        first=first,
    )


def sample_jobs(
    backend: GenerationBackend,
    policy: Policy,
    envs: dict[str, Environment],
    jobs: list[GenerateJob],
    sampling: Sampling,
    *,
    epoch: int,
    style: str,
    version: int,
    progress: GenerateProgress | None = None,
) -> list[Draft]:
    """Every job's drafts from one `genenv_engine.training.simulator.sample` call per job, with ``sampling`` as given
    (the unbatched generation, as before executors existed), stamped with the simulator weights' ``version``."""
    out: list[Draft] = []
    for job in jobs:

        def each(done: int, total: int, name: str = job.benchmark) -> None:
            if progress:
                progress(name, done, total)

        out.extend(
            sim.sample(
                backend,
                policy,
                envs[job.benchmark],
                job.seeds,
                job.n,
                replace(sampling, grammar=job.grammar),
                epoch=epoch,
                id_prefix=job.prefix,
                progress=each,
                style=style,
                note=job.note,
            )
        )
    return stamp_drafts(out, version)


def stamp_drafts(drafts: list[Draft], version: int) -> list[Draft]:
    """Record ``version`` on every draft that has none yet; returns ``drafts``."""
    for d in drafts:
        if d.policy_version is None:
            d.policy_version = version
    return drafts
