"""RIS-Off-PAC (Humayoo & Cheng): relative importance weights on the actor loss.

w_i = ρ_i / (β ρ_i + 1 − β) ∈ [0, 1/β], detached, multiplies each transition's actor loss:
L_actor = (1/B) Σ_i w_i ℓ_i with the baseline's ℓ_i; the critic is the baseline's
(option ``apply_to = actor+critic`` weights it too). ρ_i is the density ratio of
:mod:`agents.corrections.densities`, by default at a fresh action of the current policy, as the paper
evaluates its own ratio (``ratio = stored``: at the stored action, the textbook importance weight;
docs/results.md measures both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from agents.corrections.acoffpoc import effective_sample_size
from agents.corrections.base import AgentView, CorrectionSettings, Weights
from agents.corrections.behaviour import BehaviourRatio
from agents.options import Options, choice
from agents.quantities import Quantity
from agents.replay import Batch

__all__ = ["RISOffPAC", "RISOptions", "relative_weight"]


def relative_weight(log_ratio: Tensor, beta: float = 0.2) -> Tensor:
    """w_i = ρ/(βρ + 1 − β) from log ρ, same shape as ``log_ratio``, in [0, 1/β], detached.

    Computed as exp(−logaddexp(log β, log(1 − β) − log ρ)), so no ratio overflows: log ρ = +inf
    gives 1/β, −inf (or NaN, an unusable ratio) gives 0.
    """
    if not 0.0 < beta < 1.0:
        raise ValueError(f"beta must be in (0, 1), got {beta}")
    # In float64, so that ρ = 1 gives exactly w = 1 once rounded back (the baseline, bit for bit).
    log_rho = torch.nan_to_num(log_ratio.detach().double(), nan=-math.inf)
    log_beta = torch.full_like(log_rho, math.log(beta))
    return torch.exp(-torch.logaddexp(log_beta, math.log1p(-beta) - log_rho)).to(log_ratio.dtype)


RIS_WEIGHT = "ris_w"
RIS_ESS = "ris_ess"
"""Per update, (Σw)²/Σw²: how many of the batch's transitions the actor's step rests on."""


@dataclass(frozen=True)
class RISOptions(Options):
    prefix: ClassVar[str] = "ris"

    beta: float = 0.2
    """β of the relative importance weight w = ρ/(βρ + 1 − β) ∈ [0, 1/β], in (0, 1)."""
    apply_to: str = "actor"
    """The losses w weights: actor (the method's) or actor+critic."""
    ratio: str = "sampled"
    """Where ρ = π/μ is evaluated: sampled (a fresh action of the current policy, as the paper evaluates
    its own ratio, Theorem 1 and the authors' code; w then rises towards 1/β as the behaviour drifts away:
    measured to learn like the published curves, docs/results.md) or stored (the stored action: the
    textbook importance weight, which is near 0 for an earlier policy's transitions: measured far below)."""
    weighting: str = "importance"
    """How w enters a loss: importance (L = mean_i w_i ℓ_i, the method as written) or normalised
    (L = Σ w_i ℓ_i / Σ w_i, weighted importance sampling: the baseline's step size)."""

    def validate(self) -> None:
        if not 0 < self.beta < 1:
            raise ValueError(f"ris_beta must be in (0, 1), got {self.beta}")
        choice(self, "apply_to", ("actor", "actor+critic"))
        choice(self, "weighting", ("importance", "normalised"))
        choice(self, "ratio", ("stored", "sampled"))


class RISOffPAC(BehaviourRatio):
    """w_i on the actor loss (``ris_apply_to = actor+critic``: the critic's too), as importance weights:
    L = mean_i w_i ℓ_i."""

    name = "ris-off-pac"

    def __init__(self, settings: CorrectionSettings) -> None:
        super().__init__(settings)
        options = settings.option(RISOptions)
        self.beta = options.beta
        self.critic_too = options.apply_to == "actor+critic"
        self.actor_only = not self.critic_too
        self.normalised = options.weighting == "normalised"
        self.sampled = options.ratio == "sampled"
        batch = float(settings.run_config.batch_size)
        self.quantities = (Quantity(RIS_WEIGHT, "w", 0.0, 1.0 / self.beta), Quantity(RIS_ESS, "ESS(w)", 0.0, batch))

    def weights(self, batch: Batch, agent: AgentView) -> Weights:
        w = relative_weight(self.log_ratio(batch, agent, sampled=self.sampled), self.beta)
        logged = {RIS_WEIGHT: w, RIS_ESS: effective_sample_size(w)}
        return Weights(w if self.critic_too else None, w, logged, normalised=self.normalised)
