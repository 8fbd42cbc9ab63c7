"""Curriculum and loss math against hand-computed values (GenEnv Eqs. 2-3, RWR weighting, GRPO)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from genenv_engine.core.algorithms import (
    group_advantages,
    grpo_loss,
    low_var_kl,
    masked_sequence_mean,
    rwr_loss,
    token_logprobs,
)
from genenv_engine.core.curriculum import (
    alpha_reward,
    calibration_error,
    env_reward,
    in_band,
    is_success,
    rwr_weights,
    success_rate,
)

# --- curriculum ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "alpha", "beta", "expected"),
    [
        (0.3, 0.5, 2.0, math.exp(-0.08)),  # (0.3 - 0.5)^2 = 0.04
        (0.5, 0.5, 2.0, 1.0),
        (0.7, 0.5, 2.0, math.exp(-0.08)),  # symmetric around alpha
        (0.4, 0.5, 2.0, math.exp(-0.02)),
        (0.0, 0.5, 2.0, math.exp(-0.5)),
        (1.0, 0.5, 2.0, math.exp(-0.5)),
        (0.0, 0.5, 10.0, math.exp(-2.5)),
        (1.0, 0.25, 4.0, math.exp(-2.25)),  # 4 * 0.75^2
        (0.25, 0.25, 4.0, 1.0),
    ],
)
def test_alpha_reward_table(p, alpha, beta, expected):
    assert alpha_reward(p, alpha, beta) == pytest.approx(expected, rel=1e-12)


def test_alpha_reward_defaults_are_alpha_half_beta_two():
    assert alpha_reward(0.3) == pytest.approx(math.exp(-0.08), rel=1e-12)


def test_env_reward_kinds():
    assert env_reward(0.3, "alpha", 0.5, 2.0) == pytest.approx(math.exp(-0.08), rel=1e-12)
    assert env_reward(0.0, "uniform", 0.5, 2.0) == 1.0
    assert env_reward(1.0, "uniform", 0.5, 100.0) == 1.0
    with pytest.raises(ValueError, match="nope"):
        env_reward(0.5, "nope", 0.5, 2.0)


@pytest.mark.parametrize(
    ("p", "alpha", "k_min", "expected"),
    [
        (0.4, 0.5, 0.1, True),
        (0.6, 0.5, 0.1, True),
        (0.5, 0.5, 0.1, True),
        (0.45, 0.5, 0.1, True),
        (0.39, 0.5, 0.1, False),
        (0.61, 0.5, 0.1, False),
        (0.375, 0.5, 0.1, False),
        (0.0, 0.5, 0.1, False),
        (1.0, 0.5, 0.1, False),
        (0.5, 0.5, 0.0, True),
        (0.5 + 1e-6, 0.5, 0.0, False),
        (0.49, 0.5, 0.0, False),
        (0.25, 0.5, 0.0, False),
        (0.3, 0.3, 0.0, True),
        (0.2, 0.3, 0.1, True),  # 0.3 - 0.1 in float is not exactly 0.2: the slack keeps it in
        (0.4, 0.3, 0.1, True),
        (0.75, 0.5, 0.25, True),
        (0.76, 0.5, 0.25, False),
    ],
)
def test_in_band_table(p, alpha, k_min, expected):
    assert in_band(p, alpha, k_min) is expected


def test_in_band_edges_from_real_success_rates():
    # 4/10 and 6/10 are the edges of the paper's band; 3/8 and 5/8 fall outside
    assert in_band(success_rate(4, 10)) and in_band(success_rate(6, 10))
    assert not in_band(success_rate(3, 8)) and not in_band(success_rate(5, 8))
    assert in_band(success_rate(2, 4), k_min=0.0)


@pytest.mark.parametrize(
    ("rewards", "lam"),
    [
        ([1.0, 0.0], 1.0),
        ([0.2, 0.5, 0.9, 0.9], 1.0),
        ([0.98, 1.0, 0.99], 3.0),
        ([0.1, 0.7, 0.4, 1.0, 0.0], 0.5),
        ([5.0, -5.0, 0.0], 2.0),
    ],
)
def test_rwr_weights_mean_one_and_exponential_ratios(rewards, lam):
    w = rwr_weights(rewards, lam)
    assert len(w) == len(rewards)
    assert sum(w) / len(w) == pytest.approx(1.0, rel=1e-12)
    assert all(x > 0 for x in w)
    for i, j in itertools.permutations(range(len(rewards)), 2):
        assert w[i] / w[j] == pytest.approx(math.exp(lam * (rewards[i] - rewards[j])), rel=1e-12)


def test_rwr_weights_hand_values():
    e = math.e
    assert rwr_weights([1.0, 0.0], 1.0) == pytest.approx([2 * e / (e + 1), 2 / (e + 1)], rel=1e-12)
    assert rwr_weights([0.3, 0.3, 0.3]) == [1.0, 1.0, 1.0]
    assert rwr_weights([]) == []
    assert rwr_weights([0.0, 1.0], lam=0.0) == [1.0, 1.0]


def test_rwr_weights_survive_huge_rewards():
    w = rwr_weights([1000.0, 999.0], lam=1.0)  # exp(1000) overflows without the max shift
    assert w == pytest.approx([2 * math.e / (math.e + 1), 2 / (math.e + 1)], rel=1e-12)


def test_beta_two_makes_in_band_weights_nearly_flat():
    # every in-band p-hat with the paper's band (alpha 0.5, k_min 0.1), beta 2 and lambda 1
    p_hats = [k / 20 for k in range(21) if in_band(k / 20)]
    assert p_hats == [0.4, 0.45, 0.5, 0.55, 0.6]
    rewards = [alpha_reward(p, 0.5, 2.0) for p in p_hats]
    assert min(rewards) == pytest.approx(math.exp(-0.02), rel=1e-12)
    w = rwr_weights(rewards, lam=1.0)
    assert max(w) / min(w) <= math.exp(0.02) + 1e-12
    assert max(w) / min(w) == pytest.approx(math.exp(1.0 - math.exp(-0.02)), rel=1e-12)
    # a sharper beta spreads them out
    sharp = rwr_weights([alpha_reward(p, 0.5, 200.0) for p in p_hats], lam=1.0)
    assert max(sharp) / min(sharp) > math.exp(0.8)


@pytest.mark.parametrize(("k", "n", "expected"), [(3, 8, 0.375), (0, 4, 0.0), (4, 4, 1.0), (1, 3, 1 / 3), (0, 0, None)])
def test_success_rate_table(k, n, expected):
    assert success_rate(k, n) == expected


@pytest.mark.parametrize(("k", "n"), [(5, 4), (-1, 4), (0, -1), (1, 0)])
def test_success_rate_rejects_bad_counts(k, n):
    with pytest.raises(ValueError, match=f"{k}/{n}"):
        success_rate(k, n)


@pytest.mark.parametrize(
    ("p_hats", "alpha", "expected"),
    [
        ([0.25, 0.75, 0.5], 0.5, 1 / 6),
        ([0.5], 0.5, 0.0),
        ([0.0, 1.0], 0.5, 0.5),
        ([0.2, 0.4], 0.3, 0.1),
        ([1.0, 1.0, 1.0, 0.0], 0.25, (0.75 * 3 + 0.25) / 4),
        ([], 0.5, None),
    ],
)
def test_calibration_error_table(p_hats, alpha, expected):
    got = calibration_error(p_hats, alpha)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("reward", "threshold", "expected"),
    [
        (0.6, 0.5, True),
        (0.5, 0.5, True),
        (0.4999, 0.5, False),
        (0.0, 0.5, False),
        (1.0, 1.0, True),
        (0.999, 1.0, False),
        (0.3 + 0.2, 0.5, True),
        (0.1 + 0.2, 0.3, True),
    ],
)
def test_is_success_table(reward, threshold, expected):
    assert is_success(reward, threshold) is expected


# --- GRPO advantages and loss -------------------------------------------------------------------


def test_group_advantages_hand_values():
    rewards = torch.tensor([[1.0, 0.0, 0.5, 0.5], [3.0, 1.0, 1.0, 1.0]])
    # row 0: mean 0.5, deviations (.5, -.5, 0, 0), unbiased var = 0.5 / 3, std = sqrt(1/6)
    s0 = math.sqrt(1 / 6)
    # row 1: mean 1.5, deviations (1.5, -.5, -.5, -.5), unbiased var = 3 / 3 = 1, std = 1
    expected = torch.tensor([[0.5 / s0, -0.5 / s0, 0.0, 0.0], [1.5, -0.5, -0.5, -0.5]])
    got = group_advantages(rewards, eps=0.0)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    # with the default eps, the values shrink by std / (std + eps)
    torch.testing.assert_close(
        group_advantages(rewards), expected * torch.tensor([[s0 / (s0 + 1e-6)], [1 / (1 + 1e-6)]])
    )


def test_group_advantages_constant_group_is_zero():
    got = group_advantages(torch.tensor([[0.7, 0.7, 0.7]]))
    assert torch.equal(got, torch.zeros(1, 3))


def test_group_advantages_binary_rewards():
    # the docstring case: 2 of 4 succeed -> +-sqrt(3)/2 with the unbiased std sqrt(1/3)
    got = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]), eps=0.0)
    h = math.sqrt(3) / 2
    torch.testing.assert_close(got, torch.tensor([[h, -h, -h, h]]))


def _one(value: float) -> torch.Tensor:
    return torch.tensor([[value]])


@pytest.mark.parametrize(
    ("delta", "adv", "expected", "clipped"),
    [
        (math.log(1.1), 1.0, -1.1, 0.0),  # inside the clip range: -ratio * A
        (math.log(0.9), -2.0, 1.8, 0.0),  # inside: -(0.9 * -2)
        (math.log(1.5), 1.0, -1.2, 1.0),  # above 1 + clip, positive advantage: clipped to 1.2
        (math.log(1.5), -1.0, 1.5, 1.0),  # above 1 + clip, negative advantage: min picks unclipped -1.5
        (math.log(0.5), -1.0, 0.8, 1.0),  # below 1 - clip, negative advantage: clipped to 0.8
        (math.log(0.5), 1.0, -0.5, 1.0),  # below 1 - clip, positive advantage: unclipped 0.5
        (0.0, 3.0, -3.0, 0.0),
    ],
)
def test_grpo_loss_single_token_table(delta, adv, expected, clipped):
    loss, info = grpo_loss(_one(-1.0 + delta), _one(-1.0), torch.tensor([adv]), _one(1.0), clip=0.2)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert info["policy_loss"] == pytest.approx(expected, rel=1e-5)
    assert info["clip_fraction"] == clipped
    assert info["kl"] == 0.0


def test_grpo_loss_averages_tokens_then_sequences():
    # seq 0: two tokens, ratios 1.1 and 1.0, A = 1 -> mean(-1.1, -1.0) = -1.05
    # seq 1: one valid token (second masked), ratio 0.9, A = -1 -> 0.9
    old = torch.tensor([[-1.0, -2.0], [-0.5, -0.5]])
    logp = old + torch.tensor([[math.log(1.1), 0.0], [math.log(0.9), 5.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    loss, info = grpo_loss(logp, old, torch.tensor([1.0, -1.0]), mask, clip=0.2)
    assert float(loss) == pytest.approx((-1.05 + 0.9) / 2, rel=1e-5)
    assert info["clip_fraction"] == 0.0  # the masked token's ratio e^5 is not counted


def test_grpo_loss_ignores_masked_tokens():
    old = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.7, -0.9]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    adv = torch.tensor([0.7, -1.3])
    a = old + 0.05
    b = a.clone()
    b[0, 2] = 4.0  # masked positions changed wildly
    b[1, 0] = -9.0
    ref = old - 0.1
    loss_a, info_a = grpo_loss(a, old, adv, mask, 0.2, ref, 0.5)
    loss_b, info_b = grpo_loss(b, old, adv, mask, 0.2, ref, 0.5)
    assert float(loss_a) == pytest.approx(float(loss_b), rel=1e-6)
    assert info_a == pytest.approx(info_b)
    # and changing an unmasked token does change it
    c = a.clone()
    c[0, 0] -= 0.03
    assert float(grpo_loss(c, old, adv, mask, 0.2, ref, 0.5)[0]) != pytest.approx(float(loss_a), rel=1e-6)


def test_grpo_loss_kl_term_adds_kl_coef_times_k3():
    logp = torch.tensor([[-1.0, -1.0]])
    ref = torch.tensor([[-2.0, -1.0]])  # token 0: delta = -1 -> e^-1 + 1 - 1; token 1: 0
    mask = torch.ones(1, 2)
    adv = torch.tensor([1.0])
    k3 = math.exp(-1.0) / 2  # mean over the two tokens
    base, _ = grpo_loss(logp, logp, adv, mask, 0.2)
    loss, info = grpo_loss(logp, logp, adv, mask, 0.2, ref_logp=ref, kl_coef=0.1)
    assert info["kl"] == pytest.approx(k3, rel=1e-6)
    assert float(base) == pytest.approx(-1.0, rel=1e-6)
    assert float(loss) == pytest.approx(-1.0 + 0.1 * k3, rel=1e-6)
    # with kl_coef 0 the KL is reported but not added
    loss0, info0 = grpo_loss(logp, logp, adv, mask, 0.2, ref_logp=ref, kl_coef=0.0)
    assert float(loss0) == pytest.approx(-1.0, rel=1e-6)
    assert info0["kl"] == pytest.approx(k3, rel=1e-6)


@pytest.mark.parametrize(
    ("logp", "ref", "expected"),
    [(-1.0, -1.0, 0.0), (-1.0, -2.0, math.exp(-1)), (-2.0, -1.0, math.e - 2.0), (-0.3, -0.8, math.exp(-0.5) - 0.5)],
)
def test_low_var_kl_k3_values(logp, ref, expected):
    assert float(low_var_kl(torch.tensor([logp]), torch.tensor([ref]))) == pytest.approx(expected, rel=1e-6, abs=1e-7)


def test_low_var_kl_is_clamped():
    # delta clamped to 10: e^10 - 10 - 1
    got = float(low_var_kl(torch.tensor([-100.0]), torch.tensor([0.0])))
    assert got == pytest.approx(math.exp(10) - 11, rel=1e-5)


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")
def test_grpo_gradient_pushes_positive_advantage_tokens_up():
    old = torch.tensor([[-1.0, -1.5], [-0.7, -2.0]])
    logp = old.clone().requires_grad_(True)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    loss, _ = grpo_loss(logp, old, torch.tensor([2.0, -1.0]), mask, 0.2)
    loss.backward()
    g = logp.grad
    # gradient descent moves logp by -grad: positive-advantage tokens go up, negative ones down
    assert (g[0] < 0).all()
    assert g[1, 0] > 0
    assert g[1, 1] == 0.0  # masked
    # d loss / d logp at ratio 1 is -A / (tokens in sequence) / sequences
    torch.testing.assert_close(g, torch.tensor([[-2.0 / 2 / 2, -2.0 / 2 / 2], [1.0 / 2, 0.0]]))


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")
def test_grpo_gradient_is_zero_once_clipped():
    old = torch.zeros(1, 1)
    logp = torch.full((1, 1), math.log(1.5), requires_grad=True)
    loss, _ = grpo_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 1), 0.2)
    loss.backward()
    assert float(logp.grad) == 0.0


# --- RWR loss -----------------------------------------------------------------------------------


def test_rwr_loss_weighted_nll_by_hand():
    logp = torch.tensor([[-1.0, -3.0, -7.0], [-0.5, -0.5, -0.5]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    weights = torch.tensor([1.5, 0.5])
    # NLL per sequence: (1 + 3) / 2 = 2 and 0.5; weighted mean: (1.5 * 2 + 0.5 * 0.5) / 2
    loss, info = rwr_loss(logp, mask, weights)
    assert float(loss) == pytest.approx((3.0 + 0.25) / 2, rel=1e-6)
    assert info["nll"] == pytest.approx((2.0 + 0.5) / 2, rel=1e-6)
    assert info["kl"] == 0.0


def test_rwr_loss_kl_term():
    logp = torch.tensor([[-1.0, -1.0]])
    ref = torch.tensor([[-1.5, -0.5]])  # deltas -0.5 and +0.5
    mask = torch.ones(1, 2)
    k3 = ((math.exp(-0.5) + 0.5 - 1) + (math.exp(0.5) - 0.5 - 1)) / 2
    loss, info = rwr_loss(logp, mask, torch.tensor([1.0]), ref_logp=ref, kl_coef=0.2)
    assert info["kl"] == pytest.approx(k3, rel=1e-6)
    assert float(loss) == pytest.approx(1.0 + 0.2 * k3, rel=1e-6)


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")
def test_rwr_gradient_scales_with_weight():
    logp = torch.tensor([[-1.0], [-1.0]], requires_grad=True)
    loss, _ = rwr_loss(logp, torch.ones(2, 1), torch.tensor([1.5, 0.5]))
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-0.75], [-0.25]]))


def test_masked_sequence_mean_empty_sequence_is_zero():
    got = masked_sequence_mean(torch.tensor([[5.0, 5.0], [1.0, 3.0]]), torch.tensor([[0.0, 0.0], [1.0, 1.0]]))
    torch.testing.assert_close(got, torch.tensor([0.0, 2.0]))


# --- token log-probs ----------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 16])
def test_token_logprobs_matches_log_softmax_gather(chunk):
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 7, 11, generator=gen) * 3
    targets = torch.randint(0, 11, (5, 7), generator=gen)
    expected = F.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    got = token_logprobs(logits, targets, chunk=chunk)
    assert got.shape == (5, 7)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_token_logprobs_on_a_shifted_non_contiguous_view():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 6, 9, generator=gen)
    ids = torch.randint(0, 9, (3, 6), generator=gen)
    got = token_logprobs(logits[:, :-1], ids[:, 1:], chunk=2)
    expected = F.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_token_logprobs_upcasts_half_precision():
    logits = torch.tensor([[[0.0, 0.0], [2.0, 0.0]]], dtype=torch.bfloat16)
    got = token_logprobs(logits, torch.tensor([[0, 0]]))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, torch.tensor([[-math.log(2), -math.log(1 + math.exp(-2))]]), rtol=1e-4, atol=1e-4)
