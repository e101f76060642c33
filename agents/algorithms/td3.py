"""TD3 (Fujimoto et al. 2018) as in sfujim/TD3: twin critics, target smoothing, delayed actor."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from agents.algorithms.deterministic import DeterministicActorCritic
from agents.config import AlgorithmDefaults
from agents.exploration import ExplorationOptions
from agents.networks import TwinCritic
from agents.options import Options
from agents.replay import Batch

DEFAULTS = AlgorithmDefaults(
    start_steps=25_000,
    tau=0.005,
    actor_lr=3e-4,
    critic_lr=3e-4,
    critic_weight_decay=0.0,
    hidden=(256, 256),
    correction_delay=1,
)
"""The settings a config leaves unset, as the paper and the authors' code train TD3."""


@dataclass(frozen=True)
class TD3Options(Options):
    """TD3's own settings: the delayed actor and the target policy smoothing."""

    prefix: ClassVar[str] = "td3"
    unprefixed: ClassVar[frozenset[str]] = frozenset({"policy_delay", "target_noise", "noise_clip"})  # as ever

    policy_delay: int = 2
    """Critic updates per actor and target update."""
    target_noise: float = 0.2
    """Target policy smoothing noise std."""
    noise_clip: float = 0.5
    """Target policy smoothing noise clip."""

    def validate(self) -> None:
        if not (float(self.policy_delay).is_integer() and self.policy_delay >= 1):
            raise ValueError(f"policy_delay must be a whole number of at least 1, got {self.policy_delay}")
        for name in ("target_noise", "noise_clip"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a non-negative number, got {value}")


OPTIONS: tuple[type[Options], ...] = (ExplorationOptions, TD3Options)
"""TD3's option groups, as it registers them (a subclass registered under a new name declares them again)."""


class TD3(DeterministicActorCritic):
    steps_per_second = 320.0
    critic_type = TwinCritic

    def target(self, batch: Batch) -> Tensor:
        own = self.config.option(TD3Options)
        with torch.no_grad():
            # Target policy smoothing: clipped Gaussian noise on the target action.
            noise = self._noise(batch.action.shape)
            noise = (noise * own.target_noise).clamp(-own.noise_clip, own.noise_clip)
            next_action = (self.actor_target(batch.next_obs) + noise).clamp(-1.0, 1.0)
            # Clipped double Q-learning: the smaller of the twin targets.
            next_q = self.critic_target(batch.next_obs, next_action).min(0).values
            y = batch.reward + self.config.gamma * batch.not_terminated * next_q
        return y

    def actor_due(self) -> bool:
        return self.updates % self.config.option(TD3Options).policy_delay == 0

    def update_targets(self, actor_stepped: bool) -> None:
        # Delayed: targets move only with the actor.
        if actor_stepped:
            super().update_targets(actor_stepped)
