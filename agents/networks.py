"""Actor and critic networks. Critics return (E, B, 1): one row per ensemble member.

Every network is plain torch modules, and ``forward`` works under autograd (the
autograd backend). Where its layers are Linear, ReLU and a final Tanh, it also has
the two halves of a training pass that the fast backend uses instead of autograd
(see :mod:`agents.backprop`); ``fast`` says whether it does:

- ``forward_tape(...)``: the output and a tape;
- ``backward(tape, grad, ...)``: sets the parameters' ``.grad`` to ∂L/∂θ given
  ∂L/∂output, and for critics optionally returns ∂L/∂action.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import Any, TypeVar, cast

import torch
from torch import Tensor, nn

from agents.backprop import LinearChain, Tape

T = TypeVar("T")

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
"""Clamp of the Gaussian policy's log-std, as in SAC's reference code."""


def mlp(sizes: list[int], output_activation: nn.Module | None = None, layer_norm: bool = False) -> nn.Sequential:
    """Linear layers of the given sizes with ReLU between them (``layer_norm``: a LayerNorm before each ReLU)."""
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(fan_in, fan_out))
        if i < len(sizes) - 2:
            if layer_norm:
                layers.append(nn.LayerNorm(fan_out))
            # In place is safe: Linear's and LayerNorm's backward need their input, not their output.
            layers.append(nn.ReLU(inplace=True))
    if output_activation is not None:
        layers.append(output_activation)
    return nn.Sequential(*layers)


def fast_chain(layers: Iterable[nn.Module]) -> LinearChain | None:
    """The hand-written passes over ``layers``, or None where they cannot follow them (a LayerNorm, ...)."""
    try:
        return LinearChain(layers)
    except (TypeError, ValueError):
        return None


NOT_FAST = "this network has layers the fast backend does not cover: train it with backend=autograd"


def _needs(chains: T | None) -> T:
    """The hand-written passes (a chain, or a critic's list of them), which only the fast backend uses."""
    if chains is None:
        raise TypeError(NOT_FAST)
    return chains


class DeterministicActor(nn.Module):
    """π(s) ∈ [-1, 1]^d (TD3, DDPG)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...], layer_norm: bool = False) -> None:
        super().__init__()
        self.net = mlp([obs_dim, *hidden, action_dim], nn.Tanh(), layer_norm)
        self.chain = fast_chain(self.net)

    @property
    def fast(self) -> bool:
        return self.chain is not None

    def forward(self, obs: Tensor) -> Tensor:
        return self.chain(obs) if self.chain is not None else self.net(obs)

    def output(self, obs: Tensor) -> Tensor:
        """The last layer's output: the action."""
        return self(obs)

    def forward_tape(self, obs: Tensor) -> tuple[Tensor, Tape]:
        return _needs(self.chain).forward(obs)

    def backward(self, tape: Tape, grad: Tensor) -> None:
        _needs(self.chain).backward(tape, grad)


class TwinCritic(nn.Module):
    """Two independent Q-networks on cat(s, a) (TD3, SAC)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...], layer_norm: bool = False) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.members = nn.ModuleList(mlp([obs_dim + action_dim, *hidden, 1], layer_norm=layer_norm) for _ in range(2))
        chains = [fast_chain(cast(nn.Sequential, member)) for member in self.members]
        self.chains = [chain for chain in chains if chain is not None] if all(chains) else None

    @property
    def fast(self) -> bool:
        return self.chains is not None

    def forward(self, obs: Tensor, action: Tensor, first_only: bool = False) -> Tensor:
        """(E, B, 1) values; ``first_only``: Q1 alone, (1, B, 1)."""
        if self.chains is not None:
            return self.forward_tape(obs, action, first_only)[0]
        x = torch.cat([obs, action], dim=-1)
        return torch.stack([member(x) for member in (self.members[:1] if first_only else self.members)])

    def forward_tape(self, obs: Tensor, action: Tensor, first_only: bool = False) -> tuple[Tensor, list[Tape]]:
        """(E, B, 1) values and their tapes; ``first_only``: Q1 alone, (1, B, 1)."""
        chains = _needs(self.chains)
        x = torch.cat([obs, action], dim=-1)
        passes = [chain.forward(x) for chain in (chains[:1] if first_only else chains)]
        return torch.stack([q for q, _ in passes]), [tape for _, tape in passes]

    def backward(
        self, tapes: list[Tape], grad: Tensor, params: bool = True, action_grad: bool = False
    ) -> Tensor | None:
        """From ∂L/∂Q (E, B, 1): parameter gradients (``params``) and ∂L/∂action (``action_grad``)."""
        total = None
        action = slice(-self.action_dim, None)
        for chain, tape, g in zip(_needs(self.chains), tapes, grad):
            a_grad = chain.backward(tape, g, params=params, input_grad=action_grad, input_columns=action)
            if a_grad is not None:
                total = a_grad if total is None else total + a_grad
        return total

    def min_action_grad(self, tapes: list[Tape], member: Tensor, grad: Tensor | float) -> Tensor:
        """∂L/∂action for L = Σ_i g_i · min_k Q_k(s_i, a_i): each row back-propagates through the member that is
        its minimum alone. ``member``: ``q.min(0)``'s indices, (B, 1), a lane group's (K, B, 1); ``grad``: g,
        shaped as ``member``, 0-d or a number.

        On a CPU, each member runs its backward on its own rows only: the two together cost one member's
        whole-batch backward plus one narrow product, where the masked backward (:meth:`backward` with the
        other member's rows zeroed) costs two. That last, narrow product (into the action's columns) runs on
        the whole batch, zero in the other rows, since MKL rounds a row of it by where the row sits. The result
        is the masked backward's to the bit wherever MKL (or oneDNN, :mod:`agents.gemm`) computes a row of the
        hidden layers' products the same whatever the number of rows beside it: on one thread, from 4 rows on
        (MKL) where measured, and from :data:`agents.gemm.ROWS` (8) for the products it sends to oneDNN
        (``tests/agents/test_gradients.py`` checks the equality on the machine it runs on). The masked backward
        remains for a member with fewer than :data:`FEW_ROWS` rows, for more than one thread (MKL then splits
        the rows between threads) and off the CPU (where the row counts would cost a device sync an update, and
        cuBLAS promises no such rounding). A lane group's lanes split their rows differently:
        :meth:`_lanes_min_action_grad`.
        """
        chains = _needs(self.chains)
        if member.device.type != "cpu":
            return self._masked_action_grad(tapes, member, grad)
        if member.ndim > 2:
            return self._lanes_min_action_grad(chains, tapes, member, grad)
        if torch.get_num_threads() > 1:
            return self._masked_action_grad(tapes, member, grad)
        action, batch = slice(-self.action_dim, None), member.shape[0]
        total = tapes[0].inputs[0].new_empty(batch, self.action_dim)
        for k, (chain, tape) in enumerate(zip(chains, tapes)):
            mine = member == k
            rows = mine.view(-1).nonzero().view(-1)
            if len(rows) >= FEW_ROWS:
                own = Tape([x.index_select(0, rows) for x in tape.inputs], tape.output.index_select(0, rows))
                g = (
                    grad.expand_as(mine).index_select(0, rows)
                    if isinstance(grad, Tensor)
                    else own.output.new_full(own.output.shape, grad)
                )
                a_grad = chain.backward(own, g, False, True, input_columns=action, rows_of=(rows, batch))
            elif len(rows):
                a_grad = chain.backward(tape, mine * grad, params=False, input_grad=True, input_columns=action)
            else:
                continue
            assert a_grad is not None
            total.index_copy_(0, rows, a_grad.index_select(0, rows))
        return total

    def _masked_action_grad(self, tapes: list[Tape], member: Tensor, grad: Tensor | float) -> Tensor:
        """:meth:`min_action_grad` by the masked backward: both members on every row, the other's rows zeroed."""
        members = torch.arange(len(tapes), device=member.device).view(-1, *(1,) * member.ndim)
        total = self.backward(tapes, (member == members) * grad, params=False, action_grad=True)
        assert total is not None
        return total

    def _lanes_min_action_grad(
        self, chains: list[LinearChain], tapes: list[Tape], member: Tensor, grad: Tensor | float
    ) -> Tensor:
        """:meth:`min_action_grad` for a lane group's (K, B, 1) ``member``: each member's batched backward runs on
        n rows a lane, n the most any lane has for it, each lane's own rows first and then other rows of its batch,
        whose results are dropped. With the rows split about evenly, that is a little over half the masked
        backward's products. (Its rows round as a lane's solo run does only to float32 rounding, as every product
        of a lane group does: ``tests/agents/test_lanes.py``.)"""
        lanes, batch = member.shape[:2]
        total = tapes[0].inputs[0].new_zeros(lanes * batch, self.action_dim)
        g_all = grad.expand_as(member) if isinstance(grad, Tensor) else torch.full_like(member, grad, dtype=total.dtype)
        offsets = torch.arange(lanes, device=member.device).view(-1, 1) * batch
        for k, (chain, tape) in enumerate(zip(chains, tapes)):
            mine = member[..., 0] == k  # (K, B)
            n = int(mine.sum(1).max())
            if n == 0:
                continue
            # Each lane's own rows first (in order), then the rest of its batch: the first n are the lane's rows.
            rows = torch.argsort((~mine).to(torch.uint8), dim=1, stable=True)[:, :n]  # (K, n)
            own = mine.gather(1, rows).unsqueeze(-1)  # (K, n, 1): a lane's row, or padding
            flat = (rows + offsets).view(-1)  # rows of the (K·B, ...) views: index_select copies whole rows

            def pick(x: Tensor, flat: Tensor = flat, n: int = n) -> Tensor:
                return x.reshape(lanes * batch, -1).index_select(0, flat).view(lanes, n, -1)

            own_tape = Tape([pick(x) for x in tape.inputs], pick(tape.output))
            a_grad = chain.backward(
                own_tape, pick(g_all), params=False, input_grad=True, input_columns=slice(-self.action_dim, None)
            )
            assert a_grad is not None
            total.index_add_(0, flat, torch.where(own, a_grad, 0.0).view(-1, self.action_dim))
        return total.view(lanes, batch, self.action_dim)


FEW_ROWS = 8
"""Below this many rows, :meth:`TwinCritic.min_action_grad` back-propagates a member's whole masked batch: MKL
computes a product of 1 to 3 rows by another kernel, which rounds its rows differently (oneDNN, which runs the
wide products where torch has it, :mod:`agents.gemm`, a product of 1 row). 8, not 4: a margin (4 sufficed where
measured, on an AMD EPYC). Not below :data:`agents.gemm.ROWS`: a member's own rows must go to the library the
whole batch goes to."""


class DDPGCritic(nn.Module):
    """DDPG's critic: the state alone through the first layer, the action joins at the second."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...], layer_norm: bool = False) -> None:
        super().__init__()
        if len(hidden) != 2:
            raise ValueError(f"the DDPG critic takes exactly two hidden sizes, got {hidden}")
        self.action_dim = action_dim
        self.state_layer = nn.Linear(obs_dim, hidden[0])
        norm: list[nn.Module] = [nn.LayerNorm(hidden[0])] if layer_norm else []
        self.state_net = nn.Sequential(self.state_layer, *norm, nn.ReLU())
        self.head = mlp([hidden[0] + action_dim, hidden[1], 1], layer_norm=layer_norm)
        self.state_chain = fast_chain(self.state_net)
        self.head_chain = fast_chain(self.head)

    @property
    def fast(self) -> bool:
        return self.state_chain is not None and self.head_chain is not None

    def forward(self, obs: Tensor, action: Tensor, first_only: bool = False) -> Tensor:
        """(1, B, 1) values (one critic: ``first_only`` changes nothing)."""
        if self.fast:
            return self.forward_tape(obs, action)[0]
        return self.head(torch.cat([self.state_net(obs), action], dim=-1)).unsqueeze(0)

    def forward_tape(self, obs: Tensor, action: Tensor, first_only: bool = False) -> tuple[Tensor, list[Tape]]:
        """(1, B, 1) values and their tapes (one critic: ``first_only`` changes nothing)."""
        h, state_tape = _needs(self.state_chain).forward(obs)
        q, head_tape = _needs(self.head_chain).forward(torch.cat([h, action], dim=-1))
        return q.unsqueeze(0), [state_tape, head_tape]

    def backward(
        self, tapes: list[Tape], grad: Tensor, params: bool = True, action_grad: bool = False
    ) -> Tensor | None:
        """As :meth:`TwinCritic.backward`; the state layer gets its gradient through the head's input."""
        state_tape, head_tape = tapes
        x_grad = _needs(self.head_chain).backward(head_tape, grad[0], params=params, input_grad=True)
        assert x_grad is not None
        if params:
            _needs(self.state_chain).backward(state_tape, x_grad[..., : -self.action_dim], params=True)
        return x_grad[..., -self.action_dim :] if action_grad else None


class GaussianPolicy(nn.Module):
    """Pre-tanh diagonal Gaussian policy (SAC); actions are tanh(u), u ~ N(mean, std)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...], layer_norm: bool = False) -> None:
        super().__init__()
        self.trunk = mlp([obs_dim, *hidden], layer_norm=layer_norm)
        if layer_norm:
            self.trunk.append(nn.LayerNorm(hidden[-1]))
        self.trunk.append(nn.ReLU(inplace=True))
        self.head = nn.Linear(hidden[-1], 2 * action_dim)
        self.chain = fast_chain([*self.trunk, self.head])

    @property
    def fast(self) -> bool:
        return self.chain is not None

    def output(self, obs: Tensor) -> Tensor:
        """The last layer's output, (B, 2d): mean and log-std before the clamp."""
        return self.chain(obs) if self.chain is not None else self.head(self.trunk(obs))

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """(mean, log_std), each (B, d)."""
        mean, log_std = self.output(obs).chunk(2, dim=-1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def forward_tape(self, obs: Tensor) -> tuple[tuple[Tensor, Tensor], Any]:
        out, tape = _needs(self.chain).forward(obs)
        mean, log_std = out.chunk(2, dim=-1)
        return (mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)), (tape, log_std)

    def backward(self, tape: Any, grad: tuple[Tensor, Tensor]) -> None:
        """From (∂L/∂mean, ∂L/∂log_std); the clamp passes no gradient outside its range."""
        chain_tape, raw_log_std = tape
        grad_mean, grad_log_std = grad
        inside = (raw_log_std >= LOG_STD_MIN) & (raw_log_std <= LOG_STD_MAX)
        _needs(self.chain).backward(chain_tape, torch.cat([grad_mean, grad_log_std * inside], dim=-1))


def squashed_sample(mean: Tensor, log_std: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
    """Reparameterised tanh-Gaussian sample and its log-density, (B, d) and (B, 1).

    log π(a|s) = log N(u; mean, std) − Σ log(1 − tanh(u)²), with the Jacobian
    term written as 2(log 2 − u − softplus(−2u)) for numerical stability.
    """
    u = mean + torch.exp(log_std) * noise
    log_prob = (-0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1, keepdim=True)
    log_prob = log_prob - (2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))).sum(-1, keepdim=True)
    return torch.tanh(u), log_prob
