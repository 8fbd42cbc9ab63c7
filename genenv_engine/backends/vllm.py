"""The ``vllm`` backend: batched sampling with ``vllm.LLM``, weights pushed to the engine after updates.

vLLM is optional (the ``gpu`` extra on CUDA machines, ``scripts/install_vllm_cpu.sh`` on CPU) and is
imported by name inside functions (`_vllm`), never when this module loads; the engine's import contract
forbids a static ``import vllm``.

Two kinds of policy:

- **LoRA** (``policy.adapter`` set): one ``vllm.LLM`` per base folder (``policy.source``) and options,
  shared by the roles that adapt that base (agent and simulator), started with ``enable_lora``. Each
  request carries a ``LoRARequest(name, int_id, folder)``. `VLLMBackend.sync` writes the role's adapter
  (``policy.save_adapter``) into a fresh folder under a **new** int id: vLLM caches adapters by id, so a
  new id makes it read the new weights; the base is never merged or reloaded.
- **Full** (``policy.adapter`` is None): an engine of its own, started from ``policy.source`` (or from a
  save of the policy when it has none). `sync` saves the whole model (``policy.save``) into a fresh folder
  and has every vLLM worker reload its weights in place from that folder (`WeightSync`, a worker
  extension called through ``collective_rpc``: vLLM's own ``reload_weights(weights_path=...)``, which
  redoes the post-load processing such as the CPU backend's weight repacking, plus a refresh of the tied
  output layer that the CPU build misses), then clears the prefix cache. That costs one full save and
  load per update (seconds for small models, much more for billions of parameters) but no engine restart.

Prompts are encoded with the policy's tokenizer and truncated from the left to ``max_length -
max_new_tokens`` tokens, as in the ``hf`` backend, and passed to vLLM as token ids; completions are
decoded with the policy's tokenizer too. A grammar (``Sampling.grammar``) goes to vLLM's structured outputs. Log-probs
are those of the sampled tokens after temperature
(``logprobs_mode="processed_logprobs"``), like the ``hf`` backend's.
"""

from __future__ import annotations

import importlib
import itertools
import shutil
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from genenv_engine.backends.base import Completion, Sampling

_ENGINES: dict[tuple, Any] = {}
"""Shared LoRA engines, keyed by (resolved base folder, engine options)."""

_LORA_IDS = itertools.count(1)
"""LoRA int ids, unique in this process (vLLM caches adapters by id)."""


def _vllm():
    """The ``vllm`` module, imported on first use."""
    return importlib.import_module("vllm")


def _structured_outputs(grammar: str):
    """vLLM's structured-output request for a Lark ``grammar`` (its ``guidance`` backend is llguidance, the
    library of the hf backend's masks; ``auto`` picks it for Lark grammars xgrammar cannot take)."""
    return importlib.import_module("vllm.sampling_params").StructuredOutputsParams(grammar=grammar)


def _lora_request_cls():
    return importlib.import_module("vllm.lora.request").LoRARequest


class WeightSync:
    """vLLM worker extension (``worker_extension_cls``) for full-model syncs.

    `genenv_reload_weights` runs the worker's ``reload_weights(weights_path=...)`` and then rebuilds the
    CPU GEMM handles of layers that keep their weight next to a prepacked copy. vLLM 0.32 on CPU misses
    these for a tied output layer: ``lm_head`` shares the reloaded embedding tensor but no weight is
    loaded into it, so its oneDNN copy stays at the old values (observed: a changed EOS row had no effect
    on sampling until this refresh). On GPU no layer has such a copy and the refresh does nothing.
    """

    def genenv_reload_weights(self, folder: str) -> int:
        """Reload the weights from ``folder``; returns how many prepacked CPU layers were refreshed."""
        self.reload_weights(weights_path=folder)  # type: ignore[attr-defined]
        refreshed = 0
        for module in self.model_runner.get_model().modules():  # type: ignore[attr-defined]
            method, weight = getattr(module, "quant_method", None), getattr(module, "weight", None)
            if hasattr(module, "cpu_linear") and method is not None and getattr(weight, "numel", lambda: 0)():
                method.process_weights_after_loading(module)
                refreshed += 1
        return refreshed


WEIGHT_SYNC = f"{__name__}.{WeightSync.__name__}"
"""The worker extension's dotted path, as vLLM resolves it in its worker processes."""


def _lora_rank(rank: int | None, wanted: int | None) -> int:
    """The engine's ``max_lora_rank``: the requested one, else the adapter's rank rounded up to vLLM's sizes."""
    if wanted is not None:
        return wanted
    for size in (8, 16, 32, 64, 128, 256, 320, 512):
        if size >= (rank or 8):
            return size
    raise ValueError(f"LoRA rank {rank} is larger than vLLM supports")


def _dtype(policy) -> str:
    """The dtype name of the policy's weights (``float32``, ``bfloat16``...), ``auto`` when unknown."""
    for param in policy.model.parameters():
        return str(param.dtype).removeprefix("torch.")
    return "auto"


def shared_engines() -> dict[tuple, Any]:
    """The live shared LoRA engines (for inspection and tests)."""
    return _ENGINES


def close_engines() -> None:
    """Drop every shared engine (vLLM shuts its engine process down when the ``LLM`` is collected)."""
    _ENGINES.clear()


class VLLMBackend:
    """Generation through ``vllm.LLM.generate`` for a `genenv_engine.training.policy.Policy` (LoRA or full)."""

    def __init__(
        self,
        policy,
        *,
        gpu_memory_utilization: float = 0.4,
        enforce_eager: bool = True,
        max_lora_rank: int | None = None,
        max_loras: int = 2,
        dtype: str | None = None,
        chunk_size: int = 128,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        """``gpu_memory_utilization`` is the share of GPU memory each engine takes (the rest stays with the
        trainer; two full-model roles start two engines, one shared LoRA engine counts once; vLLM on CPU
        sizes its KV cache from ``VLLM_CPU_KVCACHE_SPACE`` GiB instead). ``chunk_size`` prompts go to vLLM
        per call and ``tick`` runs between calls, so a pause or stop lands after at most one chunk. ``engine_kwargs``
        go to
        ``vllm.LLM`` as they are and win over the options derived here. ``dtype`` None runs the engine in the
        dtype of the policy's weights (vLLM's own ``auto`` would downcast a float32 checkpoint)."""
        self.policy = policy
        self.chunk_size = chunk_size
        self.tokens_generated = 0
        self.tick: Callable[[], None] | None = None
        """Called between chunks of prompts (the loop sets its pause/stop check here)."""
        self.adapter: str | None = getattr(policy, "adapter", None)
        self._workdir = Path(tempfile.mkdtemp(prefix=f"genenv-vllm-{self.adapter or 'full'}-"))
        weakref.finalize(self, shutil.rmtree, self._workdir, True)  # synced weights are scratch
        self._version = 0
        self._folder: Path | None = None
        self.lora_id: int | None = None
        options: dict[str, Any] = dict(
            gpu_memory_utilization=gpu_memory_utilization,
            enforce_eager=enforce_eager,
            dtype=dtype or _dtype(policy),
            max_model_len=policy.max_length,
            logprobs_mode="processed_logprobs",
        )
        if self.adapter is not None:
            if getattr(policy, "source", None) is None:
                raise ValueError("a LoRA policy needs policy.source (its base model folder) for the vllm backend")
            options.update(
                enable_lora=True,
                max_loras=max_loras,
                max_lora_rank=_lora_rank(getattr(policy, "lora_rank", None), max_lora_rank),
            )
            options.update(engine_kwargs or {})
            base = str(Path(policy.source).resolve())
            key = (base, tuple(sorted((k, repr(v)) for k, v in options.items())))
            if key not in _ENGINES:
                _ENGINES[key] = _vllm().LLM(model=base, **options)
            self.llm = _ENGINES[key]
            self.sync()
        else:
            source = getattr(policy, "source", None)
            if source is None:  # built in memory: start from a save of it (deleted at the next sync)
                source = self._folder = self._fresh_folder()
                policy.save(source)
            options.update(worker_extension_cls=WEIGHT_SYNC)
            options.update(engine_kwargs or {})
            self.llm = _vllm().LLM(model=str(source), **options)

    def _fresh_folder(self) -> Path:
        self._version += 1
        folder = self._workdir / f"v{self._version:05d}"
        folder.mkdir(parents=True)
        return folder

    def sync(self) -> None:
        """Push the policy's current weights to the engine (adapter only for LoRA policies)."""
        folder = self._fresh_folder()
        previous, old_id = self._folder, self.lora_id
        if self.adapter is not None:
            self.policy.save_adapter(folder)
            self.lora_id = next(_LORA_IDS)
            self._remove_lora(old_id)
        else:
            self.policy.save(folder)
            self.llm.collective_rpc("genenv_reload_weights", args=(str(folder),))
            self.llm.reset_prefix_cache()
        self._folder = folder
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)

    def _remove_lora(self, lora_id: int | None) -> None:
        """Free an outdated adapter in the engine (best effort: vLLM would also evict it as least recently used)."""
        engine = getattr(self.llm, "llm_engine", None)
        if lora_id is not None and engine is not None and hasattr(engine, "remove_lora"):
            engine.remove_lora(lora_id)

    def lora_request(self):
        """The ``LoRARequest`` for the adapter's current version (None for full policies)."""
        if self.adapter is None:
            return None
        return _lora_request_cls()(self.adapter, self.lora_id, str(self._folder))

    def sampling_params(self, sampling: Sampling, index: int):
        """vLLM sampling parameters for prompt ``index``: one seed per prompt, so repeated prompts differ; a
        grammar becomes a structured-output request."""
        seed = None if sampling.seed is None else sampling.seed + index
        temperature = 0.0 if sampling.greedy else sampling.temperature
        extra = {} if sampling.grammar is None else {"structured_outputs": _structured_outputs(sampling.grammar)}
        return _vllm().SamplingParams(
            temperature=temperature,
            max_tokens=sampling.max_new_tokens,
            seed=seed,
            logprobs=0,
            stop_token_ids=[self.policy.tokenizer.eos_token_id],
            detokenize=False,
            **extra,
        )

    def prompt_ids(self, prompt: str, sampling: Sampling) -> list[int]:
        """The prompt's token ids, cut from the left to leave room for the completion (as in ``hf``)."""
        budget = max(8, self.policy.max_length - sampling.max_new_tokens)
        return self.policy.encode(prompt)[-budget:]

    def generate(self, prompts: list[str], sampling: Sampling) -> list[Completion]:
        """Sample one completion per prompt, in order; ``tick`` runs before each chunk of prompts."""
        out: list[Completion] = []
        for start in range(0, len(prompts), self.chunk_size):
            if self.tick is not None:
                self.tick()
            chunk = prompts[start : start + self.chunk_size]
            requests = [{"prompt_token_ids": self.prompt_ids(p, sampling)} for p in chunk]
            params = [self.sampling_params(sampling, start + i) for i in range(len(chunk))]
            results = self.llm.generate(requests, params, use_tqdm=False, lora_request=self.lora_request())
            out.extend(self._completion(r.outputs[0]) for r in results)
        return out

    def _completion(self, output) -> Completion:
        eos = self.policy.tokenizer.eos_token_id
        ids = list(output.token_ids)
        lps = [float(step[token].logprob) for token, step in zip(ids, output.logprobs or [], strict=False)]
        finished = output.finish_reason == "stop"
        if ids and ids[-1] == eos:  # vLLM returns the stop token; the hf backend's completions end before it
            ids, lps = ids[:-1], lps[: len(ids) - 1]
        self.tokens_generated += len(ids) + int(finished)
        return Completion(self.policy.tokenizer.decode(ids, skip_special_tokens=True), ids, lps, finished)
