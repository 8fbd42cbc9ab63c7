"""A trained role out of a session as a plain Hugging Face folder (``genenv export-model``).

A session keeps each role of each epoch inside ``checkpoints/epoch_NNN/<role>``: a whole model
(``save_pretrained``) for full fine-tuning, or a PEFT adapter for LoRA, each with its tokenizer. `export_model`
copies the chosen one out of the session after checking the checkpoint's manifest, so it loads with
``AutoModelForCausalLM.from_pretrained`` (or, for an adapter, ``peft.AutoPeftModelForCausalLM`` on its base), and
with ``merge`` folds a LoRA adapter into its base weights (``merge_and_unload``) so the result is a whole model
that vLLM can serve. The optimizer states stay in the session. The folder is written beside ``out`` and renamed
into place: a failed export leaves nothing half-written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

ROLES = ("agent", "simulator")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
    "generation_config.json",
)


def export_model(
    session_dir: str | Path, out: str | Path, epoch: int | None = None, role: str = "agent", merge: bool = False
) -> dict[str, Any]:
    """Write ``role``'s weights of ``epoch`` (default: the latest checkpoint) to the new folder ``out``; returns
    what was written (``kind``: ``full``, ``adapter`` or ``merged``, the epoch, the folder)."""
    from genenv_engine.storage.session import Session, SessionError, verify_checkpoint

    if role not in ROLES:
        raise ValueError(f"role must be agent or simulator, got {role!r}")
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} already exists: pass a new folder for the model")
    session = Session.open(session_dir)
    try:
        epochs = session.checkpoint_epochs()
        config = session.config
    finally:
        session.store.close()
    if not epochs:
        raise SessionError(f"{session_dir} has no checkpoint yet: run at least the warm start (epoch 0)")
    epoch = max(epochs) if epoch is None else epoch
    if epoch not in epochs:
        raise SessionError(f"{session_dir} has no checkpoint of epoch {epoch} (it has {', '.join(map(str, epochs))})")
    folder = session.checkpoint_dir(epoch)
    problem = verify_checkpoint(folder)
    if problem:
        raise SessionError(f"{folder} is damaged ({problem}): export another epoch")
    src = folder / role
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if (src / "config.json").is_file():
            kind = "full"
            shutil.copytree(src, tmp)
        elif (src / "adapter_config.json").is_file():
            kind = "merged" if merge else "adapter"
            if merge:
                _merge(config.model, role, src, tmp)
            else:
                shutil.copytree(src, tmp)
        else:
            raise SessionError(f"{src} holds neither a model nor an adapter")
        (tmp / "genenv_export.json").write_text(
            json.dumps(
                {"session": str(Path(session_dir).resolve()), "epoch": epoch, "role": role, "kind": kind}, indent=2
            )
        )
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"kind": kind, "epoch": epoch, "role": role, "folder": str(out)}


def _merge(model_cfg, role: str, adapter_folder: Path, tmp: Path) -> None:
    """Fold the adapter into a fresh copy of its base and save the whole model with the role's tokenizer."""
    import torch
    from peft import PeftModel

    from genenv_engine.training.models import role_source
    from genenv_engine.training.policy import load_model, quiet_transformers

    quiet_transformers()
    base = role_source(model_cfg, role)
    if base is None:
        raise ValueError("a tiny model has no base to merge into (its roles are whole models)")
    model = load_model(base, torch.device("cpu"), torch.float32)
    merged = PeftModel.from_pretrained(model, str(adapter_folder)).merge_and_unload()
    merged.save_pretrained(str(tmp))
    for name in TOKENIZER_FILES:
        if (adapter_folder / name).is_file():
            shutil.copy2(adapter_folder / name, tmp / name)
