"""AC-Off-POC similarity weights (Saglam et al., TMLR), as specified in spec/method.md.

Public math, reusable in any actor-critic code:

- :func:`gaussian_kl`: closed-form KL between full-covariance Gaussians.
- :func:`batch_similarity`: the deterministic variant's λ for a batch of action
  differences a − π(s) (DDPG, TD3).
- :func:`transition_similarity`: the stochastic variant's λ_i per transition (SAC).

Both similarities are ``exp(-ρ)`` with ρ clamped to [0, ``RHO_MAX``], so λ is
finite, in [exp(-RHO_MAX), 1], and never NaN whatever the input; a degenerate
input (non-finite values, a covariance that cannot be factorised) counts as
maximally off-policy, never as λ = 1.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import torch
from torch import Tensor

from agents.corrections.base import CorrectionSettings
from agents.corrections.divergences import (
    DIVERGENCES,
    JSD_SAMPLES,
    base_normals,
    diag_gaussian_jsd,
    diag_gaussian_kl,
    gaussian_kl,
    jsd_from_log_ratios,
)
from agents.replay import Batch

__all__ = [
    "RHO_MAX",
    "RIDGE",
    "DeterministicACOffPOC",
    "StochasticACOffPOC",
    "batch_similarity",
    "gaussian_kl",
    "transition_similarity",
]

RIDGE = 1e-6
"""ε added to the batch covariance's diagonal so it is always positive definite."""

RHO_MAX = 80.0
"""Largest divergence used; exp(-80) ≈ 1.8e-35 is still a normal float32."""

ACTION_CLAMP = 1.0 - 1e-6
"""Stored tanh actions are clamped to ±ACTION_CLAMP before atanh."""


def _check_divergence(divergence: str) -> None:
    if divergence not in DIVERGENCES:
        raise ValueError(f"unknown divergence {divergence!r}: choose one of {', '.join(DIVERGENCES)}")


def _clamp_rho(rho: Tensor) -> Tensor:
    """ρ in [0, RHO_MAX]; NaN and +inf (degenerate input) become RHO_MAX."""
    return torch.nan_to_num(rho, nan=RHO_MAX, posinf=RHO_MAX).clamp(0.0, RHO_MAX)


class _BatchConstants(NamedTuple):
    """What every batch of a given action dimension shares, made once (float64)."""

    eye: Tensor
    """(d, d) identity"""
    z: Tensor
    """(K, d) the JSD's base samples"""
    half_zz: Tensor
    """(K,) ½|z|²"""


@lru_cache(maxsize=16)
def _batch_constants(d: int, device: str) -> _BatchConstants:
    z = base_normals(d, JSD_SAMPLES, device, torch.float64)
    return _BatchConstants(torch.eye(d, dtype=torch.float64, device=device), z, 0.5 * z.square().sum(-1))


def _batch_rho(action_diff: Tensor, ref_std: float, divergence: str) -> Tensor:
    """ρ between N(μ̇, Σ̇) fitted to the differences and the reference N(0, s·I), s = ref_std.

    Specialised to the isotropic reference: one Cholesky factor L of Σ̇ serves
    every divergence (tests pin it to the general :func:`gaussian_kl` and
    :func:`~agents.corrections.divergences.gaussian_jsd`). Written for few
    operations: on a (256, 3) batch each costs more than its arithmetic.
    """
    diff = action_diff.detach().to(torch.float64)
    n, d = diff.shape
    const = _batch_constants(d, str(diff.device))
    mean = diff.mean(0)
    centred = diff - mean
    # Unbiased 1/(B-1) as printed in the paper, plus the ridge; a single sample has no spread.
    cov = torch.addmm(const.eye, centred.T, centred, beta=RIDGE, alpha=1.0 / max(n - 1, 1))
    chol, info = torch.linalg.cholesky_ex(cov)
    s = float(ref_std)  # the published method puts the exploration std on the diagonal
    # Not factorised, or not finite (non-finite input): maximally off-policy for every measure.
    if divergence == "jsd":
        return torch.where(info == 0, _batch_jsd(mean, chol, const, s), math.log(2.0))  # always finite
    rho = _batch_kl(mean, cov, chol, const.eye, s, divergence)
    return torch.where((info == 0) & (rho.abs() < math.inf), rho, RHO_MAX)


def _batch_kl(mean: Tensor, cov: Tensor, chol: Tensor, eye: Tensor, s: float, divergence: str) -> Tensor:
    """KL or symmetric KL between N(μ̇, Σ̇ = LLᵀ) and N(0, s·I)."""
    d = mean.shape[0]
    # (tr Σ̇ + |μ̇|²)/s, shared by both directions.
    spread = (cov.trace() + mean.dot(mean)).div_(s)
    if divergence == "kl":
        # KL(P‖Q) = ½[tr Σ̇/s + |μ̇|²/s − d + d ln s − ln det Σ̇]
        return (0.5 * spread).sub_(chol.diagonal().log().sum()).add_(0.5 * d * (math.log(s) - 1.0))
    # KL(Q‖P) = ½[s tr Σ̇⁻¹ + μ̇ᵀΣ̇⁻¹μ̇ − d − d ln s + ln det Σ̇]; in the mean of the two directions the
    # log-determinants cancel, and s tr Σ̇⁻¹ + μ̇ᵀΣ̇⁻¹μ̇ = s‖L⁻¹[I, μ̇/√s]‖²_F (one triangular solve).
    rhs = torch.cat([eye, (mean / math.sqrt(s)).unsqueeze(1)], 1)
    inverse_spread = torch.linalg.solve_triangular(chol, rhs, upper=False).square().sum().mul_(s)
    return (spread + inverse_spread).sub_(2 * d).mul_(0.25)


def _batch_jsd(mean: Tensor, chol: Tensor, const: _BatchConstants, s: float) -> Tensor:
    """Monte Carlo JSD(N(μ̇, LLᵀ) ‖ N(0, s·I)) with the shared base samples."""
    d = mean.shape[0]
    # ½ ln det Σ̇ − ½ ln det(sI)
    half_log_det_ratio = chol.diagonal().log().sum().sub_(0.5 * d * math.log(s))
    # At P's samples x = μ̇ + L z:   log q − log p = ½|z|² − |x|²/(2s) + ½ln det Σ̇ − ½ln det(sI)
    x = torch.addmm(mean, const.z, chol.T)
    at_p = (const.half_zz + half_log_det_ratio).sub_(x.square().sum(-1), alpha=0.5 / s)
    # At Q's samples y = √s z:       log p − log q = ½|z|² − ½|L⁻¹(y − μ̇)|² − ½ln det Σ̇ + ½ln det(sI)
    w = torch.linalg.solve_triangular(chol, (const.z.T * math.sqrt(s)).sub_(mean.unsqueeze(1)), upper=False)
    at_q = (const.half_zz - half_log_det_ratio).sub_(w.square().sum(0), alpha=0.5)
    return jsd_from_log_ratios(torch.stack([at_p, at_q]))


def batch_similarity(action_diff: Tensor, ref_std: float = 0.1, divergence: str = "jsd") -> Tensor:
    """The deterministic variant's similarity λ for one batch.

    Fits N(μ̇, Σ̇) to the action differences (unbiased covariance plus a ridge
    ``RIDGE``·I) and compares it with the reference N(0, ref_std·I):
    λ = exp(-D(N(μ̇, Σ̇) ‖ N(0, ref_std·I))), computed in float64.

    Args:
        action_diff: (B, d) differences a − π(s) between stored and current actions.
        ref_std: the exploration noise std, placed on the reference covariance's
            diagonal as paper and code do.
        divergence: ``jsd`` (Monte Carlo, λ ∈ [0.5, 1]), ``symkl`` or ``kl``.

    Returns:
        0-d float32 tensor λ ∈ (0, 1], detached.
    """
    _check_divergence(divergence)
    rho = _batch_rho(action_diff, ref_std, divergence)  # finite
    return rho.clamp(0.0, RHO_MAX).neg_().exp_().to(torch.float32)


def _diag_log_density_ratio(u: Tensor, mean_p: Tensor, log_std_p: Tensor, mean_q: Tensor, log_std_q: Tensor) -> Tensor:
    """log p(u) − log q(u) for diagonal Gaussians, summed over the last dim, (B, 1)."""
    zp = (u - mean_p) * torch.exp(-log_std_p)
    zq = (u - mean_q) * torch.exp(-log_std_q)
    return (0.5 * (zq.square() - zp.square()) + log_std_q - log_std_p).sum(-1, keepdim=True)


def transition_similarity(
    mean: Tensor,
    log_std: Tensor,
    behaviour_mean: Tensor,
    behaviour_log_std: Tensor,
    log_ratio: Tensor,
    divergence: str = "jsd",
) -> Tensor:
    """The stochastic variant's similarity λ_i for each transition.

    λ_i = exp(min(log π(a_i|s_i) − log η(a_i|s_i), −ρ_i)) with
    ρ_i = D(π(·|s_i) ‖ η_i) between the pre-tanh diagonal Gaussians, jointly over
    all d action dimensions (divergences are invariant under the tanh bijection).

    Args:
        mean, log_std: (B, d) current policy's pre-tanh Gaussian at s_i.
        behaviour_mean, behaviour_log_std: (B, d) the behaviour policy's, stored
            when the transition was collected.
        log_ratio: (B, 1) log π(a_i|s_i) − log η(a_i|s_i) at the stored action.
        divergence: ``jsd`` (default), ``symkl`` or ``kl``.

    Returns:
        (B, 1) float32 λ_i ∈ (0, 1], detached.
    """
    _check_divergence(divergence)
    p = (mean.detach().double(), log_std.detach().double())
    q = (behaviour_mean.detach().double(), behaviour_log_std.detach().double())
    if divergence == "jsd":
        # The (2, B, 128) Monte Carlo pass in float32: 4x faster, error ~1e-7 on a value ≤ ln 2.
        rho = diag_gaussian_jsd(*p, *q, sample_dtype=torch.float32)
    elif divergence == "kl":
        rho = diag_gaussian_kl(*p, *q)
    else:
        rho = 0.5 * (diag_gaussian_kl(*p, *q) + diag_gaussian_kl(*q, *p))
    rho = _clamp_rho(rho.unsqueeze(-1))
    ratio = torch.nan_to_num(log_ratio.detach().double(), nan=-RHO_MAX, posinf=0.0, neginf=-RHO_MAX)
    log_lam = torch.minimum(ratio, -rho).clamp(-RHO_MAX, 0.0)
    return torch.exp(log_lam).to(torch.float32)


class DeterministicACOffPOC:
    """One λ per batch from the action differences a − π(s) (DDPG, TD3)."""

    name = "acoffpoc"
    needs_behaviour_params = False

    def __init__(self, settings: CorrectionSettings) -> None:
        _check_divergence(settings.divergence)
        if not (settings.ref_std > 0 and math.isfinite(settings.ref_std)):
            raise ValueError(f"ref_std must be a positive number, got {settings.ref_std}")
        self.divergence = settings.divergence
        self.ref_std = settings.ref_std
        self.start_step = settings.start_step

    def active(self, step: int) -> bool:
        return step >= self.start_step

    def __call__(self, batch: Batch, policy: object) -> Tensor:
        current = policy.greedy_action(batch.obs)  # type: ignore[attr-defined]
        return batch_similarity(batch.action - current, self.ref_std, self.divergence)


class StochasticACOffPOC:
    """One λ_i per transition from the stored behaviour Gaussian (SAC)."""

    name = "acoffpoc"
    needs_behaviour_params = True

    def __init__(self, settings: CorrectionSettings) -> None:
        _check_divergence(settings.divergence)
        self.divergence = settings.divergence
        self.start_step = settings.start_step

    def active(self, step: int) -> bool:
        return step >= self.start_step

    def __call__(self, batch: Batch, policy: object) -> Tensor:
        if batch.behaviour_mean is None or batch.behaviour_log_std is None:
            raise ValueError("stochastic AC-Off-POC needs the behaviour policy's parameters in the batch")
        mean, log_std = policy.policy_distribution(batch.obs)  # type: ignore[attr-defined]
        # Both densities are evaluated at the same pre-tanh point, so the tanh
        # Jacobian cancels in the ratio and log η need not be stored.
        u = torch.atanh(batch.action.clamp(-ACTION_CLAMP, ACTION_CLAMP))
        log_ratio = _diag_log_density_ratio(u, mean, log_std, batch.behaviour_mean, batch.behaviour_log_std)
        return transition_similarity(
            mean, log_std, batch.behaviour_mean, batch.behaviour_log_std, log_ratio, self.divergence
        )
