"""A policy: one causal language model with its tokenizer, turned into training batches and log-probs.

Both roles (agent and simulator) are `Policy` objects. The tiny preset builds a small Llama from
the config with the byte tokenizer; ``model.kind = "hf"`` loads a local checkpoint. Saving writes
standard ``save_pretrained`` folders, so a checkpoint reloads with plain transformers.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import torch

from genenv_engine.config import ModelConfig


def quiet_transformers() -> None:
    """Silence transformers' per-load progress bars and info logs (the engine reports its own progress)."""
    from transformers.utils import logging

    logging.disable_progress_bar()
    logging.set_verbosity_error()


def pick_device(name: str) -> torch.device:
    """Resolve ``auto`` to CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def build_tiny_model(cfg: ModelConfig, tokenizer, seed: int):
    """A randomly initialised Llama-style model sized by ``cfg`` (about 1M parameters by default)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_length + 64, tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
    )
    return LlamaForCausalLM(config)


@dataclass
class Batch:
    """Right-padded prompt+completion tokens; ``mask`` marks completion tokens among the targets."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor


class Policy:
    """A causal LM plus tokenizer with the few verbs the trainers need."""

    def __init__(self, model, tokenizer, device: torch.device, max_length: int) -> None:
        self.model = model.to(device)
        self.tokenizer = tokenizer
        self.device = device
        self.max_length = max_length

    @classmethod
    def load(cls, path: str | Path, device: torch.device, max_length: int) -> "Policy":
        """Load a policy saved with `save` (or any local HF checkpoint folder)."""
        from transformers import AutoModelForCausalLM

        from genenv_engine.tokenizer import load_tokenizer

        quiet_transformers()

        model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True)
        return cls(model, load_tokenizer(path), device, max_length)

    def save(self, path: str | Path) -> None:
        """Write model weights (safetensors), config and tokenizer into ``path``."""
        quiet_transformers()
        self.model.save_pretrained(str(path))
        self.tokenizer.save_pretrained(str(path))

    def frozen_copy(self) -> "Policy":
        """A detached copy for use as a reference policy (no gradients, eval mode)."""
        model = copy.deepcopy(self.model).eval()
        for p in model.parameters():
            p.requires_grad_(False)
        return Policy(model, self.tokenizer, self.device, self.max_length)

    def chat(self, messages: list[dict[str, str]]) -> str:
        """Render chat messages with the tokenizer's template, ready for the assistant's turn."""
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def encode(self, text: str) -> list[int]:
        """Token ids of already-templated text (no extra special tokens)."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def completion_ids(self, text: str) -> list[int]:
        """Token ids of an assistant answer followed by end-of-sequence."""
        return self.encode(text) + [self.tokenizer.eos_token_id]

    def make_batch(self, prompts: list[list[int]], completions: list[list[int]]) -> Batch:
        """Concatenate prompt and completion ids, right-pad, and mask the completion targets.

        Over-long pairs lose prompt tokens from the left first, then completion tokens from the right.
        """
        rows = []
        for p, c in zip(prompts, completions):
            c = c[: self.max_length - 1]
            p = p[-(self.max_length - len(c)):] if len(p) + len(c) > self.max_length else p
            rows.append((p, c))
        width = max(len(p) + len(c) for p, c in rows)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        attn = torch.zeros((len(rows), width), dtype=torch.long)
        comp = torch.zeros((len(rows), width), dtype=torch.float32)
        for i, (p, c) in enumerate(rows):
            seq = p + c
            ids[i, : len(seq)] = torch.tensor(seq)
            attn[i, : len(seq)] = 1
            comp[i, len(p): len(seq)] = 1.0
        # position t predicts token t+1: targets and mask are shifted by one
        return Batch(ids.to(self.device), attn.to(self.device), ids[:, 1:].to(self.device), comp[:, 1:].to(self.device))

    def logprobs(self, batch: Batch) -> torch.Tensor:
        """Per-token log-probabilities (B, T-1) of the batch's targets under the current weights."""
        from genenv_engine.algorithms import token_logprobs

        logits = self.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        return token_logprobs(logits[:, :-1], batch.targets)

    def num_parameters(self) -> int:
        """Number of model parameters."""
        return sum(p.numel() for p in self.model.parameters())

    def fingerprint(self) -> float:
        """A cheap scalar summary of the weights (sum of |w|), to tell whether they changed."""
        with torch.no_grad():
            return float(sum(p.detach().abs().sum() for p in self.model.parameters()))
