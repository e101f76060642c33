"""What DDPG and TD3 share: acting with Gaussian exploration noise, and the actor loss −Q(s, π(s))."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from agents.algorithms.base import Action
from agents.algorithms.memo import PolicyMemo
from agents.networks import DDPGCritic, DeterministicActor, TwinCritic


def noisy_action(pi: np.ndarray, std: float, explore: bool, rng: np.random.Generator) -> Action:
    """π(s) (the actor's output, (d,)), plus N(0, std²) exploration noise clipped to [-1, 1] when exploring.

    An explored action's behaviour is the Gaussian it was drawn from, N(π(s), std²I), as (mean, log std).
    """
    if explore and std > 0:
        action = np.clip(pi + rng.normal(0.0, std, size=pi.shape), -1.0, 1.0).astype(np.float32)
        return Action(action, (pi, np.full_like(pi, math.log(std))))
    return Action(pi)


def q_actor_loss(actor: DeterministicActor, critic: TwinCritic | DDPGCritic, obs: Tensor) -> Tensor:
    """ℓ_i = −Q₁(s_i, π(s_i)): the first critic at the policy's action."""
    return -critic(obs, actor(obs), first_only=True)[0]


def q_actor_backward(
    actor: DeterministicActor, critic: TwinCritic | DDPGCritic, pi: PolicyMemo, obs: Tensor, c: Tensor | float
) -> Tensor:
    """ℓ_i = −Q(s_i, π(s_i)) with the first critic; the actor's gradient of Σ c_i ℓ_i.

    ∂L/∂Q = −c, back through the critic to the action (its own parameters get
    no gradient), then through the actor.
    """
    action, actor_tape = pi.for_actor_loss(obs)
    q, critic_tapes = critic.forward_tape(obs, action, first_only=True)  # (1, B, 1)
    action_grad = critic.backward(critic_tapes, torch.full_like(q, -1.0) * c, params=False, action_grad=True)
    assert action_grad is not None
    actor.backward(actor_tape, action_grad)
    return -q[0]
