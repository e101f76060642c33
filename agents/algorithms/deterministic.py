"""Pieces DDPG and TD3 share: acting with Gaussian noise, the greedy policy."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from agents.algorithms.base import Action


def noisy_action(actor: nn.Module, obs: Tensor, std: float, explore: bool, rng: np.random.Generator) -> Action:
    """π(s), plus N(0, std²) exploration noise clipped to [-1, 1] when exploring."""
    with torch.no_grad():
        action = actor(obs)[0].cpu().numpy()
    if explore and std > 0:
        action = np.clip(action + rng.normal(0.0, std, size=action.shape), -1.0, 1.0).astype(np.float32)
    return Action(action)


class PolicyMemo:
    """π(s) on this update's batch, computed once for both the correction and the actor loss.

    The correction asks for π(s) before the critic step; the actor loss needs the
    same π(s) (the actor has not changed in between) with gradient. When the
    actor steps in this update, the first request runs the forward pass with
    gradient and the actor loss reuses it; otherwise it runs without gradient.
    """

    def __init__(self, actor: nn.Module) -> None:
        self.actor = actor
        self._obs: Tensor | None = None
        self._actions: Tensor | None = None

    def for_correction(self, obs: Tensor, actor_due: bool) -> Tensor:
        if not actor_due:
            with torch.no_grad():
                return self.actor(obs)
        self._obs, self._actions = obs, self.actor(obs)
        return self._actions.detach()

    def for_actor_loss(self, obs: Tensor) -> Tensor:
        actions = self._actions if self._obs is obs else None
        self._obs = self._actions = None
        return actions if actions is not None else self.actor(obs)
