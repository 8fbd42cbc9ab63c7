"""A byte-level tokenizer with a chat template, built locally (no hub) and saved beside the models.

Every UTF-8 byte is one token (a BPE with no merges over the 256 byte symbols), plus a few special
tokens for the chat roles. It round-trips any text exactly and reloads through ``AutoTokenizer``.
"""

from __future__ import annotations

from pathlib import Path

SPECIAL_TOKENS = ["<|pad|>", "<|eos|>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}"
    "{% if m['role'] == 'assistant' %}<|eos|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_byte_tokenizer():
    """Return a ``PreTrainedTokenizerFast`` over raw bytes with chat-role special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<|pad|>", eos_token="<|eos|>", additional_special_tokens=SPECIAL_TOKENS[2:]
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def load_tokenizer(path: str | Path):
    """Reload a saved tokenizer with ``AutoTokenizer`` (local files only) and set left padding."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok
