"""Geoff-PAC (Zhang, Boehmer & Whiteson 2019) on the replayed batch.

The original keeps online traces per worker; replayed one transition at a time they would see
ρ = 1. Ours sums them over a window of up to n (``trace_window``) predecessors of each sampled
transition in the FIFO buffer (:mod:`agents.corrections.traces`), never across an episode:

    F1_i = Σ_{k=0..K_i} (Π_{l=1..k} γ ρ̄_{i−l}) c̄_{i−k}          M1_i = (1 − λ₁) c̄_i + λ₁ F1_i
    κ_{i,k} = c̄_{i−k} ρ̄_{i−k} [(1 − λ₂)·1{k=1} + λ₂ Π_{l=1..k−1} γ̂ ρ̄_{i−l}]
    M2 term: γ̂ Σ_{k=1..K_i} κ_{i,k} (V(s_i) − b_{i,k}) ∇log π(a_{i−k}|s_{i−k})

with c̄ = clamp(C(s), 0, 2) from a density-ratio network C (2×64 ReLU, softplus head, RMSprop
1e-3, a target copy every 200 of its steps) trained on each replayed batch to regress m·C(s') onto
γ̂·ρ̄·C'(s) + 1 − γ̂, plus the leave-one-out normaliser pulling mean C to 1 (coefficient 1e-3),
as DeepRL's ``learn_v_c``. Everything here serves the actor step, so TD3, whose actor steps every
other update, runs it (C's training too) on those updates alone. The critic is the baseline's.
The options, defaults first:

- ``pg_form``: ``dpg``, the baseline's actor loss weighted by ρ̄_i M1_i (as ACE's), with
  V(s_i) = −ℓ_i; or ``lr``, −ρ̄_i M1_i ŝ_i log π(a_i|s_i) (ACE's likelihood-ratio form).
- ``geoff_traces``: ``cached``, each slot's ρ̄ and c̄ as of its last replay (a slot not yet
  replayed counts as on-policy, ρ̄ = c̄ = 1, as it was when collected): the ratios an online
  trace holds are those of their own time too, and the window costs a lookup; or ``fresh``,
  recomputed for the whole window under the current policy every update (16 × B actor passes).
- ``geoff_m2``: ``one``, one predecessor per transition drawn with probability
  κ_{i,k}/Σ_k κ_{i,k} and weighted by Σ_k κ_{i,k} (an unbiased estimate of the window's sum,
  exact where one term dominates, as it does at γ̂ = 0.2); or ``all``, the whole window.
- ``geoff_m2_baseline``: what the term of a predecessor's action subtracts from V(s_i): ``state``,
  V(s_{i−k}), the value of the state that action was taken in; ``mean``, the leave-one-out batch
  mean of V; or ``none``, nothing, as written. A baseline that does not depend on the action leaves
  M2's expectation unchanged (E_μ[ρ ∇log π] = 0); ``state`` leaves V's change over k steps, where
  ``mean`` leaves its spread across states (hundreds on Pendulum, where V ≈ −500).

The form first shipped (``pg_form=lr geoff_traces=fresh geoff_m2=all
geoff_m2_baseline=none``) learns Pendulum for no algorithm and costs over 4× a plain update;
docs/competitors.md has the measurements.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

from agents.corrections.ace import ACE
from agents.corrections.base import AgentView, Collected, CorrectionSettings, Weights
from agents.corrections.behaviour import RHO_BAR
from agents.corrections.densities import clipped_ratio
from agents.corrections.traces import traces, windows
from agents.options import Options, choice
from agents.quantities import Quantity
from agents.replay import Batch, ReplayBuffer

C_SCALE = Quantity("geoff_c", "C(s)", 0.0, 2.0)
M1 = Quantity("geoff_m1", "M1", 0.0, 20.0)
C_LR, C_HIDDEN, C_TARGET_EVERY, C_NORMALISER = 1e-3, 64, 200, 1e-3
RHO_CACHE, C_CACHE = "geoff_rho_bar", "geoff_c_bar"
"""Per-slot ρ̄ and c̄ as of the slot's last replay (``geoff_traces=cached``)."""


@dataclass(frozen=True)
class GeoffOptions(Options):
    prefix: ClassVar[str] = "geoff"

    lambda1: float = 0.7
    """λ₁, the weight of the trace F1 in the emphasis M1, in [0, 1]."""
    lambda2: float = 0.6
    """λ₂, the weight of the trace F2 in M2, in [0, 1]."""
    gamma_hat: float = 0.2
    """γ̂ of the density ratio C and of M2, in [0, 1) (0: no M2, C ≡ 1)."""
    m2_baseline: str = "state"
    """What M2 subtracts from V(s_i) in the term of a predecessor's action: state (V of the state
    that action was taken in), mean (the batch's leave-one-out mean of V) or none (the method as written).
    A baseline leaves M2's expectation unchanged; state removes the most variance."""
    m2: str = "off"
    """The M2 term: off (none: measured to stop DDPG and SAC learning, docs/competitors.md; C still
    learns with γ̂), one (one predecessor per transition, drawn ∝ κ and weighted by Σκ: unbiased) or all
    (every predecessor in the window)."""
    traces: str = "cached"
    """The predecessors' ρ̄ and C in the traces: cached (as of each slot's last replay, as the
    original's online traces keep the ratios of their time) or fresh (recomputed under the current policy)."""

    def validate(self) -> None:
        for name in ("lambda1", "lambda2"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"geoff_{name} must be in [0, 1], got {getattr(self, name)}")
        if not 0 <= self.gamma_hat < 1:
            raise ValueError(f"geoff_gamma_hat must be in [0, 1), got {self.gamma_hat}")
        choice(self, "m2_baseline", ("state", "mean", "none"))
        choice(self, "m2", ("off", "one", "all"))
        choice(self, "traces", ("cached", "fresh"))


class DensityRatio(nn.Module):
    """C(s) > 0: 2×64 ReLU and a softplus head."""

    def __init__(self, obs_dim: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(obs_dim, C_HIDDEN), nn.ReLU(), nn.Linear(C_HIDDEN, C_HIDDEN), nn.ReLU(), nn.Linear(C_HIDDEN, 1)
        )

    def forward(self, obs: Tensor) -> Tensor:
        return nn.functional.softplus(self.net(obs))


class _Pending(NamedTuple):
    """What the actor step of this update needs from :meth:`GeoffPAC.weights`."""

    m1: Tensor
    """(B, 1)"""
    kappa: Tensor
    """(B, n), 0 outside each window"""
    slots: np.ndarray
    """(B, n) the predecessors' slots"""
    own: np.ndarray
    """(B,) the batch's slots"""


class GeoffPAC(ACE):
    name = "geoff-pac"
    quantities: tuple[Quantity, ...] = (RHO_BAR, C_SCALE, M1)

    def __init__(self, settings: CorrectionSettings) -> None:
        super().__init__(settings)
        options = settings.option(GeoffOptions)
        self.gamma, self.gamma_hat = settings.run_config.gamma, options.gamma_hat
        self.lambda1, self.lambda2 = options.lambda1, options.lambda2
        self.baseline = options.m2_baseline
        self.one_predecessor = options.m2 == "one"
        self.m2 = options.m2 != "off" and self.gamma_hat > 0
        self.cached = options.traces == "cached"
        self.quantities = GeoffPAC.quantities  # ACE's emphasis (ace_lambda1) is not Geoff-PAC's
        if self.cached:
            self.fields = MappingProxyType({**ACE.fields, RHO_CACHE: 1, C_CACHE: 1})
        self.fits = 0
        self._pending: _Pending | None = None

    @property
    def overrides_actor_loss(self) -> bool:
        return self.likelihood_ratio or self.m2

    def attach(self, agent: AgentView, replay: ReplayBuffer) -> None:
        super().attach(agent, replay)
        self.generator: torch.Generator = agent.generator
        self.c = DensityRatio(agent.obs_dim).to(agent.device)
        self.c_target = copy.deepcopy(self.c)
        self.optimiser = torch.optim.RMSprop(self.c.parameters(), lr=C_LR)

    def collect(self, transition: Collected) -> Mapping[str, float]:
        values = dict(super().collect(transition))
        return values | {RHO_CACHE: 1.0, C_CACHE: 1.0} if self.cached else values

    # ---- weights: ρ̄, c̄ and, on actor steps, the traces ---------------------------------------------
    def weights(self, batch: Batch, agent: AgentView) -> Weights:
        assert batch.slots is not None, "Geoff-PAC needs the sampled slots (a batch from the replay buffer)"
        self.rho_bar = clipped_ratio(self.log_ratio(batch, agent))
        c_bar = self.c(batch.obs).clamp(0.0, 2.0)
        logged = {RHO_BAR.name: self.rho_bar, C_SCALE.name: c_bar}
        if self.cached:
            self.replay.extra[RHO_CACHE][batch.slots] = self.rho_bar.cpu().numpy()
            self.replay.extra[C_CACHE][batch.slots] = c_bar.cpu().numpy()
        self._pending = None
        slots, valid = windows(self.replay, batch.slots, self.window)
        window_rho, window_c = self._window_ratios(slots, agent)
        mask = torch.as_tensor(valid, device=self.rho_bar.device)
        rho_bar, c_bars = torch.cat([self.rho_bar, window_rho], dim=1), torch.cat([c_bar, window_c], dim=1)
        traced = traces(rho_bar, c_bars, mask, self.gamma, self.gamma_hat, self.lambda1, self.lambda2)
        logged[M1.name] = traced.m1
        if not self.overrides_actor_loss:  # dpg without M2: weights on the baseline's actor loss
            return Weights(actor=self.dpg_weight(traced.m1), logged=logged, normalised=False)
        self._pending = _Pending(traced.m1, traced.kappa, slots, batch.slots)
        return Weights(logged=logged)

    def _window_ratios(self, slots: np.ndarray, agent: AgentView) -> tuple[Tensor, Tensor]:
        """ρ̄ and c̄ of each window's predecessors, (B, n) each: cached, or under the current policy and C."""
        rows, n = slots.shape
        flat = slots.reshape(-1)
        if self.cached:
            extra = self.replay.extra
            rho = torch.from_numpy(extra[RHO_CACHE].take(flat, axis=0)).to(self.rho_bar.device)  # type: ignore[union-attr]
            c = torch.from_numpy(extra[C_CACHE].take(flat, axis=0)).to(rho.device)
            return rho.view(rows, n), c.view(rows, n)
        window = self.replay.gather(flat)
        rho = clipped_ratio(self.log_ratio(window, agent, agent.actor(window.obs)))
        return rho.view(rows, n), self.c(window.obs).clamp(0.0, 2.0).view(rows, n)

    def auxiliary_update(self, batch: Batch, agent: AgentView) -> None:
        """One RMSprop step of C on this batch, as DeepRL's ``learn_v_c`` (its C part)."""
        assert self.rho_bar is not None
        with torch.no_grad():
            target = self.gamma_hat * self.rho_bar * self.c_target(batch.obs) + 1.0 - self.gamma_hat
        c_next = self.c(batch.next_obs) * batch.not_terminated
        n = c_next.shape[0]
        leave_one_out = ((c_next.sum() - c_next) / max(n - 1, 1) - 1.0).detach()
        loss = 0.5 * (target - c_next).square().mean() + C_NORMALISER * (leave_one_out * c_next).mean()
        self.optimiser.zero_grad()
        loss.backward()
        self.optimiser.step()
        self.fits += 1
        if self.fits % C_TARGET_EVERY == 0:
            self.c_target.load_state_dict(self.c.state_dict())

    # ---- the actor loss ----------------------------------------------------------------------------
    def actor_loss(self, agent: AgentView, obs: Tensor, batch: Batch) -> Tensor:
        assert self._pending is not None and self.rho_bar is not None, "weights() of an actor step comes first"
        pending, self._pending = self._pending, None
        # M2's predecessors and their baselines first: SAC's temperature step reads the log π of the
        # last value estimate, which must be the batch's (below).
        m2 = self._predecessors(pending, agent) if self.m2 and bool(pending.kappa.any()) else None
        if self.likelihood_ratio:
            value = agent.state_value(batch.obs)
            signal = self.signal(agent, batch, value)
            log_pi = self.current_density(batch, agent)
            if (alpha := agent.alpha_value()) is not None:  # a stochastic policy's entropy term
                signal = signal - alpha * log_pi.detach()
            loss = -(self.rho_bar * pending.m1 * signal) * log_pi
        else:
            per_sample = agent.actor_loss(obs)
            value = -per_sample.detach()  # V(s) = Q(s, π(s)) (DDPG, TD3); SAC's soft value at its sample
            weight = self.dpg_weight(pending.m1)
            assert weight is not None  # M1 is a tensor
            loss = weight * per_sample
        return loss if m2 is None else loss - self.gamma_hat * self._m2_term(m2, value, agent)

    def _m2_term(self, m2: tuple[Batch, Tensor, Tensor | float], value: Tensor, agent: AgentView) -> Tensor:
        """Σ_k κ_{i,k} (V(s_i) − b_{i,k}) log π(a_{i−k}|s_{i−k}), (B, 1), differentiable in the actor, from
        :meth:`_predecessors` and V(s_i) (``geoff_m2=one``: its one-predecessor estimate)."""
        predecessors, weight, baseline = m2
        if self.baseline == "mean":  # V(s_i) minus the mean of the others' V
            value = value - (value.sum() - value) / max(len(value) - 1, 1)
        rows = weight.shape[0] // value.shape[0]  # predecessors per transition: 1, or the window's n
        coefficient = weight * (value.repeat_interleave(rows, dim=0) - baseline)
        return (coefficient * self.current_density(predecessors, agent)).view(-1, rows).sum(1, keepdim=True)

    def _predecessors(self, pending: _Pending, agent: AgentView) -> tuple[Batch, Tensor, Tensor | float]:
        """The transitions of M2's ∇log π terms, their weights and baselines, (B·m, 1) each: every predecessor
        with weight κ_{i,k} (``geoff_m2=all``), or one per transition, drawn ∝ κ, with weight Σ_k κ_{i,k}.
        The ``state`` baseline is V(s_{i−k}), the value of the state the predecessor's action was taken in
        (a function of that state alone: it leaves the expectation unchanged); the others subtract from
        V(s_i) later, so here 0."""
        kappa = pending.kappa
        if self.one_predecessor:
            weight = kappa.sum(1, keepdim=True)
            some = weight[:, 0] > 0
            # A row without predecessors draws its first column (any would do: its weight Σκ is 0).
            probabilities = torch.where(some[:, None], kappa, torch.ones_like(kappa))
            pick = torch.multinomial(probabilities.cpu(), 1, generator=self.generator).numpy()[:, 0]
            rows = np.arange(len(pick))
            slots = np.where(some.cpu().numpy(), pending.slots[rows, pick], pending.own)  # always a stored one
        else:
            weight, slots = kappa.reshape(-1, 1), pending.slots.reshape(-1)
        predecessors = self.replay.gather(slots)
        baseline = agent.state_value(predecessors.obs) if self.baseline == "state" else 0.0
        return predecessors, weight, baseline

    # ---- checkpoints ---------------------------------------------------------------------------------
    def modules(self) -> dict[str, nn.Module]:
        return {"density_ratio": self.c, "density_ratio_target": self.c_target}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"density_ratio": self.optimiser}

    def state_dict(self) -> dict[str, Any]:
        return {"fits": self.fits}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.fits = state["fits"]
