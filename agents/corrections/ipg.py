"""IPG (Gu et al. 2017) at ν = 1: the baseline's actor loss on on-policy states.

With ν = 1 the likelihood-ratio term vanishes and IPG is the deterministic actor-critic
gradient on the states of its latest on-policy batch. Replayed one update at a time, that batch
is the newest ``ipg_window`` transitions of the FIFO buffer, and the actor trains on B states
drawn uniformly from them instead of the uniform batch; the critic keeps its batch. The default,
25,000, is measured (docs/results.md): with 5,000 (rllab++'s on-policy batch, ``launcher_utils.py``)
two of four TD3 HalfCheetah seeds fell below the published curves' range, with 25,000 none. ``ipg_state_source``:

- ``window`` (default): B states drawn from the newest ``ipg_window`` transitions;
- ``recent``: exactly the B newest (the first form we shipped: measured to learn far less than
  the baseline on HalfCheetah, since 256 states one step apart say little about the policy);
- ``replay``: the uniform batch, i.e. the baseline exactly.

The trust-region step is not ported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from agents.corrections.base import AgentView, Correction, CorrectionSettings
from agents.options import Options, choice
from agents.replay import Batch, ReplayBuffer


@dataclass(frozen=True)
class IPGOptions(Options):
    prefix: ClassVar[str] = "ipg"

    nu: float = 1.0
    """ν, the likelihood-ratio share; ν = 1 (the paper's) is the only one implemented."""
    state_source: str = "window"
    """The actor's states: window (B drawn from the newest ipg_window transitions, its on-policy batch),
    recent (exactly the B newest) or replay (the uniform batch: the baseline)."""
    window: int = 25_000
    """The newest transitions the actor's states are drawn from (measured: 5,000, rllab++'s on-policy
    batch, learned less on two of four seeds; docs/results.md)."""

    def validate(self) -> None:
        if self.nu != 1:
            raise ValueError(f"ipg_nu {self.nu}: only ν = 1 (the paper's IPG) is implemented")
        choice(self, "state_source", ("window", "recent", "replay"))
        if self.window < 1:
            raise ValueError(f"ipg_window must be at least 1, got {self.window}")


class IPG(Correction):
    name = "ipg"

    def __init__(self, settings: CorrectionSettings) -> None:
        super().__init__(settings)
        options = settings.option(IPGOptions)
        self.source = options.state_source
        self.window = options.window
        self.replay: ReplayBuffer | None = None
        self.generator: torch.Generator | None = None

    def attach(self, agent: AgentView, replay: ReplayBuffer) -> None:
        self.replay = replay
        self.generator = agent.generator

    def actor_states(self, batch: Batch) -> Tensor:
        if self.source == "replay" or self.replay is None:
            return batch.obs
        size = batch.obs.shape[0]
        if self.source == "recent":
            return self.replay.recent(size).obs
        assert self.generator is not None
        return self.replay.sample_recent(size, self.window, self.generator).obs
