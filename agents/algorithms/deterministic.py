"""What DDPG and TD3 share (:class:`DeterministicActorCritic`): acting with Gaussian exploration noise, the
actor loss −Q(s, π(s)) and its hand-written gradient, and the logged share of π(s) at its bounds."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from agents.algorithms.base import Action, ActorCritic
from agents.algorithms.memo import PolicyMemo
from agents.exploration import exploration_std
from agents.networks import DDPGCritic, DeterministicActor, TwinCritic
from agents.quantities import Quantity


def noisy_action(pi: np.ndarray, std: float, explore: bool, rng: np.random.Generator) -> Action:
    """π(s) (the actor's output, (d,)), plus N(0, std²) exploration noise clipped to [-1, 1] when exploring.

    An explored action's behaviour is the Gaussian it was drawn from, N(π(s), std²I), as (mean, log std).
    """
    if explore and std > 0:
        action = np.clip(pi + rng.normal(0.0, std, size=pi.shape), -1.0, 1.0).astype(np.float32)
        return Action(action, (pi, np.full_like(pi, math.log(std))))
    return Action(pi)


AT_BOUND = Quantity("at_bound", "share of π(s) at the bounds")
"""Per actor update, the share of the batch's action entries π(s)_j with |π(s)_j| ≥ :data:`NEAR_BOUND`: an
actor saturated at its bounds (DDPG's failure mode, issue 49) reads near 1 in the Quantities view."""
NEAR_BOUND = 0.99
"""Within 1% of the bound of [-1, 1]."""


def at_bound(pi: PolicyMemo) -> dict[str, Tensor]:
    """:data:`AT_BOUND`'s value for this update (none when the actor did not step), read once: 0-d, or one
    per lane for a lane group's (K, B, d) output."""
    output, pi.last_output = pi.last_output, None
    return {} if output is None else {AT_BOUND.name: (output.abs() >= NEAR_BOUND).float().mean((-2, -1))}


def q_actor_loss(actor: DeterministicActor, critic: TwinCritic | DDPGCritic, obs: Tensor, pi: PolicyMemo) -> Tensor:
    """ℓ_i = −Q₁(s_i, π(s_i)): the first critic at the policy's action (kept in ``pi.last_output``)."""
    action = actor(obs)
    pi.last_output = action.detach()
    return -critic(obs, action, first_only=True)[0]


def q_actor_backward(
    actor: DeterministicActor, critic: TwinCritic | DDPGCritic, pi: PolicyMemo, obs: Tensor, c: Tensor | float
) -> Tensor:
    """ℓ_i = −Q(s_i, π(s_i)) with the first critic; the actor's gradient of Σ c_i ℓ_i.

    ∂L/∂Q = −c, back through the critic to the action (its own parameters get
    no gradient), then through the actor.
    """
    action, actor_tape = pi.for_actor_loss(obs)
    pi.last_output = action.detach()
    q, critic_tapes = critic.forward_tape(obs, action, first_only=True)  # (1, B, 1)
    action_grad = critic.backward(critic_tapes, torch.full_like(q, -1.0) * c, params=False, action_grad=True)
    assert action_grad is not None
    actor.backward(actor_tape, action_grad)
    return -q[0]


class DeterministicActorCritic(ActorCritic):
    """A deterministic policy π(s) (DDPG, TD3): its actor loss −Q₁(s, π(s)), written out for the fast backend
    too, Gaussian exploration, and :data:`AT_BOUND` logged on actor steps. A subclass gives its networks,
    its target and its schedule."""

    policy_kind = "deterministic"
    quantities = (AT_BOUND,)
    critic_type: type[TwinCritic] | type[DDPGCritic] = TwinCritic
    """Its critic network (built with the actor's hidden sizes)."""
    actor: DeterministicActor
    actor_target: DeterministicActor

    def build(self) -> None:
        """π and its critic(s), each with a target copy."""
        hidden, norm = self.config.hidden, self.config.layer_norm
        assert hidden is not None
        self.actor = DeterministicActor(self.obs_dim, self.action_dim, hidden, norm).to(self.device)
        self.actor_target = copy.deepcopy(self.actor)
        self.critic = self.critic_type(self.obs_dim, self.action_dim, hidden, norm).to(self.device)
        self.critic_target = copy.deepcopy(self.critic)

    def actor_loss(self, obs: Tensor) -> Tensor:
        return q_actor_loss(self.actor, self.critic, obs, self.pi)

    def actor_backward(self, obs: Tensor, coefficients: Tensor | float) -> Tensor:
        return q_actor_backward(self.actor, self.critic, self.pi, obs, coefficients)

    def logged(self) -> Mapping[str, Tensor]:
        return at_bound(self.pi)

    def act(self, obs: np.ndarray, explore: bool, rng: np.random.Generator) -> Action:
        return noisy_action(self.actor_output(obs), exploration_std(self.config), explore, rng)

    def greedy_actions(self, obs: np.ndarray) -> np.ndarray | None:
        if type(self).act is not DeterministicActorCritic.act:  # a subclass that acts otherwise
            return None
        return self.actor_outputs(obs)  # π(s), as noisy_action returns it without exploration

    def greedy_action(self, obs: Tensor) -> Tensor:
        return self.pi.for_correction(obs, self.actor_due())
