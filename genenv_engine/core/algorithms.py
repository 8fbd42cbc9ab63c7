"""Pure tensor math of the two updates: GRPO for the agent, reward-weighted regression for the simulator.

Shapes: ``B`` sequences, ``T`` token positions. ``mask`` is 1.0 on completion tokens (the ones
the policy chose) and 0.0 on prompt and padding. Losses average over a sequence's tokens first,
then over sequences, so long and short answers weigh the same (as in the GRPO paper).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def group_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Group-normalised advantages (r - mean_group) / (std_group + eps) for rewards of shape (G, k).

    >>> group_advantages(torch.tensor([[1., 0., 0., 1.], [1., 1., 1., 1.]]))
    tensor([[ 0.8660, -0.8660, -0.8660,  0.8660],
            [ 0.0000,  0.0000,  0.0000,  0.0000]])
    """
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True, unbiased=True)
    return (rewards - mean) / (std + eps)


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, chunk: int = 16) -> torch.Tensor:
    """log pi(target_t | prefix) for logits (B, T, V) and targets (B, T), computed a few sequences at a time.

    Chunking keeps only one chunk's full-vocabulary log-softmax alive at once.

    >>> logits = torch.tensor([[[0., 0.], [2., 0.]]])
    >>> token_logprobs(logits, torch.tensor([[0, 0]])).round(decimals=4)
    tensor([[-0.6931, -0.1269]])
    """
    out = []
    for start in range(0, logits.shape[0], chunk):
        part = logits[start : start + chunk]
        tgt = targets[start : start + chunk]
        out.append(-F.cross_entropy(part.flatten(0, 1).float(), tgt.flatten(), reduction="none").view_as(tgt))
    return torch.cat(out, dim=0)


def masked_sequence_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over each sequence's masked tokens: (B, T) -> (B,); empty sequences give 0.

    >>> masked_sequence_mean(torch.tensor([[1., 3., 9.]]), torch.tensor([[1., 1., 0.]]))
    tensor([2.])
    """
    return (values * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


def low_var_kl(logp: torch.Tensor, ref_logp: torch.Tensor, clamp: float = 10.0) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || pi_ref): exp(ref - logp) - (ref - logp) - 1, always >= 0.

    >>> low_var_kl(torch.tensor([-1.0]), torch.tensor([-1.0]))
    tensor([0.])
    >>> low_var_kl(torch.tensor([-1.0]), torch.tensor([-2.0])).round(decimals=4)   # e^-1 + 1 - 1
    tensor([0.3679])
    """
    delta = (ref_logp - logp).clamp(-clamp, clamp)
    return (delta.exp() - delta - 1.0).clamp(min=0.0)


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip: float = 0.2,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped-ratio policy-gradient loss with a KL penalty to a reference policy.

    ``advantages`` has shape (B,) and is broadcast over each sequence's tokens. Returns the scalar
    loss and float metrics (policy loss, KL, clip fraction).

    >>> lp = torch.zeros(2, 2); m = torch.ones(2, 2)
    >>> loss, info = grpo_loss(lp, lp, torch.tensor([1.0, -1.0]), m)
    >>> float(loss), info["clip_fraction"]   # ratio 1: -(1*1 + 1*-1)/2
    (0.0, 0.0)
    >>> loss, _ = grpo_loss(torch.full((1, 1), 0.5), torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1))
    >>> round(float(loss), 4)   # ratio e^0.5 = 1.65 is clipped to 1.2
    -1.2
    """
    ratio = (logp - old_logp).exp()
    adv = advantages.unsqueeze(1)
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip, 1.0 + clip) * adv
    per_token = -torch.minimum(unclipped, clipped)
    policy_loss = masked_sequence_mean(per_token, mask).mean()
    kl = torch.zeros((), dtype=logp.dtype)
    if ref_logp is not None:
        kl = masked_sequence_mean(low_var_kl(logp, ref_logp), mask).mean()
    clip_fraction = masked_sequence_mean(((ratio - 1.0).abs() > clip).float(), mask).mean()
    loss = policy_loss + kl_coef * kl
    return loss, {"policy_loss": policy_loss.item(), "kl": kl.item(), "clip_fraction": clip_fraction.item()}


def rwr_loss(
    logp: torch.Tensor,
    mask: torch.Tensor,
    weights: torch.Tensor,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Reward-weighted regression: weighted negative log-likelihood plus KL to the initial policy.

    ``weights`` (B,) are the normalised exp(lambda * R_env) weights of each generated sequence.

    >>> lp = torch.tensor([[-1.0, -3.0], [-2.0, -2.0]]); m = torch.ones(2, 2)
    >>> loss, info = rwr_loss(lp, m, torch.tensor([1.5, 0.5]))
    >>> float(loss)   # (1.5 * 2 + 0.5 * 2) / 2
    2.0
    """
    nll = -masked_sequence_mean(logp, mask)
    weighted = (weights * nll).mean()
    kl = torch.zeros((), dtype=logp.dtype)
    if ref_logp is not None:
        kl = masked_sequence_mean(low_var_kl(logp, ref_logp), mask).mean()
    loss = weighted + kl_coef * kl
    return loss, {"nll": nll.mean().item(), "kl": kl.item()}
