"""Combined experience replay (Zhang & Sutton 2017): B − 1 uniform transitions plus the newest."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agents.replay import Batch
from agents.samplers.base import Sampler


class CombinedReplay(Sampler):
    name = "cer"

    def __init__(self) -> None:
        self.newest = -1

    def added(self, slot: int) -> None:
        self.newest = slot

    def sample(self, batch_size: int, generator: torch.Generator, exclude_random_phase: bool = False) -> Batch:
        """The buffer's uniform draw of ``batch_size − 1`` and the transition stored at this step, last."""
        assert self.newest >= 0, "CER samples after the first transition is stored"
        slots = self.buffer.sample_slots(batch_size - 1, generator, exclude_random_phase=exclude_random_phase)
        return self.buffer.gather(np.append(slots, self.newest))

    def state_dict(self) -> dict[str, Any]:
        return {"newest": self.newest}

    def load_state_dict(self, state: dict[str, Any], buffer_restored: bool = True) -> None:
        self.newest = int(state["newest"]) if buffer_restored else -1
