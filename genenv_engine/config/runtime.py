"""The runtime part of the config: how and where a run computes, never what the method is. ``[runtime]``
(`RuntimeConfig`: threads, device, the generation backend, batch sizes, the fused, static and bfloat16 switches),
``[ray]`` (`RayConfig`: where the rollouts and the drafts' validation run) and ``[vllm]`` (`VLLMConfig`: the vllm
backend's options), each a frozen dataclass with a docstring per field, checked when built
(`genenv_engine.config.checks`).

A runtime setting changes speed, memory and the machine a run needs; the numbers a run gives may differ by float
rounding (threads, micro-batches, the fused forward), by the precision of the passes without gradients
(``inference_dtype``) or by how the sampling streams are cut (``rollout_batch``, ``generate_batch``), never by what
the method does. The warm-start cache key (`genenv_engine.training.warmstart.cache.cache_key`) reads none of them:
a warm start is made for the method's settings, whatever runtime trained it. `RUNTIME_TABLES` names the tables
of the part.
"""

from __future__ import annotations

from dataclasses import dataclass

from genenv_engine.config.checks import check_ray, check_runtime, check_vllm

RUNTIME_TABLES = ("runtime", "vllm", "ray")
"""The TOML tables of the runtime part (`RunConfig` fields); every other table and top-level setting is the
method's."""


@dataclass(frozen=True)
class RuntimeConfig:
    """How a run computes: torch threads, device, the generation backend, the sizes its work is cut into, and the
    switches of faster arithmetic. None of it changes what the method does (see the module docstring); a session's
    ``config.toml`` keeps it, so a run that must pair with committed records can use the records' runtime."""

    threads: int = 2
    """torch intra-op CPU threads (some counts change float rounding: a run is the same method on any count)."""
    device: str = "auto"
    """``auto`` (CUDA when present, else CPU), ``cpu`` or ``cuda``."""
    backend: str = "hf"
    """Generation backend by name (``hf``; ``vllm`` with the gpu extra, its options in ``[vllm]``)."""
    micro_batch: int = 0
    """Sequences per forward/backward pass; gradients of an optimizer step accumulate over micro-batches (0: all).
    The same gradient up to float rounding."""
    logprob_chunk: int = 2048
    """Completion tokens per chunk of the log-prob gather: full-vocabulary logits exist for one chunk at a time."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, about a third more compute)."""
    train_forward: str = "fused"
    """The decoder forward of the updates and log-prob passes: ``transformers`` (the library's modules) or ``fused``
    (`genenv_engine.training.fused_llama`: a hand-written forward of LoRA-tuned float32 Llama models such as SmolLM2,
    with fewer, larger operations; models it does not serve keep the transformers forward, so ``fused``, the
    default, changes nothing for them). It computes the same model, equal up to float rounding (as threads and
    micro-batches are), so it is a runtime setting and a warm start made with either forward serves both. It keeps a
    stacked copy of the frozen q/k/v and gate/up weights (about 280 MB for SmolLM2-135M). Runs recorded before this
    default ran ``transformers``: their saved configs say so, and a config saved without the setting reads as it."""
    inference_dtype: str = "weights"
    """The dtype of the passes without gradients (decoding, reference and old log-probs, held-out scoring):
    ``weights`` (the weights' own, ``model.dtype``) or ``bfloat16`` (autocast, or bfloat16 decode weights laid out
    once per policy version, over the float32 weights the updates keep); bfloat16 on CPU needs AVX-512 BF16 or
    AMX."""
    static_decode: bool = True
    """Decode every Llama-architecture model (SmolLM2, LoRA roles) on the hand-written static-cache forward, as the
    small ones always are: faster, the same tokens as the transformers forward except where two candidates tie to
    float rounding; ``false`` keeps the transformers forward for the models over 30M parameters (as runs recorded
    before this default did: their saved configs say so, and a config saved without the setting reads as false)."""
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
        check_runtime(self)


@dataclass(frozen=True)
class VLLMConfig:
    """Options of the ``vllm`` generation backend (used only when ``runtime.backend = "vllm"``)."""

    gpu_memory_utilization: float = 0.4
    """Share of GPU memory each vLLM engine takes; the rest stays with the trainer (on CPU vLLM sizes its KV cache
    from ``VLLM_CPU_KVCACHE_SPACE`` GiB instead)."""
    enforce_eager: bool = True
    """Run without CUDA graphs (faster start, no capture memory)."""
    chunk_size: int = 128
    """Prompts per vLLM call; the pause/stop check runs between calls."""

    def __post_init__(self) -> None:
        check_vllm(self)


@dataclass(frozen=True)
class RayConfig:
    """Where the agent's rollouts and the validation of the simulator's drafts run: in this process, or on Ray
    worker actors (the ``ray`` extra). Every setting but ``address`` applies to Ray runs only."""

    address: str = ""
    """``""``: in this process (the default); ``"local"``: on the workers of a new local Ray instance; or the
    address of a running Ray cluster (``"HOST:6379"``, ``"ray://HOST:10001"``). With ``runtime.generate_batch``
    set, the drafts' generation runs on the workers too; the controller keeps every phase (``genenv run --ray
    local|ADDRESS``)."""
    workers: int = 2
    """Ray worker actors (> 0), each holding a copy of the agent with its generation backend, the checkers and
    validators, and (with ``runtime.generate_batch`` set) a copy of the simulator with its own backend."""
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
    own fault already fail deterministically (search budgets and size caps, `genenv_engine.core.limits`); and a
    retried batch has the same seed and weights, so it gives exactly what the first attempt would have. In-process
    calls are not limited; set it well above a batch's normal time."""

    def __post_init__(self) -> None:
        check_ray(self)
