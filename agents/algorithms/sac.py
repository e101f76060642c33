"""SAC (Haarnoja et al. 2018) with automatic entropy tuning, target entropy −d."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor

from agents.algorithms.base import Action, ActorCritic
from agents.algorithms.losses import adam
from agents.config import AlgorithmDefaults
from agents.networks import LOG_STD_MAX, LOG_STD_MIN, GaussianPolicy, TwinCritic, squashed_sample
from agents.optim import AdamStep
from agents.replay import Batch

DEFAULTS = AlgorithmDefaults(
    start_steps=10_000,
    tau=0.005,
    actor_lr=3e-4,
    critic_lr=3e-4,
    critic_weight_decay=0.0,
    hidden=(256, 256),
    correction_delay=5,
)
"""The settings a config leaves unset, as the paper and the authors' code train SAC."""


class SAC(ActorCritic):
    steps_per_second = 220.0
    policy_kind = "stochastic"
    keeps_target_actor = False
    actor: GaussianPolicy
    critic: TwinCritic

    def build(self) -> None:
        hidden = self.config.hidden
        assert hidden is not None
        self.actor = GaussianPolicy(self.obs_dim, self.action_dim, hidden, self.config.layer_norm).to(self.device)
        self.critic = TwinCritic(self.obs_dim, self.action_dim, hidden, self.config.layer_norm).to(self.device)
        self.critic_target = copy.deepcopy(self.critic)
        self.log_alpha = torch.zeros((), device=self.device, requires_grad=True)
        self.alpha_optimizer = adam([self.log_alpha], self.config.actor_lr)  # type: ignore[arg-type]  # resolved
        self.alpha_step = AdamStep(self.alpha_optimizer)
        self.target_entropy = -float(self.action_dim)
        self._log_pi: Tensor | None = None

    def alpha_value(self) -> Tensor:
        return self.log_alpha.detach().exp()

    def target(self, batch: Batch) -> Tensor:
        with torch.no_grad():
            mean, log_std = self.actor(batch.next_obs)
            next_action, next_log_pi = squashed_sample(mean, log_std, self._noise(mean.shape))
            next_q = self.critic_target(batch.next_obs, next_action).min(0).values
            soft_value = next_q - self.alpha_value() * next_log_pi
            y = batch.reward + self.config.gamma * batch.not_terminated * soft_value
        return y

    def actor_loss(self, obs: Tensor) -> Tensor:
        """ℓ_i = α log π(a_i|s_i) − min_k Q_k(s_i, a_i), a_i a reparameterised sample (α held fixed)."""
        mean, log_std = self.actor(obs)
        action, log_pi = squashed_sample(mean, log_std, self._noise(mean.shape))
        self._log_pi = log_pi.detach()  # for the temperature step
        return self.alpha_value() * log_pi - self.critic(obs, action).min(0).values

    def state_value(self, obs: Tensor, output: Any = None) -> Tensor:
        """V(s) = min_k Q_k(s, ã) − α log π(ã|s), ã ~ π(·|s), one sample, without gradient.

        Its log π(ã|s) is also what the temperature step of this update uses, as the actor loss's
        would be: a correction that writes its own actor loss asks for V(s) instead.
        """
        with torch.no_grad():
            mean, log_std = self.actor(obs) if output is None else (t.detach() for t in output)
            action, log_pi = squashed_sample(mean, log_std, self._noise(mean.shape))
            self._log_pi = log_pi
            return self.critic(obs, action).min(0).values - self.alpha_value() * log_pi

    def actor_backward(self, obs: Tensor, coefficients: Tensor | float) -> Tensor:
        """ℓ_i = α log π(a_i|s_i) − min_k Q_k(s_i, a_i), a_i = tanh(u_i), u_i = mean_i + σ_i ε_i.

        With L = Σ c_i ℓ_i (α held fixed):
        - ∂L/∂Q_k = −c on the member that is the minimum (where min's gradient goes);
        - ∂L/∂u = c α ∂log π/∂u + ∂L/∂a (1 − a²), where ∂log π/∂u = 2 tanh(u) = 2a
          (the tanh Jacobian term; the Gaussian term, written with ε, does not depend on u);
        - ∂L/∂mean = ∂L/∂u, and ∂L/∂log σ = ∂L/∂u · σε − c α (from log π's −Σ log σ).
        """
        c = coefficients
        (mean, log_std), actor_tape = self.pi.for_actor_loss(obs)
        noise = self._noise(mean.shape)
        action, log_pi = squashed_sample(mean, log_std, noise)
        q, critic_tapes = self.critic.forward_tape(obs, action)  # (2, B, 1)
        q_min, member = q.min(0)
        self._log_pi = log_pi
        action_grad = self.critic.min_action_grad(critic_tapes, member, -c)
        alpha = self.alpha_value()
        u_grad = (2 * alpha * c) * action + action_grad * (1 - action * action)
        self.actor.backward(actor_tape, (u_grad, u_grad * (log_std.exp() * noise) - alpha * c))
        return alpha * log_pi - q_min

    def after_actor_step(self) -> None:
        # The temperature loss −log α · mean(log π + H̄) is never weighted by a correction;
        # its gradient with respect to log α is −mean(log π + H̄).
        assert self._log_pi is not None
        # Each batch's mean: a lane group's (K, B, 1) log π gives each lane's temperature its own.
        self.log_alpha.grad = -(self._log_pi + self.target_entropy).mean((-2, -1)).view_as(self.log_alpha)
        self.alpha_step()

    def act(self, obs: np.ndarray, explore: bool, rng: np.random.Generator) -> Action:
        # What GaussianPolicy.forward and squashed_sample compute, on one observation.
        mean, log_std = np.split(self.actor_output(obs), 2)
        log_std = np.clip(log_std, LOG_STD_MIN, LOG_STD_MAX)
        if not explore:
            return Action(np.tanh(mean))
        noise = self._noise(mean.shape).cpu().numpy()
        return Action(np.tanh(mean + np.exp(log_std) * noise), (mean, log_std))

    def greedy_actions(self, obs: np.ndarray) -> np.ndarray | None:
        outputs = self.actor_outputs(obs) if type(self).act is SAC.act else None  # None: a subclass acts otherwise
        return None if outputs is None else np.tanh(outputs[:, : self.action_dim])

    def policy_distribution(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        return self.pi.for_correction(obs, self.actor_due())

    def actor_step_state(self) -> dict[str, Tensor]:
        return {} if self._log_pi is None else {"log_pi": self._log_pi.detach()}

    def set_actor_step_state(self, state: Mapping[str, Tensor]) -> None:
        if "log_pi" in state:
            self._log_pi = state["log_pi"]

    def adam_steps(self) -> list[AdamStep]:
        return [*super().adam_steps(), self.alpha_step]

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {**super().optimizers(), "alpha": self.alpha_optimizer}

    def tensors(self) -> dict[str, Tensor]:
        return {"log_alpha": self.log_alpha}
