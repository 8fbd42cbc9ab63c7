"""The ablation bench's arms, the agent compute every arm must share, and the plan of one bench run.

The arms are the paper's comparison (Table/Fig. 6) plus one: ``trained`` (GenEnv), ``frozen`` (GenEnv-Random:
the same simulator, never updated), ``static`` (a one-off augmentation before epoch 1), ``off`` (base data only)
and ``uniform`` (the trained simulator without the alpha reward: every valid generation weighted 1); ``grounded``
trains the simulator on the agent's measured progress instead (`genenv_lab.grounded`); ``unseen`` is
an oracle (new tasks from the benchmark's own generator). The difficulty-sampler arms (``target``,
``uniform-levels``, ``schedule``, ``learnability``, ``controller``) replace the simulator with the benchmark's own
generator at the levels a sampler picks (`genenv_engine.method.samplers`). The arms must get the same agent compute:
`check_equal_compute` refuses a setup in which they would train a different number of tasks, rollouts or
optimizer steps per epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_engine.config import RunConfig, load_config
from genenv_engine.core.errors import ConfigError

ARMS: dict[str, tuple[dict[str, Any], str]] = {
    "trained": ({"simulator.mode": "trained", "curriculum.reward": "alpha"}, "GenEnv"),
    "frozen": ({"simulator.mode": "frozen", "curriculum.reward": "alpha"}, "GenEnv-Random"),
    "static": ({"simulator.mode": "static", "curriculum.reward": "alpha"}, "Static augmentation"),
    "off": ({"simulator.mode": "off", "curriculum.reward": "alpha"}, "Off (base data only)"),
    **{  # the trained simulator under another reward (`curriculum.reward`, named as the arm)
        reward: ({"simulator.mode": "trained", "curriculum.reward": reward}, label)
        for reward, label in (
            ("uniform", "Uniform curriculum"),
            ("grounded", "Grounded reward"),
            ("predicted", "GenEnv, predicted success"),
            ("shrunk", "GenEnv, shrunk success"),
        )
    },
    "unseen": (
        {"simulator.mode": "off", "curriculum.reward": "alpha", "agent.base_source": "unseen"},
        "Off on unseen tasks (oracle)",
    ),
    **{
        name: ({"simulator.mode": "sampler", "curriculum.reward": "alpha", "curriculum.sampler": sampler}, label)
        for name, sampler, label in (
            ("target", "target", "Target level only"),
            ("uniform-levels", "uniform", "Uniform levels"),
            ("schedule", "schedule", "Easy-to-hard schedule"),
            ("learnability", "learnability", "Learnability sampler"),
            ("controller", "controller", "RWR difficulty controller"),
        )
    },
}
"""Arm name -> (config overrides that make the arm, the name it has in tables). ``unseen`` is not the paper's: base data
only, but new tasks from the benchmark's own generator that the warm start never saw (`agent.base_source`), the upper
bound of what a simulator could hand the agent. ``predicted`` and ``shrunk`` are GenEnv on the α-reward of a more
reliable estimate of a batch's success (`genenv_engine.method.rewards`). The sampler arms write ``seeds_per_epoch x
variations`` tasks an epoch with the benchmark's generator at ``simulator.seed_levels`` (``generated benchmarks
only``)."""


DEFAULT_ARMS = ("trained", "frozen", "static", "off", "uniform")
"""The paper's arms, run when ``--arms`` is not given."""


COMPUTE_FIELDS = (
    "rollouts",
    "tasks_per_epoch",
    "steps_per_epoch",
    "update_epochs",
    "lr",
    "minibatch",
    "temperature",
    "max_new_tokens",
    "kl_coef",
    "clip",
    "base_levels",
)
"""Agent settings that must be equal in every arm (what one epoch of agent training costs and does)."""


HOW_FIELDS = ("threads", "micro_batch", "logprob_chunk", "gradient_checkpointing")
"""``[runtime]`` settings that change how a run's updates compute, at most by float rounding (`same_run` ignores
them): two seeds run side by side on one thread each belong in one table with a seed run alone on two. The rest
of the runtime part (device, backend, the bfloat16, static and fused switches, the batch sizes, Ray, vLLM) still
tells two runs apart here. The warm-start key reads no runtime setting: arms of one seed start from one warm start
whatever their threads; the tables flag a pair of arms whose epoch-0 agents differ anyway
(`genenv_engine.ablation.runs.warm_start_mismatches`)."""


@dataclass(frozen=True)
class Plan:
    """What one ablation bench runs: arms x seeds, each for ``epochs`` epochs on the same settings."""

    out: Path
    arms: tuple[str, ...] = DEFAULT_ARMS
    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: int | None = None
    preset: str | None = "ablation"
    config_file: Path | None = None
    benchmarks: tuple[str, ...] | None = None
    sets: dict[str, Any] = field(default_factory=dict)
    records: Path | None = None
    """Run records folder (`genenv_engine.ablation.run_records`); None: ``out/records``."""

    def records_folder(self) -> Path:
        """Where this bench writes and reads its run records."""
        return self.records if self.records is not None else self.out / "records"

    def __post_init__(self) -> None:
        for arm in self.arms:
            if arm not in ARMS:
                raise ConfigError("--arms", f"unknown arm {arm!r}; known: {', '.join(ARMS)}")
        if not self.arms or not self.seeds:
            raise ConfigError("--arms/--seeds", "name at least one arm and one seed")


def folder_name(arm: str, seed: int) -> str:
    """The session folder of one arm and seed inside the bench folder.

    >>> folder_name("trained", 2)
    'trained-s2'
    """
    return f"{arm}-s{seed}"


def arm_config(plan: Plan, arm: str, seed: int) -> RunConfig:
    """The run config of one arm x seed: the plan's preset/file and ``--set`` values, then the arm's switch."""
    overrides: dict[str, Any] = dict(plan.sets)
    overrides["seed"] = seed
    if plan.epochs is not None:
        overrides["epochs"] = plan.epochs
    if plan.benchmarks is not None:
        overrides["benchmarks"] = list(plan.benchmarks)
    overrides.update(ARMS[arm][0])
    preset = None if plan.config_file is not None and plan.preset is None else plan.preset
    return load_config(preset, plan.config_file, overrides)


def check_equal_compute(configs: dict[str, RunConfig]) -> dict[str, Any]:
    """Raise ConfigError unless every arm trains the same tasks x rollouts and optimizer steps per epoch.

    Returns the shared agent budget (stated in the bench's output).
    """
    budgets = {arm: {name: getattr(cfg.agent, name) for name in COMPUTE_FIELDS} for arm, cfg in configs.items()}
    first_arm, first = next(iter(budgets.items()))
    if not first["tasks_per_epoch"] or not first["steps_per_epoch"]:
        raise ConfigError(
            "agent.tasks_per_epoch",
            "the arms would get different agent compute: set "
            "agent.tasks_per_epoch and agent.steps_per_epoch (the ablation preset does)",
        )
    for arm, budget in budgets.items():
        for name, value in budget.items():
            if value != first[name]:
                raise ConfigError(
                    f"agent.{name}", f"differs between arms {first_arm} ({first[name]}) and {arm} ({value})"
                )
    cfg = next(iter(configs.values()))
    return {
        **first,
        "rollouts_per_epoch": first["tasks_per_epoch"] * first["rollouts"],
        "heldout_size": cfg.heldout_size,
        "benchmarks": list(cfg.benchmarks),
    }


RWR_FIELDS = ("lr", "passes", "batch_size", "rwr_lambda", "kl_coef", "max_kl", "replay", "init_replay", "repairs")
"""Simulator settings that only its update reads: a run whose simulator is never updated (every mode but
``trained``) is the same run whatever they are."""


def same_run(saved: RunConfig, wanted: RunConfig) -> bool:
    """Whether a session folder was made with the settings this plan asks for (the epoch count and the preset's
    name may differ: a preset is a named set of settings, so `--preset smol-ablation --set …` can equal `smol-l3`;
    so may the `HOW_FIELDS`, and the `RWR_FIELDS` of a run that never updates its simulator).

    >>> frozen = load_config("tiny", overrides={"simulator.mode": "frozen"})
    >>> same_run(frozen, load_config("tiny", overrides={"simulator.mode": "frozen", "simulator.passes": 1}))
    True
    >>> same_run(load_config("tiny"), load_config("tiny", overrides={"simulator.passes": 1}))
    False
    """
    a, b = saved.to_dict(), wanted.to_dict()
    for d in (a, b):
        d.pop("epochs", None)
        d.pop("preset", None)
        for name in HOW_FIELDS:
            d.get("runtime", {}).pop(name, None)
        simulator = d.get("simulator", {})
        if simulator.get("mode") != "trained":
            for name in RWR_FIELDS:
                simulator.pop(name, None)
    return a == b
