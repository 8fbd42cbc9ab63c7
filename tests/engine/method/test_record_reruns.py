"""A committed record re-run from its own config gives its answers: a one-epoch micro run with LoRA roles on a
local Llama checkpoint (the model family the fused forward and the static decode serve), recorded in
``tests/engine/data/micro-lora-record.json`` with the config it ran under, its held-out and training answers and the
roles' weight fingerprints. The runtime defaults may change (a faster forward, another decode); the record's config
names the runtime it ran on, so a re-run from it is the same run. Regenerate the record (only when a change is meant
to alter it) with ``GENENV_WRITE_RECORD=1 pytest tests/engine/method/test_record_reruns.py``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from genenv_engine.config import ModelConfig, config_from_dict, load_config, replace_config

RECORD = Path(__file__).parents[1] / "data" / "micro-lora-record.json"
BASE = {"hidden_size": 64, "num_layers": 2, "num_heads": 2, "intermediate_size": 128, "max_length": 96}
"""The shape of the local checkpoint standing for a pretrained base (built from seed 3)."""
OVERRIDES = {
    "model.kind": "hf",
    "model.agent_tuning": "lora",
    "model.simulator_tuning": "lora",
    "model.lora_r": 4,
    **{f"model.{key}": value for key, value in BASE.items()},
    "simulator.prompt": "instruct",
    "epochs": 1,
    "heldout_size": 12,
    "warm_start.cache": False,
}


def base_folder(root: Path) -> Path:
    """The local base checkpoint (model and byte tokenizer), built the same way every time."""
    from genenv_engine.training.policy import build_tiny_model
    from genenv_engine.training.tokenizer import build_byte_tokenizer

    folder = root / "base"
    tok = build_byte_tokenizer()
    build_tiny_model(ModelConfig(**BASE), tok, seed=3).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def answers(config, root: Path) -> dict:
    """Run ``config`` in a new session under ``root``: per epoch, the held-out answers, the training rollouts'
    answers and the roles' weight fingerprints."""
    from genenv_engine.method.loop import run
    from genenv_engine.storage.session import Session
    from genenv_engine.testing import scripted_backends

    session = Session.create(config, root / "session")
    assert run(session, backend_factory=scripted_backends(p=0.5, style="instruct")) == {"epochs_done": config.epochs}
    store, metrics = session.store, session.store.epoch_metrics()
    out = {
        str(e): {
            "heldout": [[r["task_id"], r["response"]] for r in store.heldout_rollouts(e)],
            "train": [[r["task_id"], r["response"]] for r in store.train_rollouts(e)],
            "agent_fingerprint": metrics[e]["agent_fingerprint"],
            "simulator_fingerprint": metrics[e].get("simulator_fingerprint"),
        }
        for e in range(config.epochs + 1)
    }
    session.store.close()
    return out


@pytest.mark.slow
def test_the_committed_record_rerun_from_its_config_gives_its_answers(tmp_path):
    base = base_folder(tmp_path)
    if os.environ.get("GENENV_WRITE_RECORD"):
        config = load_config("micro", overrides=OVERRIDES | {"model.path": str(base)})
        table = config.to_dict()
        table["model"]["path"] = "<base>"
        RECORD.write_text(json.dumps({"config": table, "answers": answers(config, tmp_path)}, indent=1) + "\n")
    record = json.loads(RECORD.read_text())
    table = record["config"]
    table["model"]["path"] = str(base)
    config = config_from_dict(table, str(RECORD))
    assert config.runtime.train_forward == "transformers" and not config.runtime.static_decode  # as it ran
    got = answers(config, tmp_path / "rerun")
    for epoch, want in record["answers"].items():
        mine = got[epoch]
        assert mine["heldout"] == want["heldout"], epoch
        assert mine["train"] == want["train"], epoch
        for role in ("agent_fingerprint", "simulator_fingerprint"):
            assert mine[role] == pytest.approx(want[role], rel=1e-9), (epoch, role)
    assert any(text for _, text in record["answers"]["1"]["train"])  # the record holds real decoded text
    today = replace_config(config, runtime=load_config("micro").runtime)
    assert today.runtime != config.runtime or today == config  # the record pins its own runtime either way


def test_a_saved_config_without_a_later_default_reads_as_it_ran():
    """A saved config holds every setting of its version: one saved before the fused forward, the static decode and
    the grouped SFT became defaults lacks them and ran without them; a user's file gets today's defaults."""
    from genenv_engine.config import RunConfig

    table = RunConfig().to_dict()
    for section, key in (("runtime", "train_forward"), ("runtime", "static_decode"), ("model", "sft_length_groups")):
        del table[section][key]
    saved = config_from_dict(table)
    assert (saved.runtime.train_forward, saved.runtime.static_decode, saved.model.sft_length_groups) == (
        "transformers",
        False,
        0,
    )
    today = load_config("tiny").runtime
    assert (today.train_forward, today.static_decode) == ("fused", True)
    assert config_from_dict(RunConfig().to_dict()) == RunConfig()  # a complete table reads as written
