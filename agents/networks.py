"""Actor and critic networks. Critics return (E, B, 1): one row per ensemble member.

Besides ``forward``, each network has the two halves of a training pass that the
update uses instead of autograd (see :mod:`agents.backprop`):

- ``forward_tape(...)``: the output and a tape;
- ``backward(tape, grad, ...)``: sets the parameters' ``.grad`` to ∂L/∂θ given
  ∂L/∂output, and for critics optionally returns ∂L/∂action.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, cast

import torch
from torch import Tensor, nn

from agents.backprop import LinearChain, Tape

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
        self.chain = LinearChain(self.net)

    def forward(self, obs: Tensor) -> Tensor:
        return self.chain(obs)

    def forward_tape(self, obs: Tensor) -> tuple[Tensor, Tape]:
        return self.chain.forward(obs)

    def backward(self, tape: Tape, grad: Tensor) -> None:
        self.chain.backward(tape, grad)


class TwinCritic(nn.Module):
    """Two independent Q-networks on cat(s, a) (TD3, SAC)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.members = nn.ModuleList(mlp([obs_dim + action_dim, *hidden, 1]) for _ in range(2))
        self.chains = [LinearChain(cast(nn.Sequential, member)) for member in self.members]

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:
        return self.forward_tape(obs, action)[0]

    def forward_tape(self, obs: Tensor, action: Tensor, first_only: bool = False) -> tuple[Tensor, list[Tape]]:
        """(E, B, 1) values and their tapes; ``first_only``: Q1 alone, (1, B, 1)."""
        x = torch.cat([obs, action], dim=-1)
        passes = [chain.forward(x) for chain in (self.chains[:1] if first_only else self.chains)]
        return torch.stack([q for q, _ in passes]), [tape for _, tape in passes]

    def backward(
        self, tapes: list[Tape], grad: Tensor, params: bool = True, action_grad: bool = False
    ) -> Tensor | None:
        """From ∂L/∂Q (E, B, 1): parameter gradients (``params``) and ∂L/∂action (``action_grad``)."""
        total = None
        action = slice(-self.action_dim, None)
        for chain, tape, g in zip(self.chains, tapes, grad):
            a_grad = chain.backward(tape, g, params=params, input_grad=action_grad, input_columns=action)
            if a_grad is not None:
                total = a_grad if total is None else total + a_grad
        return total


class DDPGCritic(nn.Module):
    """DDPG's critic: the state alone through the first layer, the action joins at the second."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        if len(hidden) != 2:
            raise ValueError(f"the DDPG critic takes exactly two hidden sizes, got {hidden}")
        self.action_dim = action_dim
        self.state_layer = nn.Linear(obs_dim, hidden[0])
        self.head = mlp([hidden[0] + action_dim, hidden[1], 1])
        self.state_chain = LinearChain([self.state_layer, nn.ReLU()])
        self.head_chain = LinearChain(self.head)

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:
        return self.forward_tape(obs, action)[0]

    def forward_tape(self, obs: Tensor, action: Tensor, first_only: bool = False) -> tuple[Tensor, list[Tape]]:
        """(1, B, 1) values and their tapes (one critic: ``first_only`` changes nothing)."""
        h, state_tape = self.state_chain.forward(obs)
        q, head_tape = self.head_chain.forward(torch.cat([h, action], dim=-1))
        return q.unsqueeze(0), [state_tape, head_tape]

    def backward(
        self, tapes: list[Tape], grad: Tensor, params: bool = True, action_grad: bool = False
    ) -> Tensor | None:
        """As :meth:`TwinCritic.backward`; the state layer gets its gradient through the head's input."""
        state_tape, head_tape = tapes
        x_grad = self.head_chain.backward(head_tape, grad[0], params=params, input_grad=True)
        assert x_grad is not None
        if params:
            self.state_chain.backward(state_tape, x_grad[:, : -self.action_dim], params=True)
        return x_grad[:, -self.action_dim :] if action_grad else None


class GaussianPolicy(nn.Module):
    """Pre-tanh diagonal Gaussian policy (SAC); actions are tanh(u), u ~ N(mean, std)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.trunk = mlp([obs_dim, *hidden])
        self.trunk.append(nn.ReLU(inplace=True))
        self.head = nn.Linear(hidden[-1], 2 * action_dim)
        self.chain = LinearChain([*self.trunk, self.head])

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """(mean, log_std), each (B, d)."""
        return self.forward_tape(obs)[0]

    def forward_tape(self, obs: Tensor) -> tuple[tuple[Tensor, Tensor], Any]:
        out, tape = self.chain.forward(obs)
        mean, log_std = out.chunk(2, dim=-1)
        return (mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)), (tape, log_std)

    def backward(self, tape: Any, grad: tuple[Tensor, Tensor]) -> None:
        """From (∂L/∂mean, ∂L/∂log_std); the clamp passes no gradient outside its range."""
        chain_tape, raw_log_std = tape
        grad_mean, grad_log_std = grad
        inside = (raw_log_std >= LOG_STD_MIN) & (raw_log_std <= LOG_STD_MAX)
        self.chain.backward(chain_tape, torch.cat([grad_mean, grad_log_std * inside], dim=-1))


def squashed_sample(mean: Tensor, log_std: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
    """Reparameterised tanh-Gaussian sample and its log-density, (B, d) and (B, 1).

    log π(a|s) = log N(u; mean, std) − Σ log(1 − tanh(u)²), with the Jacobian
    term written as 2(log 2 − u − softplus(−2u)) for numerical stability.
    """
    u = mean + torch.exp(log_std) * noise
    log_prob = (-0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1, keepdim=True)
    log_prob = log_prob - (2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))).sum(-1, keepdim=True)
    return torch.tanh(u), log_prob
