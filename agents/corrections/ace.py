"""ACE, actor-critic with emphatic weightings (Imani, Graves & White 2018), at the paper's λ₁ = 0.

At λ₁ = 0 the emphatic weighting M_i is 1 and ACE is Off-PAC, with the method's own
likelihood-ratio estimator in place of the baseline's policy gradient:

    L_actor(φ) = −(1/B) Σ_i ρ̄_i · M_i · ŝ_i · log π_φ(a_i|s_i)

ρ̄_i the clipped density ratio at the stored action, ŝ_i the learning signal (``pg_signal``):
δ_i = y_i − V(s_i) with the critic's target y of this update, or Q(s_i, a_i) − V(s_i); SAC
subtracts α log π_φ(a_i|s_i) (the likelihood-ratio form of its entropy term). V(s) comes from
the baseline's critics (:meth:`~agents.algorithms.base.ActorCritic.state_value`). ``pg_form =
dpg`` keeps the baseline's actor loss (M ≡ 1: the baseline itself), a sanity check.
The critic, its targets and exploration are the baseline's.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from agents.corrections.base import CorrectionSettings, Weights
from agents.corrections.behaviour import RHO_BAR, BehaviourRatio
from agents.corrections.densities import clipped_ratio
from agents.quantities import Quantity
from agents.replay import Batch


class ACE(BehaviourRatio):
    name = "ace"
    quantities: tuple[Quantity, ...] = (RHO_BAR,)

    def __init__(self, settings: CorrectionSettings) -> None:
        super().__init__(settings)
        config = settings.config
        self.likelihood_ratio = config is None or config.pg_form == "lr"
        self.td_signal = config is None or config.pg_signal == "td"
        self.rho_bar: Tensor | None = None

    def weights(self, batch: Batch, agent: Any) -> Weights:
        self.rho_bar = clipped_ratio(self.log_ratio(batch, agent))
        return Weights(logged={RHO_BAR.name: self.rho_bar})

    def signal(self, agent: Any, batch: Batch, value: Tensor) -> Tensor:
        """ŝ_i, (B, 1), without gradient, given V(s_i) (SAC's entropy term excluded)."""
        with torch.no_grad():
            if self.td_signal:
                assert agent.last_target is not None
                return agent.last_target - value
            q = agent.critic(batch.obs, batch.action)
            q = q[0] if self.policy_kind == "deterministic" else q.min(0).values
            return q - value

    def actor_loss(self, agent: Any, obs: Tensor, batch: Batch) -> Tensor:
        if not self.likelihood_ratio:
            return agent.actor_loss(obs)
        assert self.rho_bar is not None
        signal = self.signal(agent, batch, agent.state_value(batch.obs))
        log_pi = self.current_density(batch, agent)
        if self.policy_kind == "stochastic":
            signal = signal - agent.alpha_value() * log_pi.detach()
        return -(self.rho_bar * signal) * log_pi
