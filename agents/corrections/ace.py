"""ACE, actor-critic with emphatic weightings (Imani, Graves & White 2018); the paper's λ₁ = 0.

ACE's actor step is ρ_t M_t δ_t ∇log π(A_t|S_t): the policy gradient at each transition, weighted by
the density ratio ρ and the emphasis M. The ratio corrects for the behaviour's choice of the action a
likelihood-ratio gradient samples; the emphasis reweights the states. The paper applies ACE to DDPG,
TD3 and SAC "by replacing the PG computation"; ``pg_form`` says how:

- ``dpg`` (default): the baseline's own policy gradient (DDPG/TD3's −Q(s, π(s)), SAC's
  reparameterised loss), each transition's term weighted by its emphasis M_i:
  L_actor = (1/B) Σ_i M_i ℓ_i. That gradient integrates over the policy's actions analytically (or by
  reparameterisation), so no action is sampled from the behaviour and no ratio corrects one: the
  off-policy deterministic actor-critic avoids importance sampling in the actor (Silver et al. 2014,
  §4.2). At the paper's λ₁ = 0, M ≡ 1 and ACE is then the baseline itself, as the published curves,
  within a few percent of their baselines, suggest.
- ``dpg-is``: the same, weighted by ρ̄_i M_i, the ratio kept as importance weights. At σ = 0.1 the
  ratio of an earlier policy's transition is near 0, so the actor learns from recent ones alone:
  measured to learn less than the baseline (docs/results.md).
- ``lr``: the method's likelihood-ratio estimator,
  L_actor = −(1/B) Σ_i ρ̄_i · M_i · ŝ_i · log π_φ(a_i|s_i), through the Gaussian surrogate of
  DDPG/TD3's policy (score ∝ 1/σ²). Measured to learn far less than the baseline.

At λ₁ = 0 (``ace_lambda1``, the default) the emphasis M_i is 1 and ACE is Off-PAC. Above it,
M_i = (1 − λ₁) + λ₁ F_i with F the trace of Geoff-PAC's F1 for c ≡ 1, summed over a window of
predecessors (:mod:`agents.corrections.traces`).

ρ̄_i the clipped density ratio at the stored action, ŝ_i the learning signal (``pg_signal``):
δ_i = y_i − V(s_i) with the critic's target y of this update, or Q(s_i, a_i) − V(s_i); SAC
subtracts α log π_φ(a_i|s_i) (the likelihood-ratio form of its entropy term). V(s) comes from
the baseline's critics (:meth:`~agents.algorithms.base.ActorCritic.state_value`).
The critic, its targets and exploration are the baseline's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import torch
from torch import Tensor

from agents.corrections.base import AgentView, Collected, CorrectionSettings, Weights
from agents.corrections.behaviour import RANDOM_PHASE, RHO_BAR, BehaviourRatio
from agents.corrections.densities import clipped_ratio
from agents.corrections.traces import EPISODE_START, STEP, TraceOptions, traces, windows
from agents.options import Options, choice
from agents.quantities import Quantity
from agents.replay import Batch, ReplayBuffer

EMPHASIS = Quantity("ace_m", "M", 0.0, 20.0)


@dataclass(frozen=True)
class PolicyGradientOptions(Options):
    """How ACE and Geoff-PAC replace the baseline's policy gradient."""

    prefix: ClassVar[str] = "pg"

    form: str = "dpg"
    """The actor gradient's form: dpg (the baseline's policy gradient weighted by the emphasis M; it
    samples no action, so no ratio corrects one: ACE at λ₁ = 0 is the baseline), dpg-is (weighted by
    ρ̄·M) or lr (the original methods' likelihood-ratio estimator through a Gaussian surrogate)."""
    signal: str = "td"
    """With pg_form=lr, the learning signal: td (δ = y − V(s)) or q (Q(s, a) − V(s))."""

    def validate(self) -> None:
        choice(self, "form", ("dpg", "dpg-is", "lr"))
        choice(self, "signal", ("td", "q"))


@dataclass(frozen=True)
class ACEOptions(Options):
    prefix: ClassVar[str] = "ace"

    lambda1: float = 0.0
    """λ₁ of the emphatic weighting, in [0, 1]; 0 (the paper's) makes ACE Off-PAC."""

    def validate(self) -> None:
        if not 0 <= self.lambda1 <= 1:
            raise ValueError(f"ace_lambda1 must be in [0, 1], got {self.lambda1}")


class ACE(BehaviourRatio):
    name = "ace"
    actor_only = True
    quantities: tuple[Quantity, ...] = (RHO_BAR,)
    fields: Mapping[str, int] = MappingProxyType({RANDOM_PHASE: 1, STEP: 1, EPISODE_START: 1})

    def __init__(self, settings: CorrectionSettings) -> None:
        super().__init__(settings)
        form = settings.option(PolicyGradientOptions)
        self.likelihood_ratio = form.form == "lr"
        self.action_ratio = form.form == "dpg-is"
        self.td_signal = form.signal == "td"
        self.gamma = settings.run_config.gamma
        self.emphatic = settings.option(ACEOptions).lambda1
        self.window = settings.option(TraceOptions).window
        if self.emphatic:
            self.quantities = (RHO_BAR, EMPHASIS)
        self.rho_bar: Tensor | None = None
        self._output: Any = None
        self.emphasis: Tensor | float = 1.0

    @property
    def overrides_actor_loss(self) -> bool:
        return self.likelihood_ratio

    def attach(self, agent: AgentView, replay: ReplayBuffer) -> None:
        self.replay = replay

    def collect(self, transition: Collected) -> Mapping[str, float]:
        return {
            RANDOM_PHASE: float(transition.random_phase),
            STEP: float(transition.step),
            EPISODE_START: float(transition.episode_start),
        }

    def weights(self, batch: Batch, agent: AgentView) -> Weights:
        # Called on actor steps alone (``actor_only``). lr: the batch's forward pass keeps its graph, and
        # the actor loss reuses it for log π_φ(a_i|s_i) and V(s_i) instead of two more passes (the actor
        # does not move in between). dpg: the ratio's forward pass is the policy memo's, which the actor
        # loss reuses.
        self._output = None
        if self.likelihood_ratio:
            with torch.enable_grad():
                self._output = agent.actor(batch.obs)
        self.rho_bar = clipped_ratio(self.log_ratio(batch, agent, self._output))
        logged = {RHO_BAR.name: self.rho_bar}
        if self.emphatic:
            assert batch.slots is not None, "ACE with λ₁ > 0 needs the sampled slots (a batch from the replay buffer)"
            slots, valid = windows(self.replay, batch.slots, self.window)
            window = self.replay.gather(slots.reshape(-1))
            window_rho = clipped_ratio(self.log_ratio(window, agent, agent.actor(window.obs)))
            rho_bar = torch.cat([self.rho_bar, window_rho.view(len(slots), -1)], dim=1)
            mask = torch.as_tensor(valid, device=rho_bar.device)
            # F1 with c ≡ 1 (and λ₂, γ̂ unused: no M2 term).
            self.emphasis = traces(rho_bar, torch.ones_like(rho_bar), mask, self.gamma, 0.0, self.emphatic, 0.0).m1
            logged[EMPHASIS.name] = self.emphasis
        weight = self.dpg_weight(self.emphasis)
        if self.likelihood_ratio or weight is None:  # lr: its own loss; dpg at λ₁ = 0: the baseline's
            return Weights(logged=logged)
        return Weights(actor=weight, logged=logged, normalised=False)

    def dpg_weight(self, emphasis: Tensor | float) -> Tensor | None:
        """The DPG forms' weight on the baseline's actor loss, L = (1/B) Σ_i w_i ℓ_i: the emphasis, times ρ̄_i
        for ``dpg-is``; None where it is 1 everywhere (the baseline's loss as it is)."""
        assert self.rho_bar is not None
        weight = self.rho_bar * emphasis if self.action_ratio else emphasis
        return weight if isinstance(weight, Tensor) else None

    def signal(self, agent: AgentView, batch: Batch, value: Tensor) -> Tensor:
        """ŝ_i, (B, 1), without gradient, given V(s_i) (SAC's entropy term excluded)."""
        with torch.no_grad():
            if self.td_signal:
                assert agent.last_target is not None
                return agent.last_target - value
            q = agent.critic(batch.obs, batch.action)
            q = q[0] if self.policy_kind == "deterministic" else q.min(0).values
            return q - value

    def actor_loss(self, agent: AgentView, obs: Tensor, batch: Batch) -> Tensor:
        """The likelihood-ratio form's ℓ_i = −ρ̄_i M_i ŝ_i log π_φ(a_i|s_i) (``pg_form=lr`` only)."""
        assert self.rho_bar is not None
        output, self._output = self._output, None
        signal = self.signal(agent, batch, agent.state_value(batch.obs, output))
        log_pi = self.current_density(batch, agent, output)
        if (alpha := agent.alpha_value()) is not None:  # a stochastic policy's entropy term
            signal = signal - alpha * log_pi.detach()
        return -(self.rho_bar * self.emphasis * signal) * log_pi
