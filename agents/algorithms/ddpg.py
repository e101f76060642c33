"""DDPG (Lillicrap et al. 2016) as in Fujimoto's DDPG.py: 400-300 networks, tau 0.001."""

from __future__ import annotations

import torch
from torch import Tensor

from agents.algorithms.deterministic import DeterministicActorCritic
from agents.config import AlgorithmDefaults
from agents.networks import DDPGCritic
from agents.replay import Batch

DEFAULTS = AlgorithmDefaults(
    start_steps=1_000,
    tau=0.001,
    actor_lr=1e-4,
    critic_lr=1e-3,
    critic_weight_decay=1e-2,
    hidden=(400, 300),
    correction_delay=1,
)
"""The settings a config leaves unset, as the paper and the authors' code train DDPG."""


class DDPG(DeterministicActorCritic):
    steps_per_second = 230.0
    critics = 1
    hidden_layers = 2  # the action joins the critic at its second layer
    critic_type = DDPGCritic

    def target(self, batch: Batch) -> Tensor:
        with torch.no_grad():
            next_q = self.critic_target(batch.next_obs, self.actor_target(batch.next_obs))[0]
            y = batch.reward + self.config.gamma * batch.not_terminated * next_q
        return y
