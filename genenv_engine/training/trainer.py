"""Optimizer-owning updates: supervised warm start, GRPO for the agent, RWR for the simulator.

Each trainer turns lists of token sequences into `Policy.make_batch` batches and calls the pure
losses of `genenv_engine.core.algorithms`; it owns its AdamW state so a session can save and resume it.
A ``tick`` callback runs between optimizer steps so a front end can pause or stop a long update.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from genenv_engine.core.algorithms import group_advantages, grpo_loss, rwr_loss
from genenv_engine.training.policy import Policy, prompt_groups

Tick = Callable[[], None]


def _noop() -> None:
    return None


PAD_BUDGET = 2048
"""Padded tokens per micro-batch of a GRPO or RWR step: the step's rows sorted by length and cut so that no
micro-batch holds more (measured on the tiny simulator's RWR step on CPU: 32 rows of 140-540 tokens at once
took 1.7x as long as the same rows in micro-batches of at most 2,048 padded tokens; smaller budgets gained nothing
more). The gradient is the whole step's, up to float rounding: the losses are means over sequences."""


def length_parts(lengths: Sequence[int], budget: int = PAD_BUDGET, most: int = 0) -> list[list[int]]:
    """The indices of rows of these token lengths, sorted by length and cut into micro-batches of at most
    ``budget`` padded tokens (rows x the longest) and ``most`` rows when set; a row longer than the budget runs
    alone.

    >>> length_parts([5, 1, 3, 2], 6), length_parts([5, 1, 3, 2], 100, most=3)
    ([[1, 3], [2], [0]], [[1, 3, 2], [0]])
    """
    parts: list[list[int]] = []
    current: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda j: lengths[j]):
        if current and ((len(current) + 1) * lengths[i] > budget or (most and len(current) >= most)):
            parts.append(current)
            current = []
        current.append(i)
    return parts + [current] if current else parts


@dataclass
class Group:
    """One task's k rollouts: the shared prompt, each completion's token ids and reward."""

    prompt_ids: list[int]
    completions: list[list[int]]
    rewards: list[float]


class _Trainer:
    """Shared AdamW ownership, micro-batched gradient accumulation, clipping and state persistence.

    One optimizer step covers a list of rows; they are run ``micro_batch`` sequences at a time (0: all
    at once) and each micro-batch's loss is scaled by its share of the step, so the accumulated
    gradient equals the gradient of the whole batch while activations exist for one micro-batch only.
    """

    def __init__(self, policy: Policy, lr: float, weight_decay: float = 0.0, micro_batch: int = 0) -> None:
        self.policy = policy
        self.params = policy.parameters()
        self.optimizer = torch.optim.AdamW(self.params, lr=lr, weight_decay=weight_decay)
        self.micro_batch = micro_batch
        self.steps = 0

    def _accumulate(
        self,
        rows: Sequence,
        loss_of: Callable[[list], tuple[torch.Tensor, dict[str, float], float | None]],
        lengths: Sequence[int] | None = None,
        most: int = 0,
    ) -> dict[str, float]:
        """One optimizer step over ``rows``; ``loss_of(part)`` returns (loss, metrics, share of the step), the share
        None for a mean over sequences (then it is the part's fraction of ``rows``). With the rows' token
        ``lengths`` the micro-batches are `length_parts` (at most ``most`` rows each when set); else
        ``micro_batch`` rows at a time in the given order (0: all at once)."""
        self.optimizer.zero_grad(set_to_none=True)
        if lengths is not None:
            parts = [[rows[i] for i in idx] for idx in length_parts(lengths, PAD_BUDGET, most)]
        else:
            size = self.micro_batch or len(rows)
            parts = [list(rows[start : start + size]) for start in range(0, len(rows), size)]
        total: dict[str, float] = {}
        for part in parts:
            loss, metrics, share = loss_of(part)
            share = len(part) / len(rows) if share is None else share
            (loss * share).backward()
            for key, value in metrics.items():
                total[key] = total.get(key, 0.0) + (value if key == "tokens" else value * share)
        total["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(self.params, 1.0))
        self.optimizer.step()
        self.steps += 1
        return total

    def _shared_step(
        self,
        chunk: list[int],
        prompts: Sequence[list[int]],
        completions: Sequence[list[int]],
        loss_of: Callable[[list[int]], tuple[torch.Tensor, dict[str, float]]],
    ) -> dict[str, float]:
        """One optimizer step over the rows ``chunk`` (a mean over sequences), its rows that share a prompt kept in
        one micro-batch so that `Policy.pair_logprobs` runs the prompt once for all of them; the micro-batches are
        `length_parts` of those prompt units by packed length, at most ``micro_batch`` sequences each (a unit
        larger than that runs alone). Which rows form the step is the caller's: only its cutting is done here."""
        groups = [[chunk[k] for k in unit] for unit in prompt_groups([prompts[i] for i in chunk])]
        packed = [
            self.policy.fitted_length(prompts[u[0]], completions[u[0]]) + sum(len(completions[i]) for i in u[1:])
            for u in groups
        ]
        most = max(1, self.micro_batch // max(map(len, groups))) if self.micro_batch else 0

        def part_loss(part: list) -> tuple[torch.Tensor, dict[str, float], float]:
            idx = [i for unit in part for i in unit]
            loss, metrics = loss_of(idx)
            return loss, metrics, len(idx) / len(chunk)

        return self._accumulate(groups, part_loss, packed, most=most)

    def save_state(self, path: Path) -> None:
        """Save the optimizer state and step count."""
        torch.save({"optimizer": self.optimizer.state_dict(), "steps": self.steps}, path)

    def load_state(self, path: Path) -> None:
        """Restore what `save_state` wrote."""
        state = torch.load(path, weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])


def sft(
    policy: Policy,
    pairs: Sequence[tuple[list[int], list[int]]],
    steps: int,
    lr: float,
    batch_size: int,
    rng: random.Random,
    on_step: Callable[[int, float], None] | None = None,
    micro_batch: int = 0,
    length_groups: int = 0,
) -> list[float]:
    """Supervised fine-tuning on (prompt ids, completion ids) pairs, cosine schedule with 5% warm-up.

    The loss is the mean NLL per completion token over each step's whole batch, whatever the micro-batching.
    ``length_groups`` > 1 sorts each step's sampled pairs by length and runs them as that many micro-batches
    (at most ``micro_batch`` sequences each when that is set), so each is padded only to its own longest: the
    same pairs and gradient, up to float rounding.
    """
    trainer = _Trainer(policy, lr, weight_decay=0.01, micro_batch=micro_batch)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        trainer.optimizer,
        lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / max(1, steps))),
    )
    policy.model.train()
    losses = []
    for step in range(steps):
        chosen = [pairs[rng.randrange(len(pairs))] for _ in range(batch_size)]
        total_tokens = sum(min(len(c), policy.max_length - 1) for _, c in chosen)

        def loss_of(part: list, total_tokens: int = total_tokens) -> tuple[torch.Tensor, dict[str, float], float]:
            batch = policy.make_batch([p for p, _ in part], [c for _, c in part])
            tokens = batch.mask.sum()
            loss = -(policy.logprobs(batch) * batch.mask).sum() / tokens
            return loss, {"loss": loss.item()}, float(tokens) / total_tokens

        if length_groups > 1:
            chosen.sort(key=lambda pc: len(pc[0]) + len(pc[1]))
            size = -(-len(chosen) // length_groups)
            trainer.micro_batch = min(micro_batch, size) if micro_batch else size
        metrics = trainer._accumulate(chosen, loss_of)
        sched.step()
        losses.append(metrics["loss"])
        if on_step:
            on_step(step, losses[-1])
    return losses


def minibatches(rows: int, minibatch: int, steps: int = 0) -> int:
    """Optimizer steps per pass over ``rows`` sequences: ``steps`` when fixed (never more than the rows),
    else as many as ``minibatch``-sized steps the rows fill.

    >>> minibatches(130, 64), minibatches(130, 64, steps=8), minibatches(5, 64, steps=8), minibatches(0, 64, steps=8)
    (3, 8, 5, 0)
    """
    if steps:
        return min(steps, rows)
    return -(-rows // minibatch)


def aligned(rows: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """Stack per-row log-prob vectors (`Policy.row_logprobs`) into the (B, T) shape of ``like`` (extra positions
    are masked)."""
    out = torch.zeros_like(like)
    for j, row in enumerate(rows):
        n = min(row.shape[0], like.shape[1])
        out[j, :n] = row[:n]
    return out


class GRPOTrainer(_Trainer):
    """GRPO: group-normalised advantages, clipped ratio, low-variance KL to a frozen reference agent."""

    def __init__(
        self,
        policy: Policy,
        reference: Policy,
        lr: float,
        clip: float,
        kl_coef: float,
        minibatch: int,
        update_epochs: int = 1,
        drop_zero_variance: bool = True,
        micro_batch: int = 0,
        steps: int = 0,
    ) -> None:
        super().__init__(policy, lr, micro_batch=micro_batch)
        self.reference = reference
        self.clip, self.kl_coef = clip, kl_coef
        self.minibatch, self.update_epochs = minibatch, update_epochs
        self.steps_per_pass = steps
        self.drop_zero_variance = drop_zero_variance

    def update(self, groups: list[Group], rng: random.Random, tick: Tick = _noop) -> dict[str, float]:
        """One GRPO update over the groups; returns mean loss, KL, clip fraction and counts."""
        rows = []
        for g in groups:
            rewards = torch.tensor(g.rewards, dtype=torch.float32)
            if self.drop_zero_variance and float(rewards.max() - rewards.min()) == 0.0:
                continue
            adv = group_advantages(rewards.unsqueeze(0))[0]
            rows.extend((g.prompt_ids, c, float(a)) for c, a in zip(g.completions, adv, strict=False))
        info = {
            "groups": float(len(groups)),
            "sequences": float(len(rows)),
            "steps": 0.0,
            "loss": 0.0,
            "kl": 0.0,
            "clip_fraction": 0.0,
        }
        if not rows:
            return info
        self.policy.model.train()
        # ratios are taken against the policy that sampled the rollouts: its log-probs are fixed here,
        # before any step (skipped when there is a single step, where they equal the current ones)
        parts = minibatches(len(rows), self.minibatch, self.steps_per_pass)
        single_step = self.update_epochs == 1 and parts == 1
        size = self.micro_batch or self.minibatch
        prompts, completions = [r[0] for r in rows], [r[1] for r in rows]
        old_rows = None if single_step else self.policy.row_logprobs(prompts, completions, size)
        # the reference is frozen: its log-probs are taken once, not again in every step and pass
        ref_rows = self.reference.row_logprobs(prompts, completions, size) if self.kl_coef > 0 else None

        def loss_of(idx: list[int]) -> tuple[torch.Tensor, dict[str, float]]:
            logp, mask = self.policy.pair_logprobs([rows[i][0] for i in idx], [rows[i][1] for i in idx])
            ref = None if ref_rows is None else aligned([ref_rows[i] for i in idx], logp)
            old = logp.detach() if old_rows is None else aligned([old_rows[i] for i in idx], logp)
            adv = torch.tensor([rows[i][2] for i in idx], device=logp.device)
            loss, m = grpo_loss(logp, old, adv, mask, self.clip, ref, self.kl_coef)
            m["loss"] = loss.item()
            m["tokens"] = float(mask.sum())
            return loss, m

        metrics: list[dict[str, float]] = []
        for _ in range(self.update_epochs):
            order = list(range(len(rows)))
            rng.shuffle(order)
            if self.steps_per_pass:  # a fixed number of steps: near-equal minibatches
                chunks = [order[i * len(order) // parts : (i + 1) * len(order) // parts] for i in range(parts)]
            else:
                chunks = [order[start : start + self.minibatch] for start in range(0, len(order), self.minibatch)]
            for chunk in chunks:
                metrics.append(self._shared_step(chunk, prompts, completions, loss_of))
                tick()
        for key in ("loss", "kl", "clip_fraction", "grad_norm"):
            info[key] = sum(m[key] for m in metrics) / len(metrics)
        info["tokens"] = sum(m["tokens"] for m in metrics)
        info["steps"] = float(len(metrics))
        return info


class RWRTrainer(_Trainer):
    """Reward-weighted regression with a KL penalty to the initial simulator and a KL cap per update."""

    def __init__(
        self,
        policy: Policy,
        initial: Policy,
        lr: float,
        kl_coef: float,
        max_kl: float,
        passes: int,
        batch_size: int,
        micro_batch: int = 0,
    ) -> None:
        super().__init__(policy, lr, micro_batch=micro_batch)
        self.initial = initial
        self.kl_coef, self.max_kl = kl_coef, max_kl
        self.passes, self.batch_size = passes, batch_size

    def update(
        self, examples: list[tuple[list[int], list[int], float]], rng: random.Random, tick: Tick = _noop
    ) -> dict[str, float]:
        """Weighted NLL over (context ids, generated ids, weight) examples; stops early past the KL cap."""
        info = {"examples": float(len(examples)), "steps": 0.0, "nll": 0.0, "kl": 0.0, "stopped_by_kl": 0.0}
        if not examples:
            return info
        self.policy.model.train()
        # the initial simulator is frozen: its log-probs are taken once (a seed's variations share one context)
        contexts, generated = [e[0] for e in examples], [e[1] for e in examples]
        ref_rows = self.initial.row_logprobs(contexts, generated, self.micro_batch or self.batch_size)

        def loss_of(idx: list[int]) -> tuple[torch.Tensor, dict[str, float]]:
            logp, mask = self.policy.pair_logprobs([contexts[i] for i in idx], [generated[i] for i in idx])
            ref = aligned([ref_rows[i] for i in idx], logp)
            weights = torch.tensor([examples[i][2] for i in idx], device=logp.device)
            loss, m = rwr_loss(logp, mask, weights, ref, self.kl_coef)
            m["tokens"] = float(mask.sum())
            return loss, m

        metrics: list[dict[str, float]] = []
        for _ in range(self.passes):
            order = list(range(len(examples)))
            rng.shuffle(order)
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                metrics.append(self._shared_step(chunk, contexts, generated, loss_of))
                tick()
            if metrics[-1]["kl"] > self.max_kl:
                info["stopped_by_kl"] = 1.0
                break
        info["nll"] = sum(m["nll"] for m in metrics) / len(metrics)
        info["tokens"] = sum(m["tokens"] for m in metrics)
        info["kl"] = metrics[-1]["kl"]
        info["steps"] = float(len(metrics))
        return info
