"""SAC (Haarnoja et al. 2018) with automatic entropy tuning, target entropy −d."""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import Tensor

from agents.algorithms.base import Action, ActorCritic, adam
from agents.networks import GaussianPolicy, TwinCritic, squashed_sample
from agents.replay import Batch


class SAC(ActorCritic):
    policy_kind = "stochastic"

    def build(self) -> None:
        hidden = self.config.hidden
        assert hidden is not None
        self.actor = GaussianPolicy(self.obs_dim, self.action_dim, hidden).to(self.device)
        self.critic = TwinCritic(self.obs_dim, self.action_dim, hidden).to(self.device)
        self.critic_target = copy.deepcopy(self.critic)
        self.log_alpha = torch.zeros((), device=self.device, requires_grad=True)
        self.alpha_optimizer = adam([self.log_alpha], self.config.actor_lr)  # type: ignore[arg-type]
        self.target_entropy = -float(self.action_dim)
        self._log_pi: Tensor | None = None

    def _noise(self, shape: torch.Size) -> Tensor:
        return torch.randn(shape, generator=self.generator, device=self.device)

    def alpha_value(self) -> Tensor:
        return self.log_alpha.detach().exp()

    def target(self, batch: Batch) -> Tensor:
        with torch.inference_mode():
            mean, log_std = self.actor(batch.next_obs)
            next_action, next_log_pi = squashed_sample(mean, log_std, self._noise(mean.shape))
            next_q = self.critic_target(batch.next_obs, next_action).min(0).values
            soft_value = next_q - self.alpha_value() * next_log_pi
            y = batch.reward + self.config.gamma * batch.not_terminated * soft_value
        return y.clone()  # an ordinary tensor, usable in any autograd expression

    def actor_per_sample(self, obs: Tensor) -> Tensor:
        mean, log_std = self.pi.for_actor_loss(obs)
        action, log_pi = squashed_sample(mean, log_std, self._noise(mean.shape))
        self._log_pi = log_pi.detach()
        return self.alpha_value() * log_pi - self.critic(obs, action).min(0).values

    def after_actor_step(self) -> None:
        # The temperature loss is never weighted by a correction.
        assert self._log_pi is not None
        alpha_loss = -(self.log_alpha * (self._log_pi + self.target_entropy)).mean()
        self.alpha_optimizer.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_optimizer.step()

    def act(self, obs: np.ndarray, explore: bool, rng: np.random.Generator) -> Action:
        with torch.no_grad():
            mean, log_std = self.actor(self.obs_tensor(obs))
            if not explore:
                return Action(torch.tanh(mean)[0].cpu().numpy())
            action, _ = squashed_sample(mean, log_std, self._noise(mean.shape))
        return Action(action[0].cpu().numpy(), (mean[0].cpu().numpy(), log_std[0].cpu().numpy()))

    def policy_distribution(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        return self.pi.for_correction(obs, self.actor_due())

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {**super().optimizers(), "alpha": self.alpha_optimizer}

    def tensors(self) -> dict[str, Tensor]:
        return {"log_alpha": self.log_alpha}
