"""The update every algorithm shares, and the one place where weights enter.

An algorithm supplies its networks, its critic target, its per-sample actor loss
and its schedule; :meth:`ActorCritic.update` does the rest, identically for
DDPG, TD3 and SAC:

    λ  = correction(batch, current policy)            # once, before the critic step
    y  = target(batch)                                 # no gradient
    critic: reduce_loss(Σ_critics (Q(s, a) − y)², λ)   # step
    actor (when due): reduce_loss(actor_per_sample(s), λ)  # step
    after_actor_step(); soft-update targets (when due)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

from agents.algorithms.memo import PolicyMemo
from agents.config import TrainConfig
from agents.corrections.base import Correction, PolicyKind
from agents.replay import Batch

_TINY = 1e-12


def reduce_loss(per_sample: Tensor, weight: Tensor | None) -> Tensor:
    """Reduce (B, 1) per-sample losses to a scalar: the only place weights enter.

    - ``None``: ``mean_i ℓ_i`` (the plain algorithm);
    - 0-d λ (per batch, paper eqs. 4-5): ``λ · mean_i ℓ_i``;
    - (B, 1) λ_i (per transition): ``Σ λ_i ℓ_i / Σ λ_i``, guarded against Σ λ_i = 0.
    """
    if weight is None:
        return per_sample.mean()
    if weight.ndim == 0:
        return weight * per_sample.mean()
    return (weight * per_sample).sum() / weight.sum().clamp_min(_TINY)


class SoftUpdate:
    """Polyak averaging θ' ← τθ + (1 − τ)θ' of a target network, one fused call per update.

    The parameter lists are collected once: walking the module tree every step
    costs more than the arithmetic.
    """

    def __init__(self, target: nn.Module, source: nn.Module, tau: float) -> None:
        self.target = list(target.parameters())
        self.source = list(source.parameters())
        self.tau = tau

    def __call__(self) -> None:
        with torch.no_grad():
            torch._foreach_lerp_(self.target, self.source, self.tau)


def adam(params: Iterable[nn.Parameter], lr: float, weight_decay: float = 0.0) -> torch.optim.Adam:
    """Adam with the fused kernel (one kernel for all parameters, CPU and CUDA)."""
    return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, fused=True)


class UpdateStats(NamedTuple):
    """What one update reports; tensors stay on device (no host sync per step)."""

    critic_loss: Tensor
    actor_loss: Tensor | None
    q_mean: Tensor
    alpha: Tensor | None
    weight: Tensor | None
    """The correction's weight, 0-d or (B, 1); None when no correction applied."""


class Action(NamedTuple):
    """An action to send to the (normalised) environment."""

    action: np.ndarray
    """(d,) in [-1, 1]"""
    behaviour: tuple[np.ndarray, np.ndarray] | None = None
    """Stochastic policies: the pre-tanh (mean, log_std) it was drawn from."""


class ActorCritic(ABC):
    """Shared state and update of an off-policy actor-critic agent."""

    policy_kind: PolicyKind
    actor: nn.Module
    critic: nn.Module
    critic_target: nn.Module
    actor_target: nn.Module | None = None
    """DDPG and TD3 keep a target actor; SAC has none."""

    def __init__(self, config: TrainConfig, obs_dim: int, action_dim: int, generator: torch.Generator) -> None:
        self.config = config
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.device = torch.device(config.device)
        self.generator = generator
        self.updates = 0
        self.build()
        self.pi = PolicyMemo(self.actor)
        self.actor_params = list(self.actor.parameters())
        self.soft_updates = [
            SoftUpdate(target, source, config.tau)  # type: ignore[arg-type]
            for target, source in self.target_pairs()
        ]
        self.critic_optimizer = adam(self.critic.parameters(), config.critic_lr, config.critic_weight_decay)  # type: ignore[arg-type]
        self.actor_optimizer = adam(self.actor_params, config.actor_lr)  # type: ignore[arg-type]

    # ---- what an algorithm defines -------------------------------------------------
    @abstractmethod
    def build(self) -> None:
        """Create actor, critic, critic_target (and any other networks)."""

    @abstractmethod
    def target(self, batch: Batch) -> Tensor:
        """The critic target y, (B, 1), computed under inference mode (no autograd bookkeeping)."""

    @abstractmethod
    def actor_per_sample(self, obs: Tensor) -> Tensor:
        """Per-sample actor loss, (B, 1)."""

    @abstractmethod
    def act(self, obs: np.ndarray, explore: bool, rng: np.random.Generator) -> Action:
        """An action for one observation; ``explore`` adds the algorithm's exploration."""

    def actor_due(self) -> bool:
        """Whether this update (``self.updates`` counts from 1) steps the actor."""
        return True

    def after_actor_step(self) -> None:
        """Extra work after the actor step (SAC's temperature)."""

    def update_targets(self, actor_stepped: bool) -> None:
        """Soft-update the target networks (every update unless overridden)."""
        for soft_update in self.soft_updates:
            soft_update()

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """(target, online) network pairs that soft updates track."""
        pairs = [(self.critic_target, self.critic)]
        return [*pairs, (self.actor_target, self.actor)] if self.actor_target is not None else pairs

    def alpha_value(self) -> Tensor | None:
        """The entropy temperature, for stochastic policies."""
        return None

    def modules(self) -> dict[str, nn.Module]:
        """Every network, by name (checkpoints)."""
        modules = {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target}
        return modules | {"actor_target": self.actor_target} if self.actor_target is not None else modules

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Every optimiser, by name (checkpoints)."""
        return {"actor": self.actor_optimizer, "critic": self.critic_optimizer}

    def tensors(self) -> dict[str, Tensor]:
        """Learned tensors outside any module, by name (checkpoints)."""
        return {}

    # ---- the shared update ---------------------------------------------------------
    def update(self, batch: Batch, correction: Correction | None = None) -> UpdateStats:
        """One gradient update on a batch; ``correction`` None means plain losses."""
        self.updates += 1

        # Similarity weight: once per update, from the policy before any step.
        weight = correction(batch, self) if correction is not None else None

        # Critic
        y = self.target(batch)
        q = self.critic(batch.obs, batch.action)  # (E, B, 1)
        td_error = q - y
        critic_loss = reduce_loss(td_error.square().sum(0), weight)
        self.critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_optimizer.step()

        # Actor (delayed for TD3); gradients flow to the actor's parameters only.
        actor_loss = None
        stepped = self.actor_due()
        if stepped:
            actor_loss = reduce_loss(self.actor_per_sample(batch.obs), weight)
            self.actor_optimizer.zero_grad(set_to_none=True)
            actor_loss.backward(inputs=self.actor_params)
            self.actor_optimizer.step()
            self.after_actor_step()

        self.update_targets(stepped)
        return UpdateStats(
            critic_loss=critic_loss.detach(),
            actor_loss=actor_loss.detach() if actor_loss is not None else None,
            q_mean=q.detach().mean(),
            alpha=self.alpha_value(),
            weight=weight,
        )

    # ---- helpers shared by algorithms ----------------------------------------------
    def obs_tensor(self, obs: np.ndarray) -> Tensor:
        return torch.as_tensor(obs, dtype=torch.float32, device=self.device).unsqueeze(0)
