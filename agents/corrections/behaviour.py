"""What the likelihood-ratio competitors share: the density ratio ρ_i = π(a_i|s_i)/μ(a_i|s_i) of a replayed batch.

The buffer stores each explored action's behaviour Gaussian (DDPG/TD3: N(π_old(s), σ²I); SAC: the
pre-tanh one) and whether the action came from the uniform start phase; :meth:`BehaviourRatio.log_ratio`
evaluates both densities at the stored action (:mod:`agents.corrections.densities`). Unlike
AC-Off-POC's SAC variant, the competitors keep the start-phase transitions, with μ uniform.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import torch
from torch import Tensor

from agents import plugins
from agents.corrections.base import AgentView, Collected, Correction, CorrectionSettings
from agents.corrections.densities import (
    deterministic_log_prob,
    deterministic_log_ratio,
    squashed_log_prob,
    stochastic_log_ratio,
    uniform_log_density,
)
from agents.exploration import exploration_std
from agents.quantities import Quantity
from agents.replay import Batch

RANDOM_PHASE = "random_phase"
RHO_BAR = Quantity("rho_bar", "ρ̄", 0.0, 2.0)
"""The clipped density ratio exp(min(log ρ, log 2)) ∈ [0, 2]."""


def check_behaviour_noise(config: Any) -> None:
    """DDPG/TD3 runs of a ratio correction need exploration noise: it is their behaviour density."""
    entry = plugins.algorithm(config.algo)
    if entry is not None and entry.policy_kind == "deterministic" and not exploration_std(config) > 0:
        raise ValueError(f"{config.correction} needs exploration_std > 0 (its behaviour density) for {config.algo}")


class BehaviourRatio(Correction):
    """A correction that needs ρ_i: stores the behaviour and the start-phase flag, evaluates log ρ_i."""

    needs_behaviour_params = True
    fields: Mapping[str, int] = MappingProxyType({RANDOM_PHASE: 1})

    def __init__(self, settings: CorrectionSettings) -> None:
        super().__init__(settings)
        self.policy_kind = settings.policy_kind
        self.std = exploration_std(settings.run_config)

    def collect(self, transition: Collected) -> Mapping[str, float]:
        return {RANDOM_PHASE: float(transition.random_phase)}

    def current_density(self, batch: Batch, agent: AgentView, output: Any = None) -> Tensor:
        """log π_φ(a_i|s_i) at the stored action, (B, 1), differentiable in the actor's parameters
        (DDPG/TD3: the Gaussian surrogate around π_φ(s_i); SAC: up to the tanh Jacobian).
        ``output``: the actor's output on ``batch.obs``, when already computed with gradient."""
        output = agent.actor(batch.obs) if output is None else output
        if self.policy_kind == "deterministic":
            return deterministic_log_prob(batch.action, output, self.std)
        mean, log_std = output
        return squashed_log_prob(batch.action, mean, log_std)

    def log_ratio(self, batch: Batch, agent: AgentView, output: Any = None, sampled: bool = False) -> Tensor:
        """log ρ_i under the current policy, (B, 1), without gradient (``output``: the actor's on
        ``batch.obs``, when already computed). ``sampled``: at a fresh action of the current policy (its
        Gaussian, drawn with ``agent.generator``) instead of the stored one."""
        assert batch.behaviour_mean is not None and batch.behaviour_log_std is not None
        d = batch.action.shape[-1]
        with torch.no_grad():
            if self.policy_kind == "deterministic":
                current = agent.greedy_action(batch.obs) if output is None else output.detach()
                action = batch.action
                if sampled:
                    noise = torch.randn(current.shape, generator=agent.generator).to(current.device)
                    action = current + self.std * noise
                explored = deterministic_log_ratio(action, batch.behaviour_mean, current, self.std)
                log_pi = deterministic_log_prob(action, current, self.std)
            else:
                mean, log_std = agent.policy_distribution(batch.obs) if output is None else (t.detach() for t in output)
                action = batch.action
                if sampled:
                    noise = torch.randn(mean.shape, generator=agent.generator).to(mean.device)
                    action = torch.tanh(mean + log_std.exp() * noise)
                explored = stochastic_log_ratio(action, batch.behaviour_mean, batch.behaviour_log_std, mean, log_std)
                log_pi = squashed_log_prob(action, mean, log_std, jacobian=True)
            uniform = log_pi - uniform_log_density(d)
            return torch.where(batch.extra[RANDOM_PHASE] > 0.5, uniform, explored)
