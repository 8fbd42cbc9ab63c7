"""Where each role's weights come from: building them for the warm start and loading them from checkpoints.

A role starts from its own checkpoint (``model.agent_path`` / ``model.simulator_path``) or from the
run's base (a tiny model built from the config, a local folder, or the converted SmolLM2). A
``full`` role is a whole model of its own; a ``lora`` role is a named PEFT adapter on its base, and
LoRA roles with the same base share one model in memory. As in the paper the simulator starts from
the warm-started agent unless it has its own checkpoint: a copied adapter when both are LoRA on one
base, the agent's weights (merged with its adapter if it has one) when the simulator is full, and a
fresh adapter on the base otherwise.
"""

from __future__ import annotations

from pathlib import Path

from genenv_engine.config import ConfigError, ModelConfig, RuntimeConfig
from genenv_engine.training.policy import (
    Policy,
    build_tiny_model,
    inference_options,
    load_model,
    pick_device,
    pick_dtype,
)

ROLES = ("agent", "simulator")


def base_folder(cfg: ModelConfig) -> Path | None:
    """The run's base checkpoint folder (None for a tiny model built from the config)."""
    if cfg.kind == "hf":
        local = Path(str(cfg.path)).expanduser()
        if cfg.hub_download and not local.is_dir():  # a hub id, fetched once into the hub cache
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(str(cfg.path)))
        return local
    if cfg.kind == "smollm2":
        from genenv_engine.training.smollm2 import smollm2_checkpoint

        return smollm2_checkpoint()
    return None


def role_source(cfg: ModelConfig, role: str) -> Path | None:
    """The checkpoint a role starts from: its own path, else the base."""
    own = cfg.agent_path if role == "agent" else cfg.simulator_path
    return Path(own).expanduser() if own else base_folder(cfg)


class _Loader:
    """Loads role models once per folder: LoRA roles on the same base share one PeftModel."""

    def __init__(self, cfg: ModelConfig, runtime: RuntimeConfig) -> None:
        self.cfg = cfg
        self.runtime = runtime
        self.device = pick_device(runtime.device)
        self.dtype = pick_dtype(cfg.dtype, self.device)
        self.shared: dict[Path, object] = {}

    def full(self, folder: Path) -> Policy:
        pol = Policy.load(
            folder,
            self.device,
            self.cfg.max_length,
            self.dtype,
            self.runtime.logprob_chunk,
            **inference_options(self.runtime),
        )
        _prepare(pol.model, self.runtime)
        return pol

    def lora(
        self, base: Path, tokenizer_folder: Path, adapter: str, adapter_folder: Path | None, trainable: bool = True
    ) -> Policy:
        """Policy for adapter ``adapter`` on ``base``: loaded from ``adapter_folder`` or new (zero update)."""
        from genenv_engine.training.adapters import load_adapter, new_adapter
        from genenv_engine.training.tokenizer import load_tokenizer

        model = self.shared.get(base)
        if model is None:
            model = load_model(base, self.device, self.dtype)
        if adapter_folder is not None:
            model = load_adapter(model, adapter_folder, adapter, trainable)
        else:
            model = new_adapter(model, adapter, self.cfg)
        if base not in self.shared:
            _prepare(model, self.runtime)
        self.shared[base] = model
        return Policy(
            model,
            load_tokenizer(tokenizer_folder),
            self.device,
            self.cfg.max_length,
            adapter=adapter,
            source=base,
            frozen=not trainable,
            logprob_chunk=self.runtime.logprob_chunk,
            **inference_options(self.runtime),
        )


def _prepare(model, runtime: RuntimeConfig) -> None:
    if runtime.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def warmstart_agent(cfg: ModelConfig, runtime: RuntimeConfig, seed: int) -> Policy:
    """The agent before its warm start: the tiny model, its checkpoint, or a new adapter on it."""
    loader = _Loader(cfg, runtime)
    source = role_source(cfg, "agent")
    if source is None:
        from genenv_engine.training.tokenizer import build_byte_tokenizer

        tok = build_byte_tokenizer()
        model = build_tiny_model(cfg, tok, seed).to(loader.dtype)
        _prepare(model, runtime)
        return Policy(
            model,
            tok,
            loader.device,
            cfg.max_length,
            logprob_chunk=runtime.logprob_chunk,
            **inference_options(runtime),
        )
    if cfg.agent_tuning == "lora":
        return loader.lora(source, source, "agent", None)
    return loader.full(source)


def load_warm_agent(cfg: ModelConfig, runtime: RuntimeConfig, folder: Path) -> Policy:
    """A warm-started agent saved in ``folder``, trainable as `warmstart_agent` left it after its SFT (the
    simulator's warm start can then start from it in a later run)."""
    loader = _Loader(cfg, runtime)
    source = role_source(cfg, "agent")
    if source is not None and cfg.agent_tuning == "lora":
        return loader.lora(source, folder, "agent", folder)
    return loader.full(folder)


def warmstart_simulator(cfg: ModelConfig, runtime: RuntimeConfig, agent: Policy, agent_folder: Path) -> Policy:
    """The simulator before its warm start (see the module docstring for where it starts from)."""
    loader = _Loader(cfg, runtime)
    if agent.adapter is not None:
        loader.shared[agent.source] = agent.model  # type: ignore[index]
    own = cfg.simulator_path is not None
    source = role_source(cfg, "simulator")
    if cfg.simulator_tuning == "lora":
        assert source is not None
        if not own and agent.adapter is not None and agent.source == source:
            from genenv_engine.training.adapters import copy_adapter

            copy_adapter(agent.model, agent.adapter, "simulator", trainable=True)
            return agent.sibling("simulator")
        return loader.lora(source, source, "simulator", None)
    if own:
        return loader.full(source)  # type: ignore[arg-type]
    if agent.adapter is None:
        return loader.full(agent_folder)
    # a full simulator from a LoRA agent: the agent's base with its adapter merged in
    from genenv_engine.training.adapters import load_adapter
    from genenv_engine.training.tokenizer import load_tokenizer

    merged = load_adapter(
        load_model(agent.source, loader.device, loader.dtype),
        agent_folder,
        "agent",  # type: ignore[arg-type]
        trainable=False,
    ).merge_and_unload()
    _prepare(merged, runtime)
    return Policy(
        merged,
        load_tokenizer(agent_folder),
        loader.device,
        cfg.max_length,
        logprob_chunk=runtime.logprob_chunk,
        **inference_options(runtime),
    )


AGENT_INFO = "agent.json"
"""Warm-start marker: the entry's agent is trained (its figures and the Python random state the simulator's SFT
continues from)."""
TORCH_RNG = "rng.pt"
"""Warm-start file: the torch random states (CPU, and each CUDA device) as the agent's SFT left them."""
DONE = "info.json"
"""Warm-start marker: the entry is finished, both roles trained."""


def is_agent_only(folder: Path) -> bool:
    """Whether ``folder`` is a stage-1 warm start (`genenv_engine.training.warmstart`): an agent and no finished marker.
    A checkpoint, or a finished warm start missing ``simulator/``, is not one."""
    return (folder / AGENT_INFO).exists() and not (folder / DONE).exists()


def load_role_policies(cfg: ModelConfig, runtime: RuntimeConfig, here: Path, init: Path) -> dict[str, Policy]:
    """Both roles as saved in checkpoint ``here``, and their frozen references from warm start ``init``.

    Keys: ``agent``, ``agent_ref``, ``simulator``, ``simulator_ref``. A role saved as an adapter is
    loaded onto its base; a full role is loaded whole. An agent-only warm start
    (`is_agent_only`) gives the simulator role the agent's weights.
    """
    from genenv_engine.training.adapters import is_adapter_folder

    loader = _Loader(cfg, runtime)
    out: dict[str, Policy] = {}
    for role in ROLES:
        folder, ref, source_role = here / role, init / role, role
        if role == "simulator" and here == init and is_agent_only(here):
            # a run without a simulator: the simulator is the agent's copy, as it is before its own SFT, never used
            folder, ref, source_role = here / "agent", here / "agent", "agent"
        if is_adapter_folder(folder):
            source = role_source(cfg, source_role)
            if source is None:
                raise ConfigError(
                    f"model.{role}_tuning", f"{folder} holds an adapter but the run has no base checkpoint"
                )
            out[role] = loader.lora(source, folder, role, folder)
            out[f"{role}_ref"] = loader.lora(source, folder, f"{role}_ref", ref, trainable=False)
            continue
        out[role] = loader.full(folder)
        if here == init:  # the reference is the weights just loaded: copy instead of reading them again
            out[f"{role}_ref"] = out[role].frozen_copy()
        else:
            out[f"{role}_ref"] = loader.full(ref).frozen_copy()
    return out
