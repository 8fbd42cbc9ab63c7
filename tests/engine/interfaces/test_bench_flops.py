"""The benches' FLOP accounting against a hand count on a tiny config, and the pass tokens it is fed."""

from __future__ import annotations

import pytest
import torch

from genenv_engine.config import ModelConfig, RunConfig
from genenv_engine.interfaces.benches import flops as fl
from genenv_engine.interfaces.benches.epoch import PhaseTokens, add_bounds
from genenv_engine.training import policy as policy_module
from genenv_engine.training.policy import Policy, build_tiny_model
from genenv_engine.training.tokenizer import build_byte_tokenizer

TINY = ModelConfig(hidden_size=32, num_layers=2, num_heads=4, intermediate_size=48, max_length=64)


def test_tiny_model_flops_by_hand():
    shape = fl.model_shape(RunConfig(model=TINY))
    assert shape == fl.Shape(32, 48, 2, 4, 4, 8, 261)
    # per layer: q, k, v, o are 32 x 32 (1,024 weights each), gate and up 32 x 48, down 48 x 32 (1,536 each)
    body = 2 * (4 * 1024 + 3 * 1536)
    assert shape.body() == body == 17_408
    assert shape.head() == 261 * 32
    # the parameters the model really has: body + embeddings (tied head) + norms
    model = build_tiny_model(TINY, build_byte_tokenizer(), seed=0)
    assert sum(p.numel() for p in model.parameters()) == body + 261 * 32 + (2 * 2 + 1) * 32
    full = fl.role_flops(shape, "full", 8, ("q_proj", "v_proj"))
    assert full == fl.RoleFlops(body, 8352, 0, True)
    lora = fl.role_flops(shape, "lora", 8, ("q_proj", "v_proj"))
    assert lora.adapter == 2 * 2 * 8 * (32 + 32)  # layers x targets x rank x (in + out)
    # an SFT step over 100 tokens, the head at 40 of them: forward 2N, backward 4N (full) / 2N + 4 x adapter (LoRA)
    passes = {"forward": 0, "head": 0, "grad_forward": 100, "grad_head": 40}
    assert full.update(passes) == 6 * (body * 100 + 8352 * 40)
    assert lora.update(passes) == (2 * (body + 2048) * 100 + 2 * 8352 * 40) + (
        2 * body * 100 + 2 * 8352 * 40 + 4 * 2048 * 100
    )
    # decoding 10 tokens after 30 prompt tokens: 40 tokens through the body, 10 through the head
    assert full.decode(30, 10) == 2 * body * 40 + 2 * 8352 * 10


def test_log_prob_passes_count_their_tokens(monkeypatch):
    monkeypatch.setattr(policy_module, "PASS_TOKENS", dict.fromkeys(policy_module.PASS_TOKENS, 0))
    tok = build_byte_tokenizer()
    pol = Policy(build_tiny_model(TINY, tok, seed=0), tok, torch.device("cpu"), 64)
    prompts, completions = [[5, 6, 7], [5, 6, 7], [8, 9]], [[10, 11], [12], [13, 14, 15]]
    batch = pol.make_batch(prompts, completions)
    pol.logprobs(batch)  # gradients on: 3 + 2, 3 + 1, 2 + 3 tokens; the head at the 6 completion tokens
    with torch.no_grad():
        pol.row_logprobs(prompts, completions, 8)  # the shared prompt runs once: 3 + 2 + 1, then 2 + 3
    assert policy_module.PASS_TOKENS == {"grad_forward": 14, "grad_head": 6, "forward": 11, "head": 6}


def test_epoch_rows_get_their_bounds():
    counter = PhaseTokens()
    counter.prompted[(1, "rollout")], counter.tokens[(1, "rollout")] = 300, 100
    counter.passes[(1, "agent_update")] = {"forward": 50, "head": 20, "grad_forward": 100, "grad_head": 40}
    role = fl.RoleFlops(1000, 100, 0, True)
    rows = [
        {
            "epoch": 1,
            "phases": {"rollout": {"seconds": 2.0}, "agent_update": {"seconds": 1.0}, "checkpoint": {"seconds": 0.1}},
        }
    ]
    add_bounds(rows, counter, {"agent": role, "simulator": role}, {"float32": 1e6, "bfloat16": None})
    rollout, update = rows[0]["phases"]["rollout"], rows[0]["phases"]["agent_update"]
    assert rollout["model_tokens"] == 400 and rollout["flops"] == 2 * 1000 * 400 + 2 * 100 * 100
    assert rollout["multiple"] == pytest.approx(2.0 / (rollout["flops"] / 1e6), abs=0.01)
    assert update["flops"] == (2 * 1000 * 50 + 2 * 100 * 20) + 6 * (1000 * 100 + 100 * 40)
    assert "flops" not in rows[0]["phases"]["checkpoint"] and "multiple_bf16" not in update


def test_matmul_peak_is_measured():
    assert fl.matmul_peak("float32", size=128, seconds=0.05) > 1e8
