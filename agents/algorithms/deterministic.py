"""What DDPG and TD3 share: acting with Gaussian exploration noise."""

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
