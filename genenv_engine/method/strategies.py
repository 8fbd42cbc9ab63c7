"""The strategies an epoch calls, by name, resolved from the config once per run (`resolve`), and their registry.

Five kinds (`genenv_engine.method.protocols`: a Protocol each), each a registry of factories by name
(``factory(config) -> strategy``):

- ``tasks``, where an epoch's fresh tasks come from, named by ``simulator.mode``: the simulator writes and the
  environment validates them (``trained``, ``frozen``), a one-off static augmentation resampled every epoch
  (``static``), or none (``off``, whose replay takes the generation budget instead);
- ``seeds``, which seed tasks the simulator is conditioned on (``simulator.seed_sampling``): ``uniform``;
- ``replay``, what the agent's base replay draws from (`replay_name`): ``train``, the whole train split;
- ``note``, the note a simulator prompt carries (``simulator.note``, `note_name`): ``none`` (compact),
  ``success_line`` (instruct: the agent's measured success against alpha);
- ``reward``, the simulator's reward per variation batch (``curriculum.reward``): ``alpha``, ``agent0`` and
  ``uniform`` score a batch by its p-hat when it is scored (`CurriculumReward`); a reward that measures the agent
  around its update hooks in before and after it (`CurriculumReward.before`, `CurriculumReward.after`).

The paper's method is registered here. Other strategies (the study variants among them) register themselves when
their module is imported: `get`, asked for a name not registered, imports every module installed under the
``genenv.strategies`` entry-point group (once; `load_plugins`), so the engine never imports them by name. `register`
refuses a name another factory holds (`DuplicateStrategy`).
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Literal, TypeVar, overload

from genenv_engine.backends.base import Sampling
from genenv_engine.config import RunConfig, check_study
from genenv_engine.config.checks import check
from genenv_engine.core.curriculum import env_reward
from genenv_engine.core.events import BatchProgressed, PhaseTimer, TasksGenerated
from genenv_engine.core.records import ScoredBatch, Task
from genenv_engine.environments.base import Environment, near_duplicate_key
from genenv_engine.executors.base import GenerateJob
from genenv_engine.method.protocols import Drafts as Drafts
from genenv_engine.method.protocols import Epoch as Epoch
from genenv_engine.method.protocols import FreshTasks as FreshTasks
from genenv_engine.method.protocols import (
    PromptNote,
    ReplaySource,
    SeedSampler,
    SimulatorReward,
    TaskSource,
    ValidationMetrics,
)
from genenv_engine.method.protocols import Strategies as Strategies
from genenv_engine.method.simulator_update import success_by_epoch, success_history
from genenv_engine.storage.session import Session
from genenv_engine.training import simulator as sim

if TYPE_CHECKING:
    from genenv_engine.training.roles import Roles

GROUP = "genenv.strategies"
"""The entry-point group whose modules register strategies when imported."""

KINDS = ("tasks", "seeds", "replay", "note", "reward")

Factory = Callable[[RunConfig], object]
REGISTRY: dict[str, dict[str, Factory]] = {kind: {} for kind in KINDS}
"""Kind -> name -> factory."""


class DuplicateStrategy(ValueError):
    """A second factory registered under a name of a kind that another factory holds."""


_Tasks = TypeVar("_Tasks", bound=Callable[[RunConfig], TaskSource])
_Seeds = TypeVar("_Seeds", bound=Callable[[RunConfig], SeedSampler])
_Replay = TypeVar("_Replay", bound=Callable[[RunConfig], ReplaySource])
_Note = TypeVar("_Note", bound=Callable[[RunConfig], PromptNote])
_Reward = TypeVar("_Reward", bound=Callable[[RunConfig], SimulatorReward])
_Factory = TypeVar("_Factory", bound=Factory)


@overload
def register(kind: Literal["tasks"], *names: str) -> Callable[[_Tasks], _Tasks]: ...
@overload
def register(kind: Literal["seeds"], *names: str) -> Callable[[_Seeds], _Seeds]: ...
@overload
def register(kind: Literal["replay"], *names: str) -> Callable[[_Replay], _Replay]: ...
@overload
def register(kind: Literal["note"], *names: str) -> Callable[[_Note], _Note]: ...
@overload
def register(kind: Literal["reward"], *names: str) -> Callable[[_Reward], _Reward]: ...
def register(kind: str, *names: str) -> Callable[[_Factory], _Factory]:
    """Class or function decorator: register a factory of ``kind`` under each of ``names``.

    A name another factory of the kind holds raises `DuplicateStrategy` (nothing is registered then). The same
    factory again is allowed: the same object, or the same definition imported again (its module reloaded, or
    imported under a second name from the same file), which replaces the one registered."""

    def add(factory: _Factory) -> _Factory:
        mine = REGISTRY[kind]
        for name in names:
            held = mine.get(name)
            if held is not None and not same_factory(held, factory):
                raise DuplicateStrategy(
                    f"{kind} strategy {name!r} is taken: {describe(held)} holds it, {describe(factory)} cannot "
                    "register under it too"
                )
        for name in names:
            mine[name] = factory
        return factory

    return add


def describe(factory: object) -> str:
    """A factory's dotted name, ``module.QualifiedName``.

    >>> describe(UniformSeeds)
    'genenv_engine.method.strategies.UniformSeeds'
    """
    module = getattr(factory, "__module__", None) or "?"
    return f"{module}.{getattr(factory, '__qualname__', repr(factory))}"


def same_factory(a: object, b: object) -> bool:
    """Whether ``a`` and ``b`` are one factory: the same object, or one definition (same qualified name) from the
    same file, as a module reloaded or imported under a second name defines it again.

    >>> same_factory(UniformSeeds, UniformSeeds), same_factory(UniformSeeds, TrainReplay)
    (True, False)
    """
    if a is b:
        return True
    return getattr(a, "__qualname__", None) == getattr(b, "__qualname__", None) and _defined_in(a) == _defined_in(b)


def _defined_in(factory: object) -> str:
    """The file that defines ``factory`` (its module's name when that cannot be told)."""
    try:
        return os.path.realpath(inspect.getfile(factory))  # type: ignore[arg-type]
    except TypeError:
        return str(getattr(factory, "__module__", ""))


@functools.cache
def load_plugins() -> tuple[str, ...]:
    """Import every module installed under the ``genenv.strategies`` entry-point group, once per process (its import
    registers its strategies); returns one line for each that failed to import, each also given as a warning."""
    failed = []
    for entry in entry_points(group=GROUP):
        try:
            entry.load()
        except Exception as exc:  # a broken plugin: one line naming it, not a traceback
            line = f"{GROUP} entry point {entry.name!r} ({entry.value}) failed to import: {type(exc).__name__}: {exc}"
            warnings.warn(line, RuntimeWarning, stacklevel=2)
            failed.append(line)
    return tuple(failed)


@overload
def get(kind: Literal["tasks"], name: str) -> Callable[[RunConfig], TaskSource]: ...
@overload
def get(kind: Literal["seeds"], name: str) -> Callable[[RunConfig], SeedSampler]: ...
@overload
def get(kind: Literal["replay"], name: str) -> Callable[[RunConfig], ReplaySource]: ...
@overload
def get(kind: Literal["note"], name: str) -> Callable[[RunConfig], PromptNote]: ...
@overload
def get(kind: Literal["reward"], name: str) -> Callable[[RunConfig], SimulatorReward]: ...
def get(kind: str, name: str) -> Factory:
    """The factory registered as ``name`` of ``kind``; a name not registered first loads the installed plugins
    (`load_plugins`), then raises ``KeyError`` naming what is registered and any plugin that failed to import.

    >>> get("seeds", "uniform").__name__, get("seeds", "alpha").__name__
    ('UniformSeeds', 'AlphaSeeds')
    >>> get("note", "shout")
    Traceback (most recent call last):
    ...
    KeyError: "no note strategy 'shout' (registered: ['fixed_line', 'none', 'steer', 'success_line'])"
    """
    if name not in REGISTRY[kind]:
        failed = load_plugins()
        if name not in REGISTRY[kind]:
            broken = f"; {'; '.join(failed)}" if failed else ""
            raise KeyError(f"no {kind} strategy {name!r} (registered: {sorted(REGISTRY[kind])}){broken}")
    return REGISTRY[kind][name]


def replay_name(config: RunConfig) -> str:
    """The base replay's strategy: ``unseen`` (new tasks no split has), ``train_subset`` (train tasks at
    ``agent.base_levels`` or a fixed pool of ``agent.base_pool``), or ``train``.

    >>> from genenv_engine.config import load_config
    >>> settings = ({}, {"agent.base_pool": 5}, {"agent.base_source": "unseen"})
    >>> [replay_name(load_config("tiny", overrides=o)) for o in settings]
    ['train', 'train_subset', 'unseen']
    """
    a = config.agent
    if a.base_source != "train":
        return a.base_source
    return "train_subset" if a.base_levels or a.base_pool else "train"


def note_name(config: RunConfig) -> str:
    """The prompt note's strategy: ``simulator.note``, whose ``auto`` is the paper's, the instruct prompt's
    ``success_line`` and the compact prompt's ``none``.

    >>> from genenv_engine.config import load_config
    >>> note_name(load_config("tiny")), note_name(load_config("smol-ablation"))
    ('none', 'success_line')
    """
    s = config.simulator
    if s.note != "auto":
        return s.note
    return "success_line" if s.prompt == "instruct" else "none"


def resolve(config: RunConfig) -> Strategies:
    """The strategies ``config`` names, built once; its ``[study]`` table checked against the settings the installed
    packages register (`genenv_engine.config.check_study`)."""
    check_study(config, load_plugins)  # a package registers its study settings as its strategies are imported
    return Strategies(
        tasks=get("tasks", config.simulator.mode)(config),
        seeds=get("seeds", config.simulator.seed_sampling)(config),
        replay=get("replay", replay_name(config))(config),
        note=get("note", note_name(config))(config),
        reward=get("reward", config.curriculum.reward)(config),
    )


def epoch_note(config: RunConfig, benchmark: str, rates: Sequence[float | None]) -> str | None:
    """The note an epoch's prompts carry, from ``rates``: the benchmark's measured success at each earlier epoch
    (oldest first; None where nothing was measured), by the configured note strategy.

    >>> from genenv_engine.config import load_config
    >>> cfg = load_config("smol-ablation")
    >>> epoch_note(cfg, "bfcl", [0.9, 0.25])
    'Agent success on recent bfcl tasks: 25% (target 50%).'
    >>> epoch_note(load_config("tiny"), "bfcl", [0.8]) is None
    True
    """
    return get("note", note_name(config))(config).text(benchmark, rates)


# --- simulator rewards ---------------------------------------------------------------------------------------


@register("reward", "alpha", "agent0", "uniform")
class CurriculumReward:
    """The curriculum's R_env of a batch from its p-hat (`genenv_engine.core.curriculum.env_reward` under
    ``curriculum.reward``), the batch kept for the simulator's update by `CurriculumConfig.keeps`; nothing is measured
    around the agent's update."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.name = config.curriculum.reward

    def check(self, env: Environment) -> None:
        """Nothing to check: every benchmark's batches have a p-hat."""

    def score(self, p_hat: float, benchmark: str) -> tuple[float, bool]:
        """A scored batch's R_env and whether the simulator's update keeps it.

        >>> from genenv_engine.config import load_config
        >>> r, kept = CurriculumReward(load_config("tiny")).score(0.4, "bfcl")
        >>> round(r, 6), kept
        (0.980199, True)
        """
        cur = self.config.curriculum
        return env_reward(p_hat, cur.reward, cur.alpha_for(benchmark), cur.beta), cur.keeps(p_hat, benchmark)

    def before(self, ep: Epoch, roles: Roles, fresh: list[Task], batch_of: dict[str, str]) -> None:
        """Measure the agent on this epoch's fresh tasks (``batch_of``: each one's batch) before its update: nothing
        to measure here."""

    def after(self, ep: Epoch, roles: Roles, batches: list[ScoredBatch]) -> list[ScoredBatch]:
        """The scored batches the simulator's update reads, once the agent has been updated: as they were scored."""
        return batches


# --- notes ---------------------------------------------------------------------------------------------------


@register("note", "none")
class NoNote:
    """The compact prompt as the paper's method writes it: the seed only, in every prompt and pair."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config

    def text(self, benchmark: str, rates: Sequence[float | None]) -> str | None:
        return None

    def pair_note(self, source: Task, sibling: Task) -> str | None:
        return None

    def hindsight(self, seed: Task, task: Task) -> str | None:
        return None


@register("note", "success_line")
class SuccessLine(NoNote):
    """The instruct prompt's line with the agent's last measured success on the benchmark against alpha (its pairs
    carry the warm start's "not measured yet" line, as every instruct prompt without a note does)."""

    def __init__(self, config: RunConfig) -> None:
        check(
            config.simulator.prompt == "instruct",
            "simulator.note",
            "success_line is the instruct prompt's line: it needs simulator.prompt = 'instruct'",
        )
        super().__init__(config)

    def text(self, benchmark: str, rates: Sequence[float | None]) -> str | None:
        return sim.success_note(benchmark, rates[-1] if rates else None, self.config.curriculum.alpha_for(benchmark))


# --- seed samplers --------------------------------------------------------------------------------------------


@register("seeds", "uniform")
class UniformSeeds:
    """``simulator.seeds_per_epoch`` seeds drawn uniformly from the seed split (and any imported seeds)."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.levels = config.simulator.seed_levels

    def check(self, env: Environment) -> None:
        env.split_at_levels("seed", self.levels, "simulator.seed_levels")

    def pool(self, env: Environment, session: Session) -> list[Task]:
        """The seeds to draw from: the seed split, and the tasks imported into it."""
        split = env.split_at_levels("seed", self.levels, "simulator.seed_levels")
        return split + session.store.imported_seeds(env.name, self.levels)

    def draw(self, ep: Epoch, name: str, seeds: list[Task]) -> list[Task]:
        return ep.rng.sample(seeds, min(self.config.simulator.seeds_per_epoch, len(seeds)))


# --- replay sources -------------------------------------------------------------------------------------------


@register("replay", "train")
class TrainReplay:
    """The agent's base replay draws from the whole train split."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config

    def check(self, env: Environment) -> None:
        self.choices(env)

    def choices(self, env: Environment) -> list[Task]:
        """The tasks the base replay draws from."""
        return env.split_at_levels("train", (), "agent.base_levels")

    def stored(self, env: Environment) -> list[Task]:
        """Tasks no split holds that epoch 0 stores, so rollouts can name them."""
        return []


def replay_budget(cfg: RunConfig, tasks: TaskSource, n_fresh: int, n_benchmarks: int) -> int:
    """How many D_train tasks ride along with ``n_fresh`` fresh ones this epoch.

    With ``agent.tasks_per_epoch`` set, the replay sample fills the budget, so every arm trains on the same
    number of tasks; otherwise ``replay_tasks``, plus what the run's task source ``tasks`` adds (``off``: the
    generation budget).

    >>> from genenv_engine.config import load_config
    >>> tiny, off = load_config("tiny"), load_config("tiny", overrides={"simulator.mode": "off"})
    >>> replay_budget(tiny, resolve(tiny).tasks, 40, 1), replay_budget(off, resolve(off).tasks, 0, 1)
    (32, 96)
    >>> budget = load_config("tiny", overrides={"agent.tasks_per_epoch": 96})
    >>> replay_budget(budget, resolve(budget).tasks, 40, 1)
    56
    """
    if cfg.agent.tasks_per_epoch:
        return max(0, cfg.agent.tasks_per_epoch - n_fresh)
    return cfg.agent.replay_tasks + tasks.extra_replay(n_benchmarks)


# --- task sources ---------------------------------------------------------------------------------------------


@register("tasks", "frozen")
class SimulatorTasks:
    """The simulator writes ``simulator.variations`` variations of each drawn seed; the environment validates them;
    the valid ones are the epoch's fresh tasks. The simulator keeps its warm-start weights."""

    origin = "generated"
    replays_pool = True
    """Whether the replay also draws from the earlier generated pool."""
    trains_simulator = False
    """Whether the simulator's RWR update runs after the agent's."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.name = config.simulator.mode

    def check(self, env: Environment) -> None:
        """Nothing to check: every benchmark has seeds."""

    def extra_replay(self, n_benchmarks: int) -> int:
        """Replay tasks added to ``agent.replay_tasks`` when no ``agent.tasks_per_epoch`` budget is set."""
        return 0

    def generate(self, ep: Epoch) -> Drafts:
        """Sample this epoch's drafts (by the executor, timed ``generate``), with each batch's prompt note and the
        levels of the seeds drawn."""
        cfg, store = self.config, ep.session.store
        sampling = Sampling(
            temperature=cfg.simulator.temperature,
            max_new_tokens=cfg.simulator.max_new_tokens,
            seed=ep.rng.randrange(2**31),
        )
        rates = success_by_epoch(store)
        out = Drafts()

        def progress(name: str, done: int, total: int) -> None:
            ep.emit(BatchProgressed(ep.epoch, f"generate:{name}", done, total))
            ep.check()

        with PhaseTimer(ep.emit, ep.epoch, "generate", ep.seconds):
            jobs = []
            for name, env in ep.envs.items():
                seeds, n, prefix, drawn = self.job(ep, name, ep.plan.seeds.pool(env, ep.session))
                if drawn:
                    out.seed_levels_drawn[name] = dict(sorted(Counter(f"L{t.level}" for t in seeds).items()))
                note = ep.plan.note.text(name, success_history(rates, name, ep.epoch))
                jobs.append(GenerateJob(name, seeds, n, prefix, note, sim.job_grammar(cfg, env)))
            out.drafts = ep.executor.generate(
                jobs, sampling, epoch=ep.epoch, style=cfg.simulator.prompt, progress=progress
            )
        by_benchmark = {job.benchmark: job.note for job in jobs}
        out.notes = {d.batch_id: by_benchmark.get(d.seed.benchmark) for d in out.drafts}
        return out

    def job(self, ep: Epoch, name: str, seeds: list[Task]) -> tuple[list[Task], int, str | None, bool]:
        """One benchmark's seeds to condition on, variations per seed, task id prefix (None: the default), and
        whether the seed sampler drew the seeds (their levels join the epoch's metrics)."""
        return ep.plan.seeds.draw(ep, name, seeds), self.config.simulator.variations, None, True

    def validate(self, ep: Epoch, drafts: Drafts) -> FreshTasks:
        """Validate and store the drafts (timed ``validate``); the fresh tasks are picked among them (`pick`). Tasks
        written valid by construction (`Drafts.written`) pass through."""
        if drafts.written is not None:
            return drafts.written
        with PhaseTimer(ep.emit, ep.epoch, "validate", ep.seconds):
            metrics, gens = validate_and_store(ep, drafts.drafts, self.origin)
        ep.check()
        tasks, batch_of = self.pick(ep, gens)
        return FreshTasks(tasks, batch_of, gens, metrics)

    def pick(self, ep: Epoch, gens: list[sim.Generation]) -> tuple[list[Task], dict[str, str]]:
        """The fresh tasks among this epoch's validated generations: the valid ones."""
        valid = [g for g in gens if g.task.valid]
        return [g.task for g in valid], {g.task.id: g.batch_id for g in valid}


@register("tasks", "trained")
class TrainedSimulatorTasks(SimulatorTasks):
    """The paper's method: `SimulatorTasks`, and the simulator learns by RWR on its in-band batches."""

    trains_simulator = True


@register("tasks", "static")
class StaticTasks(SimulatorTasks):
    """The paper's static augmentation: the simulator writes ``simulator.static_multiplier`` variations of every
    seed once (the first epoch); each epoch trains on a sample of those stored batches."""

    origin = "static"

    def generate(self, ep: Epoch) -> Drafts:
        if ep.session.store.count_tasks(origin="static") > 0:
            return Drafts()
        return super().generate(ep)

    def job(self, ep: Epoch, name: str, seeds: list[Task]) -> tuple[list[Task], int, str | None, bool]:
        return seeds, self.config.simulator.static_multiplier, f"static/{name}", False

    def pick(self, ep: Epoch, gens: list[sim.Generation]) -> tuple[list[Task], dict[str, str]]:
        """A sample of the stored static batches, ``simulator.seeds_per_epoch`` per benchmark."""
        cfg, store = self.config, ep.session.store
        batch_ids = store.static_batch_ids()
        chosen = ep.rng.sample(batch_ids, min(len(batch_ids), cfg.simulator.seeds_per_epoch * len(cfg.benchmarks)))
        by_batch = store.tasks_in_batches(chosen, origin="static")
        tasks = [t for b in chosen for t in by_batch[b] if t.status == "active"]
        return tasks, {t.id: b for b in chosen for t in by_batch[b]}


@register("tasks", "off")
class NoTasks(SimulatorTasks):
    """No fresh tasks: the agent trains on its replay only, which takes the generation budget instead (the same
    agent compute as the simulator's arms) and draws from the base data alone."""

    replays_pool = False

    def generate(self, ep: Epoch) -> Drafts:
        return Drafts()

    def extra_replay(self, n_benchmarks: int) -> int:
        s = self.config.simulator
        return s.seeds_per_epoch * s.variations * n_benchmarks


def validate_and_store(
    ep: Epoch, drafts: list[sim.Draft], origin: str
) -> tuple[ValidationMetrics, list[sim.Generation]]:
    """Validate generations (by the executor), cap near-duplicates against the pool, store every one with its
    verdict; returns the validation metrics and the generations."""
    cfg, store, envs, epoch = ep.session.config, ep.session.store, ep.envs, ep.epoch
    if not drafts:
        return {"generated": 0, "valid": 0, "valid_fraction": None, "unique_fraction": None, "difficulty_mix": {}}, []
    generator = f"simulator@e{epoch - 1}"
    pool = store.pool(list(cfg.benchmarks))
    existing = {t.prompt for t in pool} | {t.prompt for env in envs.values() for t in env.splits()["seed"]}
    keys = Counter(
        envs[t.benchmark].template_key(t.prompt) if t.benchmark in envs else near_duplicate_key(t.prompt) for t in pool
    )
    uniques: list[float] = []

    def cap(name: str, env: Environment, mine: list[sim.Generation]) -> list[sim.Generation]:
        heldout = frozenset(t.prompt for t in env.splits()["heldout"])
        mine, capped = sim.cap_duplicates(mine, existing, keys, cfg.simulator.duplicate_cap, heldout, env.template_key)
        if capped["unique_fraction"] is not None:
            uniques.append(capped["unique_fraction"])
        reasons = Counter(g.task.reason.split(":")[0] for g in mine if not g.task.valid)
        ep.emit(TasksGenerated(epoch, name, len(mine), sum(g.task.valid for g in mine), dict(reasons)))
        return mine

    checked = ep.executor.validate(drafts, epoch=epoch, generator=generator, origin=origin, style=cfg.simulator.prompt)
    if not cfg.simulator.answer_check:
        checked = [sim.admit_on_gold(g, cfg.simulator.admit_mended) for g in checked]
    gens = sim.per_benchmark(checked, envs, cap)  # in the drafts' order
    by_batch: dict[str, list[Task]] = {}
    for g in gens:
        by_batch.setdefault(g.batch_id, []).append(g.task)
    for batch_id, tasks in by_batch.items():
        store.insert_tasks(tasks, batch_id=batch_id)
    valid = [g.task for g in gens if g.task.valid]
    admitted: dict[str, Counter[str]] = {}  # per benchmark: valid as written, on the recomputed gold, mended
    for g in gens:
        if g.task.valid:
            admitted.setdefault(g.task.benchmark, Counter())[g.admission] += 1
    return {
        "generated": len(drafts),
        "valid": len(valid),
        "valid_fraction": len(valid) / len(drafts),
        "admitted": {name: dict(ways) for name, ways in sorted(admitted.items())},
        "unique_fraction": sum(uniques) / len(uniques) if uniques else None,
        "invalid_reasons": dict(Counter(g.task.reason.split(":")[0] for g in gens if not g.task.valid)),
        "difficulty_mix": dict(sorted(Counter(envs[t.benchmark].bucket(t) for t in valid).items())),
    }, gens
