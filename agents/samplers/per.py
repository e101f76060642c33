"""Prioritised experience replay as sfujim/LAP-PAL's ``PER_TD3`` (docs/competitors.md, "Replay samplers").

Priorities live in a sum tree (float64) already raised to α; a new transition gets the running
maximum (from 1.0); after each critic step a replayed transition's priority becomes
max_k |Q_k − y|^α (no ε). A batch draws slots ∝ priority, with importance weights p^−β / max over
the batch (multiplying the critic loss only); β starts at β₀ and rises by the increment per
batch, capped at 1. Everything works on whole batches in NumPy: no per-sample Python loop.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from agents.options import Options
from agents.quantities import Quantity
from agents.replay import Batch
from agents.samplers.base import Sampler

PER_BETA = Quantity("per_beta", "PER β", 0.0, 1.0)
PER_WEIGHT = Quantity("per_weight", "PER weight", 0.0, 1.0)


class SumTree:
    """A complete binary tree over ``size`` leaves, each node the sum of its children (``nodes[1]``: the total).

    Sums are recomputed from the children on every write, never adjusted by differences, so
    rounding never accumulates however many writes a run makes.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.depth = max(size - 1, 0).bit_length()
        self.leaves = 1 << self.depth
        self.nodes = np.zeros(2 * self.leaves, dtype=np.float64)

    @property
    def total(self) -> float:
        return float(self.nodes[1])

    def __getitem__(self, index: np.ndarray) -> np.ndarray:
        return self.nodes[self.leaves + index]

    def set(self, index: np.ndarray, values: np.ndarray | float) -> None:
        """Leaves ``index`` become ``values`` (a repeated index takes its last value); sums follow."""
        index = np.asarray(index, dtype=np.int64)
        if index.size == 0:
            return
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), index.shape)
        nodes = self.nodes
        if index.size <= 4:  # one stored transition: a scalar walk up is cheaper than array calls
            for i, value in zip(index.tolist(), values.tolist(), strict=True):
                node = self.leaves + i
                nodes[node] = value
                for _ in range(self.depth):
                    node >>= 1
                    nodes[node] = nodes[2 * node] + nodes[2 * node + 1]
            return
        unique, last = np.unique(index[::-1], return_index=True)
        node = unique + self.leaves
        nodes[node] = values[::-1][last]
        for _ in range(self.depth):  # a node listed twice is recomputed twice, to the same sum
            node >>= 1
            child = node << 1
            nodes[node] = nodes.take(child) + nodes.take(child + 1)

    def find(self, mass: np.ndarray) -> np.ndarray:
        """The leaf each cumulative ``mass`` in [0, total) falls on."""
        node = np.ones(mass.shape, dtype=np.int64)
        mass = mass.copy()
        nodes = self.nodes
        for _ in range(self.depth):
            child = node << 1
            left = nodes.take(child)
            right = mass >= left
            np.subtract(mass, left, out=mass, where=right)
            node = child + right
        return node - self.leaves


@dataclass(frozen=True)
class PEROptions(Options):
    prefix: ClassVar[str] = "per"

    alpha: float = 0.6
    """Priorities are |TD error|^α, α in [0, 1]."""
    beta0: float = 0.4
    """The importance-weight exponent β at the first batch, in [0, 1]."""
    beta_increment: float = 2e-7
    """β's rise per batch, capped at 1."""

    def validate(self) -> None:
        for flat, value in self.flat().items():
            if not (math.isfinite(value) and 0 <= value <= 1):
                raise ValueError(f"{flat} must be in [0, 1], got {value}")


class Prioritised(Sampler):
    name = "per"
    quantities = (PER_BETA, PER_WEIGHT)
    hears_td_errors = True

    def __init__(self, alpha: float = 0.6, beta: float = 0.4, beta_increment: float = 2e-7) -> None:
        self.alpha, self.beta, self.beta_increment = alpha, beta, beta_increment
        self.max_priority = 1.0
        self.excluded = False
        self._logged: dict[str, Tensor] = {}

    def attach(self, buffer: Any) -> None:
        super().attach(buffer)
        self.tree = SumTree(buffer.capacity)

    def added(self, slot: int) -> None:
        after = (slot + 1) % self.buffer.capacity  # holds the next observation: starts no transition now
        self.tree.set(np.array([slot, after]), np.array([self.max_priority, 0.0]))

    def sample(self, batch_size: int, generator: torch.Generator, exclude_random_phase: bool = False) -> Batch:
        if exclude_random_phase and not self.excluded:  # AC-Off-POC's SAC variant: never again
            self.tree.set(np.flatnonzero(self.buffer.random_phase[: self.buffer.filled]), 0.0)
            self.excluded = True
        if self.tree.total <= 0:  # every priority zero (TD errors all exactly 0): nothing to prefer
            self._logged = {PER_BETA.name: torch.tensor(self.beta), PER_WEIGHT.name: torch.ones(batch_size, 1)}
            return self.buffer.sample(batch_size, generator, exclude_random_phase=exclude_random_phase)
        uniform = torch.rand(batch_size, generator=generator, dtype=torch.float64, device=generator.device)
        slots = self.tree.find(uniform.cpu().numpy() * self.tree.total)
        empty = self.tree[slots] == 0
        while empty.any():  # rounding stepped into a subtree with nothing in it (rare): draw those again
            again = torch.rand(int(empty.sum()), generator=generator, dtype=torch.float64, device=generator.device)
            slots[empty] = self.tree.find(again.cpu().numpy() * self.tree.total)
            empty = self.tree[slots] == 0
        weights = self.tree[slots] ** -self.beta
        weights /= weights.max()
        importance = torch.from_numpy(weights.astype(np.float32)).unsqueeze(1).to(self.buffer.device)
        self._logged = {PER_BETA.name: torch.tensor(self.beta), PER_WEIGHT.name: importance}
        self.beta = min(self.beta + self.beta_increment, 1.0)
        return self.buffer.gather(slots)._replace(importance=importance)

    def td_errors(self, slots: np.ndarray, td_error: Tensor) -> None:
        priority = td_error.reshape(-1).double().cpu().numpy() ** self.alpha
        self.max_priority = max(float(priority.max()), self.max_priority)
        self.tree.set(slots, priority)

    def logged(self) -> Mapping[str, Tensor]:
        return self._logged

    def state_dict(self) -> dict[str, Any]:
        filled = self.buffer.filled
        return {"priorities": self.tree[np.arange(filled)].copy(), "beta": self.beta,
                "max_priority": self.max_priority, "excluded": self.excluded}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any], buffer_restored: bool = True) -> None:
        self.beta, self.max_priority = float(state["beta"]), float(state["max_priority"])
        if buffer_restored:
            priorities = np.asarray(state["priorities"], dtype=np.float64)
            self.tree.set(np.arange(len(priorities)), priorities)
            self.excluded = bool(state["excluded"])
