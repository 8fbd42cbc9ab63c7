"""The hf backend's decode loop draws exactly what ``model.generate`` draws for the same seed.

Finished rows leave the batch early in `genenv_engine.backends.hf.decode`, so these tests check
it against a direct ``generate`` call (left-padded batch, per-step scores) token by token and
log-prob by log-prob (to 1e-5: the static path's hand-written forward rounds differently), on a
model whose answers end at different lengths, on both of its paths.
"""

from __future__ import annotations

import functools
import random

import pytest
import torch

from genenv_engine.backends.base import Sampling
from genenv_engine.backends.hf import HFBackend
from genenv_engine.config import ModelConfig
from genenv_engine.training.policy import Policy, build_tiny_model
from genenv_engine.training.tokenizer import build_byte_tokenizer
from genenv_engine.training.trainer import sft

CFG = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_length=64)
QUESTIONS = ["add 1 and 2", "sq 5", "mul 3 4", "x", "neg 7", "what is 2+2?"]
ANSWERS = ["3", "twenty-five", "12", "y", "minus seven!", "4"]


@pytest.fixture(scope="module")
def taught():
    """A tiny model half-taught to answer each question: answers of several lengths, some never ending."""
    torch.set_num_threads(1)
    tok = build_byte_tokenizer()
    pol = Policy(build_tiny_model(CFG, tok, seed=0), tok, torch.device("cpu"), max_length=64)
    prompts = [pol.chat([{"role": "user", "content": q}]) for q in QUESTIONS]
    sft(
        pol,
        [(pol.encode(p), pol.completion_ids(a)) for p, a in zip(prompts, ANSWERS, strict=False)],
        steps=40,
        lr=2e-2,
        batch_size=6,
        rng=random.Random(0),
    )
    pol.model.eval()
    return pol, prompts


def reference(pol: Policy, prompts: list[str], sampling: Sampling) -> list[tuple[list[int], list[float], bool]]:
    """Tokens, log-probs and finished flags from one plain ``generate`` call on the left-padded batch."""
    tok = pol.tokenizer
    enc = [pol.encode(p) for p in prompts]
    width = max(map(len, enc))
    ids = torch.full((len(enc), width), tok.pad_token_id)
    attn = torch.zeros_like(ids)
    for i, e in enumerate(enc):
        ids[i, width - len(e) :], attn[i, width - len(e) :] = torch.tensor(e), 1
    torch.manual_seed(sampling.seed)
    kwargs = (
        dict(do_sample=False)
        if sampling.greedy
        else dict(do_sample=True, temperature=sampling.temperature, top_k=0, top_p=1.0)
    )
    with torch.no_grad():
        res = pol.model.generate(
            input_ids=ids,
            attention_mask=attn,
            max_new_tokens=sampling.max_new_tokens,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
            return_dict_in_generate=True,
            output_scores=True,
            **kwargs,
        )
    out = []
    new = res.sequences[:, width:]
    for i in range(len(enc)):
        toks, lps, finished = [], [], False
        for t, token in enumerate(new[i].tolist()):
            if token == tok.eos_token_id:
                finished = True
                break
            if token == tok.pad_token_id:
                break
            toks.append(token)
            lps.append(float(res.scores[t][i].float().log_softmax(-1)[token]))
        out.append((toks, lps, finished))
    return out


@pytest.mark.parametrize("fast", [None, False], ids=["default", "transformers"])
@pytest.mark.parametrize(
    "sampling",
    [
        Sampling(temperature=1.0, max_new_tokens=24, seed=3),
        Sampling(temperature=0.7, max_new_tokens=24, seed=11),
        Sampling(temperature=1.5, max_new_tokens=12, seed=5),
        Sampling(greedy=True, max_new_tokens=24, seed=0),
    ],
)
def test_decode_matches_generate_token_for_token(taught, sampling, fast, monkeypatch):
    from genenv_engine.backends import hf

    # default: this small Llama decodes on the static path (static_llama); False: the transformers forward
    monkeypatch.setattr(hf, "decode", functools.partial(hf.decode, fast=fast))
    pol, prompts = taught
    prompts = prompts * 4  # 24 rows: chunks and early exits
    want = reference(pol, prompts, sampling)
    got = HFBackend(pol).generate(prompts, sampling)
    assert [c.token_ids for c in got] == [w[0] for w in want]
    assert [c.finished for c in got] == [w[2] for w in want]
    for c, w in zip(got, want, strict=False):
        assert c.logprobs == pytest.approx(w[1], abs=1e-5)
        assert c.text == pol.tokenizer.decode(w[0], skip_special_tokens=True)
    lengths = {len(c.token_ids) for c in got}
    assert len(lengths) >= 2  # rows really ended at different steps (early exits were exercised)


def test_tick_runs_between_steps_and_an_exception_stops_decoding(taught):
    from genenv_engine.backends import hf

    pol, prompts = taught
    tok = pol.tokenizer
    calls = []
    tokens, logprobs, lengths, finished = hf.decode(
        pol.model,
        *_padded(pol, prompts),
        20,
        tok.eos_token_id,
        tok.pad_token_id,
        1.0,
        tick=lambda: calls.append(1),
        every=0.0,
    )
    assert tokens.shape == logprobs.shape == (len(prompts), 20)
    assert 1 <= len(calls) <= int(lengths.max())  # once per step while rows are decoding

    class Stop(Exception):
        pass

    def stop() -> None:
        raise Stop()

    backend = HFBackend(pol)
    backend.tick = stop
    pol.model.train()
    with pytest.raises(Stop):
        backend.generate(prompts, Sampling(temperature=1.0, max_new_tokens=20, seed=1))
    assert pol.model.training  # the training mode is restored even when a tick raises
    pol.model.eval()


def _padded(pol: Policy, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    enc = [pol.encode(p) for p in prompts]
    width = max(map(len, enc))
    ids = torch.full((len(enc), width), pol.tokenizer.pad_token_id)
    attn = torch.zeros_like(ids)
    for i, e in enumerate(enc):
        ids[i, width - len(e) :], attn[i, width - len(e) :] = torch.tensor(e), 1
    return ids, attn


def test_repeated_prompts_are_prefilled_once_and_decode_as_if_each_were_computed(taught, monkeypatch):
    """A task's k rollouts send one prompt k times: the transformers path prefills each distinct prompt once (the
    model sees 6 rows, not 24) and draws exactly the tokens of a prefill that computes all 24 rows."""
    from genenv_engine.backends import hf

    pol, prompts = taught
    tok = pol.tokenizer
    rows = [p for p in prompts for _ in range(4)]  # adjacent repeats, as `agent.rollout` sends them
    ids, attn = _padded(pol, rows)
    seen: list[int] = []
    hook = pol.model.register_forward_pre_hook(
        lambda _m, args, kwargs: seen.append(kwargs["input_ids"].shape), with_kwargs=True
    )
    try:
        torch.manual_seed(7)
        got = hf.decode(pol.model, ids, attn, 16, tok.eos_token_id, tok.pad_token_id, 1.0, fast=False)
        prefill_rows = sum(shape[0] for shape in seen if shape[1] > 1)  # steps feed one column, a prefill more
        monkeypatch.setattr(hf, "distinct_rows", lambda i, _a: (list(range(len(i))), list(range(len(i)))))
        seen.clear()
        torch.manual_seed(7)
        want = hf.decode(pol.model, ids, attn, 16, tok.eos_token_id, tok.pad_token_id, 1.0, fast=False)
    finally:
        hook.remove()
    assert prefill_rows == len(prompts)
    assert sum(shape[0] for shape in seen if shape[1] > 1) == len(rows)
    assert torch.equal(got[0], want[0]) and torch.equal(got[2], want[2]) and torch.equal(got[3], want[3])
    assert torch.allclose(got[1], want[1], atol=1e-5)
    assert len({tuple(r) for r in got[0].tolist()}) > len(prompts)  # the repeats sampled different answers


def test_distinct_rows_tells_prompts_apart_by_their_padding_too():
    from genenv_engine.backends.hf import distinct_rows

    ids = torch.tensor([[0, 5, 6], [0, 5, 6], [1, 5, 6], [0, 5, 6]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1], [1, 1, 1], [0, 1, 1]])
    assert distinct_rows(ids, mask) == ([0, 1, 2], [0, 1, 2, 0])


def test_repeated_prompts_on_a_grouped_query_attention_model(monkeypatch):
    """SmolLM2's shape (fewer key/value heads than query heads): the copied prefill decodes as the computed one."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from genenv_engine.backends import hf

    tok = build_byte_tokenizer()
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tok),
            hidden_size=48,
            num_hidden_layers=2,
            num_attention_heads=6,
            num_key_value_heads=2,
            intermediate_size=96,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )
    ).eval()
    pol = Policy(model, tok, torch.device("cpu"), max_length=64)
    ids, attn = _padded(pol, [p for p in ("sq 5", "add 1 and 22", "x") for _ in range(3)])

    def run():
        torch.manual_seed(3)
        return hf.decode(model, ids, attn, 10, tok.eos_token_id, tok.pad_token_id, 1.0, fast=False)

    got = run()
    monkeypatch.setattr(hf, "distinct_rows", lambda i, _a: (list(range(len(i))), list(range(len(i)))))
    want = run()
    assert torch.equal(got[0], want[0]) and torch.allclose(got[1], want[1], atol=1e-5)
