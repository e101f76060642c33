"""Accumulates per-update statistics and weights on device; hands out records.

Nothing here synchronises with the host per update: values are written into
preallocated tensors and converted once per block or interval.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from agents.algorithms.base import UpdateStats
from agents.sink import TrainStatsRecord, WeightBlock, WeightHistogram

BATCH_COLUMNS = ("lambda",)
TRANSITION_COLUMNS = ("mean", "min", "max", "p10", "p25", "p50", "p75", "p90")
_QUANTILES = (0.10, 0.25, 0.50, 0.75, 0.90)


@lru_cache(maxsize=8)
def _order_statistics(n: int, device: str) -> tuple[Tensor, Tensor, Tensor]:
    """(lo, hi, frac) such that lerp(sorted[lo], sorted[hi], frac) is the min, the max, then each of
    ``_QUANTILES`` of n sorted values, interpolating linearly between order statistics as torch.quantile."""
    pos = torch.tensor((0.0, 1.0, *_QUANTILES), dtype=torch.float64) * (n - 1)
    lo, hi = pos.floor(), pos.ceil()
    return lo.long().to(device), hi.long().to(device), (pos - lo).float().to(device)


class WeightRecorder:
    """Every batch's weight (λ, or a summary of the λ_i) plus a λ histogram per interval."""

    def __init__(self, per_transition: bool, block: int, bins: int, device: torch.device) -> None:
        self.per_transition = per_transition
        self.columns = TRANSITION_COLUMNS if per_transition else BATCH_COLUMNS
        self.block = block
        self.bins = bins
        self.device = device
        self.values = torch.zeros(block, len(self.columns), device=device)
        self.updates = np.zeros(block, dtype=np.int64)
        self.steps = np.zeros(block, dtype=np.int64)
        self.size = 0
        self.counts = torch.zeros(bins, dtype=torch.float64, device=device)
        self._lambdas: Tensor | None = None if per_transition else self.values
        """Every λ recorded in this block, one row per update: the per-batch λ column itself, or
        (block, B) λ_i. Summaries and histograms are made from them in bulk (see :meth:`_settle`)."""
        self._settled = 0
        """Rows of ``_lambdas`` already summarised into ``values`` and counted in ``counts``."""

    def add(self, update: int, step: int, weight: Tensor) -> WeightBlock | None:
        """Record one update's weight; returns a full block when one completes."""
        flat = weight.reshape(-1)
        if self.per_transition:
            if self._lambdas is None or self._lambdas.shape[1] != flat.numel():
                self._settle()  # a new batch size: a new buffer, the rows so far summarised and counted
                self._lambdas = torch.empty(self.block, flat.numel(), device=self.device)
            self._lambdas[self.size].copy_(flat)
        else:
            self.values[self.size].copy_(flat)
        self.updates[self.size] = update
        self.steps[self.size] = step
        self.size += 1
        return self.flush() if self.size == self.block else None

    def _settle(self) -> None:
        """Summarise the rows recorded since the last call and add them to the histogram.

        One sort and one ``histc`` for many updates: per update they would cost
        more than the λ_i themselves.
        """
        if self._lambdas is None or self.size == self._settled:
            return
        pending = self._lambdas[self._settled : self.size]
        if self.per_transition:
            # Per row: mean, then min, max and the quantiles from the sorted λ_i.
            w, _ = pending.sort(dim=1)
            lo, hi, frac = _order_statistics(w.shape[1], str(w.device))
            rows = self.values[self._settled : self.size]
            torch.mean(w, 1, keepdim=True, out=rows[:, :1])
            torch.lerp(w[:, lo], w[:, hi], frac, out=rows[:, 1:])
        self.counts += torch.histc(pending.reshape(-1).double(), bins=self.bins, min=0.0, max=1.0)
        self._settled = self.size

    def flush(self) -> WeightBlock | None:
        """The pending rows as a block (None when there are none)."""
        if self.size == 0:
            return None
        self._settle()
        block = WeightBlock(
            columns=self.columns,
            updates=self.updates[: self.size].copy(),
            steps=self.steps[: self.size].copy(),
            values=self.values[: self.size].cpu().numpy().copy(),
        )
        self.size = self._settled = 0
        return block

    def histogram(self, step: int) -> WeightHistogram | None:
        """The interval's histogram (None if no weight was recorded), then reset."""
        self._settle()
        counts = self.counts.cpu().numpy().round().astype(np.int64)
        if counts.sum() == 0:
            return None
        self.counts.zero_()
        return WeightHistogram(step=step, edges=np.linspace(0.0, 1.0, self.bins + 1), counts=counts)

    def state_dict(self) -> dict[str, Tensor]:
        self._settle()
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
        self.sums.add_(torch.stack([stats.critic_loss, stats.q_mean, alpha, actor]))
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
