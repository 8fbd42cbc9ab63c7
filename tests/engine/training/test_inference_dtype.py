"""``runtime.inference_dtype``: passes without gradients in bfloat16, updates on float32 weights, a clear error where
the CPU has no bfloat16 units; ``runtime.static_decode`` reaching the policies; neither joining the warm-start cache
key."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from genenv_engine.backends import cpu_load
from genenv_engine.config import ConfigError, ModelConfig, RunConfig, RuntimeConfig
from genenv_engine.training.policy import Policy, build_tiny_model, inference_options
from genenv_engine.training.tokenizer import build_byte_tokenizer


def test_cpu_flags_decide_bfloat16(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    assert cpu_load.cpu_bfloat16(str(info))
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_tile\n")
    assert not cpu_load.cpu_bfloat16(str(info))
    assert not cpu_load.cpu_bfloat16(str(tmp_path / "missing"))


def test_bfloat16_on_a_cpu_without_it_is_a_config_error(monkeypatch):
    monkeypatch.setattr(cpu_load, "cpu_bfloat16", lambda: False)
    with pytest.raises(ConfigError, match="runtime.inference_dtype.*AVX-512 BF16 or AMX"):
        RuntimeConfig(inference_dtype="bfloat16", device="cpu")
    with pytest.raises(ConfigError, match="runtime.inference_dtype"):
        RuntimeConfig(inference_dtype="float16")
    monkeypatch.setattr(cpu_load, "cpu_bfloat16", lambda: True)
    assert RuntimeConfig(inference_dtype="bfloat16", device="cpu").inference_dtype == "bfloat16"
    assert RuntimeConfig(inference_dtype="bfloat16", device="cuda").device == "cuda"  # no CPU question asked


def test_settings_reach_the_policy_and_its_siblings():
    assert inference_options(RuntimeConfig()) == {  # the defaults: the faster paths, where they serve the model
        "inference_dtype": None,
        "static_decode": True,
        "fused_forward": True,
    }
    assert not inference_options(RuntimeConfig(train_forward="transformers"))["fused_forward"]
    assert not inference_options(RuntimeConfig(static_decode=False))["static_decode"]
    tok = build_byte_tokenizer()
    cfg = ModelConfig(hidden_size=32, num_layers=2, num_heads=4, intermediate_size=48, max_length=64)
    pol = Policy(
        build_tiny_model(cfg, tok, seed=0),
        tok,
        torch.device("cpu"),
        64,
        inference_dtype=torch.bfloat16,
        static_decode=True,
        fused_forward=True,
    )
    copy = pol.frozen_copy()
    assert (copy.inference_dtype, copy.static_decode, copy.fused_forward) == (torch.bfloat16, True, True)


def test_no_grad_log_probs_run_in_bfloat16_and_gradient_passes_in_float32():
    tok = build_byte_tokenizer()
    cfg = ModelConfig(hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128, max_length=96)
    model = build_tiny_model(cfg, tok, seed=1)
    plain = Policy(model, tok, torch.device("cpu"), 96)
    half = Policy(model, tok, torch.device("cpu"), 96, inference_dtype=torch.bfloat16)
    prompts = [tok("add 1 and 2", add_special_tokens=False)["input_ids"]] * 2 + [[5, 6, 7]]
    completions = [[40, 41, 42], [43, 44], [45, 46, 47, 48]]
    batch = plain.make_batch(prompts, completions)
    with torch.no_grad():
        want = plain.logprobs(batch)
        got = half.logprobs(batch)
        rows = half.row_logprobs(prompts, completions, 8)
    assert model.model.embed_tokens.weight.dtype == torch.float32
    assert not torch.equal(got, want)  # bfloat16 rounding shows
    torch.testing.assert_close(got, want, atol=0.1, rtol=0.05)
    torch.testing.assert_close(
        torch.cat(rows),
        torch.cat([r[: len(p) + len(c) - 1] for r, p, c in zip(want, prompts, completions, strict=False)]),
        atol=0.1,
        rtol=0.05,
    )
    with_grad = half.logprobs(batch)  # gradients on: the float32 computation, exactly
    assert with_grad.requires_grad and torch.equal(with_grad.detach(), want)


def test_inference_settings_leave_the_warm_start_key_alone():
    from genenv_engine.training.warmstart.cache import cache_key

    base = RunConfig()
    fast = dataclasses.replace(base, runtime=RuntimeConfig(static_decode=True))
    assert cache_key(fast) == cache_key(base)
