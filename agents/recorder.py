"""Accumulates per-update statistics and weights on device; hands out records.

Nothing here synchronises with the host per update: values are written into
preallocated tensors and converted once per block or interval.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from agents.algorithms.base import UpdateStats
from agents.sink import TrainStatsRecord, WeightBlock, WeightHistogram

BATCH_COLUMNS = ("lambda",)
TRANSITION_COLUMNS = ("mean", "min", "max", "p10", "p25", "p50", "p75", "p90")
_QUANTILES = (0.10, 0.25, 0.50, 0.75, 0.90)


class WeightRecorder:
    """Every batch's weight (λ, or a summary of the λ_i) plus a λ histogram per interval."""

    def __init__(self, per_transition: bool, block: int, bins: int, device: torch.device) -> None:
        self.columns = TRANSITION_COLUMNS if per_transition else BATCH_COLUMNS
        self.block = block
        self.bins = bins
        self.device = device
        self.values = torch.zeros(block, len(self.columns), device=device)
        self.updates = np.zeros(block, dtype=np.int64)
        self.steps = np.zeros(block, dtype=np.int64)
        self.size = 0
        self.counts = torch.zeros(bins, dtype=torch.float64, device=device)
        self._quantile_index: tuple[Tensor, Tensor, Tensor] | None = None
        self._quantile_n = 0

    def _summary(self, weight: Tensor) -> Tensor:
        w, _ = weight.reshape(-1).sort()
        if self._quantile_index is None or self._quantile_n != w.numel():
            # Linear interpolation between order statistics, as torch.quantile does.
            pos = torch.tensor(_QUANTILES, dtype=torch.float32, device=w.device) * (w.numel() - 1)
            self._quantile_index = (pos.floor().long(), pos.ceil().long(), pos - pos.floor())
            self._quantile_n = w.numel()
        lo, hi, frac = self._quantile_index
        quantiles = w[lo] * (1.0 - frac) + w[hi] * frac
        return torch.cat([torch.stack([w.mean(), w[0], w[-1]]), quantiles])

    def add(self, update: int, step: int, weight: Tensor) -> WeightBlock | None:
        """Record one update's weight; returns a full block when one completes."""
        row = self._summary(weight) if len(self.columns) > 1 else weight.reshape(1)
        self.values[self.size].copy_(row)
        self.updates[self.size] = update
        self.steps[self.size] = step
        self.size += 1
        self.counts += torch.histc(weight.reshape(-1).double(), bins=self.bins, min=0.0, max=1.0)
        return self.flush() if self.size == self.block else None

    def flush(self) -> WeightBlock | None:
        """The pending rows as a block (None when there are none)."""
        if self.size == 0:
            return None
        block = WeightBlock(
            columns=self.columns,
            updates=self.updates[: self.size].copy(),
            steps=self.steps[: self.size].copy(),
            values=self.values[: self.size].cpu().numpy().copy(),
        )
        self.size = 0
        return block

    def histogram(self, step: int) -> WeightHistogram | None:
        """The interval's histogram (None if no weight was recorded), then reset."""
        counts = self.counts.cpu().numpy().round().astype(np.int64)
        if counts.sum() == 0:
            return None
        self.counts.zero_()
        return WeightHistogram(step=step, edges=np.linspace(0.0, 1.0, self.bins + 1), counts=counts)

    def state_dict(self) -> dict[str, Tensor]:
        return {"counts": self.counts.cpu()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.counts.copy_(state["counts"])


class StatsAccumulator:
    """Interval means of losses, Q and α."""

    def __init__(self, device: torch.device) -> None:
        self.sums = torch.zeros(4, dtype=torch.float64, device=device)
        """critic_loss, q_mean, alpha, actor_loss"""
        self.updates = 0
        self.actor_updates = 0
        self._zero = torch.zeros((), device=device)

    def add(self, stats: UpdateStats) -> None:
        actor = stats.actor_loss if stats.actor_loss is not None else self._zero
        alpha = stats.alpha if stats.alpha is not None else self._zero
        self.sums += torch.stack([stats.critic_loss, stats.q_mean, alpha, actor]).double()
        self.updates += 1
        self.actor_updates += stats.actor_loss is not None

    def record(self, step: int, total_updates: int, sps: float, has_alpha: bool) -> TrainStatsRecord:
        """The interval's means (None for what had no update), then reset."""
        critic, q, alpha, actor = self.sums.tolist()
        n = self.updates
        record = TrainStatsRecord(
            step=step,
            updates=total_updates,
            critic_loss=critic / n if n else None,
            actor_loss=actor / self.actor_updates if self.actor_updates else None,
            q_mean=q / n if n else None,
            alpha=alpha / n if n and has_alpha else None,
            sps=sps,
        )
        self.sums.zero_()
        self.updates = self.actor_updates = 0
        return record
