"""PEFT LoRA adapters for the roles: several named adapters on one base model, saved in standard PEFT format.

With LoRA tuning the agent and the simulator are adapters named ``agent`` and ``simulator`` on one
``PeftModel``; their frozen references (the warm-start weights) are two more adapters,
``agent_ref`` and ``simulator_ref``, so four role views cost one base model in memory. Each adapter
is saved alone as ``adapter_config.json`` + ``adapter_model.safetensors``, which plain
``PeftModel.from_pretrained(base, folder)`` reloads.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch

from genenv_engine.config import ModelConfig

ADAPTER_FILE = "adapter_config.json"


def is_adapter_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a PEFT adapter (rather than a full checkpoint)."""
    return (Path(folder) / ADAPTER_FILE).is_file()


def lora_config(cfg: ModelConfig):
    """The ``peft.LoraConfig`` of the run's adapters (causal LM, no bias)."""
    from peft import LoraConfig

    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=list(cfg.lora_targets),
        bias="none",
        task_type="CAUSAL_LM",
    )


def new_adapter(model, name: str, cfg: ModelConfig):
    """Add a freshly initialised LoRA adapter ``name`` (B = 0, so the model is unchanged); returns the PeftModel."""
    from peft import PeftModel, get_peft_model

    if isinstance(model, PeftModel):
        model.add_adapter(name, lora_config(cfg))
        return model
    return get_peft_model(model, lora_config(cfg), adapter_name=name)


def load_adapter(model, folder: Path, name: str, trainable: bool):
    """Load the adapter saved in ``folder`` under ``name``; returns the PeftModel."""
    from peft import PeftModel

    if isinstance(model, PeftModel):
        model.load_adapter(str(folder), adapter_name=name, is_trainable=trainable)
        return model
    return PeftModel.from_pretrained(model, str(folder), adapter_name=name, is_trainable=trainable)


def copy_adapter(model, source: str, target: str, trainable: bool) -> None:
    """Create adapter ``target`` on ``model`` holding a copy of adapter ``source``'s weights."""
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    model.add_adapter(target, model.peft_config[source])
    state = {k: v.detach().clone() for k, v in get_peft_model_state_dict(model, adapter_name=source).items()}
    set_peft_model_state_dict(model, state, adapter_name=target)
    for param in adapter_parameters(model, target):
        param.requires_grad_(trainable)


def adapter_parameters(model, name: str) -> list[torch.nn.Parameter]:
    """The parameters of adapter ``name`` (LoRA A and B matrices of every targeted module)."""
    marker = f".{name}."
    return [p for n, p in model.named_parameters() if marker in n]


def save_adapter(model, name: str, folder: Path) -> None:
    """Write adapter ``name`` alone into ``folder`` in standard PEFT format."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        model.save_pretrained(tmp, selected_adapters=[name])
        written = Path(tmp) / name if (Path(tmp) / name).is_dir() else Path(tmp)  # non-default names go in a subfolder
        for item in written.iterdir():
            if item.is_file():
                shutil.move(str(item), str(folder / item.name))
