"""`RunConfig`: everything a co-evolution run needs, its top-level settings and one section per TOML table, in three
parts: the method's settings (the top level, ``[model]``, ``[warm_start]``, ``[simulator]``, ``[agent]``,
``[curriculum]``), the runtime part (``[runtime]``, ``[vllm]``, ``[ray]``: `genenv_engine.config.runtime`) and the
study part (``[study]``: settings only the package that registers them reads).

Built from nested tables by `genenv_engine.config.loading`; checked when built (`genenv_engine.config.checks`,
across sections too: a setting of one section that needs another's), its paths only where a run starts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from genenv_engine.config.checks import check_data_paths, check_run
from genenv_engine.config.choices import DEFAULT_RAY_BATCH
from genenv_engine.config.runtime import RayConfig, RuntimeConfig, VLLMConfig
from genenv_engine.config.sections import (
    AgentConfig,
    CurriculumConfig,
    ModelConfig,
    SimulatorConfig,
    WarmStartConfig,
)
from genenv_engine.config.tables import build, drop_none, merge, nest, renamed


@dataclass(frozen=True)
class RunConfig:
    """Everything a co-evolution run needs; saved as ``config.toml`` beside each session."""

    preset: str = "tiny"
    """Name of the preset the run started from."""
    seed: int = 0
    """Seed for data splits, warm start and sampling."""
    epochs: int = 6
    """Co-evolution epochs after the warm start (epoch 0)."""
    benchmarks: tuple[str, ...] = ("bfcl",)
    """Enabled environments."""
    heldout_size: int = 400
    """Held-out tasks evaluated per benchmark per epoch."""
    data_dirs: dict[str, str] = field(default_factory=dict)
    """Upstream data per benchmark (``{bamboogle = "~/data/bamboogle.csv"}``): its items become the held-out split."""
    environments: dict[str, str] = field(default_factory=dict)
    """How each benchmark that is not built in was found, recorded when the run is configured (name -> ``module
    <module:Class>``, ``entry point <module:Class> from <package> <version>`` or ``adapter rg:<dataset>``): a saved
    session reads without the plugin, and runs only where it imports."""
    environments_options: dict[str, dict[str, Any]] = field(default_factory=dict, metadata={"values": dict})
    """Keyword options per plugin benchmark, passed to its class (``--set environments_options.lineq.max_coef=9``:
    ``Class(seed=..., sizes=..., data_dir=..., max_coef=9)``); recorded with the session, so resuming builds the
    same environment. Built-in benchmarks take none."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """The language model shared by both roles."""
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    """Epoch-0 supervised warm start."""
    simulator: SimulatorConfig = field(default_factory=SimulatorConfig)
    """The environment simulator and its RWR update."""
    agent: AgentConfig = field(default_factory=AgentConfig)
    """The agent and its GRPO update."""
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    """The alpha-curriculum reward and band filter."""
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    """How the run computes: threads, device, backend, batch sizes, faster arithmetic (the runtime part)."""
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    """Options of the vllm backend (the runtime part)."""
    ray: RayConfig = field(default_factory=RayConfig)
    """Where the rollouts and the drafts' validation run: in this process or on Ray workers (the runtime part)."""
    study: dict[str, Any] = field(default_factory=dict, metadata={"values": "setting"})
    """A study's own settings (the study part: ``[study] steer_hold = true``), read only by the package that
    registers them (`genenv_engine.method.strategies.register_settings`), never by the engine's roles or epoch;
    checked against the registered settings where a run resolves its strategies. Empty: none."""

    def __post_init__(self) -> None:
        if tuple(self.benchmarks) == ("all",):
            from genenv_engine.environments import PAPER_BENCHMARKS  # deferred: imports records only

            object.__setattr__(self, "benchmarks", PAPER_BENCHMARKS)
        from genenv_engine.environments import resolve_benchmarks  # deferred: imports a plugin only when named

        names, found = resolve_benchmarks(self.benchmarks, self.environments)
        if names != tuple(self.benchmarks):  # a module:Class or rg: spelling becomes the class's name
            object.__setattr__(self, "benchmarks", names)
        object.__setattr__(self, "environments", found)
        check_run(self)

    def rollout_batch_tasks(self) -> int:
        """Tasks per seeded rollout batch, 0 for the in-process single stream.

        >>> on_ray = RunConfig(ray=RayConfig(address="local"))
        >>> (RunConfig().rollout_batch_tasks(), on_ray.rollout_batch_tasks(),
        ...  RunConfig(runtime=RuntimeConfig(rollout_batch=4)).rollout_batch_tasks())
        (0, 16, 4)
        """
        return self.runtime.rollout_batch or (DEFAULT_RAY_BATCH if self.ray.address else 0)

    def check_paths(self) -> RunConfig:
        """Raise ConfigError unless the model folders, data paths and environment classes this config names exist
        here; returns the config. Called where a run starts (``load_config``, `loop.run`), never at construction, so a
        saved
        session's config.toml reads on any machine (reports, the console's session list)."""
        self.model.check_paths()
        check_data_paths(self)
        from genenv_engine.environments import require

        require(self.benchmarks, self.environments_options)
        return self

    def to_dict(self) -> dict[str, Any]:
        """Return the config as nested plain dicts (TOML-ready: no None values)."""
        table: dict[str, Any] = drop_none(asdict(self))
        return table

    def with_overrides(self, overrides: dict[str, Any]) -> RunConfig:
        """Return a copy with dotted-key overrides applied (``{"curriculum.alpha": 0.4}``)."""
        return build(RunConfig, merge(self.to_dict(), renamed(nest(overrides), "overrides")), "")
