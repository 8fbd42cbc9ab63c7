"""SFT with length-grouped micro-batches: the same pairs and gradient as the whole batch, with less padding."""

from __future__ import annotations

import random

import pytest
import torch

from genenv_engine.config import ConfigError, ModelConfig, load_config
from genenv_engine.training.policy import Policy, build_tiny_model
from genenv_engine.training.tokenizer import build_byte_tokenizer
from genenv_engine.training.trainer import sft
from genenv_engine.training.warmstart import cache_key


def _policy() -> Policy:
    tok = build_byte_tokenizer()
    cfg = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_length=96)
    return Policy(build_tiny_model(cfg, tok, seed=0), tok, torch.device("cpu"), max_length=96)


def test_length_groups_train_the_same_weights_with_narrower_batches():
    torch.set_num_threads(1)
    rng = random.Random(0)
    pairs = [
        (
            [rng.randrange(5, 250) for _ in range(rng.randrange(4, 60))],
            [rng.randrange(5, 250) for _ in range(rng.randrange(1, 20))],
        )
        for _ in range(64)
    ]
    runs = {}
    for groups in (0, 4):
        pol = _policy()
        widths: list[int] = []
        make = pol.make_batch

        def recording(prompts, completions, make=make, widths=widths):
            batch = make(prompts, completions)
            widths.append(batch.input_ids.shape[0] * batch.input_ids.shape[1])
            return batch

        pol.make_batch = recording  # type: ignore[method-assign]
        losses = sft(pol, pairs, 6, 1e-2, 16, random.Random(1), length_groups=groups)
        runs[groups] = (losses, [p.detach().clone() for p in pol.model.parameters()], widths)
    (l0, w0, cells0), (l4, w4, cells4) = runs[0], runs[4]
    assert len(cells0) == 6 and len(cells4) == 24  # four micro-batches per step
    assert sum(cells4) < 0.85 * sum(cells0)  # fewer padded positions computed
    assert l4 == pytest.approx(l0, abs=1e-5)
    assert max((a - b).abs().max().item() for a, b in zip(w0, w4, strict=False)) < 1e-4


def test_length_groups_join_the_warm_start_cache_key_only_when_set():
    # rounding-level differences decide which side of the number-copying transition a tiny warm start lands on,
    # so a grouped warm start is not reused for an ungrouped run (or the other way round)
    base = load_config("tiny", None, {"model.sft_length_groups": 0})
    grouped = load_config("tiny", None, {"model.sft_length_groups": 4})
    assert grouped.model.sft_length_groups == 4 and cache_key(grouped) != cache_key(base)
    # unset, the key is what it was before the field joined it: the documented experiments' caches stay valid
    assert cache_key(load_config("ablation")) == "ablation-s0-9873941b1f0e"
    with pytest.raises(ConfigError, match="sft_length_groups"):
        load_config("tiny", None, {"model.sft_length_groups": -1})
