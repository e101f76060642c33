"""DDPG (Lillicrap et al. 2016) as in Fujimoto's DDPG.py: 400-300 networks, tau 0.001."""

from __future__ import annotations

import copy
from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from agents.algorithms.base import Action, ActorCritic
from agents.algorithms.deterministic import AT_BOUND, at_bound, noisy_action, q_actor_backward, q_actor_loss
from agents.config import AlgorithmDefaults
from agents.exploration import exploration_std
from agents.networks import DDPGCritic, DeterministicActor
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


class DDPG(ActorCritic):
    policy_kind = "deterministic"
    critics = 1
    hidden_layers = 2  # the action joins the critic at its second layer
    quantities = (AT_BOUND,)
    actor: DeterministicActor
    actor_target: DeterministicActor

    def build(self) -> None:
        hidden = self.config.hidden
        assert hidden is not None
        self.actor = DeterministicActor(self.obs_dim, self.action_dim, hidden, self.config.layer_norm).to(self.device)
        self.actor_target = copy.deepcopy(self.actor)
        self.critic = DDPGCritic(self.obs_dim, self.action_dim, hidden, self.config.layer_norm).to(self.device)
        self.critic_target = copy.deepcopy(self.critic)

    def target(self, batch: Batch) -> Tensor:
        with torch.no_grad():
            next_q = self.critic_target(batch.next_obs, self.actor_target(batch.next_obs))[0]
            y = batch.reward + self.config.gamma * batch.not_terminated * next_q
        return y

    def actor_loss(self, obs: Tensor) -> Tensor:
        return q_actor_loss(self.actor, self.critic, obs, self.pi)

    def logged(self) -> Mapping[str, Tensor]:
        return at_bound(self.pi)

    def actor_backward(self, obs: Tensor, coefficients: Tensor | float) -> Tensor:
        return q_actor_backward(self.actor, self.critic, self.pi, obs, coefficients)

    def act(self, obs: np.ndarray, explore: bool, rng: np.random.Generator) -> Action:
        return noisy_action(self.actor_output(obs), exploration_std(self.config), explore, rng)

    def greedy_action(self, obs: Tensor) -> Tensor:
        return self.pi.for_correction(obs, self.actor_due())
