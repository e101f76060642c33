"""The replay sampler interface: which transitions each update trains on, and how much each counts.

A sampler gives a batch's slots and, optionally, per-transition importance weights that multiply
the critic loss only; it hears about each stored transition and, after the critic step, the
batch's TD errors. ``uniform`` (the default) is the buffer's own sampling, untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from torch import Tensor

from agents.quantities import Quantity
from agents.replay import Batch, ReplayBuffer

_NOTHING: Mapping[str, Tensor] = MappingProxyType({})


class Sampler:
    """Uniform replay: the buffer's sampling, with no importance weights and nothing to learn."""

    name = "uniform"
    quantities: tuple[Quantity, ...] = ()
    """Per-update quantities the sampler logs (:meth:`logged` gives their values)."""
    hears_td_errors = False
    """Whether :meth:`td_errors` wants each update's TD errors (computing them costs a little)."""

    def attach(self, buffer: ReplayBuffer) -> None:
        self.buffer = buffer

    def added(self, slot: int) -> None:
        """The buffer just stored a transition at ``slot`` (its next slot no longer starts one)."""

    def sample(self, batch_size: int, generator: torch.Generator, exclude_random_phase: bool = False) -> Batch:
        """A batch with its ``slots`` (and ``importance``, (B, 1), where the sampler weights the critic)."""
        return self.buffer.sample(batch_size, generator, exclude_random_phase=exclude_random_phase)

    def episode_end(self, episode_return: float, generator: torch.Generator) -> None:
        """A training episode ended with this undiscounted return (evaluation episodes never come here)."""

    def td_errors(self, slots: np.ndarray, td_error: Tensor) -> None:
        """After the critic step: the batch's |TD error| per transition, (B, 1), detached."""

    def logged(self) -> Mapping[str, Tensor]:
        return _NOTHING

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to sample exactly as this one would."""
        return {}

    def load_state_dict(self, state: dict[str, Any], buffer_restored: bool = True) -> None:
        """Restore :meth:`state_dict`'s output (``{}``: a checkpoint from before samplers); without the
        buffer (``checkpoint_buffer`` off), what describes its slots is dropped."""
