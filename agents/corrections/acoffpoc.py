"""AC-Off-POC similarity weights (Saglam et al., TMLR), as docs/method.md states them.

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

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache
from operator import mul
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch
from torch import Tensor

from agents.corrections.base import AgentView, Correction, CorrectionSettings, Weights
from agents.corrections.divergences import (
    DIVERGENCES,
    JSD_SAMPLES,
    LOG2,
    base_normals,
    diag_gaussian_jsd,
    diag_gaussian_kl,
    gaussian_kl,
)
from agents.exploration import exploration_std
from agents.options import Options, choice
from agents.quantities import LAMBDA, Quantity
from agents.replay import Batch

__all__ = [
    "RHO_MAX",
    "RIDGE",
    "DeterministicACOffPOC",
    "StochasticACOffPOC",
    "batch_similarity",
    "effective_sample_size",
    "gaussian_kl",
    "transition_similarity",
]

RIDGE = 1e-6
"""ε added to the batch covariance's diagonal so it is always positive definite."""

RHO_MAX = 80.0
"""Largest divergence used; exp(-80) ≈ 1.8e-35 is still a normal float32."""

ACTION_CLAMP = 1.0 - 1e-6
"""Stored tanh actions are clamped to ±ACTION_CLAMP before atanh."""

RATIO_AT = ("sampled", "stored")
"""Where the stochastic variant evaluates π/η (``acoffpoc_ratio``), the default first."""


@dataclass(frozen=True)
class ACOffPOCOptions(Options):
    prefix: ClassVar[str] = "acoffpoc"
    unprefixed: ClassVar[frozenset[str]] = frozenset({"divergence", "ref_std"})  # common fields until schema 12

    divergence: str = "jsd"
    """The divergence λ = exp(-D) uses: jsd (Monte Carlo, the paper), symkl (the authors' code) or kl."""
    ref_std: float | None = None
    """Reference std on the covariance diagonal (DDPG, TD3); None = the run's exploration_std."""
    ratio: str = "sampled"
    """SAC: where λ_i's clip π/η is evaluated: sampled (a fresh action of the current policy,
    Theorem 1 and the authors' code) or stored (the stored action, Section 4.2 and Algorithm 1: measured to
    collapse SAC on HalfCheetah, docs/results.md)."""

    def resolve(self, config: Any) -> ACOffPOCOptions:
        std = exploration_std(config)
        if self.ref_std is not None or not (math.isfinite(std) and std >= 0):
            return self  # a bad exploration_std is for the config's own check to name
        return dataclasses.replace(self, ref_std=std)

    def validate(self) -> None:
        choice(self, "divergence", DIVERGENCES)
        if self.ref_std is not None:
            _check_ref_std(self.ref_std)
        choice(self, "ratio", RATIO_AT)


ESS = "lambda_ess"
"""The stochastic variant's per-update effective sample size of its λ_i."""


def _check_divergence(divergence: str) -> None:
    if divergence not in DIVERGENCES:
        raise ValueError(f"unknown divergence {divergence!r}: choose one of {', '.join(DIVERGENCES)}")


def _check_ref_std(ref_std: float) -> None:
    if not (ref_std > 0 and math.isfinite(ref_std)):
        raise ValueError(f"ref_std must be a positive number, got {ref_std}")


def _clamp_rho(rho: Tensor) -> Tensor:
    """ρ in [0, RHO_MAX]; NaN and +inf (degenerate input) become RHO_MAX."""
    return torch.nan_to_num(rho, nan=RHO_MAX, posinf=RHO_MAX).clamp(0.0, RHO_MAX)


class _BatchConstants(NamedTuple):
    """What every batch of a given action dimension shares, made once (float64, on the host)."""

    eye: Tensor
    """(d, d) identity"""
    z: np.ndarray
    """(K, d) the JSD's base samples"""
    half_zz: np.ndarray
    """(K,) ½|z|²"""


@lru_cache(maxsize=16)
def _batch_constants(d: int) -> _BatchConstants:
    z = base_normals(d, JSD_SAMPLES, "cpu", torch.float64).numpy()
    return _BatchConstants(torch.eye(d, dtype=torch.float64), z, 0.5 * np.square(z).sum(-1))


def _batch_rho(action_diff: Tensor, s: float, divergence: str) -> float:
    """ρ between N(μ̇, Σ̇) fitted to the differences and the reference N(0, s·I), s = ref_std.

    Specialised to the isotropic reference: one Cholesky factor L of Σ̇ serves
    every divergence (tests pin it to the general :func:`gaussian_kl` and
    :func:`~agents.corrections.divergences.gaussian_jsd`). Torch reduces the
    (B, d) batch to μ̇, Σ̇, L and (symkl, jsd) L⁻¹ in float64 on the host; the
    rest works on those few numbers as Python floats and, for the JSD's
    samples, NumPy arrays. On a (256, 3) batch each tensor operation costs more
    than its arithmetic, and several times more right after an update, so the
    scalar algebra stays out of torch (``benchmarks/diagnostics/loop_profile.py`` times
    the similarity in the loop).
    """
    x = action_diff.detach().to("cpu", torch.float64)
    n, d = x.shape
    const = _batch_constants(d)
    mean = x.mean(0)
    centred = x - mean
    # Unbiased 1/(B-1) as printed in the paper, plus the ridge; a single sample has no spread.
    cov = torch.addmm(const.eye, centred.T, centred, beta=RIDGE, alpha=1.0 / max(n - 1, 1))
    chol, info = torch.linalg.cholesky_ex(cov)
    mu = mean.tolist()
    trace = sum(cov.diagonal().tolist())
    # Not factorised, or not finite (non-finite input): maximally off-policy for every measure.
    if info.item() != 0 or not math.isfinite(trace + sum(mu)):
        return LOG2 if divergence == "jsd" else RHO_MAX
    half_log_det = sum(map(math.log, chol.diagonal().tolist()))  # ½ ln det Σ̇
    spread = (trace + sum(map(mul, mu, mu))) / s  # (tr Σ̇ + |μ̇|²)/s, shared by both KL directions
    if divergence == "kl":
        # KL(P‖Q) = ½[tr Σ̇/s + |μ̇|²/s − d + d ln s − ln det Σ̇]
        return 0.5 * (spread - d + d * math.log(s)) - half_log_det
    inverse = torch.linalg.solve_triangular(chol, const.eye, upper=False)  # L⁻¹
    if divergence == "symkl":
        # KL(Q‖P) = ½[s tr Σ̇⁻¹ + μ̇ᵀΣ̇⁻¹μ̇ − d − d ln s + ln det Σ̇], with Σ̇⁻¹ = L⁻ᵀL⁻¹; in the
        # mean of the two directions the log-determinants cancel.
        rows = inverse.tolist()
        whitened_mean = [sum(map(mul, r, mu)) for r in rows]  # L⁻¹μ̇
        inverse_spread = s * sum(sum(map(mul, r, r)) for r in rows) + sum(map(mul, whitened_mean, whitened_mean))
        return 0.25 * (spread + inverse_spread - 2 * d)
    half_log_det_ratio = half_log_det - 0.5 * d * math.log(s)  # ½ ln det Σ̇ − ½ ln det(sI)
    return _batch_jsd(mean.numpy(), chol.numpy(), inverse.numpy(), half_log_det_ratio, const, s)


def _batch_jsd(
    mean: np.ndarray, chol: np.ndarray, inverse: np.ndarray, half_log_det_ratio: float, const: _BatchConstants, s: float
) -> float:
    """Monte Carlo JSD(N(μ̇, LLᵀ) ‖ N(0, s·I)) with the shared base samples z."""
    z, half_zz = const.z, const.half_zz
    # At P's samples x = μ̇ + L z:   log q − log p = ½|z|² − |x|²/(2s) + ½ln det Σ̇ − ½ln det(sI)
    x = z @ chol.T + mean
    # At Q's samples y = √s z:       log p − log q = ½|z|² − ½|L⁻¹(y − μ̇)|² − ½ln det Σ̇ + ½ln det(sI)
    w = (z * math.sqrt(s) - mean) @ inverse.T
    at_p = half_zz - (0.5 / s) * np.square(x).sum(1) + half_log_det_ratio
    at_q = half_zz - 0.5 * np.square(w).sum(1) - half_log_det_ratio
    # As jsd_from_log_ratios: ln 2 − mean H over both sets, H = ln(1 + e) + a·e/(1 + e), a = |r|, e = exp(−a).
    a = np.abs(np.concatenate([at_p, at_q]))
    e = np.exp(-a)
    jsd = LOG2 - float((np.log1p(e) + a * e / (1.0 + e)).mean())
    return jsd if math.isfinite(jsd) else LOG2


def batch_similarity(action_diff: Tensor, ref_std: float = 0.1, divergence: str = "jsd") -> Tensor:
    """The deterministic variant's similarity λ for one batch.

    Fits N(μ̇, Σ̇) to the action differences (unbiased covariance plus a ridge
    ``RIDGE``·I) and compares it with the reference N(0, ref_std·I):
    λ = exp(-D(N(μ̇, Σ̇) ‖ N(0, ref_std·I))), computed in float64. The d × d
    algebra runs on the host, so on a GPU the call waits for ``action_diff``.

    Args:
        action_diff: (B, d) differences a − π(s) between stored and current actions.
        ref_std: the exploration noise std, placed on the reference covariance's
            diagonal as paper and code do.
        divergence: ``jsd`` (Monte Carlo, λ ∈ [0.5, 1]), ``symkl`` or ``kl``.

    Returns:
        0-d float32 tensor λ ∈ (0, 1] on ``action_diff``'s device, detached.

    Raises:
        ValueError: an unknown divergence, or a ``ref_std`` that is not a positive number.
    """
    _check_divergence(divergence)
    _check_ref_std(ref_std)
    rho = _batch_rho(action_diff, float(ref_std), divergence)
    rho = RHO_MAX if math.isnan(rho) else min(max(rho, 0.0), RHO_MAX)
    return torch.tensor(math.exp(-rho), dtype=torch.float32, device=action_diff.device)


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


class DeterministicACOffPOC(Correction):
    """One λ per batch from the action differences a − π(s) (DDPG, TD3), on both losses."""

    name = "acoffpoc"
    quantities = (LAMBDA,)

    def __init__(self, settings: CorrectionSettings) -> None:
        super().__init__(settings)
        options = settings.option(ACOffPOCOptions).resolve(settings.run_config)
        options.validate()
        assert options.ref_std is not None  # resolved
        self.divergence = options.divergence
        self.ref_std = options.ref_std

    def similarity(self, batch: Batch, policy: Any) -> Tensor:
        """λ for the batch under ``policy`` (anything with ``greedy_action``), 0-d."""
        return batch_similarity(batch.action - policy.greedy_action(batch.obs), self.ref_std, self.divergence)

    def weights(self, batch: Batch, agent: AgentView) -> Weights:
        return Weights.both(self.similarity(batch, agent))


class StochasticACOffPOC(Correction):
    """One λ_i per transition from the stored behaviour Gaussian (SAC), on both losses.

    Transitions of the uniform-random start phase have no behaviour Gaussian: they are
    left out of batches while the correction is active. Each update also logs the λ_i's
    effective sample size (Σλ)²/Σλ²: how many of the B transitions the update rests on.
    """

    name = "acoffpoc"
    needs_behaviour_params = True
    excludes_random_phase = True

    def __init__(self, settings: CorrectionSettings) -> None:
        super().__init__(settings)
        options = settings.option(ACOffPOCOptions)
        options.validate()
        self.divergence = options.divergence
        self.sampled = options.ratio == "sampled"
        self.quantities = (LAMBDA, Quantity(ESS, "ESS(λ)", 0.0, float(settings.run_config.batch_size)))

    def similarity(self, batch: Batch, policy: Any) -> Tensor:
        """λ_i for the batch under ``policy`` (anything with ``policy_distribution``, and a ``generator``
        for ``acoffpoc_ratio=sampled``), (B, 1)."""
        if batch.behaviour_mean is None or batch.behaviour_log_std is None:
            raise ValueError("stochastic AC-Off-POC needs the behaviour policy's parameters in the batch")
        mean, log_std = policy.policy_distribution(batch.obs)
        # Both densities are evaluated at the same pre-tanh point, so the tanh
        # Jacobian cancels in the ratio and log η need not be stored.
        if self.sampled:  # a fresh action of the current policy (Theorem 1, the authors' code)
            noise = torch.randn(mean.shape, generator=policy.generator).to(mean.device)
            u = mean.detach() + log_std.detach().exp() * noise
        else:  # the stored action (Section 4.2, Algorithm 1)
            u = torch.atanh(batch.action.clamp(-ACTION_CLAMP, ACTION_CLAMP))
        log_ratio = _diag_log_density_ratio(u, mean, log_std, batch.behaviour_mean, batch.behaviour_log_std)
        return transition_similarity(
            mean, log_std, batch.behaviour_mean, batch.behaviour_log_std, log_ratio, self.divergence
        )

    def weights(self, batch: Batch, agent: AgentView) -> Weights:
        lam = self.similarity(batch, agent)
        return Weights(lam, lam, {LAMBDA.name: lam, ESS: effective_sample_size(lam)})


def effective_sample_size(weights: Tensor) -> Tensor:
    """(Σw)²/Σw², 0-d: how many equal weights the (B, 1) ``weights`` are worth (B when all equal, 1 when
    one dominates; 0 when all are 0)."""
    total = weights.sum()
    return total.square() / weights.square().sum().clamp_min(torch.finfo(weights.dtype).tiny)
