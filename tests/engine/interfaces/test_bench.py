"""`genenv bench update-memory` on a small local checkpoint: each setting runs one real update in its own process."""

from __future__ import annotations

import json
import subprocess
import sys

from genenv_engine.config import ModelConfig
from genenv_engine.training.policy import build_tiny_model
from genenv_engine.training.tokenizer import build_byte_tokenizer


def test_update_memory_reports_one_step_per_setting(tmp_path):
    tok = build_byte_tokenizer()
    build_tiny_model(
        ModelConfig(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128), tok, 0
    ).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "genenv_engine.interfaces.cli",
            "bench",
            "update-memory",
            "--model",
            str(tmp_path),
            "--batch",
            "8",
            "--seq",
            "32",
            "--setting",
            "0:0",
            "--setting",
            "2:16:gc",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.strip().splitlines()]
    assert [(r["micro_batch"], r["logprob_chunk"], r["gradient_checkpointing"]) for r in rows] == [
        (0, 0, False),
        (2, 16, True),
    ]
    for r in rows:
        assert r["steps"] == 1.0 and r["batch"] == 8 and r["seq"] == 32
        assert r["peak_rss_mb"] >= r["after_load_mb"] > 0 and r["seconds"] > 0
