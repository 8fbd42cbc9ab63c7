"""Byte tokenizer, Policy batching / persistence, and the HF generation backend on a tiny model."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from genenv_engine.backends import get_backend
from genenv_engine.backends.base import Completion, Sampling
from genenv_engine.backends.hf import HFBackend
from genenv_engine.config import ModelConfig
from genenv_engine.training.policy import Policy, build_tiny_model, pick_device
from genenv_engine.training.tokenizer import SPECIAL_TOKENS, build_byte_tokenizer, load_tokenizer

CFG = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)

UNICODE_SAMPLES = [
    "",
    "plain ascii",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\n",
    "punctuation , . ' s don't ? !",  # no clean-up of spaces before punctuation
    "héllo wörld ñ ç",
    "日本語のテキスト",
    "emoji 🎉👩\u200d💻 and flags 🇫🇷",
    "combining e\u0301 and zero\u200bwidth",
    "math ∑ ∫ ≤ ≥ ∞ and arrows → ←",
    "null \x00 and del \x7f bytes",
    "Ω≈ç√∫˜µ≤≥÷ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
]


@pytest.fixture(scope="module")
def tok():
    return build_byte_tokenizer()


@pytest.fixture(scope="module")
def saved_tok_dir(tok, tmp_path_factory):
    path = tmp_path_factory.mktemp("tok")
    tok.save_pretrained(str(path))
    return path


@pytest.fixture
def policy(tok):
    torch.set_num_threads(1)
    return Policy(build_tiny_model(CFG, tok, seed=0), tok, torch.device("cpu"), max_length=64)


# --- tokenizer ----------------------------------------------------------------------------------


def test_byte_tokenizer_vocabulary(tok):
    assert len(tok) == 256 + len(SPECIAL_TOKENS)
    special = tok.convert_tokens_to_ids(SPECIAL_TOKENS)
    assert sorted(special) == list(range(256, 256 + len(SPECIAL_TOKENS)))
    assert tok.pad_token_id == tok.convert_tokens_to_ids("<|pad|>")
    assert tok.eos_token_id == tok.convert_tokens_to_ids("<|eos|>")
    assert tok.pad_token_id != tok.eos_token_id
    assert tok.padding_side == "left"


@pytest.mark.parametrize("text", UNICODE_SAMPLES)
def test_byte_tokenizer_roundtrips_unicode_one_token_per_byte(tok, text):
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text.encode("utf-8"))
    assert all(0 <= i < 256 for i in ids)
    assert tok.decode(ids) == text


def test_special_tokens_are_single_ids_and_skippable(tok):
    text = "<|user|>hi<|assistant|>yo<|eos|>"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids("<|user|>")
    assert ids[-1] == tok.eos_token_id
    assert len(ids) == 1 + 2 + 1 + 2 + 1
    assert tok.decode(ids) == text
    assert tok.decode(ids, skip_special_tokens=True) == "hiyo"


def test_chat_template_renders_roles(tok):
    messages = [{"role": "system", "content": "gen"}, {"role": "user", "content": "hi"}]
    assert tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == (
        "<|system|>gen<|user|>hi<|assistant|>"
    )
    assert tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=False) == "<|system|>gen<|user|>hi"
    with_answer = messages + [{"role": "assistant", "content": "ok"}]
    assert tok.apply_chat_template(with_answer, tokenize=False) == "<|system|>gen<|user|>hi<|assistant|>ok<|eos|>"


def test_saved_tokenizer_reloads_with_autotokenizer(tok, saved_tok_dir):
    again = load_tokenizer(saved_tok_dir)
    assert again.padding_side == "left"
    assert len(again) == len(tok)
    assert again.pad_token_id == tok.pad_token_id
    assert again.eos_token_id == tok.eos_token_id
    assert again.chat_template == tok.chat_template
    messages = [{"role": "system", "content": "gen"}, {"role": "user", "content": "hi"}]
    assert again.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == (
        "<|system|>gen<|user|>hi<|assistant|>"
    )
    for text in UNICODE_SAMPLES:
        ids = again(text, add_special_tokens=False)["input_ids"]
        assert ids == tok(text, add_special_tokens=False)["input_ids"]
        assert again.decode(ids) == text


def test_policy_chat_encode_and_completion_ids(policy):
    text = policy.chat([{"role": "system", "content": "gen"}, {"role": "user", "content": "hi"}])
    assert text == "<|system|>gen<|user|>hi<|assistant|>"
    ids = policy.encode(text)
    assert len(ids) == 1 + 3 + 1 + 2 + 1  # no extra BOS
    comp = policy.completion_ids("ok")
    assert len(comp) == 3
    assert comp[:-1] == policy.encode("ok")
    assert comp[-1] == policy.tokenizer.eos_token_id
    assert policy.tokenizer.decode(comp, skip_special_tokens=True) == "ok"


# --- make_batch ---------------------------------------------------------------------------------


def test_make_batch_masks_exactly_the_completion_tokens(policy):
    pad = policy.tokenizer.pad_token_id
    prompts = [[10, 11, 12], [20]]
    completions = [[13, 14], [21, 22, 23, 24]]
    b = policy.make_batch(prompts, completions)
    assert b.input_ids.shape == (2, 5)
    assert b.attention_mask.shape == (2, 5)
    assert b.targets.shape == (2, 4)
    assert b.mask.shape == (2, 4)
    assert b.input_ids.tolist() == [[10, 11, 12, 13, 14], [20, 21, 22, 23, 24]]
    assert b.attention_mask.tolist() == [[1] * 5, [1] * 5]
    # target t is token t + 1; the mask is on targets that are completion tokens
    assert b.targets.tolist() == [[11, 12, 13, 14], [21, 22, 23, 24]]
    assert b.mask.tolist() == [[0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    assert b.mask.sum(dim=1).tolist() == [2.0, 4.0]
    assert b.mask.dtype == torch.float32
    assert pad not in b.input_ids.tolist()[0]


def test_make_batch_right_pads_and_excludes_padding(policy):
    pad = policy.tokenizer.pad_token_id
    b = policy.make_batch([[1, 2], [3, 4, 5, 6]], [[7], [8, 9, 10]])
    assert b.input_ids.tolist() == [[1, 2, 7, pad, pad, pad, pad], [3, 4, 5, 6, 8, 9, 10]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 0, 0, 0, 0], [1] * 7]
    assert b.mask.tolist() == [[0, 1, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1]]
    # masked targets are exactly the completions
    for row, comp in zip(range(2), [[7], [8, 9, 10]], strict=False):
        assert b.targets[row][b.mask[row] == 1].tolist() == comp


def test_make_batch_truncates_overlong_prompts_from_the_left(policy):
    prompt = list(range(100))  # max_length is 64
    completion = [200, 201, 202, 203, 204, 205, 206, 207, 208, 209]
    b = policy.make_batch([prompt, [1, 2]], [completion, [3]])
    assert b.input_ids.shape == (2, 64)
    row = b.input_ids[0].tolist()
    assert row[-10:] == completion  # the completion is intact
    assert row[:54] == prompt[-54:]  # the prompt's last tokens survive
    assert b.mask[0].sum() == 10
    assert b.targets[0][b.mask[0] == 1].tolist() == completion
    assert b.mask[1].sum() == 1


def test_make_batch_truncates_overlong_completion_from_the_right(policy):
    completion = list(range(100))
    b = policy.make_batch([[1, 2, 3]], [completion])
    assert b.input_ids.shape == (1, 64)
    assert b.input_ids[0].tolist() == [3] + completion[:63]
    assert b.mask.sum() == 63


def test_logprobs_shape_and_range(policy):
    b = policy.make_batch([[1, 2, 3], [4]], [[5, 6], [7, 8, 9]])
    with torch.no_grad():
        lp = policy.logprobs(b)
    assert lp.shape == b.targets.shape
    assert (lp <= 0).all()
    # they are the log-softmax of the model's next-token logits
    logits = policy.model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits
    ref = F.log_softmax(logits[:, :-1].float(), -1).gather(-1, b.targets.unsqueeze(-1)).squeeze(-1)
    # ... at completion positions; prompt and padding positions are not computed and read 0
    torch.testing.assert_close(lp, (ref * b.mask).detach(), rtol=1e-5, atol=1e-5)
    assert (lp[b.mask == 0] == 0).all() and (lp[b.mask == 1] < 0).all()


def test_chunked_logprob_gather_matches_full_values_and_gradients(policy):
    b = policy.make_batch([[1, 2, 3], [4], [9, 9]], [[5, 6, 7, 8], [7, 8, 9], [10]])
    grads = []
    for chunk in (1, 3, 4096):
        policy.logprob_chunk = chunk
        policy.model.zero_grad(set_to_none=True)
        lp = policy.logprobs(b)
        (lp * b.mask).sum().backward()
        grads.append((lp.detach(), [p.grad.clone() for p in policy.model.parameters()]))
    policy.logprob_chunk = 2048
    for lp, g in grads[:-1]:
        torch.testing.assert_close(lp, grads[-1][0], rtol=1e-5, atol=1e-6)
        for a, c in zip(g, grads[-1][1], strict=False):
            torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-6)


# --- persistence and frozen copies --------------------------------------------------------------


def test_save_then_load_gives_identical_logits(policy, tmp_path):
    b = policy.make_batch([[259, 104, 105, 260], [259, 120]], [[111, 107, 256], [121, 256]])
    policy.model.eval()
    with torch.no_grad():
        before = policy.model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits
    policy.save(tmp_path / "ckpt")
    again = Policy.load(tmp_path / "ckpt", torch.device("cpu"), max_length=64)
    assert again.max_length == 64
    assert again.num_parameters() == policy.num_parameters()
    assert again.fingerprint() == pytest.approx(policy.fingerprint(), rel=1e-6)
    assert again.tokenizer.decode(again.encode("héllo 🎉")) == "héllo 🎉"
    again.model.eval()
    with torch.no_grad():
        after = again.model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits
    assert torch.equal(before, after)


def test_frozen_copy_is_detached_and_equal(policy):
    frozen = policy.frozen_copy()
    params = list(frozen.model.parameters())
    assert params and not any(p.requires_grad for p in params)
    assert not frozen.model.training
    assert any(p.requires_grad for p in policy.model.parameters())  # the original is untouched
    assert frozen.tokenizer is policy.tokenizer
    assert frozen.max_length == policy.max_length
    b = policy.make_batch([[1, 2, 3]], [[4, 5]])
    with torch.no_grad():
        torch.testing.assert_close(frozen.logprobs(b), policy.logprobs(b))
    # independent storage: changing the original leaves the copy alone
    fp = frozen.fingerprint()
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(0.5)
    assert frozen.fingerprint() == fp
    assert policy.fingerprint() != fp


def test_pick_device():
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


# --- HF backend ---------------------------------------------------------------------------------

PROMPTS = ["<|system|>gen<|user|>hi<|assistant|>", "<|user|>What is 2+2?<|assistant|>", "<|user|>x<|assistant|>"]
ANSWERS = ["hello", "four", "xyz"]


@pytest.fixture(scope="module")
def taught(tok):
    """A tiny model taught by SFT to answer each prompt differently (a random one repeats its last token)."""
    import random

    from genenv_engine.training.trainer import sft

    torch.set_num_threads(1)
    pol = Policy(build_tiny_model(CFG, tok, seed=0), tok, torch.device("cpu"), max_length=64)
    pairs = [(pol.encode(p), pol.completion_ids(a)) for p, a in zip(PROMPTS, ANSWERS, strict=False)]
    sft(pol, pairs, steps=80, lr=2e-2, batch_size=6, rng=random.Random(0))
    pol.model.eval()
    return pol


def test_hf_backend_greedy_one_completion_per_prompt_in_order(taught):
    backend = HFBackend(taught)
    sampling = Sampling(greedy=True, max_new_tokens=8)
    first = backend.generate(PROMPTS, sampling)
    second = backend.generate(PROMPTS, sampling)
    assert len(first) == len(PROMPTS)
    assert all(isinstance(c, Completion) for c in first)
    assert [c.text for c in first] == ANSWERS  # one per prompt, in order
    assert all(c.finished for c in first)  # each stopped on end-of-sequence, which is not kept
    assert [c.token_ids for c in first] == [taught.encode(a) for a in ANSWERS]
    assert [c.token_ids for c in second] == [c.token_ids for c in first]  # greedy is deterministic
    for a, b in zip(first, second, strict=False):
        assert b.logprobs == pytest.approx(a.logprobs, abs=1e-6)
    for prompt, comp in zip(PROMPTS, first, strict=False):
        assert len(comp.logprobs) == len(comp.token_ids)
        assert all(lp <= 0.0 for lp in comp.logprobs)
        # the reported log-probs are this prompt's own and each token is the argmax
        b = taught.make_batch([taught.encode(prompt)], [comp.token_ids])
        with torch.no_grad():
            logits = taught.model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits[0, :-1]
        logsm = F.log_softmax(logits.float(), -1)[b.mask[0] == 1]
        chosen = logsm.gather(-1, torch.tensor(comp.token_ids).unsqueeze(-1)).squeeze(-1)
        torch.testing.assert_close(torch.tensor(comp.logprobs), chosen, rtol=1e-4, atol=1e-4)
        assert (chosen >= logsm.max(-1).values - 1e-5).all()
    # answer tokens plus one end-of-sequence each, over both calls
    assert backend.tokens_generated == 2 * sum(len(a) + 1 for a in ANSWERS)


def test_hf_backend_order_survives_chunking_and_reversal(taught):
    sampling = Sampling(greedy=True, max_new_tokens=8)
    chunked = HFBackend(taught, chunk_size=2).generate(PROMPTS, sampling)  # chunks of 2 then 1
    assert [c.text for c in chunked] == ANSWERS
    reversed_ = HFBackend(taught).generate(PROMPTS[::-1], sampling)
    assert [c.text for c in reversed_] == ANSWERS[::-1]
    single = [HFBackend(taught).generate([p], sampling)[0].text for p in PROMPTS]
    assert single == ANSWERS


def test_hf_backend_budget_cuts_unfinished_answers(taught):
    out = HFBackend(taught).generate(PROMPTS, Sampling(greedy=True, max_new_tokens=2))
    assert [c.text for c in out] == [a[:2] for a in ANSWERS]
    assert not any(c.finished for c in out)
    assert all(len(c.token_ids) == len(c.logprobs) == 2 for c in out)


def test_hf_backend_keeps_training_mode_and_is_registered(policy):
    policy.model.train()
    backend = get_backend("hf", policy=policy)
    assert isinstance(backend, HFBackend)
    out = backend.generate(PROMPTS[:1], Sampling(greedy=True, max_new_tokens=2))
    assert len(out) == 1
    assert policy.model.training
    backend.sync()  # a no-op for the in-process backend
    with pytest.raises(KeyError, match="nope"):
        get_backend("nope")


def test_hf_backend_seeded_sampling_is_reproducible(policy):
    backend = HFBackend(policy)
    sampling = Sampling(temperature=1.0, max_new_tokens=8, seed=123)
    a = backend.generate(PROMPTS, sampling)
    b = backend.generate(PROMPTS, sampling)
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    # an untrained model sampled at temperature 1 does not just repeat one token
    assert len({t for c in a for t in c.token_ids}) > 3
    for c in a:
        assert len(c.logprobs) == len(c.token_ids)
        assert all(lp <= 0.0 for lp in c.logprobs)


def test_hf_backend_logprobs_are_the_teacher_forced_ones_whatever_the_chunking(policy):
    from genenv_engine.backends import hf

    prompts = [policy.chat([{"role": "user", "content": q}]) for q in ("add 1 and 2", "sq 5", "mul 3 4")]
    sampling = Sampling(temperature=1.0, max_new_tokens=6, seed=7)
    one = hf.HFBackend(policy).generate(prompts, sampling)
    greedy = Sampling(max_new_tokens=6, greedy=True)
    whole = hf.HFBackend(policy).generate(prompts, greedy)
    split = hf.HFBackend(policy, chunk_size=1).generate(prompts, greedy)  # chunks of one prompt
    for a, b in zip(whole, split, strict=False):
        assert a.token_ids == b.token_ids and a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    for prompt, comp in zip(prompts, one, strict=False):
        ids = comp.token_ids + ([policy.tokenizer.eos_token_id] if comp.finished else [])
        batch = policy.make_batch([policy.encode(prompt)], [ids])
        with torch.no_grad():
            forced = policy.logprobs(batch)[0][batch.mask[0] == 1].tolist()
        assert comp.logprobs == pytest.approx(forced[: len(comp.logprobs)], abs=1e-4)
