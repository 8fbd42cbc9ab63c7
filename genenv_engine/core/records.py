"""Typed records that cross module boundaries: tasks, checker results and validation verdicts.

Also `paused_gc`, the block in which many records are built or written at once (a split, a store write).

A `Task` follows the shared task schema (design note benchmarks.md §8) flattened to what the
loop, the store and the checkers need; benchmark-specific structure lives in `tools`,
`expected` and `difficulty` as plain JSON-able dicts so every benchmark fits without change.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from typing import Any

ADMISSIONS = ("as_written", "on_gold", "mended")
"""How a valid task was admitted: as the simulator wrote it, on the gold the validator recomputed
(``simulator.answer_check = false``), or as the task of its mended prompt (``simulator.admit_mended``)."""
ORIGINS = ("seed", "generated", "edited", "official", "static", "imported")
STATUSES = ("active", "pinned", "banned")
SPLITS = ("seed", "train", "heldout", "generated")


@dataclass(frozen=True)
class Task:
    """One single-step task: the agent reads `prompt` and must produce an action the checker accepts."""

    id: str
    """Unique id, e.g. ``bfcl/train/00042`` or ``gen/e3/0042``."""
    benchmark: str
    """Environment name that owns the checker and validator (``bfcl``, ``apibank``, ...)."""
    prompt: str
    """The agent-facing text: tool docs plus the query, already rendered for the model."""
    answer: str
    """The canonical gold answer text (what supervised warm start trains on)."""
    expected: dict[str, Any] = field(default_factory=dict)
    """Structured gold for the checker (e.g. ``{"calls": [{"name": .., "args": {k: [allowed]}}]}``)."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    """Tool/function documentation in JSON-schema form (empty when the benchmark has none)."""
    difficulty: dict[str, Any] = field(default_factory=dict)
    """``{"level": int, "features": {...}}``: native level plus the ladder features."""
    checker: str = "step_match"
    """Name of the checker the environment applies."""
    granularity: str = "step"
    """``step`` (one context -> action) or ``episode`` (run to the end)."""
    split: str = "train"
    """One of ``seed``, ``train``, ``heldout`` or ``generated``."""
    origin: str = "seed"
    """One of ``seed``, ``generated``, ``edited``, ``official``, ``static``."""
    parent_id: str | None = None
    """The task this one was generated from or is a revision of (lineage)."""
    epoch: int = 0
    """Epoch in which the task was created (0 for built-in data)."""
    generator: str | None = None
    """Which simulator version wrote it, e.g. ``sim@e2``."""
    valid: bool = True
    """Whether the environment accepted the task."""
    reason: str = ""
    """Why the task is invalid (empty when valid)."""
    status: str = "active"
    """``active``, ``pinned`` (always in the agent pool) or ``banned`` (never used)."""
    simulator_version: int | None = None
    """Version of the simulator weights that wrote it: the epoch whose RWR update produced them (0: the warm start),
    as the agent's rollouts record theirs; None for tasks no simulator wrote (built-in data, hand edits)."""

    def to_row(self) -> dict[str, Any]:
        """Return the task as a plain dict (JSON-able) for storage or export.

        Shallow: the dict and list fields are the task's own objects, not copies (a task is frozen; a caller that
        changes one copies it first). `dataclasses.asdict` deep-copies every leaf, which made writing a 32,000-task
        split to the store take about a minute.
        """
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def with_(self, **changes: Any) -> Task:
        """Return a copy with some fields changed."""
        return replace(self, **changes)

    @property
    def level(self) -> int:
        """The native difficulty level (0 when unknown)."""
        return int(self.difficulty.get("level", 0))


@dataclass(frozen=True)
class CheckResult:
    """What a checker says about one response: the common result shape of all five benchmarks."""

    success: bool
    score: float
    sub_scores: dict[str, float] = field(default_factory=dict)
    error_type: str | None = None


@dataclass(frozen=True)
class Validation:
    """The environment's verdict on a generated (prompt, answer) pair."""

    ok: bool
    reason: str
    task: Task | None = None
    """The accepted task, with the gold answer recomputed by the environment (None if rejected)."""
    repair: Task | None = None
    """A rejection whose prompt is sound and only its answer wrong: the task with the gold answer the environment
    recomputed (the corrected target the simulator can be taught; never stored as a valid task)."""


@dataclass(frozen=True)
class ScoredBatch:
    """One variation batch after the agent's rollouts: its p-hat, R_env and whether the band keeps it.

    The loop's scoring phase hands these to the simulator update directly (the store keeps the same values
    as a log in its ``batches`` table; nothing reads them back within the epoch).
    """

    id: str
    epoch: int
    benchmark: str
    seed_task_id: str | None
    n_tasks: int
    p_hat: float
    r_env: float
    in_band: bool

    def row(self) -> dict[str, Any]:
        """The ``batches`` table row of this batch."""
        return {
            "id": self.id,
            "epoch": self.epoch,
            "benchmark": self.benchmark,
            "seed_task_id": self.seed_task_id,
            "n_generated": self.n_tasks,
            "n_valid": self.n_tasks,
            "p_hat": self.p_hat,
            "r_env": self.r_env,
            "in_band": self.in_band,
        }


@contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (and back as it was after): building a split, or a
    store's rows of one, allocates hundreds of thousands of containers and no cycle, and each burst of them would
    otherwise start a collection that walks every object of the process (a test worker's torch and transformers
    included): two thirds of a `chain` split's time. Reference counting still frees what the block drops; nothing
    built changes.

    >>> with paused_gc():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
