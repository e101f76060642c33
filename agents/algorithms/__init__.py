"""DDPG, TD3 and SAC, built by name from a resolved ``TrainConfig``."""

from __future__ import annotations

import torch

from agents.algorithms.base import ActorCritic, SoftUpdate, UpdateStats, reduce_loss
from agents.algorithms.ddpg import DDPG
from agents.algorithms.sac import SAC
from agents.algorithms.td3 import TD3
from agents.config import ConfigError, TrainConfig

ALGORITHM_CLASSES: dict[str, type[ActorCritic]] = {"ddpg": DDPG, "td3": TD3, "sac": SAC}


def make_algorithm(config: TrainConfig, obs_dim: int, action_dim: int, generator: torch.Generator) -> ActorCritic:
    """The algorithm named by ``config.algo``, with freshly initialised networks."""
    if config.algo not in ALGORITHM_CLASSES:
        raise ConfigError(f"unknown algorithm {config.algo!r}: choose one of {', '.join(ALGORITHM_CLASSES)}")
    return ALGORITHM_CLASSES[config.algo](config, obs_dim, action_dim, generator)


__all__ = ["DDPG", "SAC", "TD3", "ActorCritic", "SoftUpdate", "UpdateStats", "make_algorithm", "reduce_loss"]
