"""Grammar-constrained decoding: the hf backend never emits a string outside the grammar.

A model with random weights writes near-uniform bytes, so without a grammar almost nothing it writes is in the
grammar; under one, every finished completion must be a whole string of it and every unfinished one a prefix
(its matcher never failed). Both decode paths (the static Llama forward and the transformers forward), sampled
and greedy, several seeds. The mask's log-probabilities are those of the masked distribution.
"""

from __future__ import annotations

import llguidance
import pytest
import torch

from genenv_engine.backends import hf
from genenv_engine.backends.base import Sampling
from genenv_engine.backends.grammar import (
    GrammarError,
    GrammarMask,
    compile_grammar,
    ll_tokenizer,
    matches,
    random_strings,
    task_grammar,
)
from genenv_engine.config import ModelConfig
from genenv_engine.training.policy import Policy, build_tiny_model
from genenv_engine.training.tokenizer import build_byte_tokenizer

CFG = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_length=160)
RULES = r"""
prompt: "F: " sigs " | Q: " NAME " " NUM
sigs: sig | sig " " sig | sig " " sig " " sig
sig: NAME "(" ARG ")"
answer: NAME "(x=" NUM ")"
NAME: "add" | "neg" | "sq" | "pow"
ARG: "x:int"
NUM: /-?[1-9][0-9]{0,2}|0/
"""
GRAMMAR = task_grammar(RULES)


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    tok = build_byte_tokenizer()
    return Policy(build_tiny_model(CFG, tok, seed=0), tok, torch.device("cpu"), max_length=160)


def prefix_ok(tok, grammar: str, ids: list[int]) -> bool:
    """Whether the tokens ``ids`` are a prefix of some string of ``grammar``."""
    matcher = llguidance.LLMatcher(ll_tokenizer(tok), compile_grammar(grammar))
    return all(matcher.consume_token(t) for t in ids) and not matcher.is_error()


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("greedy,seed", [(False, 0), (False, 1), (False, 2), (True, 0)])
def test_every_completion_is_in_the_grammar(policy, monkeypatch, fast, greedy, seed):
    real = hf.decode
    monkeypatch.setattr(hf, "decode", lambda *a, **k: real(*a, **{**k, "fast": fast}))
    prompts = [policy.chat([{"role": "user", "content": f"task {i}"}]) for i in range(12)]
    outs = hf.HFBackend(policy).generate(
        prompts, Sampling(temperature=1.0, max_new_tokens=90, greedy=greedy, seed=seed, grammar=GRAMMAR)
    )
    assert len(outs) == 12
    for out in outs:
        assert prefix_ok(policy.tokenizer, GRAMMAR, out.token_ids), out.text
        if out.finished:
            assert matches(policy.tokenizer, GRAMMAR, out.text), out.text
    assert sum(o.finished for o in outs) >= 6  # most end within 90 bytes: the grammar's strings are short


def test_without_a_grammar_random_weights_leave_it(policy):
    prompts = [policy.chat([{"role": "user", "content": f"task {i}"}]) for i in range(12)]
    outs = hf.HFBackend(policy).generate(prompts, Sampling(max_new_tokens=40, seed=0))
    assert not any(matches(policy.tokenizer, GRAMMAR, o.text) for o in outs)


def test_logprobs_are_those_of_the_masked_distribution(policy):
    """A row whose grammar allows one token at a step draws it with log-probability 0."""
    grammar = task_grammar('prompt: "ab"\nanswer: "c"')
    prompts = [policy.chat([{"role": "user", "content": "x"}])]
    backend = hf.HFBackend(policy)
    out = backend.generate(prompts, Sampling(max_new_tokens=20, seed=0, grammar=grammar))[0]
    assert out.text == "ab => c" and out.finished
    assert max(abs(lp) for lp in out.logprobs) < 1e-5
    assert backend.grammar_steps == len("ab => c") + 1 and backend.grammar_seconds > 0


def test_mask_rows_follow_their_own_matchers():
    tok = build_byte_tokenizer()
    mask = GrammarMask(tok, 'start: "a" "b" | "c"', rows=2, ahead=False)
    mask.advance([0, 1], tok.encode("ac", add_special_tokens=False))
    assert not mask.accepts(0) and mask.accepts(1)
    scores = torch.zeros(2, len(tok))
    mask.apply_(scores, [0, 1])
    assert torch.isfinite(scores[0]).nonzero().flatten().tolist() == tok.encode("b", add_special_tokens=False)
    assert torch.isfinite(scores[1]).nonzero().flatten().tolist() == [tok.eos_token_id]  # stopped: may only end


def test_random_strings_are_in_the_grammar():
    tok = build_byte_tokenizer()
    strings = random_strings(tok, GRAMMAR, 30, seed=3)
    assert len(set(strings)) > 20
    assert all(matches(tok, GRAMMAR, s) for s in strings)


def test_bad_grammar_and_style_are_clear_errors():
    with pytest.raises(GrammarError, match="unknown name"):
        compile_grammar("start: nothing_here")
    with pytest.raises(GrammarError, match="unknown simulator style"):
        task_grammar(RULES, "json")
    assert task_grammar(RULES, "instruct").startswith('start: "TASK: " prompt "\\nANSWER: " answer')


@pytest.mark.parametrize("name", ["bfcl", "apibank", "alfworld", "bamboogle", "travelplanner", "chain"])
def test_a_batch_exploring_every_branch_at_once_keeps_its_matchers(name):
    """64 rows drawing uniformly among the allowed tokens, step by step side by side (what a batch of an untrained
    simulator does): no row's matcher fails (a lexer out of fuel would fail them all, and decoding would end every
    row at once)."""
    import random

    from genenv_engine.backends.grammar import allowed_ids
    from genenv_engine.environments import get_environment
    from genenv_engine.environments.base import SplitSizes

    tok = build_byte_tokenizer()
    env = get_environment(name, 0, sizes=SplitSizes(seed=50, train=50, heldout=50))
    mask, rng = GrammarMask(tok, task_grammar(env.task_grammar()), 64, ahead=False), random.Random(0)
    for _ in range(120):
        live = [r for r in range(64) if not mask.matchers[r].is_stopped()]
        bits = mask.bitmask(live)
        mask.advance(
            live,
            [
                rng.choice(
                    [t for t in allowed_ids(bits[i], mask.tok.vocab_size) if t != tok.eos_token_id]
                    or [tok.eos_token_id]
                )
                for i in range(len(live))
            ],
        )
        assert not any(m.is_error() for m in mask.matchers), next(m.get_error() for m in mask.matchers if m.is_error())


@pytest.mark.parametrize("fast", [True, False])
def test_masks_computed_ahead_give_the_same_completions(policy, monkeypatch, fast):
    """The next step's masks computed on a worker thread while the model runs draw exactly what masks computed in
    turn draw, on both decode paths (rows leaving the batch included)."""
    import functools

    real = hf.decode
    monkeypatch.setattr(hf, "decode", lambda *a, **k: real(*a, **{**k, "fast": fast}))
    prompts = [policy.chat([{"role": "user", "content": f"task {i}"}]) for i in range(12)]
    sampling = Sampling(temperature=1.0, max_new_tokens=90, seed=3, grammar=GRAMMAR)
    ahead = [(o.token_ids, o.logprobs, o.finished) for o in hf.HFBackend(policy).generate(prompts, sampling)]
    monkeypatch.setattr(hf, "GrammarMask", functools.partial(GrammarMask, ahead=False))
    in_turn = [(o.token_ids, o.logprobs, o.finished) for o in hf.HFBackend(policy).generate(prompts, sampling)]
    assert ahead == in_turn and len({len(ids) for ids, _, _ in ahead}) > 1  # rows of several lengths
