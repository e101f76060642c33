"""Actor and critic networks. Critics return (E, B, 1): one row per ensemble member."""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor, nn

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
"""Clamp of the Gaussian policy's log-std, as in SAC's reference code."""


def mlp(sizes: list[int], output_activation: nn.Module | None = None) -> nn.Sequential:
    """Linear layers of the given sizes with ReLU between them."""
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(fan_in, fan_out))
        if i < len(sizes) - 2:
            # In place is safe: Linear's backward needs its input, not its output.
            layers.append(nn.ReLU(inplace=True))
    if output_activation is not None:
        layers.append(output_activation)
    return nn.Sequential(*layers)


class DeterministicActor(nn.Module):
    """π(s) ∈ [-1, 1]^d (TD3, DDPG)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.net = mlp([obs_dim, *hidden, action_dim], nn.Tanh())

    def forward(self, obs: Tensor) -> Tensor:
        return self.net(obs)


class TwinCritic(nn.Module):
    """Two independent Q-networks on cat(s, a) (TD3, SAC)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.members = nn.ModuleList(mlp([obs_dim + action_dim, *hidden, 1]) for _ in range(2))

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:
        x = torch.cat([obs, action], dim=-1)
        return torch.stack([member(x) for member in self.members])

    def q1(self, obs: Tensor, action: Tensor) -> Tensor:
        """The first member only, (B, 1): TD3's actor objective."""
        return self.members[0](torch.cat([obs, action], dim=-1))


class DDPGCritic(nn.Module):
    """DDPG's critic: the state alone through the first layer, the action joins at the second."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        if len(hidden) != 2:
            raise ValueError(f"the DDPG critic takes exactly two hidden sizes, got {hidden}")
        self.state_layer = nn.Linear(obs_dim, hidden[0])
        self.head = mlp([hidden[0] + action_dim, hidden[1], 1])

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:
        h = torch.relu(self.state_layer(obs))
        return self.head(torch.cat([h, action], dim=-1)).unsqueeze(0)


class GaussianPolicy(nn.Module):
    """Pre-tanh diagonal Gaussian policy (SAC); actions are tanh(u), u ~ N(mean, std)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.trunk = mlp([obs_dim, *hidden])
        self.trunk.append(nn.ReLU(inplace=True))
        self.head = nn.Linear(hidden[-1], 2 * action_dim)

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """(mean, log_std), each (B, d)."""
        mean, log_std = self.head(self.trunk(obs)).chunk(2, dim=-1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)


def squashed_sample(mean: Tensor, log_std: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
    """Reparameterised tanh-Gaussian sample and its log-density, (B, d) and (B, 1).

    log π(a|s) = log N(u; mean, std) − Σ log(1 − tanh(u)²), with the Jacobian
    term written as 2(log 2 − u − softplus(−2u)) for numerical stability.
    """
    u = mean + torch.exp(log_std) * noise
    log_prob = (-0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1, keepdim=True)
    log_prob = log_prob - (2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))).sum(-1, keepdim=True)
    return torch.tanh(u), log_prob
