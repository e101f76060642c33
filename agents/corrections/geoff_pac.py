"""Geoff-PAC (Zhang, Boehmer & Whiteson 2019), on the replayed batch, as ``spec/competitors.md`` states it.

The original keeps online traces per worker; replayed one transition at a time, they would
see ρ = 1. Ours recomputes them over a window of up to n (``trace_window``) predecessors of
each sampled transition in the FIFO buffer (:mod:`agents.corrections.traces`), under the
current policy and without gradient:

    F1_i = Σ_{k=0..K_i} (Π_{l=1..k} γ ρ̄_{i−l}) c̄_{i−k}          M1_i = (1 − λ₁) c̄_i + λ₁ F1_i
    κ_{i,k} = c̄_{i−k} ρ̄_{i−k} [(1 − λ₂)·1{k=1} + λ₂ Π_{l=1..k−1} γ̂ ρ̄_{i−l}]
    L_actor = −(1/B) Σ_i [ρ̄_i M1_i ŝ_i log π(a_i|s_i) + γ̂ V(s_i) Σ_{k=1..K_i} κ_{i,k} log π(a_{i−k}|s_{i−k})]

with c̄ = clamp(C(s), 0, 2) from a density-ratio network C (2×64 ReLU, softplus head,
RMSprop 1e-3, a target copy every 200 updates) trained on each replayed batch to regress
m·C(s') onto γ̂·ρ̄·C'(s) + 1 − γ̂, plus the leave-one-out normaliser pulling mean C to 1
(coefficient 1e-3), as DeepRL's ``learn_v_c``. ŝ and V are ACE's; the critic is the baseline's.
Named deviations: the window, the window's log-probabilities at the current φ, the
baseline's critic in place of the importance-weighted V-critic, and c̄ of this update read
before C's step on the same batch.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor, nn

from agents.corrections.ace import ACE
from agents.corrections.base import CorrectionSettings, Weights
from agents.corrections.behaviour import RHO_BAR
from agents.corrections.densities import clipped_ratio
from agents.corrections.traces import traces, windows
from agents.quantities import Quantity
from agents.replay import Batch, ReplayBuffer

C_SCALE = Quantity("geoff_c", "C(s)", 0.0, 2.0)
M1 = Quantity("geoff_m1", "M1", 0.0, 20.0)
C_LR, C_HIDDEN, C_TARGET_EVERY, C_NORMALISER = 1e-3, 64, 200, 1e-3


class DensityRatio(nn.Module):
    """C(s) > 0: 2×64 ReLU and a softplus head."""

    def __init__(self, obs_dim: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(obs_dim, C_HIDDEN), nn.ReLU(), nn.Linear(C_HIDDEN, C_HIDDEN), nn.ReLU(), nn.Linear(C_HIDDEN, 1)
        )

    def forward(self, obs: Tensor) -> Tensor:
        return nn.functional.softplus(self.net(obs))


class GeoffPAC(ACE):
    name = "geoff-pac"
    quantities: tuple[Quantity, ...] = (RHO_BAR, C_SCALE, M1)

    def __init__(self, settings: CorrectionSettings) -> None:
        super().__init__(settings)
        config = settings.config
        assert config is not None, "Geoff-PAC reads its options from the run's config"
        self.gamma, self.gamma_hat = config.gamma, config.geoff_gamma_hat
        self.lambda1, self.lambda2 = config.geoff_lambda1, config.geoff_lambda2
        self.centred = config.geoff_m2_baseline == "mean"
        self.quantities = GeoffPAC.quantities  # ACE's emphasis (ace_lambda1) is not Geoff-PAC's
        self.fits = 0
        self._pending: tuple[Tensor, Tensor, Batch, Tensor, Any, Any] | None = None

    def attach(self, agent: Any, replay: ReplayBuffer) -> None:
        super().attach(agent, replay)
        self.c = DensityRatio(agent.obs_dim).to(agent.device)
        self.c_target = copy.deepcopy(self.c)
        self.optimiser = torch.optim.RMSprop(self.c.parameters(), lr=C_LR)

    def weights(self, batch: Batch, agent: Any) -> Weights:
        """ρ̄, c̄ and the traces over each window, under the current policy (stashed for the actor loss)."""
        assert batch.slots is not None, "Geoff-PAC needs the sampled slots (a batch from the replay buffer)"
        slots, valid = windows(self.replay, batch.slots, self.window)
        window = self.replay.gather(slots.reshape(-1))
        # Where the actor steps in this update, the forward pass keeps its graph: the actor loss
        # differentiates log π(a_i|s_i) and, when M2 counts (γ̂ > 0), log π(a_{i−k}|s_{i−k}) from it.
        due = agent.actor_due()
        if self.gamma_hat:
            with torch.set_grad_enabled(due):
                own, predecessors = _split(agent.actor(torch.cat([batch.obs, window.obs])), len(slots))
        else:
            with torch.set_grad_enabled(due):
                own = agent.actor(batch.obs)
            predecessors = agent.actor(window.obs)
        rho_bar = torch.cat(
            [
                clipped_ratio(self.log_ratio(batch, agent, own)),
                clipped_ratio(self.log_ratio(window, agent, predecessors)).view(len(slots), -1),
            ],
            dim=1,
        )
        with torch.no_grad():
            c_bar = self.c(torch.cat([batch.obs, window.obs])).clamp(0.0, 2.0)
        c_bar = torch.cat([c_bar[: len(slots)], c_bar[len(slots) :].view(len(slots), -1)], dim=1)
        mask = torch.as_tensor(valid, device=rho_bar.device)
        traced = traces(rho_bar, c_bar, mask, self.gamma, self.gamma_hat, self.lambda1, self.lambda2)
        self.rho_bar = rho_bar[:, :1]
        self._pending = (traced.m1, traced.kappa, window, mask, own, predecessors)
        logged = {RHO_BAR.name: self.rho_bar, C_SCALE.name: c_bar[:, :1], M1.name: traced.m1}
        return Weights(logged=logged)

    def auxiliary_update(self, batch: Batch, agent: Any) -> None:
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

    def actor_loss(self, agent: Any, obs: Tensor, batch: Batch) -> Tensor:
        assert self._pending is not None and self.rho_bar is not None
        m1, kappa, window, mask, own, predecessors = self._pending
        self._pending = None
        value = agent.state_value(batch.obs, own)
        signal = self.signal(agent, batch, value)
        log_pi = self.current_density(batch, agent, own)
        if self.policy_kind == "stochastic":
            signal = signal - agent.alpha_value() * log_pi.detach()
        loss = -(self.rho_bar * m1 * signal) * log_pi
        if self.gamma_hat and bool(mask.any()):
            window_log_pi = self.current_density(window, agent, predecessors).view(kappa.shape)
            if self.centred:  # V(s_i) minus the mean of the others' V: a baseline M2's expectation ignores
                value = value - (value.sum() - value) / max(len(value) - 1, 1)
            loss = loss - self.gamma_hat * value * (kappa * window_log_pi).sum(1, keepdim=True)
        return loss

    def modules(self) -> dict[str, nn.Module]:
        return {"density_ratio": self.c, "density_ratio_target": self.c_target}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"density_ratio": self.optimiser}

    def state_dict(self) -> dict[str, Any]:
        return {"fits": self.fits}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.fits = state["fits"]


def _split(output: Any, rows: int) -> tuple[Any, Any]:
    """The actor's output on ``cat([batch.obs, window.obs])`` as (batch's, window's); SAC's is a pair."""
    if isinstance(output, tuple):
        mean, log_std = output
        return (mean[:rows], log_std[:rows]), (mean[rows:], log_std[rows:])
    return output[:rows], output[rows:]
