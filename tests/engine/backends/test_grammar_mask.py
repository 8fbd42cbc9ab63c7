"""The grammar's masks are llguidance's own: `apply_bitmask_` masks exactly the logits that
``llguidance.torch.apply_token_bitmask_inplace`` (and its numpy twin) masks, the bitmasks `GrammarMask` fills are
those of ``llguidance.torch.fill_next_token_bitmask_par``, and a constrained decode draws the same tokens under either.

llguidance's torch masking runs eagerly here (``torch.compiler.set_stance("force_eager")``): the same operations
without the ``torch.compile`` that makes its first call cost seconds.
"""

from __future__ import annotations

import random

import llguidance
import llguidance.numpy as lln
import llguidance.torch as llt
import pytest
import torch

from genenv_engine.backends import grammar as gm
from genenv_engine.backends import hf
from genenv_engine.backends.base import Sampling
from genenv_engine.backends.grammar import GrammarMask, apply_bitmask_, ll_tokenizer, task_grammar
from genenv_engine.config import ModelConfig
from genenv_engine.environments import get_environment
from genenv_engine.environments.base import SplitSizes
from genenv_engine.training.policy import Policy, build_tiny_model
from genenv_engine.training.tokenizer import build_byte_tokenizer

SMALL = 'start: "a" NUM | "b" ("x" | "y")+\nNUM: /[0-9]+/'


def grammars() -> list[str]:
    """A small grammar and two environments' task grammars."""
    found = [SMALL]
    for name in ("bfcl", "chain"):
        env = get_environment(name, 0, sizes=SplitSizes(seed=10, train=10, heldout=10))
        found.append(task_grammar(env.task_grammar()))
    return found


def random_bitmasks(rows: int, words: int, seed: int) -> torch.Tensor:
    """Bitmasks with every word pattern: none set, all set (-1), the sign bit alone, random words."""
    rng = random.Random(seed)
    choices = [0, -1, -(1 << 31), 1, (1 << 31) - 1]
    values = [[rng.choice(choices) if rng.random() < 0.3 else rng.randrange(-(1 << 31), 1 << 31) for _ in range(words)]]
    values += [[rng.randrange(-(1 << 31), 1 << 31) for _ in range(words)] for _ in range(rows - 1)]
    return torch.tensor(values, dtype=torch.int32)


def llguidance_apply(logits: torch.Tensor, bits: torch.Tensor) -> None:
    """llguidance's torch masking, run eagerly."""
    with torch.compiler.set_stance("force_eager"):
        llt.apply_token_bitmask_inplace(logits, bits)


def assert_same_masking(logits: torch.Tensor, bits: torch.Tensor) -> None:
    mine, theirs, numpy = logits.clone(), logits.clone(), logits.clone().numpy()
    apply_bitmask_(mine, bits)
    llguidance_apply(theirs, bits)
    lln.apply_token_bitmask_inplace(numpy, bits.numpy())
    torch.testing.assert_close(mine, theirs, rtol=0, atol=0, equal_nan=True)  # every value, NaN where NaN
    torch.testing.assert_close(mine, torch.from_numpy(numpy), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("vocab", [261, 256, 300, 49152])
def test_random_bitmasks_mask_what_llguidance_masks(vocab):
    """Vocabularies that fill the last word, leave part of it unused, or run past the bitmask (masked whole)."""
    torch.manual_seed(vocab)
    for rows, words in [(1, (vocab + 31) // 32), (5, (vocab + 31) // 32), (3, (vocab + 31) // 32 - 1)]:
        if words < 1:
            continue
        assert_same_masking(torch.randn(rows, vocab), random_bitmasks(rows, words, seed=vocab + rows))


def test_nan_scores_are_masked_as_llguidance_masks_them():
    logits = torch.randn(4, 300)
    logits[0, :40] = float("nan")
    logits[2, 100:] = float("nan")
    assert_same_masking(logits, random_bitmasks(4, 10, seed=7))


def test_grammar_bitmasks_are_llguidances_and_mask_what_it_masks():
    """Along random walks through each grammar, the rows' bitmasks equal llguidance's own fill and the logits they
    mask equal llguidance's masking of them."""
    tok = build_byte_tokenizer()
    executor = llguidance.LLExecutor(num_threads=1)
    rng = random.Random(0)
    for grammar in grammars():
        mask = GrammarMask(tok, grammar, 8, ahead=False)
        for _ in range(40):
            live = [r for r in range(8) if not mask.matchers[r].is_stopped()]
            if not live:
                break
            bits = mask.bitmask(live)
            theirs = llt.allocate_token_bitmask(len(live), mask.tok.vocab_size)
            llt.fill_next_token_bitmask_par(executor, [(mask.matchers[r], i) for i, r in enumerate(live)], theirs)
            assert torch.equal(bits, theirs)
            assert_same_masking(torch.randn(len(live), len(tok)), bits)
            allowed = [gm.allowed_ids(bits[i], mask.tok.vocab_size) for i in range(len(live))]
            mask.advance(live, [rng.choice([t for t in ids if t != tok.eos_token_id] or ids) for ids in allowed])


def test_a_constrained_decode_draws_the_tokens_it_drew_under_llguidances_masking(monkeypatch):
    tok = build_byte_tokenizer()
    cfg = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_length=160)
    policy = Policy(build_tiny_model(cfg, tok, seed=0), tok, torch.device("cpu"), max_length=160)
    prompts = [policy.chat([{"role": "user", "content": f"task {i}"}]) for i in range(8)]
    grammar = grammars()[1]
    runs = []
    for apply in (apply_bitmask_, llguidance_apply):
        monkeypatch.setattr(gm, "apply_bitmask_", apply)
        for greedy in (False, True):
            sampling = Sampling(temperature=1.0, max_new_tokens=60, greedy=greedy, seed=1, grammar=grammar)
            runs.append(
                [(o.token_ids, o.logprobs, o.finished) for o in hf.HFBackend(policy).generate(prompts, sampling)]
            )
    assert runs[:2] == runs[2:] and any(ids for ids, _, _ in runs[0])
    assert ll_tokenizer(tok) is ll_tokenizer(tok)
