"""The simulator role: write n task variations per seed, validate them, and cap near-duplicates.

The simulator reads a seed task as ``<prompt> => <answer>`` under a ``gen`` system turn and writes
a new one in the same shape (the paper's "original task + answer -> new similar task + answer").
Its text is untrusted: the environment parses it strictly and recomputes the gold answer, and a
rejected generation is kept with its reason. Near-duplicates (same prompt with numbers masked) are
capped across the pool so calibration cannot be reached by repeating a handful of tasks.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from genenv_engine.backends.base import GenerationBackend, Sampling
from genenv_engine.environments.base import Environment, GenerationParseError
from genenv_engine.policy import Policy
from genenv_engine.records import Task

SIMULATOR_SYSTEM = "gen"
"""System turn that tells the shared base model it is playing the simulator."""


@dataclass
class Generation:
    """One simulator output: its conditioning seed, raw text, and the stored task (valid or not)."""

    seed: Task
    batch_id: str
    context: str
    """The templated simulator prompt (the RWR training context)."""
    text: str
    token_ids: list[int]
    task: Task | None
    """The task row to store: accepted (valid) or a record of the rejection (None until validated)."""
    task_id: str = ""


def simulator_prompt(policy: Policy, env: Environment, seed: Task) -> str:
    """The simulator's chat prompt for one conditioning seed."""
    return policy.chat([{"role": "system", "content": SIMULATOR_SYSTEM},
                        {"role": "user", "content": env.simulator_text(seed)}])


def near_duplicate_key(prompt: str) -> str:
    """Prompt with every number masked and whitespace squeezed: tasks differing only in numbers collide.

    >>> near_duplicate_key("F: add(a:int,b:int) | Q: add 3 and  15")
    'F: add(a:int,b:int) | Q: add # and #'
    """
    return re.sub(r"\s+", " ", re.sub(r"\d+", "#", prompt)).strip()


def parse_and_validate(env: Environment, text: str, *, task_id: str, seed: Task, epoch: int,
                       generator: str) -> Task:
    """Turn raw simulator text into a stored task: the environment's accepted task or an invalid record."""
    try:
        prompt, answer = env.parse_generation(text)
    except GenerationParseError as exc:
        return _invalid(env, task_id, text, "", f"parse_error: {exc}", seed, epoch, generator)
    verdict = env.validate(prompt, answer, task_id=task_id, parent=seed, epoch=epoch, generator=generator)
    if verdict.ok and verdict.task is not None:
        return verdict.task
    return _invalid(env, task_id, prompt, answer, verdict.reason, seed, epoch, generator)


def _invalid(env: Environment, task_id: str, prompt: str, answer: str, reason: str, seed: Task, epoch: int,
             generator: str) -> Task:
    return Task(id=task_id, benchmark=env.name, prompt=prompt, answer=answer, split="generated", origin="generated",
                parent_id=seed.id, epoch=epoch, generator=generator, valid=False, reason=reason,
                granularity=env.granularity)


def sample(backend: GenerationBackend, policy: Policy, env: Environment, seeds: list[Task], n: int,
           sampling: Sampling, *, epoch: int, id_prefix: str | None = None,
           progress: Callable[[int, int], None] | None = None, chunk: int = 128) -> list[Generation]:
    """Write ``n`` variations of each seed; each comes back unvalidated (``task`` is None)."""
    prefix = id_prefix or f"gen/e{epoch}/{env.name}"
    contexts = [simulator_prompt(policy, env, s) for s in seeds]
    flat = [(si, v) for si in range(len(seeds)) for v in range(n)]
    outs = []
    for start in range(0, len(flat), chunk):
        part = flat[start:start + chunk]
        outs.extend(backend.generate([contexts[si] for si, _ in part], sampling))
        if progress:
            progress(min(start + chunk, len(flat)), len(flat))
    return [Generation(seeds[si], f"e{epoch}/{seeds[si].id}", contexts[si], comp.text, comp.token_ids, None,
                       f"{prefix}/{si:04d}-{v}")
            for (si, v), comp in zip(flat, outs)]


def validate(env: Environment, gens: list[Generation], *, epoch: int, generator: str, origin: str = "generated") -> None:
    """Parse and validate every generation in place, setting its stored task (valid or not)."""
    for g in gens:
        task = parse_and_validate(env, g.text, task_id=g.task_id, seed=g.seed, epoch=epoch, generator=generator)
        g.task = task.with_(origin=origin)


def cap_duplicates(gens: list[Generation], existing_prompts: set[str], key_counts: Counter, cap: int,
                   heldout_prompts: frozenset[str] = frozenset()) -> dict[str, float]:
    """Reject held-out copies, exact repeats of known prompts and near-duplicates beyond ``cap`` per key, in place.

    ``key_counts`` holds the near-duplicate keys already in the pool and is updated. Returns the
    unique fraction of the valid generations before capping, and how many were rejected.
    """
    valid = [g for g in gens if g.task is not None and g.task.valid]
    unique = len({g.task.prompt for g in valid}) / len(valid) if valid else None
    seen = set(existing_prompts)
    rejected = 0
    for g in valid:
        key = near_duplicate_key(g.task.prompt)
        if g.task.prompt in heldout_prompts:
            g.task = g.task.with_(valid=False, reason="heldout_copy: the prompt of a held-out task")  # type: ignore[union-attr]
        elif g.task.prompt in seen:
            g.task = g.task.with_(valid=False, reason="duplicate: same prompt as an earlier task")  # type: ignore[union-attr]
        elif key_counts[key] >= cap:
            g.task = g.task.with_(valid=False, reason=f"duplicate_cap: {cap} tasks share this template")
        else:
            seen.add(g.task.prompt)
            key_counts[key] += 1
            continue
        rejected += 1
    return {"unique_fraction": unique, "duplicates_rejected": float(rejected)}  # type: ignore[dict-item]
