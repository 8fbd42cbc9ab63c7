"""The checks of every config section: each raises `ConfigError` naming the field (``curriculum.alpha`` ...) when
a value is out of range, not one of its choices, or changed from its default while the setting it depends on is
off.

One function per section dataclass, called from its ``__post_init__``, so a config is checked when it is built;
`check_model_paths` and `check_data_paths` look at the file system and run only where a run starts.
"""

from __future__ import annotations

from dataclasses import MISSING
from pathlib import Path
from typing import TYPE_CHECKING, Any

from genenv_engine.config.choices import (
    BASE_SOURCES,
    CURRICULUM_FILTERS,
    CURRICULUM_REWARDS,
    DEVICES,
    DTYPES,
    INFERENCE_DTYPES,
    LEVEL_SAMPLERS,
    MODEL_KINDS,
    SEED_SAMPLINGS,
    SIMULATOR_MODES,
    SIMULATOR_PROMPTS,
    TRAIN_FORWARDS,
    TUNINGS,
)
from genenv_engine.core.errors import ConfigError

if TYPE_CHECKING:
    from genenv_engine.config.run import RunConfig
    from genenv_engine.config.runtime import RayConfig, RuntimeConfig, VLLMConfig
    from genenv_engine.config.sections import (
        AgentConfig,
        CurriculumConfig,
        ModelConfig,
        SimulatorConfig,
        WarmStartConfig,
    )


def check(ok: bool, name: str, message: str) -> None:
    """Raise `ConfigError` for the field ``name`` unless ``ok``.

    >>> check(True, "epochs", "must be >= 0")
    >>> check(False, "epochs", "must be >= 0")
    Traceback (most recent call last):
    ...
    genenv_engine.core.errors.ConfigError: config error in 'epochs': must be >= 0
    """
    if not ok:
        raise ConfigError(name, message)


def default_of(cls: type, name: str) -> Any:
    """The default value of the dataclass field ``name`` of ``cls``."""
    spec = cls.__dataclass_fields__[name]  # type: ignore[attr-defined]
    return spec.default if spec.default is not MISSING else spec.default_factory()


def check_levels(levels: tuple[int, ...], name: str) -> None:
    """Difficulty levels must be positive integers (``[3, 4]``)."""
    check(
        all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in levels),
        name,
        f"must be a list of positive integer levels such as [3, 4], got {list(levels)!r}",
    )


def check_model(model: ModelConfig) -> None:
    """The ``[model]`` section."""
    check(model.kind in MODEL_KINDS, "model.kind", f"must be one of {', '.join(MODEL_KINDS)}; got {model.kind!r}")
    if model.kind == "hf":
        check(bool(model.path), "model.path", "is required when model.kind = 'hf'")
    check(
        model.path is None or model.kind == "hf",
        "model.path",
        f"is read only when model.kind = 'hf' (model.kind is {model.kind!r})",
    )
    check(
        not model.hub_download or model.kind == "hf",
        "model.hub_download",
        f"applies to model.path, read only when model.kind = 'hf' (model.kind is {model.kind!r})",
    )
    for name in ("agent_tuning", "simulator_tuning"):
        check(
            getattr(model, name) in TUNINGS, f"model.{name}", f"must be 'full' or 'lora', got {getattr(model, name)!r}"
        )
    for role in ("agent", "simulator"):
        own = model.agent_path if role == "agent" else model.simulator_path
        check(
            not (model.tuning(role) == "lora" and model.kind == "tiny" and not own),
            f"model.{role}_tuning",
            "LoRA needs a pretrained base (model.kind = 'hf' or 'smollm2', or a role path); "
            "a tiny model is trained from scratch",
        )
    check(model.dtype in DTYPES, "model.dtype", f"must be one of {', '.join(DTYPES)}; got {model.dtype!r}")
    for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size", "max_length", "lora_r", "lora_alpha"):
        check(getattr(model, name) > 0, f"model.{name}", "must be > 0")
    check(model.sft_length_groups >= 0, "model.sft_length_groups", "must be >= 0 (0: off)")
    check(0.0 <= model.lora_dropout < 1.0, "model.lora_dropout", "must be in [0, 1)")
    check(len(model.lora_targets) > 0, "model.lora_targets", "name at least one module")
    check(model.hidden_size % model.num_heads == 0, "model.num_heads", "must divide hidden_size")


def check_runtime(runtime: RuntimeConfig) -> None:
    """The ``[runtime]`` section."""
    check(runtime.threads > 0, "runtime.threads", "must be > 0")
    check(runtime.device in DEVICES, "runtime.device", f"must be one of {', '.join(DEVICES)}; got {runtime.device!r}")
    from genenv_engine.backends import BACKENDS  # deferred: imports the backends' names only

    check(
        runtime.backend in BACKENDS,
        "runtime.backend",
        f"unknown backend {runtime.backend!r}; known: {', '.join(BACKENDS)}",
    )
    check(runtime.micro_batch >= 0, "runtime.micro_batch", "must be >= 0 (0: the whole batch at once)")
    check(runtime.logprob_chunk > 0, "runtime.logprob_chunk", "must be > 0")
    check(
        runtime.train_forward in TRAIN_FORWARDS,
        "runtime.train_forward",
        f"must be {' or '.join(TRAIN_FORWARDS)}; got {runtime.train_forward!r}",
    )
    check(
        runtime.inference_dtype in INFERENCE_DTYPES,
        "runtime.inference_dtype",
        f"must be {' or '.join(INFERENCE_DTYPES)}; got {runtime.inference_dtype!r}",
    )
    if runtime.inference_dtype == "bfloat16" and runtime.device != "cuda":
        from genenv_engine.backends.cpu_load import cpu_bfloat16

        check(
            cpu_bfloat16() or _cuda_present(runtime.device),
            "runtime.inference_dtype",
            "bfloat16 needs a CPU with AVX-512 BF16 or AMX (avx512_bf16 / amx_bf16 in /proc/cpuinfo), or CUDA; "
            "this CPU has neither: use weights",
        )
    check(runtime.rollout_batch >= 0, "runtime.rollout_batch", "must be >= 0 (0: one sampling stream in-process)")
    check(
        runtime.generate_batch >= 0,
        "runtime.generate_batch",
        "must be >= 0 (0: one sampling stream in the controller)",
    )


def _cuda_present(device: str) -> bool:
    """Whether ``device`` (``auto``) resolves to CUDA (torch is imported only here, for this one question)."""
    if device != "auto":
        return False
    import torch

    return torch.cuda.is_available()


def check_model_paths(model: ModelConfig) -> None:
    """Every model folder ``model`` names exists and holds a model (``config.json``, or a PEFT adapter's
    ``adapter_config.json``)."""
    for name in ("path", "agent_path", "simulator_path"):
        value = getattr(model, name)
        if value is None or (name == "path" and (model.kind != "hf" or model.hub_download)):
            continue
        folder = Path(str(value)).expanduser()
        check(
            folder.is_dir(),
            f"model.{name}",
            f"no such folder: {value}" + (" (a hub id needs model.hub_download = true)" if name == "path" else ""),
        )
        check(
            (folder / "config.json").is_file() or (folder / "adapter_config.json").is_file(),
            f"model.{name}",
            f"{value} is not a model folder (no config.json): pass a folder written by save_pretrained",
        )


def check_warm_start(warm: WarmStartConfig) -> None:
    """The ``[warm_start]`` section."""
    for name in ("agent_steps", "simulator_steps"):
        check(getattr(warm, name) >= 0, f"warm_start.{name}", "must be >= 0")
    check(warm.batch_size > 0, "warm_start.batch_size", "must be > 0")
    for name in ("agent_lr", "simulator_lr"):
        check(getattr(warm, name) > 0, f"warm_start.{name}", "must be > 0")
    check_levels(warm.agent_levels, "warm_start.agent_levels")


def check_simulator(sim: SimulatorConfig) -> None:
    """The ``[simulator]`` section."""
    check(
        sim.mode in SIMULATOR_MODES, "simulator.mode", f"must be one of {', '.join(SIMULATOR_MODES)}; got {sim.mode!r}"
    )
    for name in (
        "seeds_per_epoch",
        "variations",
        "max_new_tokens",
        "passes",
        "batch_size",
        "static_multiplier",
        "duplicate_cap",
    ):
        check(getattr(sim, name) > 0, f"simulator.{name}", "must be > 0")
    check(sim.temperature > 0, "simulator.temperature", "must be > 0")
    check(sim.plugin_timeout >= 0, "simulator.plugin_timeout", "must be >= 0 (0: no limit)")
    check(sim.prompt in SIMULATOR_PROMPTS, "simulator.prompt", f"must be one of {', '.join(SIMULATOR_PROMPTS)}")
    check(
        sim.seed_sampling in SEED_SAMPLINGS,
        "simulator.seed_sampling",
        f"must be one of {', '.join(SEED_SAMPLINGS)}, got {sim.seed_sampling!r}",
    )
    check(
        bool(sim.note) and sim.note.replace("_", "").isalnum(),
        "simulator.note",
        f"must name a note strategy (auto, none, success_line, or one a package registers), got {sim.note!r}",
    )
    check(
        not (sim.admit_mended and sim.answer_check),
        "simulator.admit_mended",
        "admits a mended draft on its recomputed gold: it needs simulator.answer_check = false",
    )
    check_levels(sim.seed_levels, "simulator.seed_levels")
    for name in ("lr", "max_kl"):
        check(getattr(sim, name) > 0, f"simulator.{name}", "must be > 0")
    for name in ("rwr_lambda", "kl_coef", "replay", "init_replay"):
        check(getattr(sim, name) >= 0, f"simulator.{name}", "must be >= 0")


def check_agent(agent: AgentConfig) -> None:
    """The ``[agent]`` section."""
    check(agent.rollouts >= 2, "agent.rollouts", "must be >= 2 (GRPO normalises within a group)")
    for name in ("max_new_tokens", "minibatch", "update_epochs"):
        check(getattr(agent, name) > 0, f"agent.{name}", "must be > 0")
    check(agent.replay_tasks >= 0, "agent.replay_tasks", "must be >= 0")
    check(0.0 <= agent.base_fraction <= 1.0, "agent.base_fraction", "must be in [0, 1]")
    check(
        agent.base_source in BASE_SOURCES,
        "agent.base_source",
        f"must be one of {', '.join(BASE_SOURCES)}, got {agent.base_source!r}",
    )
    check(agent.unseen_tasks > 0, "agent.unseen_tasks", "must be > 0")
    check(agent.base_pool >= 0, "agent.base_pool", "must be >= 0 (0: the whole train split)")
    check(
        agent.base_pool == 0 or agent.base_source == "train",
        "agent.base_pool",
        "caps the train base pool; with agent.base_source = 'unseen' set agent.unseen_tasks",
    )
    check(
        agent.unseen_tasks == default_of(type(agent), "unseen_tasks") or agent.base_source == "unseen",
        "agent.unseen_tasks",
        "sizes the unseen base pool: it needs agent.base_source = 'unseen'",
    )
    check_levels(agent.base_levels, "agent.base_levels")
    check(0.0 < agent.success_threshold <= 1.0, "agent.success_threshold", "must be in (0, 1]")
    check(agent.temperature > 0, "agent.temperature", "must be > 0")
    check(agent.lr > 0, "agent.lr", "must be > 0")
    check(0 < agent.clip < 1, "agent.clip", "must be in (0, 1)")
    check(agent.kl_coef >= 0, "agent.kl_coef", "must be >= 0")
    for name in ("tasks_per_epoch", "steps_per_epoch"):
        check(getattr(agent, name) >= 0, f"agent.{name}", "must be >= 0 (0: not fixed)")


def check_curriculum(curriculum: CurriculumConfig) -> None:
    """The ``[curriculum]`` section."""
    check(
        curriculum.reward in CURRICULUM_REWARDS,
        "curriculum.reward",
        f"must be one of {', '.join(CURRICULUM_REWARDS)}, got {curriculum.reward!r}",
    )
    check(
        curriculum.filter in CURRICULUM_FILTERS,
        "curriculum.filter",
        f"must be one of {', '.join(CURRICULUM_FILTERS)}, got {curriculum.filter!r}",
    )
    check(0.0 < curriculum.alpha < 1.0, "curriculum.alpha", f"must be in (0, 1), got {curriculum.alpha}")
    for name, value in curriculum.alpha_by_benchmark.items():
        check(0.0 < value < 1.0, f"curriculum.alpha_by_benchmark.{name}", f"must be in (0, 1), got {value}")
    check(curriculum.beta > 0, "curriculum.beta", f"must be > 0, got {curriculum.beta}")
    check(curriculum.k_min >= 0, "curriculum.k_min", f"must be >= 0, got {curriculum.k_min}")
    check(
        curriculum.sampler in LEVEL_SAMPLERS,
        "curriculum.sampler",
        f"must be one of {', '.join(LEVEL_SAMPLERS)}, got {curriculum.sampler!r}",
    )


def check_vllm(vllm: VLLMConfig) -> None:
    """The ``[vllm]`` section."""
    check(0.0 < vllm.gpu_memory_utilization < 1.0, "vllm.gpu_memory_utilization", "must be in (0, 1)")
    check(vllm.chunk_size > 0, "vllm.chunk_size", "must be > 0")


def check_ray(ray: RayConfig) -> None:
    """The ``[ray]`` section."""
    check(
        ray.address == ray.address.strip() and " " not in ray.address,
        "ray.address",
        f"must be '', 'local' or a Ray address such as 'HOST:6379', got {ray.address!r}",
    )
    check(ray.workers > 0, "ray.workers", "must be > 0")
    check(ray.validate_batch > 0, "ray.validate_batch", "must be > 0")
    check(ray.call_timeout >= 0, "ray.call_timeout", "must be >= 0 seconds (0: no limit)")


def check_run(config: RunConfig) -> None:
    """The top level, and the settings of one section that depend on another (its benchmarks named ``all`` already
    expanded to the paper's)."""
    from genenv_engine.environments import BENCHMARKS  # deferred: imports records only

    check(config.epochs >= 0, "epochs", "must be >= 0")
    check(config.heldout_size > 0, "heldout_size", "must be > 0")
    check(len(config.benchmarks) > 0, "benchmarks", "enable at least one benchmark")
    check(len(set(config.benchmarks)) == len(config.benchmarks), "benchmarks", "lists a benchmark twice")
    known = {*BENCHMARKS, *config.environments}  # built in, or found as the config records
    for name, _path in config.data_dirs.items():
        check(name in known, f"data_dirs.{name}", f"unknown benchmark {name!r}")
    for name in config.environments_options:
        check(
            name not in BENCHMARKS,
            f"environments_options.{name}",
            f"{name!r} is a built-in benchmark, which takes no options; options are for plugin environments",
        )
        check(
            name in config.benchmarks,
            f"environments_options.{name}",
            f"unknown benchmark {name!r}; options go to a plugin benchmark the run enables",
        )
    for name in config.benchmarks:
        check(name in known, "benchmarks", f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    sim = config.simulator
    most_fresh = max(sim.seeds_per_epoch * sim.variations, sim.seeds_per_epoch * sim.static_multiplier) * len(
        config.benchmarks
    )
    check(
        config.agent.tasks_per_epoch in (0,) or config.agent.tasks_per_epoch >= most_fresh,
        "agent.tasks_per_epoch",
        f"must be 0 or at least the most fresh tasks an epoch can bring ({most_fresh}: seeds_per_epoch x "
        "max(variations, static_multiplier) x benchmarks), so fresh tasks are never dropped",
    )
    check(
        config.curriculum.sampler == default_of(type(config.curriculum), "sampler") or sim.mode == "sampler",
        "curriculum.sampler",
        "picks the levels of sampler mode: it needs simulator.mode = 'sampler'",
    )
    for name in config.curriculum.alpha_by_benchmark:
        check(name in known, f"curriculum.alpha_by_benchmark.{name}", f"unknown benchmark {name!r}")


def check_data_paths(config: RunConfig) -> None:
    """Every upstream data path of ``data_dirs`` exists."""
    for name, path in config.data_dirs.items():
        check(Path(path).expanduser().exists(), f"data_dirs.{name}", f"no such file or folder: {path}")
