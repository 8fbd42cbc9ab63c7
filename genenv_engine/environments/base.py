"""The environment interface every benchmark implements: splits, checker, validator, simulator text.

An environment owns everything benchmark-specific, so the co-evolution loop never special-cases a
benchmark: it asks for seeded splits, renders tasks for the simulator, parses and validates the
simulator's output (recomputing or checking the gold answer itself, never by eval/exec of
generated text), and scores agent responses with its checker.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass

from genenv_engine.records import CheckResult, Task, Validation

SEP = " => "
"""Separator between task and answer in simulator text (``<prompt> => <answer>``)."""


class GenerationParseError(ValueError):
    """The simulator's output does not have the required ``<task> => <answer>`` shape."""


@dataclass(frozen=True)
class SplitSizes:
    """How many tasks each built-in split holds."""

    seed: int = 200
    train: int = 2000
    heldout: int = 400


class Environment(ABC):
    """A benchmark: deterministic splits, a checker, and a validator for generated tasks."""

    name: str = ""
    granularity: str = "step"
    source: str = "built-in mini"
    structured: bool = True
    """Structured actions are rewarded by exact success (1/0); unstructured ones by the checker's score."""

    def __init__(self, seed: int = 0, sizes: SplitSizes = SplitSizes(), data_dir: str | None = None) -> None:
        self.seed = seed
        self.sizes = sizes
        self.data_dir = data_dir
        """A user folder holding the upstream benchmark data; None uses the built-in mini only."""

    def describe(self) -> dict[str, object]:
        """Name, granularity, source and split sizes, for ``genenv benchmarks``."""
        return {"name": self.name, "granularity": self.granularity,
                "source": "upstream folder" if self.data_dir else self.source,
                "sizes": {k: len(v) for k, v in self.splits().items()}}

    @abstractmethod
    def splits(self) -> dict[str, list[Task]]:
        """Return disjoint ``seed``, ``train`` and ``heldout`` task lists, the same for the same seed."""

    @abstractmethod
    def check(self, task: Task, response: str) -> CheckResult:
        """Score one agent response against the task's gold."""

    @abstractmethod
    def validate(self, prompt: str, answer: str, *, task_id: str, parent: Task | None = None,
                 epoch: int = 0, generator: str | None = None) -> Validation:
        """Accept or reject a generated task, recomputing its gold answer from the prompt."""

    @abstractmethod
    def sibling_pairs(self, tasks: list[Task], rng: random.Random, n: int) -> list[tuple[Task, Task]]:
        """Return ``n`` (source, sibling) pairs of similar tasks for the simulator's warm start."""

    def reward(self, result: CheckResult) -> float:
        """R_agent in [0, 1]: success for structured actions, the checker's similarity score otherwise."""
        return float(result.success) if self.structured else float(result.score)

    def simulator_text(self, task: Task) -> str:
        """Render a task as the simulator reads and writes it: ``<prompt> => <answer>``."""
        return f"{task.prompt}{SEP}{task.answer}"

    def parse_generation(self, text: str) -> tuple[str, str]:
        """Split simulator output into (prompt, answer); raise GenerationParseError if malformed."""
        if text.count(SEP) != 1:
            raise GenerationParseError(f"expected exactly one '{SEP.strip()}' separator, got {text.count(SEP)}")
        prompt, answer = (part.strip() for part in text.split(SEP))
        if not prompt or not answer:
            raise GenerationParseError("empty task or answer")
        return prompt, answer

    def bucket(self, task: Task) -> str:
        """Difficulty bucket name used for the difficulty mix (default: ``L<level>``)."""
        return f"L{task.level}"
