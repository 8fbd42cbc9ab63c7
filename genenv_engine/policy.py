"""A policy: one causal language model (or one LoRA adapter on a shared base) with its tokenizer.

Both roles (agent and simulator) are `Policy` objects. The tiny preset builds a small Llama from
the config with the byte tokenizer; other kinds load a local checkpoint. A LoRA policy is a named
adapter on a ``PeftModel`` that other policies may share; every forward pass first activates the
policy's own adapter. Log-probabilities are gathered only at completion positions, in chunks, so
full-vocabulary logits never exist for a whole batch (SmolLM2's 49k-token vocabulary would need
0.8 GB per copy at 32x128). Saving writes standard ``save_pretrained`` folders (full models) or
standard PEFT adapter folders, so a checkpoint reloads with plain transformers / peft.
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


def pick_dtype(name: str, device: torch.device) -> torch.dtype:
    """Resolve ``auto`` to bfloat16 on CUDA and float32 elsewhere.

    >>> pick_dtype("auto", torch.device("cpu"))
    torch.float32
    >>> pick_dtype("bfloat16", torch.device("cpu"))
    torch.bfloat16
    """
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, name)


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


def load_model(folder: str | Path, device: torch.device, dtype: torch.dtype | None = None):
    """Load a local causal-LM checkpoint folder (never the hub) onto ``device``."""
    from transformers import AutoModelForCausalLM

    quiet_transformers()
    kwargs = {"dtype": dtype} if dtype is not None else {}
    return AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, **kwargs).to(device)


def target_logprobs(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, chunk: int) -> torch.Tensor:
    """log p(target) for each row of ``hidden`` (N, H), computing the (chunk, vocab) logits one chunk at a time.

    With gradients on, each chunk is checkpointed: its logits are recomputed in the backward pass
    instead of being kept, so peak memory holds one chunk of logits, not N.
    """
    def one(h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        logits = head(h).float()
        return logits.gather(-1, t.unsqueeze(-1)).squeeze(-1) - logits.logsumexp(-1)

    parts = []
    for start in range(0, hidden.shape[0], chunk):
        h, t = hidden[start:start + chunk], targets[start:start + chunk]
        if torch.is_grad_enabled() and h.requires_grad:
            parts.append(torch.utils.checkpoint.checkpoint(one, h, t, use_reentrant=False))
        else:
            parts.append(one(h, t))
    return torch.cat(parts) if parts else hidden.new_zeros(0, dtype=torch.float32)


@dataclass
class Batch:
    """Right-padded prompt+completion tokens; ``mask`` marks completion tokens among the targets."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor

    def __len__(self) -> int:
        return self.input_ids.shape[0]


class Policy:
    """A causal LM (or one adapter of a shared PeftModel) plus tokenizer, with the verbs the trainers need."""

    def __init__(self, model, tokenizer, device: torch.device, max_length: int, *, adapter: str | None = None,
                 source: Path | None = None, frozen: bool = False, logprob_chunk: int = 2048) -> None:
        self.model = model.to(device)
        self.tokenizer = tokenizer
        self.device = device
        self.max_length = max_length
        self.adapter = adapter
        """Name of this policy's PEFT adapter on ``model``; None for a whole model of its own."""
        self.source = source
        """Local folder the (base) weights came from, if any (an external engine such as vLLM loads it)."""
        self.frozen = frozen
        self.logprob_chunk = logprob_chunk

    @classmethod
    def load(cls, path: str | Path, device: torch.device, max_length: int, dtype: torch.dtype | None = None,
             logprob_chunk: int = 2048) -> "Policy":
        """Load a full policy saved with `save` (or any local HF checkpoint folder)."""
        from genenv_engine.tokenizer import load_tokenizer

        model = load_model(path, device, dtype)
        return cls(model, load_tokenizer(path), device, max_length, source=Path(path), logprob_chunk=logprob_chunk)

    # ------------------------------------------------------------------ adapters

    @property
    def lora_rank(self) -> int | None:
        """The adapter's LoRA rank (None for a full model)."""
        return self.model.peft_config[self.adapter].r if self.adapter else None

    def activate(self) -> None:
        """Make this policy's adapter the active one on the shared model (no-op for a full model)."""
        if self.adapter is not None and self.model.active_adapter != self.adapter:
            self.model.set_adapter(self.adapter, inference_mode=self.frozen)

    def parameters(self) -> list[torch.nn.Parameter]:
        """The weights this policy trains: its adapter's LoRA matrices, or the whole model."""
        if self.adapter is None:
            return list(self.model.parameters())
        from genenv_engine.adapters import adapter_parameters

        return adapter_parameters(self.model, self.adapter)

    def sibling(self, adapter: str, *, frozen: bool = False) -> "Policy":
        """Another policy on the same shared model, using adapter ``adapter`` (already loaded)."""
        return Policy(self.model, self.tokenizer, self.device, self.max_length, adapter=adapter, source=self.source,
                      frozen=frozen, logprob_chunk=self.logprob_chunk)

    def frozen_copy(self, name: str | None = None) -> "Policy":
        """A frozen reference holding the current weights: a copied adapter ``name`` on the shared model
        (default ``<adapter>_ref``), or a deep copy of a full model (no gradients, eval mode)."""
        if self.adapter is not None:
            from genenv_engine.adapters import copy_adapter

            target = name or f"{self.adapter}_ref"
            copy_adapter(self.model, self.adapter, target, trainable=False)
            return self.sibling(target, frozen=True)
        model = copy.deepcopy(self.model).eval()
        for p in model.parameters():
            p.requires_grad_(False)
        return Policy(model, self.tokenizer, self.device, self.max_length, source=self.source, frozen=True,
                      logprob_chunk=self.logprob_chunk)

    # ------------------------------------------------------------------ saving

    def save(self, path: str | Path) -> None:
        """Write the weights (full safetensors, or the adapter alone in PEFT format), config and tokenizer."""
        quiet_transformers()
        path = Path(path)
        if self.adapter is not None:
            self.save_adapter(path)
        else:
            self.model.save_pretrained(str(path))
        self.tokenizer.save_pretrained(str(path))

    def save_adapter(self, path: str | Path) -> None:
        """Write this policy's adapter alone into ``path`` (``adapter_config.json`` + safetensors)."""
        if self.adapter is None:
            raise ValueError("save_adapter needs a LoRA policy; this one fine-tunes the whole model")
        from genenv_engine.adapters import save_adapter

        save_adapter(self.model, self.adapter, Path(path))

    # ------------------------------------------------------------------ text and batches

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
        rows = [self._fit(p, c) for p, c in zip(prompts, completions)]
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

    def fitted_length(self, prompt: list[int], completion: list[int]) -> int:
        """The tokens a pair takes in `make_batch` (after the cut to ``max_length``)."""
        prompt, completion = self._fit(prompt, completion)
        return len(prompt) + len(completion)

    def _fit(self, prompt: list[int], completion: list[int]) -> tuple[list[int], list[int]]:
        """A pair cut to ``max_length`` as `make_batch` cuts it: prompt tokens from the left first, then completion
        tokens from the right."""
        completion = completion[: self.max_length - 1]
        if len(prompt) + len(completion) > self.max_length:
            prompt = prompt[-(self.max_length - len(completion)):]
        return prompt, completion

    @torch.no_grad()
    def row_logprobs(self, prompts: list[list[int]], completions: list[list[int]], rows: int) -> list[torch.Tensor]:
        """`logprobs` of each pair without gradients, each prompt run once for all the completions that share it.

        Returns one vector per pair, laid out as its row of `logprobs` on `make_batch` (index ``t`` is the
        log-probability of token ``t + 1`` of prompt + completion; 0 at prompt positions). The pairs are taken
        prompt by prompt, at most ``rows`` completions per forward (a prompt with more gets a forward of its own):
        the distinct prompts, left-padded, fill a KV cache; it is copied to each of their completions, which then
        run right-padded after it. A task's k rollouts (or a seed's n variations) share one prompt, and prompts
        are most of their tokens, so this costs about what the completions alone cost. Equal to `logprobs` up to
        float rounding (the same operations in other shapes).
        """
        self.activate()
        base = self.model.get_base_model() if self.adapter is not None else self.model
        decoder, head = base.get_decoder(), base.get_output_embeddings()
        pairs = [self._fit(p, c) for p, c in zip(prompts, completions)]
        if any(not p or not c for p, c in pairs):
            raise ValueError("row_logprobs needs a non-empty prompt and completion in every pair")
        by_prompt: dict[tuple[int, ...], list[int]] = {}
        for i, (p, _) in enumerate(pairs):
            by_prompt.setdefault(tuple(p), []).append(i)
        calls: list[list[list[int]]] = [[]]
        for members in by_prompt.values():
            if calls[-1] and sum(map(len, calls[-1])) + len(members) > rows:
                calls.append([])
            calls[-1].append(members)
        out: list[torch.Tensor] = [torch.zeros(0)] * len(pairs)
        pad = self.tokenizer.pad_token_id
        # a layer that checkpoints in training mode drops the KV cache; without gradients it saves nothing anyway
        layers = [m for m in decoder.modules() if getattr(m, "gradient_checkpointing", False)]
        for m in layers:
            m.gradient_checkpointing = False
        try:
            for call in calls:
                self._shared_prefix_call(decoder, head, pairs, call, pad, out)
        finally:
            for m in layers:
                m.gradient_checkpointing = True
        return out

    def _shared_prefix_call(self, decoder, head, pairs: list[tuple[list[int], list[int]]], call: list[list[int]],
                            pad: int, out: list[torch.Tensor]) -> None:
        """One forward of `row_logprobs`: the prompts of ``call`` (lists of pairs sharing a prompt) into a KV cache,
        copied to their completions; each pair's vector is written into ``out``."""
        from transformers import DynamicCache

        dev = self.device
        plens = [len(pairs[m[0]][0]) for m in call]
        pw = max(plens)
        p_ids = torch.full((len(call), pw), pad, dtype=torch.long)
        p_mask = torch.zeros((len(call), pw), dtype=torch.long)
        for g, members in enumerate(call):
            p_ids[g, pw - plens[g]:] = torch.tensor(pairs[members[0]][0])
            p_mask[g, pw - plens[g]:] = 1
        cache = DynamicCache(config=decoder.config)
        p_hidden = decoder(input_ids=p_ids.to(dev), attention_mask=p_mask.to(dev),
                           position_ids=(p_mask.cumsum(-1) - 1).clamp(min=0).to(dev), past_key_values=cache,
                           use_cache=True).last_hidden_state[:, -1]
        members = [i for m in call for i in m]
        spread = torch.tensor([g for g, m in enumerate(call) for _ in m])  # each completion's prompt in the call
        spread_dev = spread.to(dev)
        shared = DynamicCache(config=decoder.config)
        for layer, kv in enumerate(cache.layers):
            shared.update(kv.keys[spread_dev], kv.values[spread_dev], layer)
        clens = [len(pairs[i][1]) for i in members]
        cw = max(clens)
        c_ids = torch.full((len(members), cw), pad, dtype=torch.long)
        c_mask = torch.zeros((len(members), cw), dtype=torch.long)
        for r, i in enumerate(members):
            c_ids[r, :clens[r]] = torch.tensor(pairs[i][1])
            c_mask[r, :clens[r]] = 1
        hidden = p_hidden[spread_dev][:, None]
        if cw > 1:  # completion token j + 1 is predicted at completion position j
            c_pos = torch.tensor(plens)[spread][:, None] + torch.arange(cw - 1)[None]
            c_hidden = decoder(input_ids=c_ids[:, :-1].to(dev),
                               attention_mask=torch.cat([p_mask[spread], c_mask[:, :-1]], 1).to(dev),
                               position_ids=c_pos.to(dev), past_key_values=shared, use_cache=True).last_hidden_state
            hidden = torch.cat([hidden, c_hidden], 1)
        r_idx, c_idx = c_mask.nonzero(as_tuple=True)
        values = target_logprobs(head, hidden[r_idx.to(dev), c_idx.to(dev)], c_ids[r_idx, c_idx].to(dev),
                                 self.logprob_chunk)
        start = 0
        for r, i in enumerate(members):
            plen = len(pairs[i][0])
            out[i] = torch.cat([values.new_zeros(plen - 1), values[start:start + clens[r]]])
            start += clens[r]

    def logprobs(self, batch: Batch) -> torch.Tensor:
        """Log-probabilities (B, T-1) of the batch's targets at completion positions (0 elsewhere).

        The decoder's final hidden states are taken once; the vocabulary projection runs only at the
        masked positions, ``logprob_chunk`` positions at a time.
        """
        self.activate()
        base = self.model.get_base_model() if self.adapter is not None else self.model
        decoder, head = base.get_decoder(), base.get_output_embeddings()
        hidden = decoder(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state[:, :-1]
        rows, cols = batch.mask.nonzero(as_tuple=True)
        values = target_logprobs(head, hidden[rows, cols], batch.targets[rows, cols], self.logprob_chunk)
        out = torch.zeros(batch.targets.shape, dtype=torch.float32, device=hidden.device)
        return out.index_put((rows, cols), values)

    def num_parameters(self) -> int:
        """Number of model parameters (the base plus every adapter on it)."""
        return sum(p.numel() for p in self.model.parameters())

    def num_trainable(self) -> int:
        """Number of parameters this policy trains."""
        return sum(p.numel() for p in self.parameters())

    def fingerprint(self) -> float:
        """A cheap scalar summary of the trained weights (sum of |w|), to tell whether they changed."""
        with torch.no_grad():
            return float(sum(p.detach().float().abs().sum() for p in self.parameters()))
