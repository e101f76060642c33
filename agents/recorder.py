"""Accumulates per-update statistics and logged quantities on device; hands out records.

Nothing here synchronises with the host per update: values are written into
preallocated tensors and converted once per block or interval.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from torch import Tensor

from agents.algorithms.base import UpdateStats
from agents.quantities import LAMBDA, Quantity
from agents.sink import QuantityBlock, QuantityHistogram, TrainStatsRecord

TRANSITION_COLUMNS = ("mean", "min", "max", "p10", "p25", "p50", "p75", "p90")
_QUANTILES = (0.10, 0.25, 0.50, 0.75, 0.90)


@lru_cache(maxsize=8)
def _order_statistics(n: int, device: str) -> tuple[Tensor, Tensor, Tensor]:
    """(lo, hi, frac) such that lerp(sorted[lo], sorted[hi], frac) is the min, the max, then each of
    ``_QUANTILES`` of n sorted values, interpolating linearly between order statistics as torch.quantile."""
    pos = torch.tensor((0.0, 1.0, *_QUANTILES), dtype=torch.float64) * (n - 1)
    lo, hi = pos.floor(), pos.ceil()
    return lo.long().to(device), hi.long().to(device), (pos - lo).float().to(device)


class QuantityRecorder:
    """One quantity (λ by default): its value at every update (or a summary of its per-transition
    values) plus a histogram per interval over the quantity's range."""

    def __init__(
        self, per_transition: bool, block: int, bins: int, device: torch.device, quantity: Quantity = LAMBDA
    ) -> None:
        self.quantity = quantity
        self.per_transition = per_transition
        self.columns = TRANSITION_COLUMNS if per_transition else (quantity.name,)
        self.block = block
        self.bins = bins
        self.device = device
        self.values = torch.zeros(block, len(self.columns), device=device)
        self.updates = np.zeros(block, dtype=np.int64)
        self.steps = np.zeros(block, dtype=np.int64)
        self.size = 0
        self.counts = torch.zeros(bins, dtype=torch.float64, device=device)
        self._rows: Tensor | None = None if per_transition else self.values
        """Every λ recorded in this block, one row per update: the per-batch λ column itself, or
        (block, B) λ_i. Summaries and histograms are made from them in bulk (see :meth:`_settle`)."""
        self._settled = 0
        """Rows of ``_rows`` already summarised into ``values`` and counted in ``counts``."""

    def add(self, update: int, step: int, weight: Tensor) -> QuantityBlock | None:
        """Record one update's weight; returns a full block when one completes."""
        flat = weight.reshape(-1)
        if self.per_transition:
            if self._rows is None or self._rows.shape[1] != flat.numel():
                self._settle()  # a new batch size: a new buffer, the rows so far summarised and counted
                self._rows = torch.empty(self.block, flat.numel(), device=self.device)
            self._rows[self.size].copy_(flat)
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
        if self._rows is None or self.size == self._settled:
            return
        pending = self._rows[self._settled : self.size]
        if self.per_transition:
            # Per row: mean, then min, max and the quantiles from the sorted λ_i.
            w, _ = pending.sort(dim=1)
            lo, hi, frac = _order_statistics(w.shape[1], str(w.device))
            rows = self.values[self._settled : self.size]
            torch.mean(w, 1, keepdim=True, out=rows[:, :1])
            torch.lerp(w[:, lo], w[:, hi], frac, out=rows[:, 1:])
        low, high = self.quantity.low, self.quantity.high
        # histc drops values outside [low, high]: clamped, they count in the end bins.
        values = pending.reshape(-1).double().clamp(low, high)
        self.counts += torch.histc(values, bins=self.bins, min=low, max=high)
        self._settled = self.size

    def flush(self) -> QuantityBlock | None:
        """The pending rows as a block (None when there are none)."""
        if self.size == 0:
            return None
        self._settle()
        block = QuantityBlock(
            quantity=self.quantity,
            columns=self.columns,
            updates=self.updates[: self.size].copy(),
            steps=self.steps[: self.size].copy(),
            values=self.values[: self.size].cpu().numpy().copy(),
        )
        self.size = self._settled = 0
        return block

    def histogram(self, step: int) -> QuantityHistogram | None:
        """The interval's histogram (None if no weight was recorded), then reset."""
        self._settle()
        counts = self.counts.cpu().numpy().round().astype(np.int64)
        if counts.sum() == 0:
            return None
        self.counts.zero_()
        edges = np.linspace(self.quantity.low, self.quantity.high, self.bins + 1)
        return QuantityHistogram(step=step, edges=edges, counts=counts, quantity=self.quantity)

    def state_dict(self) -> dict[str, Any]:
        self._settle()
        return {"counts": self.counts.cpu(), "per_transition": self.per_transition}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.counts.copy_(state["counts"])


class QuantityRecorders:
    """A :class:`QuantityRecorder` per declared quantity, made when its first value arrives
    (a 0-d value is recorded as is, a (B, 1) one as its summary)."""

    def __init__(self, quantities: Iterable[Quantity], block: int, bins: int, device: torch.device) -> None:
        self.declared = {q.name: q for q in quantities}
        self.block, self.bins, self.device = block, bins, device
        self.recorders: dict[str, QuantityRecorder] = {}

    def _recorder(self, name: str, per_transition: bool) -> QuantityRecorder:
        recorder = self.recorders.get(name)
        if recorder is None:
            if name not in self.declared:
                raise ValueError(f"logged quantity {name!r} is not declared (declared: {', '.join(self.declared)})")
            recorder = QuantityRecorder(per_transition, self.block, self.bins, self.device, self.declared[name])
            self.recorders[name] = recorder
        return recorder

    def add(self, update: int, step: int, logged: Mapping[str, Tensor]) -> list[QuantityBlock]:
        """Record one update's values; returns the blocks that completed."""
        blocks = []
        for name, value in logged.items():
            block = self._recorder(name, value.ndim > 0).add(update, step, value)
            if block is not None:
                blocks.append(block)
        return blocks

    def flush(self) -> list[QuantityBlock]:
        return [b for r in self.recorders.values() if (b := r.flush()) is not None]

    def histograms(self, step: int) -> list[QuantityHistogram]:
        return [h for r in self.recorders.values() if (h := r.histogram(step)) is not None]

    def state_dict(self) -> dict[str, Any]:
        return {name: recorder.state_dict() for name, recorder in self.recorders.items()}

    def load_state_dict(self, state: dict[str, Any], legacy_per_transition: bool = False) -> None:
        """Restore :meth:`state_dict`; a checkpoint from before quantities holds λ's counts alone,
        per transition as ``legacy_per_transition`` says (SAC's were)."""
        if "counts" in state:
            state = {LAMBDA.name: {**state, "per_transition": legacy_per_transition}} if state["counts"].any() else {}
        for name, recorder_state in state.items():
            self._recorder(name, recorder_state["per_transition"]).load_state_dict(recorder_state)


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
