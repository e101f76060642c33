"""Hand-made batches and small agents for update tests: an agent of each algorithm on a 5-dimensional
observation and a 2-dimensional action, a batch drawn from a seed, and a correction of constant weight."""

from __future__ import annotations

import torch

from agents.algorithms import ActorCritic, make_algorithm
from agents.config import TrainConfig
from agents.corrections import Correction, Weights
from agents.quantities import LAMBDA
from agents.replay import Batch

OBS, ACT, B = 5, 2, 32


def agent(algo: str, seed: int = 0, **overrides) -> ActorCritic:
    config = TrainConfig.make(algo=algo, hidden=(32, 32), **overrides).resolved()
    torch.manual_seed(seed)
    return make_algorithm(config, OBS, ACT, torch.Generator().manual_seed(seed))


def batch(seed: int = 0, terminated_every: int = 4, behaviour: bool = False) -> Batch:
    g = torch.Generator().manual_seed(seed)
    not_terminated = torch.ones(B, 1)
    not_terminated[::terminated_every] = 0.0
    return Batch(
        obs=torch.randn(B, OBS, generator=g),
        action=torch.rand(B, ACT, generator=g) * 2 - 1,
        reward=torch.randn(B, 1, generator=g),
        next_obs=torch.randn(B, OBS, generator=g),
        not_terminated=not_terminated,
        behaviour_mean=torch.randn(B, ACT, generator=g) if behaviour else None,
        behaviour_log_std=torch.randn(B, ACT, generator=g).clamp(-2, 0) if behaviour else None,
    )


def params(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


class ConstantWeight(Correction):
    """A correction returning a fixed weight for both losses: probes the one reduction point."""

    name = "constant"
    quantities = (LAMBDA,)

    def __init__(self, value: torch.Tensor) -> None:
        super().__init__()
        self.value = value

    def weights(self, batch: Batch, agent: object) -> Weights:
        return Weights.both(self.value)
