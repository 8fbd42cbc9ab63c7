"""What the epoch's strategies are: a `typing.Protocol` per kind, one run's resolved strategies, the context an epoch
hands them, and the typed results its task source returns.

The five kinds (registered by name in `genenv_engine.method.strategies`, each factory typed
``Callable[[RunConfig], <the kind's Protocol>]``):

- ``tasks`` (`TaskSource`): where an epoch's fresh tasks come from, in two steps: ``generate`` writes the drafts
  (`Drafts`), ``validate`` checks them and returns the fresh tasks (`FreshTasks`, with `ValidationMetrics`);
- ``seeds`` (`SeedSampler`): which seed tasks the simulator is conditioned on;
- ``replay`` (`ReplaySource`): what the agent's base replay draws from;
- ``note`` (`PromptNote`): the note a simulator prompt carries, at warm start and in the RWR update too;
- ``reward`` (`SimulatorReward`): the simulator's reward per variation batch, with hooks before and after the
  agent's update.

One run's resolved strategies are a `Strategies`; `Epoch` is what each of them works with in one epoch. The agent's
update is not a registered kind but the trainer's part (`AgentLearner`): genenv's GRPO, or an outside trainer's
weights adopted.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from genenv_engine.core.events import EventSink
from genenv_engine.core.records import ScoredBatch, Task
from genenv_engine.environments.base import Environment
from genenv_engine.executors.base import RolloutExecutor
from genenv_engine.storage.session import Session
from genenv_engine.training import simulator as sim

if TYPE_CHECKING:
    from genenv_engine.training.agent import TaskAttempts
    from genenv_engine.training.roles import Roles


class ValidationMetrics(TypedDict, total=False):
    """What validating an epoch's drafts adds to its metrics (every key but the last three even with no draft)."""

    generated: int
    valid: int
    valid_fraction: float | None
    unique_fraction: float | None
    difficulty_mix: dict[str, int]
    admitted: dict[str, dict[str, int]]
    """Benchmark -> how its valid tasks were admitted (as written, on the recomputed gold, mended) -> tasks."""
    invalid_reasons: dict[str, int]


@dataclass
class FreshTasks:
    """Step 2's result (validate): the epoch's fresh tasks, each one's variation batch, the validated generations
    (the simulator's update reads them) and the validation's metrics."""

    tasks: list[Task]
    batch_of: dict[str, str]
    """Task id -> batch id."""
    generations: list[sim.Generation]
    metrics: ValidationMetrics = field(default_factory=lambda: ValidationMetrics())


@dataclass
class Drafts:
    """Step 1's result (generate): what the task source wrote this epoch, for step 2 to validate."""

    drafts: list[sim.Draft] = field(default_factory=list)
    """The simulator's drafts, in order (none: nothing written this epoch)."""
    notes: dict[str, str | None] = field(default_factory=dict)
    """Batch id -> the note its simulator prompt carried."""
    seed_levels_drawn: dict[str, dict[str, int]] = field(default_factory=dict)
    """Benchmark -> the levels of the seeds the seed sampler drew (``L<level>`` -> seeds); empty when none was."""
    written: FreshTasks | None = None
    """Fresh tasks written valid by construction (a procedural generator's, not a simulator's): validation passes
    them through."""


@dataclass
class Epoch:
    """What a strategy works with in one epoch: the session, the executor, the epoch's rng, the event sink and
    pause check, the phase timings, the epoch's metrics (the loop's steps write theirs; a strategy may add its own)
    and the run's strategies."""

    session: Session
    executor: RolloutExecutor
    envs: dict[str, Environment]
    epoch: int
    rng: random.Random
    emit: EventSink
    check: Callable[[], None]
    seconds: dict[str, float]
    metrics: dict[str, Any]
    plan: Strategies


class TaskSource(Protocol):
    """Where an epoch's fresh tasks come from (kind ``tasks``, named by ``simulator.mode``)."""

    @property
    def name(self) -> str: ...

    @property
    def replays_pool(self) -> bool:
        """Whether the replay also draws from the earlier generated pool."""
        ...

    @property
    def trains_simulator(self) -> bool:
        """Whether the simulator's RWR update runs after the agent's."""
        ...

    def check(self, env: Environment) -> None:
        """Fail (``ConfigError``) before the warm start when the source cannot serve ``env``."""

    def extra_replay(self, n_benchmarks: int) -> int:
        """Replay tasks added to ``agent.replay_tasks`` when no ``agent.tasks_per_epoch`` budget is set."""
        ...

    def generate(self, ep: Epoch) -> Drafts:
        """Step 1: write this epoch's drafts (timed ``generate`` when anything is written)."""
        ...

    def validate(self, ep: Epoch, drafts: Drafts) -> FreshTasks:
        """Step 2: validate and store ``drafts``; the valid ones are the epoch's fresh tasks."""
        ...


class SeedSampler(Protocol):
    """Which seed tasks the simulator is conditioned on (kind ``seeds``, ``simulator.seed_sampling``)."""

    def check(self, env: Environment) -> None: ...

    def pool(self, env: Environment, session: Session) -> list[Task]:
        """The seeds to draw from."""
        ...

    def draw(self, ep: Epoch, name: str, seeds: list[Task]) -> list[Task]:
        """This epoch's seeds of benchmark ``name`` among ``seeds``."""
        ...


class ReplaySource(Protocol):
    """What the agent's base replay draws from (kind ``replay``)."""

    def check(self, env: Environment) -> None: ...

    def choices(self, env: Environment) -> list[Task]:
        """The tasks the base replay draws from."""
        ...

    def stored(self, env: Environment) -> list[Task]:
        """Tasks no split holds that epoch 0 stores, so rollouts can name them."""
        ...


class PromptNote(Protocol):
    """The note a simulator prompt carries (kind ``note``, ``simulator.note``): in an epoch's prompts, in the
    warm start's (seed -> sibling) pairs and the update's anchor pairs, and in the context the RWR update trains a
    generated task under."""

    def text(self, benchmark: str, rates: Sequence[float | None]) -> str | None:
        """The note for ``benchmark`` from its measured success at each earlier epoch (oldest first)."""
        ...

    def pair_note(self, source: Task, sibling: Task) -> str | None:
        """The note of a (seed -> sibling) pair's prompt (None: the prompt's own; a note that is not None here
        changes the warm start, so the cache key names the strategy)."""
        ...

    def hindsight(self, seed: Task, task: Task) -> str | None:
        """The note the RWR update trains ``task`` (written on ``seed``) under instead of the one it was asked with
        (None: as asked)."""
        ...


class SimulatorReward(Protocol):
    """The simulator's reward per variation batch (kind ``reward``, ``curriculum.reward``)."""

    def check(self, env: Environment) -> None: ...

    def score(self, p_hat: float, benchmark: str) -> tuple[float, bool]:
        """A scored batch's reward and whether the simulator's update keeps it."""
        ...

    def before(self, ep: Epoch, roles: Roles, fresh: list[Task], batch_of: dict[str, str]) -> None:
        """Measure what the reward needs on this epoch's fresh tasks before the agent's update."""

    def after(self, ep: Epoch, roles: Roles, batches: list[ScoredBatch]) -> list[ScoredBatch]:
        """The scored batches the simulator's update reads, once the agent has been updated."""
        ...


@dataclass(frozen=True)
class Strategies:
    """One run's resolved strategies."""

    tasks: TaskSource
    seeds: SeedSampler
    replay: ReplaySource
    note: PromptNote
    reward: SimulatorReward

    def check(self, env: Environment) -> None:
        """Fail (``ConfigError``) before the warm start when a strategy cannot serve ``env``."""
        for strategy in (self.seeds, self.replay, self.tasks, self.reward):
            strategy.check(env)


class AgentLearner(Protocol):
    """The agent's update of one epoch (the ``agent_update`` phase): learns from the epoch's usable attempts, or
    brings in the weights a trainer outside genenv learned, and returns the update's figures."""

    def __call__(self, ep: Epoch, roles: Roles, trained: list[TaskAttempts]) -> dict[str, Any]: ...
