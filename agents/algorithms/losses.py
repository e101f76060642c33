"""Where a correction's weights enter the losses, and the small pieces every update uses.

:func:`loss_coefficients` is the one place weights become the c_i of L = Σ_i c_i ℓ_i; both backends of
:class:`~agents.algorithms.base.ActorCritic` reduce their per-sample losses through it.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

__all__ = [
    "SoftUpdate",
    "adam",
    "grad_norm",
    "loss_coefficients",
    "reduce_loss",
    "set_grads",
    "total_weight",
    "weighted_sum",
]


def loss_coefficients(weight: Tensor | None, batch_size: int, normalised: bool = True) -> Tensor | float:
    """The c_i of L = Σ_i c_i ℓ_i, i.e. ∂L/∂ℓ_i: the only place weights enter.

    - ``None``: ``1 / B``, so L = mean_i ℓ_i (the plain algorithm);
    - 0-d λ (per batch, paper eqs. 4-5): ``λ / B``, so L = λ · mean_i ℓ_i;
    - (B, 1) λ_i (per transition): ``λ_i / Σ λ_j``, so L = Σ λ_i ℓ_i / Σ λ_j, a weighted mean however small
      the λ_i (AC-Off-POC's SAC variant); all zero gives L = 0; with ``normalised`` false, ``λ_i / B``:
      L = mean_i λ_i ℓ_i (importance weights).
    """
    if weight is None:
        return 1.0 / batch_size
    if weight.ndim == 0 or not normalised:
        return weight / batch_size
    # Guarded against Σ λ_j = 0 only: a floor any larger (the smallest λ is e⁻⁸⁰) would turn a batch of
    # tiny λ_i into a vanishing update instead of a weighted mean.
    return weight / weight.sum().clamp_min(torch.finfo(weight.dtype).tiny)


def total_weight(weight: Tensor | None, normalised: bool = True) -> Tensor | float:
    """Σ_i c_i of :func:`loss_coefficients`: 1 for the plain mean, λ for a per-batch λ; for per-transition
    λ_i, 1 normalised (0 when every λ_i is 0), mean λ_i otherwise."""
    if weight is None:
        return 1.0
    if weight.ndim == 0:
        return weight
    return (weight.sum() > 0).to(weight.dtype) if normalised else weight.mean()


def weighted_sum(per_sample: Tensor, coefficients: Tensor | float) -> Tensor:
    """L = Σ_i c_i ℓ_i for (B, 1) or (E, B, 1) per-sample losses."""
    return (coefficients * per_sample).sum()


def reduce_loss(per_sample: Tensor, weight: Tensor | None) -> Tensor:
    """Reduce (B, 1) per-sample losses to the scalar L = Σ_i c_i ℓ_i (see :func:`loss_coefficients`)."""
    return weighted_sum(per_sample, loss_coefficients(weight, per_sample.shape[0]))


def set_grads(module: nn.Module, loss: Tensor) -> None:
    """∂loss/∂θ into the ``.grad`` of ``module``'s parameters alone (the optimiser's step reads it)."""
    params = list(module.parameters())
    for param, grad in zip(params, torch.autograd.grad(loss, params), strict=True):
        param.grad = grad


def grad_norm(tensors: list[Tensor]) -> Tensor:
    """The 2-norm of a list of tensors taken as one vector."""
    return torch.stack(torch._foreach_norm(tensors)).norm()


class SoftUpdate:
    """Polyak averaging θ' ← τθ + (1 − τ)θ' of a target network, one fused call per update.

    The parameter lists are collected once: walking the module tree every step
    costs more than the arithmetic.
    """

    def __init__(self, target: nn.Module, source: nn.Module, tau: float) -> None:
        self.target: list[Tensor] = list(target.parameters())
        self.source: list[Tensor] = list(source.parameters())
        self.tau = tau

    def __call__(self) -> None:
        with torch.no_grad():
            torch._foreach_lerp_(self.target, self.source, self.tau)


def adam(params: Iterable[Tensor], lr: float, weight_decay: float = 0.0) -> torch.optim.Adam:
    """Adam with the fused kernel (one kernel for all parameters, CPU and CUDA)."""
    return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, fused=True)
