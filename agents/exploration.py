"""The exploration noise of a deterministic policy: an option group DDPG and TD3 declare.

A deterministic actor explores with Gaussian noise of std ``exploration_std`` (in normalised action
units) added to its action; that noise is also its behaviour density, which ratio corrections and
AC-Off-POC's reference covariance read. A stochastic policy (SAC) explores by sampling and takes no
such option.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from agents.options import Options

__all__ = ["ExplorationOptions", "exploration_std"]


@dataclass(frozen=True)
class ExplorationOptions(Options):
    prefix: ClassVar[str] = "exploration"

    std: float = 0.1
    """Gaussian exploration noise std in normalised action units (DDPG, TD3)."""

    def validate(self) -> None:
        if not (math.isfinite(self.std) and self.std >= 0):
            raise ValueError(f"exploration_std must be a non-negative number, got {self.std}")


def exploration_std(config: Any) -> float:
    """A run's exploration std (a ``TrainConfig``): its own, or the default for an algorithm without one."""
    return config.option(ExplorationOptions).std
