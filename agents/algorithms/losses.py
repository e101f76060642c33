"""Where a correction's weights enter the losses, and the small pieces every update uses.

:func:`loss_coefficients` is the one place weights become the c_i of L = Σ_i c_i ℓ_i; both backends of
:class:`~agents.algorithms.base.ActorCritic` reduce their per-sample losses through it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from agents.corrections.base import Weights

__all__ = [
    "Coefficients",
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
    """L = Σ_i c_i ℓ_i for (B, 1) per-sample losses: 0-d; for a lane group's (K, B, 1), each lane's, (K,)."""
    return (coefficients * per_sample).sum((-2, -1))


class Coefficients:
    """One update's c_i (:func:`loss_coefficients`) for the critic's and the actor's loss, and Σ_i c_i of the
    critic's (what scales its decay): from a solo run's :class:`~agents.corrections.base.Weights`, or, for a
    lane group's stacked update, from each lane's, stacked on a leading lane axis ((K, B, 1) tensors) so that
    lane k's losses are weighted as its solo run weights them."""

    def __init__(self, weights: Sequence[Weights], batch_size: int, lanes_like: Tensor | None = None) -> None:
        """``weights``: a solo run's alone (``lanes_like`` None), or each lane's, stacked as ``lanes_like``'s dtype
        and device."""
        self.weights = list(weights)
        self.lanes_like = lanes_like
        self.batch_size = batch_size
        self.critic = self._each(lambda w: w.critic, batch_size)
        """The critic loss's c_i: a number, (B, 1), or a lane group's (K, B, 1)."""

    def _stack(self, values: list[Tensor | float], shape: tuple[int, ...]) -> Tensor:
        like = self.lanes_like
        assert like is not None
        return torch.stack([torch.as_tensor(v, dtype=like.dtype, device=like.device).expand(shape) for v in values])

    def _each(self, pick: Callable[[Weights], Tensor | None], n: int) -> Tensor | float:
        values = [loss_coefficients(pick(w), n, w.normalised) for w in self.weights]
        return values[0] if self.lanes_like is None else self._stack(values, (n, 1))

    def actor(self, n: int) -> Tensor | float:
        """The actor loss's c_i on ``n`` actor states (a correction may choose other states than the batch's)."""
        if n == self.batch_size and all(w.actor is w.critic for w in self.weights):
            return self.critic
        return self._each(lambda w: w.actor, n)

    def total(self) -> Tensor | float:
        """Σ_i c_i of the critic's loss (:func:`total_weight`); a lane group's, (K,)."""
        totals = [total_weight(w.critic, w.normalised) for w in self.weights]
        return totals[0] if self.lanes_like is None else self._stack(totals, ())


def reduce_loss(per_sample: Tensor, weight: Tensor | None) -> Tensor:
    """Reduce (B, 1) per-sample losses to the scalar L = Σ_i c_i ℓ_i (see :func:`loss_coefficients`)."""
    return weighted_sum(per_sample, loss_coefficients(weight, per_sample.shape[0]))


def set_grads(module: nn.Module, loss: Tensor) -> None:
    """∂loss/∂θ into the ``.grad`` of ``module``'s parameters alone (the optimiser's step reads it)."""
    params = list(module.parameters())
    for param, grad in zip(params, torch.autograd.grad(loss, params), strict=True):
        # Contiguous, as the parameter is: a lane group's stacked layer gets its weight's gradient as a
        # transposed view (batched products' backward), and the fused Adam kernel reads a gradient in the
        # parameter's memory order (measured: 620 of 1,024 entries stepped the wrong way without this).
        param.grad = grad.contiguous()


def grad_norm(tensors: list[Tensor], lanes: bool = False) -> Tensor:
    """The 2-norm of a list of tensors taken as one vector; with ``lanes``, of each lane's slices ((K, ...)
    tensors): (K,)."""
    if lanes:
        return torch.stack([t.reshape(t.shape[0], -1).norm(dim=1) for t in tensors]).norm(dim=0)
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
