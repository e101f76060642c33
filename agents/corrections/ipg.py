"""IPG (Gu et al. 2017) at ν = 1: the baseline's actor loss on on-policy states.

With ν = 1 the likelihood-ratio term vanishes and IPG is the deterministic actor-critic
gradient on the states of the latest transitions (rllab++ evaluates it on the latest batch):
the actor trains on the B most recent transitions in the FIFO buffer instead of the uniform
batch; the critic keeps its batch. ``ipg_state_source = replay`` gives back the baseline
exactly. The trust-region step is not ported.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from agents.corrections.base import Correction, CorrectionSettings
from agents.replay import Batch, ReplayBuffer


class IPG(Correction):
    name = "ipg"

    def __init__(self, settings: CorrectionSettings) -> None:
        super().__init__(settings)
        config = settings.config
        self.recent = config is None or config.ipg_state_source == "recent"
        self.replay: ReplayBuffer | None = None

    def attach(self, agent: Any, replay: ReplayBuffer) -> None:
        self.replay = replay

    def actor_states(self, batch: Batch) -> Tensor:
        if not self.recent or self.replay is None:
            return batch.obs
        return self.replay.recent(batch.obs.shape[0]).obs
