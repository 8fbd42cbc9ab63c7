"""The strategies an epoch calls, by name, resolved from the config once per run (`resolve`).

Five kinds, each a registry of factories by name (``factory(config) -> strategy``):

- ``tasks``, where an epoch's fresh tasks come from, named by ``simulator.mode``: the simulator writes and the
  environment validates them (``trained``, ``frozen``), a one-off static augmentation resampled every epoch
  (``static``), or none (``off``, whose replay takes the generation budget instead);
- ``seeds``, which seed tasks the simulator is conditioned on (``simulator.seed_sampling``): ``uniform``;
- ``replay``, what the agent's base replay draws from (`replay_name`): ``train``, the whole train split;
- ``note``, the note a simulator prompt carries (`note_name`): ``none`` (compact), ``success_line`` (instruct:
  the agent's measured success against alpha);
- ``reward``, the simulator's reward per variation batch (``curriculum.reward``): ``alpha``, ``agent0`` and
  ``uniform`` score a batch by its p-hat when it is scored (`CurriculumReward`); a reward that measures the agent
  around its update hooks in before and after it (`CurriculumReward.before`, `CurriculumReward.after`).

The paper's method is registered here. The study variants (`genenv_engine.experiments.strategies`: the sampler
task source, the ``alpha`` seed sampler, the level-, pool- and unseen-restricted replays, the steer word, the
withheld success line and the ``grounded`` reward) register themselves when that module is imported, which `get`
does, by its module name, the first time it is asked for a name not registered here: the method's modules never
import the study code.
"""

from __future__ import annotations

import importlib
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from genenv_engine.backends.base import Sampling
from genenv_engine.config import RunConfig
from genenv_engine.core.curriculum import env_reward
from genenv_engine.core.events import BatchProgressed, EventSink, PhaseTimer, TasksGenerated
from genenv_engine.core.records import ScoredBatch, Task
from genenv_engine.environments.base import Environment
from genenv_engine.executors.base import GenerateJob, RolloutExecutor
from genenv_engine.method.simulator_update import success_by_epoch, success_history
from genenv_engine.storage.session import Session
from genenv_engine.training import simulator as sim

if TYPE_CHECKING:
    from genenv_engine.training.roles import Roles

STUDY_MODULE = "genenv_engine.experiments.strategies"
"""The module whose import registers the study variants (loaded by name, on first need)."""

REGISTRY: dict[str, dict[str, Callable[[RunConfig], Any]]] = {
    "tasks": {},
    "seeds": {},
    "replay": {},
    "note": {},
    "reward": {},
}
"""Kind -> name -> factory."""


def register(kind: str, *names: str) -> Callable[[Callable], Callable]:
    """Class or function decorator: register a factory of ``kind`` under each of ``names``."""

    def add(factory: Callable) -> Callable:
        for name in names:
            REGISTRY[kind][name] = factory
        return factory

    return add


def get(kind: str, name: str) -> Callable[[RunConfig], Any]:
    """The factory registered as ``name`` of ``kind`` (the study variants are loaded on first need).

    >>> get("seeds", "uniform").__name__, get("seeds", "alpha").__name__
    ('UniformSeeds', 'AlphaSeeds')
    >>> get("note", "shout")
    Traceback (most recent call last):
    ...
    KeyError: "no note strategy 'shout' (registered: ['fixed_line', 'none', 'steer', 'success_line'])"
    """
    if name not in REGISTRY[kind]:
        importlib.import_module(STUDY_MODULE)
    try:
        return REGISTRY[kind][name]
    except KeyError:
        raise KeyError(f"no {kind} strategy {name!r} (registered: {sorted(REGISTRY[kind])})") from None


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
    """The prompt note's strategy: instruct ``success_line`` (or ``fixed_line``, the warm start's "not measured
    yet" line, with ``simulator.success_note`` off); compact ``none`` (or ``steer`` with ``simulator.steer``).

    >>> from genenv_engine.config import load_config
    >>> note_name(load_config("tiny")), note_name(load_config("smol-ablation"))
    ('none', 'success_line')
    """
    s = config.simulator
    if s.prompt == "instruct":
        return "success_line" if s.success_note else "fixed_line"
    return "steer" if s.steer else "none"


@dataclass(frozen=True)
class Strategies:
    """One run's resolved strategies."""

    tasks: Any
    seeds: Any
    replay: Any
    note: Any
    reward: Any

    def check(self, env: Environment) -> None:
        """Fail (``ConfigError``) before the warm start when a strategy cannot serve ``env``."""
        for strategy in (self.seeds, self.replay, self.tasks, self.reward):
            strategy.check(env)


def resolve(config: RunConfig) -> Strategies:
    """The strategies ``config`` names, built once."""
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
    >>> epoch_note(cfg.with_overrides({"simulator.success_note": False}), "bfcl", [0.25])
    'Agent success on recent bfcl tasks: not measured yet (target 50%).'
    >>> tiny = load_config("tiny")
    >>> epoch_note(tiny, "bfcl", [0.8]), epoch_note(tiny.with_overrides({"simulator.steer": True}), "bfcl", [0.8])
    (None, 'harder')
    """
    return get("note", note_name(config))(config).text(benchmark, rates)


@dataclass
class Epoch:
    """What a task source works with in one epoch: the session, the executor, the epoch's rng, the event sink and
    pause check, the phase timings, the metrics it adds to, each batch's prompt note, and the run's strategies."""

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
    notes: dict[str, str | None] = field(default_factory=dict)
    """Batch id -> the note its simulator prompt carried."""


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
    """The compact prompt as the paper's method writes it: the seed only."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config

    def text(self, benchmark: str, rates: Sequence[float | None]) -> str | None:
        return None


@register("note", "success_line")
class SuccessLine(NoNote):
    """The instruct prompt's line with the agent's last measured success on the benchmark against alpha."""

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


def replay_budget(cfg: RunConfig, n_fresh: int, n_benchmarks: int) -> int:
    """How many D_train tasks ride along with ``n_fresh`` fresh ones this epoch.

    With ``agent.tasks_per_epoch`` set, the replay sample fills the budget, so every arm trains on the same
    number of tasks; otherwise ``replay_tasks``, plus what the task source adds (``off``: the generation budget).

    >>> from genenv_engine.config import load_config
    >>> off = load_config("tiny", overrides={"simulator.mode": "off"})
    >>> replay_budget(load_config("tiny"), 40, 1), replay_budget(off, 0, 1)
    (32, 96)
    >>> replay_budget(load_config("tiny", overrides={"agent.tasks_per_epoch": 96}), 40, 1)
    56
    """
    if cfg.agent.tasks_per_epoch:
        return max(0, cfg.agent.tasks_per_epoch - n_fresh)
    return cfg.agent.replay_tasks + get("tasks", cfg.simulator.mode)(cfg).extra_replay(n_benchmarks)


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

    def fresh(self, ep: Epoch) -> tuple[list[Task], dict[str, str], list[sim.Generation]]:
        """This epoch's fresh tasks, each one's batch id, and the validated generations (for the simulator's
        update); the generate and validate phases are timed."""
        drafts = self.drafts(ep)
        with PhaseTimer(ep.emit, ep.epoch, "validate", ep.seconds):
            validated, gens = validate_and_store(ep, drafts, self.origin)
            ep.metrics.update(validated)
        ep.check()
        fresh, batch_of = self.pick(ep, gens)
        return fresh, batch_of, gens

    def pick(self, ep: Epoch, gens: list[sim.Generation]) -> tuple[list[Task], dict[str, str]]:
        """The fresh tasks among this epoch's validated generations: the valid ones."""
        valid = [g for g in gens if g.task.valid]
        return [g.task for g in valid], {g.task.id: g.batch_id for g in valid}

    def job(self, ep: Epoch, name: str, seeds: list[Task]) -> tuple[list[Task], int, str | None]:
        """One benchmark's seeds to condition on, variations per seed, and task id prefix (None: the default);
        the seed levels drawn go into the metrics."""
        chosen = ep.plan.seeds.draw(ep, name, seeds)
        drawn = Counter(f"L{t.level}" for t in chosen)
        ep.metrics.setdefault("seed_levels_drawn", {})[name] = dict(sorted(drawn.items()))
        return chosen, self.config.simulator.variations, None

    def drafts(self, ep: Epoch) -> list[sim.Draft]:
        """Sample this epoch's drafts (by the executor); each draft's batch id and the note its prompt carried go
        into ``ep.notes``."""
        cfg, store = self.config, ep.session.store
        sampling = Sampling(
            temperature=cfg.simulator.temperature,
            max_new_tokens=cfg.simulator.max_new_tokens,
            seed=ep.rng.randrange(2**31),
        )
        rates = success_by_epoch(store)

        def progress(name: str, done: int, total: int) -> None:
            ep.emit(BatchProgressed(ep.epoch, f"generate:{name}", done, total))
            ep.check()

        with PhaseTimer(ep.emit, ep.epoch, "generate", ep.seconds):
            jobs = []
            for name, env in ep.envs.items():
                seeds, n, prefix = self.job(ep, name, ep.plan.seeds.pool(env, ep.session))
                note = ep.plan.note.text(name, success_history(rates, name, ep.epoch))
                jobs.append(GenerateJob(name, seeds, n, prefix, note, sim.job_grammar(cfg, env)))
            drafts = ep.executor.generate(jobs, sampling, epoch=ep.epoch, style=cfg.simulator.prompt, progress=progress)
        by_benchmark = {job.benchmark: job.note for job in jobs}
        ep.notes.update((d.batch_id, by_benchmark.get(d.seed.benchmark)) for d in drafts)
        return drafts


@register("tasks", "trained")
class TrainedSimulatorTasks(SimulatorTasks):
    """The paper's method: `SimulatorTasks`, and the simulator learns by RWR on its in-band batches."""

    trains_simulator = True


@register("tasks", "static")
class StaticTasks(SimulatorTasks):
    """The paper's static augmentation: the simulator writes ``simulator.static_multiplier`` variations of every
    seed once (the first epoch); each epoch trains on a sample of those stored batches."""

    origin = "static"

    def drafts(self, ep: Epoch) -> list[sim.Draft]:
        if ep.session.store.count_tasks(origin="static") > 0:
            return []
        return super().drafts(ep)

    def job(self, ep: Epoch, name: str, seeds: list[Task]) -> tuple[list[Task], int, str | None]:
        return seeds, self.config.simulator.static_multiplier, f"static/{name}"

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

    def drafts(self, ep: Epoch) -> list[sim.Draft]:
        return []

    def extra_replay(self, n_benchmarks: int) -> int:
        s = self.config.simulator
        return s.seeds_per_epoch * s.variations * n_benchmarks


def validate_and_store(ep: Epoch, drafts: list[sim.Draft], origin: str) -> tuple[dict[str, Any], list[sim.Generation]]:
    """Validate generations (by the executor), cap near-duplicates against the pool, store every one with its
    verdict; returns the validation metrics and the generations."""
    cfg, store, envs, epoch = ep.session.config, ep.session.store, ep.envs, ep.epoch
    if not drafts:
        return {"generated": 0, "valid": 0, "valid_fraction": None, "unique_fraction": None, "difficulty_mix": {}}, []
    generator = f"simulator@e{epoch - 1}"
    pool = store.pool(list(cfg.benchmarks))
    existing = {t.prompt for t in pool} | {t.prompt for env in envs.values() for t in env.splits()["seed"]}
    keys = Counter(
        envs[t.benchmark].template_key(t.prompt) if t.benchmark in envs else sim.near_duplicate_key(t.prompt)
        for t in pool
    )
    out: dict[str, Any] = {"generated": len(drafts)}
    uniques = []

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
    out["valid"] = len(valid)
    out["valid_fraction"] = len(valid) / len(drafts)
    admitted: dict[str, Counter] = {}  # per benchmark: valid as written, on the recomputed gold, mended
    for g in gens:
        if g.task.valid:
            admitted.setdefault(g.task.benchmark, Counter())[g.admission] += 1
    out["admitted"] = {name: dict(ways) for name, ways in sorted(admitted.items())}
    out["unique_fraction"] = sum(uniques) / len(uniques) if uniques else None
    out["invalid_reasons"] = dict(Counter(g.task.reason.split(":")[0] for g in gens if not g.task.valid))
    out["difficulty_mix"] = dict(sorted(Counter(envs[t.benchmark].bucket(t) for t in valid).items()))
    return out, gens
