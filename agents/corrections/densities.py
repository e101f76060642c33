"""Densities of the behaviour and current policies at a stored action, and the ratio ρ = π/μ.

Public math (``docs/competitors.md``, "Densities for the ratio"), always at the stored,
executed action a_i in normalised action space and in log space:

- DDPG/TD3, a deterministic actor explored with N(0, σ²I): μ_i = N(ā_i, σ²I) around the
  behaviour actor's output ā_i, π_φ(·|s_i) = N(π_φ(s_i), σ²I), so
  log ρ_i = (‖a_i − ā_i‖² − ‖a_i − π_φ(s_i)‖²) / (2σ²); clipping of a_i is ignored.
- SAC: the stored pre-tanh Gaussian against the current one at u_i = atanh(a_i) (clamped to
  ±(1 − 1e-6)); the tanh Jacobian cancels in the ratio.
- The uniform-random start phase: μ = Uniform[-1, 1]^d, log μ = −d log 2.

The clipped ratio ρ̄ = exp(min(log ρ, log 2)) ∈ [0, 2] is never NaN or inf.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "ACTION_CLAMP",
    "LOG_RATIO_CAP",
    "clipped_ratio",
    "deterministic_log_prob",
    "deterministic_log_ratio",
    "squashed_log_prob",
    "stochastic_log_ratio",
    "uniform_log_density",
]

ACTION_CLAMP = 1.0 - 1e-6
"""Stored tanh actions are clamped to ±ACTION_CLAMP before atanh."""
LOG_RATIO_CAP = math.log(2.0)
"""ρ̄ = exp(min(log ρ, log 2)): the Geoff-PAC code clamps ratios to [0, 2]."""
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def deterministic_log_ratio(action: Tensor, behaviour_output: Tensor, current_output: Tensor, std: float) -> Tensor:
    """log ρ_i = log N(a_i; π(s_i), σ²I) − log N(a_i; ā_i, σ²I), (B, 1), for (B, d) inputs."""
    behaviour = (action - behaviour_output).square().sum(-1, keepdim=True)
    current = (action - current_output).square().sum(-1, keepdim=True)
    return (behaviour - current) / (2.0 * std * std)


def deterministic_log_prob(action: Tensor, output: Tensor, std: float) -> Tensor:
    """log N(a_i; π(s_i), σ²I), (B, 1): the deterministic policy's Gaussian surrogate density.

    Differentiable in ``output``; its gradient is (a_i − π(s_i))/σ².
    """
    d = action.shape[-1]
    return -(action - output).square().sum(-1, keepdim=True) / (2.0 * std * std) - d * (math.log(std) + _HALF_LOG_2PI)


def squashed_log_prob(action: Tensor, mean: Tensor, log_std: Tensor, jacobian: bool = False) -> Tensor:
    """log π(a_i|s_i) of a tanh-Gaussian at the stored action, (B, 1), differentiable in ``mean`` and ``log_std``.

    Without ``jacobian``, the pre-tanh Gaussian's log-density at u_i = atanh(a_i): what a ratio of two
    tanh-Gaussians and a gradient in φ see. With it, the density on the action space
    (− Σ log(1 − a²)), to compare with a density there (the uniform start phase).
    """
    clamped = action.clamp(-ACTION_CLAMP, ACTION_CLAMP)
    z = (torch.atanh(clamped) - mean) * torch.exp(-log_std)
    log_prob = (-0.5 * z.square() - log_std - _HALF_LOG_2PI).sum(-1, keepdim=True)
    if jacobian:
        log_prob = log_prob - torch.log1p(-clamped.square()).sum(-1, keepdim=True)
    return log_prob


def stochastic_log_ratio(
    action: Tensor, behaviour_mean: Tensor, behaviour_log_std: Tensor, mean: Tensor, log_std: Tensor
) -> Tensor:
    """log ρ_i = log π(a_i|s_i) − log μ(a_i|s_i) between two tanh-Gaussians at the stored action, (B, 1)."""
    return squashed_log_prob(action, mean, log_std) - squashed_log_prob(action, behaviour_mean, behaviour_log_std)


def uniform_log_density(action_dim: int) -> float:
    """log μ of the uniform start phase on [-1, 1]^d: −d log 2."""
    return -action_dim * math.log(2.0)


def clipped_ratio(log_ratio: Tensor) -> Tensor:
    """ρ̄ = exp(min(log ρ, log 2)) ∈ [0, 2], detached; NaN counts as ρ = 0 (maximally off-policy)."""
    capped = torch.nan_to_num(log_ratio.detach(), nan=-math.inf).clamp(max=LOG_RATIO_CAP)
    return torch.exp(capped)
