"""The default backend: transformers ``generate`` with a KV cache, batched, on the policy's own model.

Prompts are left-padded and generated in chunks; the sampled tokens' log-probabilities come from
the processed scores (after temperature), gathered step by step. ``generate`` keeps every step's
full-vocabulary scores until it returns, so a chunk holds at most ``SCORES_BUDGET`` bytes of them:
128 prompts for the tiny byte vocabulary, about 40 for SmolLM2's 49k tokens at 128 new tokens.
Because the model object is shared with the trainer, `sync` has nothing to do.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from genenv_engine.backends.base import Completion, Sampling


def _tick_criterion(tick: Callable[[], None], every: float = 0.2):
    """A stopping criterion that never stops but calls ``tick`` between decoding steps (at most every ``every`` s).

    The loop's pause/stop check runs inside long ``generate`` calls this way: a pause blocks between two
    tokens and a stop raises out of ``generate``.
    """
    from transformers import StoppingCriteria

    class Tick(StoppingCriteria):
        last = 0.0

        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs) -> torch.Tensor:
            now = time.monotonic()
            if now - self.last >= every:
                self.last = now
                tick()
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
    return Tick()


def _tick_list(tick: Callable[[], None]):
    from transformers import StoppingCriteriaList

    return StoppingCriteriaList([_tick_criterion(tick)])


SCORES_BUDGET = 1 << 30
"""Bytes of per-step scores one ``generate`` call may hold (prompts x new tokens x vocabulary x 4)."""


def chunk_for(vocab: int, max_new_tokens: int, limit: int, budget: int = SCORES_BUDGET) -> int:
    """Prompts per ``generate`` call so the stored scores fit ``budget``, between 8 and ``limit``.

    >>> chunk_for(261, 200, 128)
    128
    >>> chunk_for(49152, 128, 128)
    42
    """
    return max(min(8, limit), min(limit, budget // max(1, max_new_tokens * vocab * 4)))


class HFBackend:
    """Batched generation with ``model.generate`` for a `genenv_engine.policy.Policy`."""

    def __init__(self, policy, chunk_size: int = 128) -> None:
        self.policy = policy
        self.chunk_size = chunk_size
        self.tokens_generated = 0
        self.tick: Callable[[], None] | None = None
        """Called between decoding steps (the loop sets its pause/stop check here)."""

    def sync(self) -> None:
        """Nothing to do: generation uses the trainer's model object."""

    @torch.no_grad()
    def generate(self, prompts: list[str], sampling: Sampling) -> list[Completion]:
        """Sample one completion per prompt; order is preserved."""
        out: list[Completion] = []
        size = chunk_for(len(self.policy.tokenizer), sampling.max_new_tokens, self.chunk_size)
        for start in range(0, len(prompts), size):
            out.extend(self._generate_chunk(prompts[start:start + size], sampling))
        return out

    def _generate_chunk(self, prompts: list[str], sampling: Sampling) -> list[Completion]:
        pol = self.policy
        tok = pol.tokenizer
        budget = max(8, pol.max_length - sampling.max_new_tokens)
        enc = [pol.encode(p)[-budget:] for p in prompts]
        width = max(len(e) for e in enc)
        ids = torch.full((len(enc), width), tok.pad_token_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, e in enumerate(enc):
            ids[i, width - len(e):] = torch.tensor(e)
            attn[i, width - len(e):] = 1
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        was_training = pol.model.training
        pol.activate()  # a LoRA role shares its model with the other role: use this role's adapter
        pol.model.eval()
        kwargs = dict(do_sample=False) if sampling.greedy else dict(do_sample=True, temperature=sampling.temperature, top_k=0, top_p=1.0)
        res = pol.model.generate(
            input_ids=ids.to(pol.device), attention_mask=attn.to(pol.device), max_new_tokens=sampling.max_new_tokens,
            eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, return_dict_in_generate=True,
            output_scores=True, **kwargs,
            **({"stopping_criteria": _tick_list(self.tick)} if self.tick else {}),
        )
        pol.model.train(was_training)
        new = res.sequences[:, width:]
        # log-prob of each sampled token, one step at a time (never a stacked copy of every step's scores)
        picked = [step.float().log_softmax(-1).gather(1, new[:, t:t + 1]).squeeze(1) for t, step in enumerate(res.scores)]
        scores = torch.stack(picked, dim=1).cpu() if picked else None
        new = new.cpu()
        return [self._completion(new[i], scores[i] if scores is not None else None) for i in range(len(enc))]

    def _completion(self, row: torch.Tensor, scores: torch.Tensor | None) -> Completion:
        tok = self.policy.tokenizer
        ids: list[int] = []
        lps: list[float] = []
        finished = False
        for t, token in enumerate(row.tolist()):
            if token == tok.eos_token_id:
                finished = True
                break
            if token == tok.pad_token_id:
                break
            ids.append(token)
            if scores is not None:
                lps.append(float(scores[t]))
        self.tokens_generated += len(ids) + int(finished)
        return Completion(tok.decode(ids, skip_special_tokens=True), ids, lps, finished)
