"""What a correction is: given a batch and the current policy, the loss weights.

A correction never touches networks, targets or exploration. It returns a weight
that the algorithms' single reduction point (``agents.algorithms.base.loss_coefficients``)
turns into the coefficients of L = Σ_i c_i ℓ_i, for the losses and their gradients alike:

- ``None``: no correction, the plain mean;
- a 0-d tensor λ (per batch): ``λ · mean_i(ℓ_i)``;
- a (B, 1) tensor λ_i (per transition): ``Σ λ_i ℓ_i / Σ λ_i``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from torch import Tensor

from agents.replay import Batch

PolicyKind = Literal["deterministic", "stochastic"]


class Correction(Protocol):
    """An off-policy correction, registered by name in ``agents.corrections``."""

    name: str

    @property
    def needs_behaviour_params(self) -> bool:
        """True when the buffer must store the behaviour policy's parameters."""
        ...

    def active(self, step: int) -> bool:
        """Whether weights apply at this environment step (False: plain losses)."""
        ...

    def __call__(self, batch: Batch, policy: object) -> Tensor:
        """The weight for a batch under the current policy, detached, in [0, 1]:
        0-d λ (per batch) or (B, 1) λ_i (per transition). It is also what gets logged."""
        ...


@dataclass(frozen=True)
class CorrectionSettings:
    """Everything a correction factory may use; filled from the run's config."""

    policy_kind: PolicyKind
    divergence: str = "jsd"
    ref_std: float = 0.1
    start_step: int = 0
    """First environment step at which the correction applies."""


class NoCorrection:
    """The plain algorithm: no weights, ever."""

    name = "none"
    needs_behaviour_params = False

    def active(self, step: int) -> bool:
        return False

    def __call__(self, batch: Batch, policy: object) -> Tensor:
        raise RuntimeError("the 'none' correction computes no weights")
