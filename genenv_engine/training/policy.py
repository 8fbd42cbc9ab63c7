"""A policy: one causal language model (or one LoRA adapter on a shared base) with its tokenizer.

Both roles (agent and simulator) are `Policy` objects. The tiny preset builds a small Llama from
the config with the byte tokenizer; other kinds load a local checkpoint. A LoRA policy is a named
adapter on a ``PeftModel`` that other policies may share; every forward pass first activates the
policy's own adapter. Log-probabilities are gathered only at completion positions, in chunks, so
full-vocabulary logits never exist for a whole batch (SmolLM2's 49k-token vocabulary would need
0.8 GB per copy at 32x128), and pairs that share a prompt (a task's rollouts) are packed into one row under a tree
mask, so the trainers run each prompt once. Saving writes standard ``save_pretrained`` folders (full models) or
standard PEFT adapter folders, so a checkpoint reloads with plain transformers / peft. A policy may run its passes
without gradients in bfloat16 (``inference_dtype``, `inference_options`) while its updates keep float32 weights.
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch

from genenv_engine.config import ModelConfig, RuntimeConfig

PASS_TOKENS = {"forward": 0, "head": 0, "grad_forward": 0, "grad_head": 0}
"""Tokens the policies' log-prob passes ran through the decoder (``forward``) and the output head (``head``),
without gradients and with them (``grad_*``): counted for the benches' FLOP accounting, never read by a run."""


def _count(decoder_tokens: int, head_tokens: int) -> None:
    prefix = "grad_" if torch.is_grad_enabled() else ""
    PASS_TOKENS[prefix + "forward"] += int(decoder_tokens)
    PASS_TOKENS[prefix + "head"] += int(head_tokens)


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


def inference_options(runtime: RuntimeConfig) -> dict:
    """The `Policy` keywords of ``runtime.inference_dtype``, ``runtime.static_decode`` and ``runtime.train_forward``.

    >>> inference_options(RuntimeConfig(train_forward="transformers"))
    {'inference_dtype': None, 'static_decode': True, 'fused_forward': False}
    """
    dtype = None if runtime.inference_dtype == "weights" else getattr(torch, runtime.inference_dtype)
    return {
        "inference_dtype": dtype,
        "static_decode": runtime.static_decode,
        "fused_forward": runtime.train_forward == "fused",
    }


def build_tiny_model(cfg: ModelConfig, tokenizer, seed: int):
    """A randomly initialised Llama-style model sized by ``cfg`` (about 1M parameters by default)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_length + 64,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
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
        h, t = hidden[start : start + chunk], targets[start : start + chunk]
        if torch.is_grad_enabled() and h.requires_grad:
            parts.append(torch.utils.checkpoint.checkpoint(one, h, t, use_reentrant=False))
        else:
            parts.append(one(h, t))
    return torch.cat(parts) if parts else hidden.new_zeros(0, dtype=torch.float32)


def prompt_groups(prompts: list[list[int]]) -> list[list[int]]:
    """The indices of ``prompts`` grouped by equal prompt, in order of first appearance.

    >>> prompt_groups([[1, 2], [3], [1, 2]])
    [[0, 2], [1]]
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(tuple(p), []).append(i)
    return list(groups.values())


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

    def __init__(
        self,
        model,
        tokenizer,
        device: torch.device,
        max_length: int,
        *,
        adapter: str | None = None,
        source: Path | None = None,
        frozen: bool = False,
        logprob_chunk: int = 2048,
        inference_dtype: torch.dtype | None = None,
        static_decode: bool = False,
        fused_forward: bool = False,
    ) -> None:
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
        self.inference_dtype = inference_dtype
        """The dtype of passes without gradients (decoding, log-probs under ``no_grad``); None: the weights'."""
        self.static_decode = static_decode
        """Decode on the static-cache forward whenever it serves the model (`genenv_engine.backends.hf.decode`)."""
        self.fused_forward = fused_forward
        """Run the decoder of updates and log-prob passes on `genenv_engine.training.fused_llama` where it serves."""

    @classmethod
    def load(
        cls,
        path: str | Path,
        device: torch.device,
        max_length: int,
        dtype: torch.dtype | None = None,
        logprob_chunk: int = 2048,
        **options,
    ) -> Policy:
        """Load a full policy saved with `save` (or any local HF checkpoint folder); ``options``:
        `inference_options`."""
        from genenv_engine.training.tokenizer import load_tokenizer

        model = load_model(path, device, dtype)
        return cls(
            model, load_tokenizer(path), device, max_length, source=Path(path), logprob_chunk=logprob_chunk, **options
        )

    def _options(self) -> dict:
        return {
            "inference_dtype": self.inference_dtype,
            "static_decode": self.static_decode,
            "fused_forward": self.fused_forward,
        }

    def no_grad_autocast(self):
        """Autocast to ``inference_dtype`` for a pass without gradients (nothing otherwise, or with gradients on)."""
        if self.inference_dtype is None or torch.is_grad_enabled():
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.inference_dtype)

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
        from genenv_engine.training.adapters import adapter_parameters

        return adapter_parameters(self.model, self.adapter)

    def sibling(self, adapter: str, *, frozen: bool = False) -> Policy:
        """Another policy on the same shared model, using adapter ``adapter`` (already loaded)."""
        return Policy(
            self.model,
            self.tokenizer,
            self.device,
            self.max_length,
            adapter=adapter,
            source=self.source,
            frozen=frozen,
            logprob_chunk=self.logprob_chunk,
            **self._options(),
        )

    def frozen_copy(self, name: str | None = None) -> Policy:
        """A frozen reference holding the current weights: a copied adapter ``name`` on the shared model
        (default ``<adapter>_ref``), or a deep copy of a full model (no gradients, eval mode)."""
        if self.adapter is not None:
            from genenv_engine.training.adapters import copy_adapter

            target = name or f"{self.adapter}_ref"
            copy_adapter(self.model, self.adapter, target, trainable=False)
            return self.sibling(target, frozen=True)
        model = copy.deepcopy(self.model).eval()
        for p in model.parameters():
            p.requires_grad_(False)
        return Policy(
            model,
            self.tokenizer,
            self.device,
            self.max_length,
            source=self.source,
            frozen=True,
            logprob_chunk=self.logprob_chunk,
            **self._options(),
        )

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
        from genenv_engine.training.adapters import save_adapter

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
        rows = [self._fit(p, c) for p, c in zip(prompts, completions, strict=False)]
        width = max(len(p) + len(c) for p, c in rows)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        attn = torch.zeros((len(rows), width), dtype=torch.long)
        comp = torch.zeros((len(rows), width), dtype=torch.float32)
        for i, (p, c) in enumerate(rows):
            seq = p + c
            ids[i, : len(seq)] = torch.tensor(seq)
            attn[i, : len(seq)] = 1
            comp[i, len(p) : len(seq)] = 1.0
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
            prompt = prompt[-(self.max_length - len(completion)) :]
        return prompt, completion

    def pair_logprobs(
        self, prompts: list[list[int]], completions: list[list[int]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`logprobs` of ``make_batch(prompts, completions)`` and that batch's ``mask``, each distinct prompt run once.

        Pairs sharing a prompt (a task's k rollouts, a seed's variations) are packed into one row: the prompt,
        then each completion, which attends to the prompt and to its own earlier tokens only and sits at the
        positions it has after the prompt (`_packed_values`). The same operations in other shapes, so equal to
        the padded forward up to float rounding, and differentiable when gradients are on.
        """
        pairs = self._fitted_pairs(prompts, completions)
        groups = prompt_groups([p for p, _ in pairs])
        if len(groups) == len(pairs):  # nothing to share: the padded forward is as fast
            batch = self.make_batch(prompts, completions)
            return self.logprobs(batch), batch.mask
        values = self._packed_values(pairs, groups)
        order = [i for members in groups for i in members]  # the order of ``values``
        width = max(len(p) + len(c) for p, c in pairs)
        rows = torch.cat([torch.full((len(pairs[i][1]),), i, dtype=torch.long) for i in order])
        cols = torch.cat([torch.arange(len(pairs[i][0]) - 1, len(pairs[i][0]) - 1 + len(pairs[i][1])) for i in order])
        mask = torch.zeros((len(pairs), width - 1), dtype=torch.float32)
        mask[rows, cols] = 1.0
        out = torch.zeros((len(pairs), width - 1), dtype=torch.float32, device=values.device)
        return out.index_put((rows.to(values.device), cols.to(values.device)), values), mask.to(values.device)

    @torch.no_grad()
    def row_logprobs(self, prompts: list[list[int]], completions: list[list[int]], rows: int) -> list[torch.Tensor]:
        """`logprobs` of each pair without gradients, each prompt run once for all the completions that share it.

        Returns one vector per pair, laid out as its row of `logprobs` on `make_batch` (index ``t`` is the
        log-probability of token ``t + 1`` of prompt + completion; 0 at prompt positions). The pairs are taken
        prompt by prompt, shortest first, at most ``rows`` completions per forward (a prompt with more gets a forward
        of its own), each forward packing a prompt with its completions into one row (`_packed_values`). A task's
        k rollouts (or a seed's n variations) share one prompt, and prompts are most of their tokens, so this costs
        about what the completions alone cost. Equal to `logprobs` up to float rounding.
        """
        pairs = self._fitted_pairs(prompts, completions)
        calls: list[list[list[int]]] = [[]]
        # shortest rows first, so that each forward pads its rows to about their own length
        for members in sorted(
            prompt_groups([p for p, _ in pairs]), key=lambda m: len(pairs[m[0]][0]) + sum(len(pairs[i][1]) for i in m)
        ):
            if calls[-1] and sum(map(len, calls[-1])) + len(members) > rows:
                calls.append([])
            calls[-1].append(members)
        out: list[torch.Tensor] = [torch.zeros(0)] * len(pairs)
        for groups in filter(None, calls):
            values = self._packed_values(pairs, groups)
            start = 0
            for i in (i for members in groups for i in members):
                plen, clen = len(pairs[i][0]), len(pairs[i][1])
                out[i] = torch.cat([values.new_zeros(plen - 1), values[start : start + clen]])
                start += clen
        return out

    def _fitted_pairs(
        self, prompts: list[list[int]], completions: list[list[int]]
    ) -> list[tuple[list[int], list[int]]]:
        pairs = [self._fit(p, c) for p, c in zip(prompts, completions, strict=False)]
        if any(not p or not c for p, c in pairs):
            raise ValueError("pair log-probs need a non-empty prompt and completion in every pair")
        return pairs

    def _packed_values(self, pairs: list[tuple[list[int], list[int]]], groups: list[list[int]]) -> torch.Tensor:
        """The log-probability of every completion token of the ``pairs`` (cut to fit) that ``groups`` names (their
        indices by prompt, `prompt_groups`), group after group and pair after pair, from one forward in which each
        group is one row: the prompt, then each of its completions.

        A tree mask keeps the completions apart (a completion token attends to the prompt and to its own
        completion's earlier tokens), and position ids restart after the prompt for each completion, so every
        completion sees exactly what it sees alone after its prompt. Rows are right-padded; a padding position
        attends only to padding, so no attention row is empty.
        """
        self.activate()
        base = self.model.get_base_model() if self.adapter is not None else self.model
        decoder, head = base.get_decoder(), base.get_output_embeddings()
        width = max(len(pairs[m[0]][0]) + sum(len(pairs[i][1]) for i in m) for m in groups)
        ids = torch.full((len(groups), width), self.tokenizer.pad_token_id, dtype=torch.long)
        positions = torch.zeros((len(groups), width), dtype=torch.long)
        branch = torch.full((len(groups), width), -2, dtype=torch.long)  # -1 prompt, j completion j, -2 padding
        row_of: dict[int, int] = {}
        start_of: dict[int, int] = {}
        for r, members in enumerate(groups):
            prompt = pairs[members[0]][0]
            n = len(prompt)
            ids[r, :n], positions[r, :n], branch[r, :n] = torch.tensor(prompt), torch.arange(n), -1
            for j, i in enumerate(members):
                c = pairs[i][1]
                ids[r, n : n + len(c)] = torch.tensor(c)
                positions[r, n : n + len(c)] = torch.arange(len(prompt), len(prompt) + len(c))
                branch[r, n : n + len(c)] = j
                row_of[i], start_of[i] = r, n
                n += len(c)
        query, key = branch[:, :, None], branch[:, None, :]
        allowed = torch.ones((width, width), dtype=torch.bool).tril() & (((key == -1) & (query != -2)) | (key == query))
        # completion token 0 is predicted at the prompt's last position, token t at the completion's position t - 1
        order = [i for members in groups for i in members]
        at_row = torch.cat([torch.full((len(pairs[i][1]),), row_of[i], dtype=torch.long) for i in order])
        at_col = torch.cat(
            [
                torch.tensor([len(pairs[i][0]) - 1] + list(range(start_of[i], start_of[i] + len(pairs[i][1]) - 1)))
                for i in order
            ]
        )
        targets = torch.tensor([t for i in order for t in pairs[i][1]], dtype=torch.long)
        dev = self.device
        _count(sum(len(pairs[m[0]][0]) + sum(len(pairs[i][1]) for i in m) for m in groups), len(targets))
        with self.no_grad_autocast():
            hidden = self._hidden(decoder, ids.to(dev), allowed[:, None].to(dev), positions.to(dev))
            return target_logprobs(head, hidden[at_row.to(dev), at_col.to(dev)], targets.to(dev), self.logprob_chunk)

    def logprobs(self, batch: Batch) -> torch.Tensor:
        """Log-probabilities (B, T-1) of the batch's targets at completion positions (0 elsewhere).

        The decoder's final hidden states are taken once; the vocabulary projection runs only at the
        masked positions, ``logprob_chunk`` positions at a time.
        """
        self.activate()
        base = self.model.get_base_model() if self.adapter is not None else self.model
        decoder, head = base.get_decoder(), base.get_output_embeddings()
        rows, cols = batch.mask.nonzero(as_tuple=True)
        _count(int(batch.attention_mask.sum()), rows.numel())
        with self.no_grad_autocast():
            hidden = self._hidden(decoder, batch.input_ids, batch.attention_mask)[:, :-1]
            values = target_logprobs(head, hidden[rows, cols], batch.targets[rows, cols], self.logprob_chunk)
        out = torch.zeros(batch.targets.shape, dtype=torch.float32, device=hidden.device)
        return out.index_put((rows, cols), values)

    def _hidden(
        self, decoder, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The decoder's last hidden states: on the fused forward when asked and it serves the model (float32 LoRA
        Llama outside autocast), else through ``decoder``."""
        if self.fused_forward:
            from genenv_engine.training import fused_llama

            if fused_llama.serves(self.model):
                return fused_llama.hidden_states(self.model, ids, mask, positions)
        return decoder(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False).last_hidden_state

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
