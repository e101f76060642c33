"""Closed-form KL and Monte Carlo JSD against independent references (spec invariants)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats
from torch.distributions import Independent, MultivariateNormal, Normal, kl_divergence

from agents.corrections.acoffpoc import gaussian_kl
from agents.corrections.divergences import diag_gaussian_jsd, diag_gaussian_kl, gaussian_jsd

LN2 = math.log(2.0)


def random_spd(batch: int, d: int, generator: torch.Generator) -> torch.Tensor:
    a = torch.randn(batch, d, d, generator=generator, dtype=torch.float64)
    return a @ a.transpose(-1, -2) + 0.1 * torch.eye(d, dtype=torch.float64)


@pytest.mark.parametrize("d", [1, 3, 17])
def test_gaussian_kl_matches_torch_full_covariance(d: int) -> None:
    g = torch.Generator().manual_seed(d)
    mean_p, mean_q = (torch.randn(8, d, generator=g, dtype=torch.float64) for _ in range(2))
    cov_p, cov_q = random_spd(8, d, g), random_spd(8, d, g)
    expected = kl_divergence(MultivariateNormal(mean_p, cov_p), MultivariateNormal(mean_q, cov_q))
    torch.testing.assert_close(gaussian_kl(mean_p, cov_p, mean_q, cov_q), expected, rtol=1e-9, atol=1e-9)


def test_symmetric_kl_matches_torch() -> None:
    g = torch.Generator().manual_seed(1)
    mean_p, mean_q = torch.randn(4, 5, generator=g, dtype=torch.float64), torch.zeros(4, 5, dtype=torch.float64)
    cov_p, cov_q = random_spd(4, 5, g), 0.1 * torch.eye(5, dtype=torch.float64).expand(4, 5, 5)
    p, q = MultivariateNormal(mean_p, cov_p), MultivariateNormal(mean_q, cov_q)
    sym = 0.5 * (gaussian_kl(mean_p, cov_p, mean_q, cov_q) + gaussian_kl(mean_q, cov_q, mean_p, cov_p))
    torch.testing.assert_close(sym, 0.5 * (kl_divergence(p, q) + kl_divergence(q, p)))


def test_diagonal_kl_matches_torch() -> None:
    g = torch.Generator().manual_seed(2)
    mp, mq, lp, lq = (torch.randn(32, 6, generator=g, dtype=torch.float64) for _ in range(4))
    expected = kl_divergence(Independent(Normal(mp, lp.exp()), 1), Independent(Normal(mq, lq.exp()), 1))
    torch.testing.assert_close(diag_gaussian_kl(mp, lp, mq, lq), expected)


def test_kl_of_non_positive_definite_covariance_is_infinite_not_an_error() -> None:
    singular = torch.zeros(1, 2, 2, dtype=torch.float64)
    eye = torch.eye(2, dtype=torch.float64).unsqueeze(0)
    kl = gaussian_kl(torch.zeros(1, 2, dtype=torch.float64), singular, torch.zeros(1, 2, dtype=torch.float64), eye)
    assert torch.isinf(kl).all()


def test_jsd_is_zero_for_identical_gaussians() -> None:
    g = torch.Generator().manual_seed(3)
    mean, cov = torch.randn(5, 4, generator=g, dtype=torch.float64), random_spd(5, 4, g)
    assert gaussian_jsd(mean, cov, mean, cov).abs().max() < 1e-12
    log_std = torch.randn(5, 4, generator=g, dtype=torch.float64)
    assert diag_gaussian_jsd(mean, log_std, mean, log_std).abs().max() < 1e-12


def test_jsd_is_symmetric_and_bounded_by_ln2() -> None:
    g = torch.Generator().manual_seed(4)
    mean_p, mean_q = torch.randn(16, 3, generator=g, dtype=torch.float64), 5 * torch.randn(16, 3, generator=g)
    mean_q = mean_q.double()
    cov_p, cov_q = random_spd(16, 3, g), random_spd(16, 3, g)
    forward, backward = gaussian_jsd(mean_p, cov_p, mean_q, cov_q), gaussian_jsd(mean_q, cov_q, mean_p, cov_p)
    torch.testing.assert_close(forward, backward, rtol=0, atol=1e-12)
    assert ((forward >= 0) & (forward <= LN2)).all()
    far = gaussian_jsd(mean_p, cov_p, mean_p + 1e3, cov_q)
    torch.testing.assert_close(far, torch.full_like(far, LN2), rtol=0, atol=1e-6)


def numerical_jsd_1d(m1: float, s1: float, m2: float, s2: float) -> float:
    p, q = stats.norm(m1, s1), stats.norm(m2, s2)

    def integrand(x: float) -> float:
        px, qx = p.pdf(x), q.pdf(x)
        mx = 0.5 * (px + qx)
        total = 0.0
        if px > 0:
            total += 0.5 * px * math.log(px / mx)
        if qx > 0:
            total += 0.5 * qx * math.log(qx / mx)
        return total

    lo, hi = min(m1 - 12 * s1, m2 - 12 * s2), max(m1 + 12 * s1, m2 + 12 * s2)
    return integrate.quad(integrand, lo, hi, limit=500, points=[m1, m2])[0]


@pytest.mark.parametrize(
    ("m1", "s1", "m2", "s2"), [(0, 1, 0.5, 1), (0, 1, 2, 0.5), (0.3, 0.2, -0.1, 0.31), (0, 1, 0, 3)]
)
def test_jsd_agrees_with_numerical_integral_in_1d(m1: float, s1: float, m2: float, s2: float) -> None:
    expected = numerical_jsd_1d(m1, s1, m2, s2)
    t = lambda v: torch.tensor([[float(v)]], dtype=torch.float64)  # noqa: E731
    full = gaussian_jsd(t(m1)[0], t(s1**2), t(m2)[0], t(s2**2))
    diag = diag_gaussian_jsd(t(m1), t(math.log(s1)), t(m2), t(math.log(s2)))
    # The spec asks for 1e-2; the quasi-Monte Carlo estimate is within 2e-3 on these.
    assert abs(float(full) - expected) < 3e-3
    assert abs(float(diag) - expected) < 3e-3


def sampled_jsd(mean_p: torch.Tensor, std_p: torch.Tensor, mean_q: torch.Tensor, std_q: torch.Tensor) -> torch.Tensor:
    """½ E_P[log p − log m] + ½ E_Q[log q − log m] from 50,000 independent samples each."""
    p, q = Independent(Normal(mean_p, std_p), 1), Independent(Normal(mean_q, std_q), 1)
    g = torch.Generator().manual_seed(99)
    total = torch.zeros(mean_p.shape[0], dtype=torch.float64)
    for _ in range(10):
        for own, other, mean, std in ((p, q, mean_p, std_p), (q, p, mean_q, std_q)):
            x = mean + std * torch.randn(5_000, *mean.shape, generator=g, dtype=torch.float64)
            log_own, log_other = own.log_prob(x), other.log_prob(x)
            log_m = torch.logaddexp(log_own, log_other) - LN2
            total += 0.5 * (log_own - log_m).mean(0)
    return total / 10


@pytest.mark.parametrize("d", [3, 6])
def test_jsd_is_accurate_beyond_one_dimension(d: int) -> None:
    # Plain Monte Carlo with 512 independent samples per distribution (offpoc's
    # estimator before) has rms error 0.009-0.013 on these pairs, depending on the
    # sample table; benchmarks/jsd_accuracy.py compares the two more widely.
    g = torch.Generator().manual_seed(20 + d)
    mean_p = torch.randn(64, d, generator=g, dtype=torch.float64)
    log_std_p = torch.rand(64, d, generator=g, dtype=torch.float64) * -2.0
    mean_q = mean_p + log_std_p.exp() * torch.randn(64, d, generator=g, dtype=torch.float64)
    log_std_q = log_std_p + 0.5 * torch.randn(64, d, generator=g, dtype=torch.float64)
    expected = sampled_jsd(mean_p, log_std_p.exp(), mean_q, log_std_q.exp())
    error = diag_gaussian_jsd(mean_p, log_std_p, mean_q, log_std_q) - expected
    assert float(error.square().mean().sqrt()) < 0.006


def test_diagonal_and_full_jsd_share_their_estimator() -> None:
    g = torch.Generator().manual_seed(5)
    mp, mq, lp, lq = (torch.randn(6, 3, generator=g, dtype=torch.float64) for _ in range(4))
    full = gaussian_jsd(mp, torch.diag_embed((2 * lp).exp()), mq, torch.diag_embed((2 * lq).exp()))
    torch.testing.assert_close(diag_gaussian_jsd(mp, lp, mq, lq), full, rtol=1e-9, atol=1e-12)


def test_jsd_estimate_is_deterministic() -> None:
    mean = torch.tensor([0.2, -0.1], dtype=torch.float64)
    cov = torch.tensor([[0.3, 0.05], [0.05, 0.2]], dtype=torch.float64)
    ref = 0.1 * torch.eye(2, dtype=torch.float64)
    values = {float(gaussian_jsd(mean, cov, torch.zeros(2, dtype=torch.float64), ref)) for _ in range(3)}
    assert len(values) == 1
    assert np.isfinite(next(iter(values)))
