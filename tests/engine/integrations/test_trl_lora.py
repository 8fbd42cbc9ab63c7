"""A LoRA agent under TRL (`genenv_engine.integrations.trl`): ``coevo.model()`` is the session's base with its agent
adapter loaded trainable (the session's LoRA settings), TRL trains the adapter alone, and at the epoch's end TRL's
adapter becomes the session's agent adapter, the base untouched. A small Llama saved in the test is the base (no
downloads), the micro preset's warm start cut to a few steps."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("trl")

from genenv_engine.config import ModelConfig, load_config  # noqa: E402
from genenv_engine.integrations.trl import TrlCoEvolution  # noqa: E402
from genenv_engine.storage.session import Session  # noqa: E402

BASE = {"hidden_size": 64, "num_layers": 2, "num_heads": 2, "intermediate_size": 128, "max_length": 96}


def base_folder(folder: Path) -> Path:
    from genenv_engine.training.policy import build_tiny_model
    from genenv_engine.training.tokenizer import build_byte_tokenizer

    tok = build_byte_tokenizer()
    build_tiny_model(ModelConfig(**BASE), tok, seed=3).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_trl_trains_a_lora_agent_and_its_adapter_becomes_the_sessions(tmp_path):
    from peft import PeftModel, get_peft_model_state_dict
    from safetensors.torch import load_file
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    overrides = {
        "model.kind": "hf",
        "model.path": str(base_folder(tmp_path / "base")),
        "model.agent_tuning": "lora",
        "model.simulator_tuning": "lora",
        "model.lora_r": 4,
        "model.lora_alpha": 8,
        "warm_start.agent_steps": 2,
        "warm_start.simulator_steps": 2,
        "heldout_size": 8,
        "epochs": 1,
    }
    cfg = load_config("micro", overrides=overrides)
    with TrlCoEvolution(tmp_path / "s", config=cfg, steps_per_epoch=1) as coevo:
        model = coevo.model()
        assert isinstance(model, PeftModel) and model.peft_config["default"].r == 4
        trainable = {n for n, p in model.named_parameters() if p.requires_grad}
        assert trainable and all("lora_" in n for n in trainable)  # the adapter alone
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.add_(0.01)  # away from the warm start's adapter, so that adopting it shows
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[coevo.reward],
            args=coevo.grpo_config(
                output_dir=str(tmp_path / "trl"), per_device_train_batch_size=cfg.agent.rollouts, disable_tqdm=True
            ),
            train_dataset=coevo.dataset(),
            processing_class=AutoTokenizer.from_pretrained(coevo.agent_path),
            callbacks=[coevo.callback],
        )
        trainer.train()
    assert coevo.summary == {"epochs_done": 1}
    session = Session.open(tmp_path / "s")
    trained = get_peft_model_state_dict(trainer.model)
    saved = load_file(session.checkpoint_dir(1) / "agent" / "adapter_model.safetensors")
    warm = load_file(session.checkpoint_dir(0) / "agent" / "adapter_model.safetensors")
    assert saved.keys() == trained.keys() == warm.keys()
    assert all(torch.equal(saved[k], trained[k]) for k in saved)
    assert any(not torch.equal(saved[k], warm[k]) for k in saved)
    assert not (session.checkpoint_dir(1) / "agent" / "model.safetensors").exists()  # an adapter, not a whole model
