"""AC-Off-POC similarity weights: the spec's invariants for both variants."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from agents.corrections.acoffpoc import RHO_MAX, RIDGE, batch_similarity, gaussian_kl, transition_similarity
from agents.corrections.divergences import DIVERGENCES, gaussian_jsd

LAMBDA_MIN = math.exp(-RHO_MAX)


def whitened(batch: int, d: int, std_on_diagonal: float, seed: int = 0) -> torch.Tensor:
    """Differences whose sample mean is exactly 0 and sample covariance exactly std·I."""
    x = torch.randn(batch, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    x = x - x.mean(0)
    cov = x.T @ x / (batch - 1)
    x = x @ torch.linalg.inv(torch.linalg.cholesky(cov)).T
    return (x * math.sqrt(std_on_diagonal)).float()


@pytest.mark.parametrize("divergence", DIVERGENCES)
def test_lambda_is_one_when_differences_match_the_reference(divergence: str) -> None:
    lam = batch_similarity(whitened(256, 3, 0.1), ref_std=0.1, divergence=divergence)
    assert lam.ndim == 0
    assert float(lam) == pytest.approx(1.0, abs=1e-3)


def general_lambda(diff: torch.Tensor, divergence: str) -> torch.Tensor:
    """λ from the general full-covariance divergences of ``divergences.py`` (float64 diff)."""
    d = diff.shape[1]
    mean = diff.mean(0)
    cov = torch.cov(diff.T, correction=1).reshape(d, d) + RIDGE * torch.eye(d, dtype=torch.float64)
    ref_mean, ref_cov = torch.zeros(d, dtype=torch.float64), 0.1 * torch.eye(d, dtype=torch.float64)
    rho = {
        "kl": gaussian_kl(mean, cov, ref_mean, ref_cov),
        "symkl": 0.5 * (gaussian_kl(mean, cov, ref_mean, ref_cov) + gaussian_kl(ref_mean, ref_cov, mean, cov)),
        "jsd": gaussian_jsd(mean, cov, ref_mean, ref_cov),
    }[divergence]
    return torch.exp(-rho.clamp(0, RHO_MAX)).float()


@pytest.mark.parametrize("divergence", DIVERGENCES)
@pytest.mark.parametrize(("batch", "d", "shift"), [(256, 3, 0.0), (256, 6, 0.2), (64, 17, -0.05), (5, 2, 0.5)])
def test_batch_similarity_equals_the_general_divergences(divergence: str, batch: int, d: int, shift: float) -> None:
    diff = torch.randn(batch, d, generator=torch.Generator().manual_seed(d), dtype=torch.float64) * 0.4 + shift
    expected = general_lambda(diff, divergence)
    torch.testing.assert_close(batch_similarity(diff.float(), 0.1, divergence), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("divergence", ["jsd", "kl"])
@pytest.mark.parametrize(("d", "pinned"), [(4, [2]), (17, [3, 4, 9])])
def test_saturated_dimensions_agree_with_the_general_divergences(divergence: str, d: int, pinned: list[int]) -> None:
    # Dimensions whose differences are all 0 have only the ridge as variance: L has 1e-3 on its
    # diagonal, L⁻¹ has 1e3, and the result must still match the general (solve-based) forms.
    # (The symmetric KL's s·tr Σ̇⁻¹ ≈ 1e5 per such dimension puts its λ at the floor.)
    diff = torch.randn(256, d, generator=torch.Generator().manual_seed(d), dtype=torch.float64) * 0.3
    diff[:, pinned] = 0.0
    lam = batch_similarity(diff.float(), 0.1, divergence)
    assert LAMBDA_MIN < float(lam) < 0.99
    torch.testing.assert_close(lam, general_lambda(diff, divergence), rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("divergence", DIVERGENCES)
def test_lambda_decreases_as_the_mean_shift_grows(divergence: str) -> None:
    base = whitened(256, 3, 0.1)
    lams = [float(batch_similarity(base + shift, 0.1, divergence)) for shift in (0.0, 0.1, 0.3, 1.0, 3.0)]
    assert all(a > b for a, b in itertools.pairwise(lams)), lams
    assert lams[-1] < 0.6


def test_jsd_lambda_lies_in_half_to_one_and_kl_can_go_lower() -> None:
    far = whitened(256, 6, 0.1) + 2.0
    assert 0.5 <= float(batch_similarity(far, 0.1, "jsd")) < 0.51
    assert float(batch_similarity(far, 0.1, "kl")) < 1e-6


def degenerate_inputs() -> dict[str, torch.Tensor]:
    saturated = torch.randn(256, 4, generator=torch.Generator().manual_seed(1)) * 0.3
    saturated[:, 2] = 0.7  # a dimension pinned at the bound: zero variance
    # Two equal columns at a scale where the ridge is lost: Σ̇ = 2⁴⁰·[[1, 1], [1, 1]] exactly, and
    # the Cholesky factorisation meets a zero pivot (every step is exact in float64).
    collinear = torch.tensor([[1.0, 1.0], [-1.0, -1.0], [0.0, 0.0]]) * 2.0**20
    return {
        "fewer samples than dimensions": torch.randn(3, 17, generator=torch.Generator().manual_seed(2)),
        "single sample": torch.full((1, 3), 0.2),
        "all zero": torch.zeros(256, 6),
        "saturated dimension": saturated,
        "huge": torch.full((256, 3), 1e30) * torch.randn(256, 3, generator=torch.Generator().manual_seed(3)),
        "infinite": torch.full((8, 2), float("inf")),
        "nan": torch.full((8, 2), float("nan")),
        "not factorisable": collinear,
    }


@pytest.mark.parametrize("divergence", DIVERGENCES)
@pytest.mark.parametrize("case", list(degenerate_inputs()))
def test_lambda_is_finite_and_in_range_on_degenerate_inputs(case: str, divergence: str) -> None:
    lam = batch_similarity(degenerate_inputs()[case], ref_std=0.1, divergence=divergence)
    assert torch.isfinite(lam)
    assert 0.0 <= float(lam) <= 1.0


@pytest.mark.parametrize("divergence", DIVERGENCES)
@pytest.mark.parametrize("case", ["huge", "infinite", "nan", "not factorisable"])
def test_broken_inputs_never_fall_back_to_one(case: str, divergence: str) -> None:
    lam = float(batch_similarity(degenerate_inputs()[case], ref_std=0.1, divergence=divergence))
    floor = 0.5 if divergence == "jsd" else LAMBDA_MIN
    assert lam == pytest.approx(floor, rel=1e-3)


def test_all_zero_differences_are_close_but_not_identical_to_the_reference() -> None:
    # Zero spread against N(0, 0.1 I): a real divergence, so λ < 1 for every measure.
    for divergence in DIVERGENCES:
        assert float(batch_similarity(torch.zeros(256, 3), 0.1, divergence)) < 0.999


def test_unknown_divergence_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown divergence 'tv'"):
        batch_similarity(torch.zeros(4, 2), divergence="tv")


@pytest.mark.parametrize("ref_std", [0.0, -0.1, math.nan, math.inf])
def test_a_reference_std_that_is_not_positive_is_a_clear_error(ref_std: float) -> None:
    with pytest.raises(ValueError, match="ref_std must be a positive number"):
        batch_similarity(torch.zeros(4, 2), ref_std=ref_std)


def policy(batch: int = 64, d: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, d, generator=g), torch.randn(batch, d, generator=g).clamp(-3, 1)


@pytest.mark.parametrize("divergence", DIVERGENCES)
def test_transition_lambda_is_one_for_the_policy_itself(divergence: str) -> None:
    mean, log_std = policy()
    lam = transition_similarity(mean, log_std, mean, log_std, torch.zeros(64, 1), divergence)
    assert lam.shape == (64, 1)
    torch.testing.assert_close(lam, torch.ones(64, 1), rtol=0, atol=1e-6)


@pytest.mark.parametrize("divergence", DIVERGENCES)
def test_transition_lambda_is_the_smaller_of_ratio_and_similarity(divergence: str) -> None:
    mean, log_std = policy(seed=1)
    b_mean, b_log_std = policy(seed=2)
    log_ratio = torch.randn(64, 1, generator=torch.Generator().manual_seed(3))
    lam = transition_similarity(mean, log_std, b_mean, b_log_std, log_ratio, divergence)
    unclipped = transition_similarity(mean, log_std, b_mean, b_log_std, torch.full((64, 1), 1e9), divergence)
    assert ((lam >= 0) & (lam <= 1)).all()
    torch.testing.assert_close(lam, torch.minimum(log_ratio.exp(), unclipped).clamp_max(1.0))
    # The divergence is joint over dimensions: more differing dimensions, smaller λ.
    if divergence != "jsd":
        one_dim = b_mean.clone()
        one_dim[:, 1:] = mean[:, 1:]
        one_std = b_log_std.clone()
        one_std[:, 1:] = log_std[:, 1:]
        joint = transition_similarity(mean, log_std, one_dim, one_std, torch.zeros(64, 1), divergence)
        assert (joint >= unclipped - 1e-6).all()


@pytest.mark.parametrize("divergence", DIVERGENCES)
def test_transition_lambda_survives_extreme_inputs(divergence: str) -> None:
    mean = torch.tensor([[0.0, 1e30], [float("nan"), 0.0], [0.0, 0.0]])
    log_std = torch.tensor([[-20.0, 2.0], [0.0, 0.0], [-20.0, -20.0]])
    b_mean = torch.tensor([[1e3, -1e30], [0.0, 0.0], [5.0, 5.0]])
    b_log_std = torch.tensor([[2.0, -20.0], [0.0, float("inf")], [-20.0, -20.0]])
    log_ratio = torch.tensor([[float("inf")], [float("nan")], [-1e4]])
    lam = transition_similarity(mean, log_std, b_mean, b_log_std, log_ratio, divergence)
    assert torch.isfinite(lam).all()
    assert ((lam >= 0) & (lam <= 1)).all()
    assert (lam < 0.51).all(), "broken inputs must not fall back to λ = 1"


# ---- where the stochastic variant evaluates π/η, and how many transitions an update rests on --------------
class _Policy:
    """The current policy as the correction sees it: a fixed Gaussian per state, and the run's generator."""

    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor, seed: int = 0) -> None:
        self.mean, self.log_std = mean, log_std
        self.generator = torch.Generator().manual_seed(seed)

    def policy_distribution(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.mean, self.log_std


def _stochastic(ratio: str):  # type: ignore[no-untyped-def]
    from agents.config import TrainConfig
    from agents.corrections import CorrectionSettings, make_correction

    config = TrainConfig.make(algo="sac", correction="acoffpoc", acoffpoc_ratio=ratio).resolved()
    return make_correction("acoffpoc", CorrectionSettings("stochastic", config=config))


def _sac_batch(mean: torch.Tensor, log_std: torch.Tensor, action: torch.Tensor):  # type: ignore[no-untyped-def]
    from agents.replay import Batch

    n = mean.shape[0]
    return Batch(torch.zeros(n, 4), action, torch.zeros(n, 1), torch.zeros(n, 4), torch.ones(n, 1), mean, log_std)


@pytest.mark.parametrize("ratio", ["stored", "sampled"])
def test_both_ratio_points_give_one_for_the_policy_itself(ratio: str) -> None:
    mean, log_std = policy(seed=4)
    action = torch.tanh(mean + log_std.exp() * torch.randn(mean.shape, generator=torch.Generator().manual_seed(5)))
    weights = _stochastic(ratio).weights(_sac_batch(mean, log_std, action), _Policy(mean, log_std))
    torch.testing.assert_close(weights.critic, torch.ones(64, 1), rtol=0, atol=1e-6)
    assert weights.actor is weights.critic
    assert float(weights.logged["lambda_ess"]) == pytest.approx(64.0)


def test_the_sampled_ratio_is_taken_at_a_fresh_action_of_the_current_policy() -> None:
    """acoffpoc_ratio=sampled: π/η at u = μ_π + σ_π ε with ε from the run's generator (Theorem 1), whatever the
    stored action; stored: at atanh of the stored action."""
    mean, log_std = policy(seed=6)
    b_mean, b_log_std = mean + 0.5, log_std - 0.3
    stored_action = torch.full_like(mean, 0.9)  # far from both policies: a tiny ratio at the stored action
    batch = _sac_batch(b_mean, b_log_std, stored_action)
    lam = _stochastic("sampled").weights(batch, _Policy(mean, log_std, seed=7)).critic
    noise = torch.randn(mean.shape, generator=torch.Generator().manual_seed(7))
    u = mean + log_std.exp() * noise
    normal = torch.distributions.Normal
    log_ratio = (normal(mean, log_std.exp()).log_prob(u) - normal(b_mean, b_log_std.exp()).log_prob(u)).sum(-1, True)
    expected = transition_similarity(mean, log_std, b_mean, b_log_std, log_ratio)
    torch.testing.assert_close(lam, expected, rtol=1e-5, atol=1e-6)
    at_stored = _stochastic("stored").weights(batch, _Policy(mean, log_std)).critic
    assert float(at_stored.mean()) < float(lam.mean())


def test_the_effective_sample_size_of_the_weights() -> None:
    from agents.corrections.acoffpoc import effective_sample_size

    assert float(effective_sample_size(torch.full((256, 1), 0.3))) == pytest.approx(256.0)
    one = torch.zeros(256, 1)
    one[7] = 0.01
    assert float(effective_sample_size(one)) == pytest.approx(1.0)
    assert float(effective_sample_size(torch.tensor([[1.0], [1.0], [0.0], [0.0]]))) == pytest.approx(2.0)
    assert float(effective_sample_size(torch.zeros(8, 1))) == 0.0


def test_an_unknown_ratio_point_is_a_config_error() -> None:
    from agents.config import ConfigError, TrainConfig

    with pytest.raises(ConfigError, match="acoffpoc_ratio must be one of sampled, stored"):
        TrainConfig.make(algo="sac", correction="acoffpoc", acoffpoc_ratio="fresh").resolved()
