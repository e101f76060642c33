"""Emphatic traces over a window of predecessors in the FIFO buffer (ACE with λ₁ > 0, Geoff-PAC).

Online, the traces F_t run along each worker's trajectory; replayed one transition at a time
they would see ρ = 1. Here they are recomputed for each replayed transition over up to n
predecessors (``trace_window``) under the current policy: :func:`windows` finds them in the
buffer, :func:`traces` sums them. Each transition stores its global step and whether it starts
an episode, so a window never crosses an episode start, the wrap-around or an overwritten slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np
import torch
from torch import Tensor

from agents.options import Options
from agents.replay import ReplayBuffer

STEP, EPISODE_START = "step", "episode_start"


@dataclass(frozen=True)
class TraceOptions(Options):
    """The window of ACE's (λ₁ > 0) and Geoff-PAC's traces."""

    prefix: ClassVar[str] = "trace"

    window: int = 16
    """Predecessors of each replayed transition the traces run over (ACE with λ₁ > 0, Geoff-PAC)."""

    def validate(self) -> None:
        if self.window < 1:
            raise ValueError(f"trace_window must be at least 1, got {self.window}")


def windows(replay: ReplayBuffer, index: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The slots of each transition's predecessors and which of them count, (B, size) each.

    Column k − 1 holds the slot of transition i − k. It counts when every transition from
    i − k to i is in the buffer, consecutive in the run (its stored step is i's minus k, so it was
    not overwritten) and within i's episode (none of i − k + 1 … i starts one).
    """
    steps, starts_episode = replay.extra[STEP][:, 0], replay.extra[EPISODE_START][:, 0]
    offsets = np.arange(1, size + 1)
    slots = (index[:, None] - offsets[None, :]) % replay.capacity  # (B, n)
    step = steps[index][:, None]
    consecutive = replay.starts_transition[slots] & (steps[slots] == step - offsets) & (slots < replay.filled)
    # i − k + 1 … i must not start an episode: for k = 1 that is i itself, then each column's successor.
    successor_starts = np.concatenate([starts_episode[index][:, None], starts_episode[slots[:, :-1]]], axis=1) > 0.5
    valid = np.cumprod(consecutive & ~successor_starts, axis=1).astype(bool)
    return slots, valid


class Traces(NamedTuple):
    m1: Tensor
    """(B, 1) the emphasis M1_i"""
    kappa: Tensor
    """(B, n) the coefficients κ_{i,k} of log π(a_{i−k}|s_{i−k}), 0 outside the window"""


def traces(
    rho_bar: Tensor, c_bar: Tensor, valid: Tensor, gamma: float, gamma_hat: float, lambda1: float, lambda2: float
) -> Traces:
    """M1 and κ from ρ̄ and c̄ over each window, column 0 the transition itself: (B, n + 1) each; ``valid`` (B, n)."""
    inside = valid.to(rho_bar.dtype)
    before_rho, before_c = rho_bar[:, 1:] * inside, c_bar[:, 1:] * inside  # predecessors, zero outside
    # Π_{l=1..k} γ ρ̄_{i−l} for k = 0..n: the discount of c̄_{i−k} in F1.
    discount = torch.cumprod(torch.cat([torch.ones_like(rho_bar[:, :1]), gamma * before_rho], dim=1), dim=1)
    f1 = (discount * torch.cat([c_bar[:, :1], before_c], dim=1)).sum(1, keepdim=True)
    m1 = (1 - lambda1) * c_bar[:, :1] + lambda1 * f1
    # Π_{l=1..k−1} γ̂ ρ̄_{i−l} for k = 1..n.
    emphatic = torch.cumprod(torch.cat([torch.ones_like(rho_bar[:, :1]), gamma_hat * before_rho[:, :-1]], dim=1), dim=1)
    first = torch.zeros_like(emphatic)
    first[:, 0] = 1.0
    kappa = before_c * before_rho * ((1 - lambda2) * first + lambda2 * emphatic)
    return Traces(m1, kappa)
