"""Incremental copies of what the dashboard plots, refreshed by the poller thread.

Each poll asks SQLite only for rows past the last step seen per run (a run never writes
a step twice), so a refresh costs what was written since the previous one, not the size
of the store. A run resumed from a checkpoint replaces what it recorded past it and bumps
its ``revision``: a cache holding an older revision of a run drops it and reads it anew.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import sqlite_utils

from store.reader import eval_series, quantity_blocks
from store.stats import FinalWindow


class RunCurve:
    """One run's evaluations in growable arrays: appending is amortised O(1), reading copies nothing."""

    def __init__(self) -> None:
        self._steps = np.zeros(0, dtype=np.int64)
        self._wall = np.zeros(0, dtype=np.float64)
        self._returns = np.zeros(0, dtype=np.float64)
        self.size = 0

    def extend(self, steps: list[int], wall: list[float | None], returns: list[float]) -> None:
        """Append evaluations (steps increasing); a missing wall time (imported curves) becomes NaN."""
        end = self.size + len(steps)
        if end > len(self._steps):
            capacity = max(end, 2 * len(self._steps), 64)
            self._steps, self._wall, self._returns = (
                np.concatenate([a[: self.size], np.zeros(capacity - self.size, dtype=a.dtype)])
                for a in (self._steps, self._wall, self._returns)
            )
        self._steps[self.size : end] = steps
        self._wall[self.size : end] = np.asarray(wall, dtype=np.float64)
        self._returns[self.size : end] = returns
        self.size = end

    @property
    def last_step(self) -> int:
        return int(self._steps[self.size - 1]) if self.size else -1

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(steps, wall time in s, returns): read-only views, valid until the next extend."""
        views = self._steps[: self.size], self._wall[: self.size], self._returns[: self.size]
        for view in views:
            view.flags.writeable = False
        return views


class EvalCache:
    """Every evaluation of the runs asked for so far, keyed by run id."""

    def __init__(self) -> None:
        self.curves: dict[int, RunCurve] = {}
        self.revisions: dict[int, int] = {}
        """The revision of each run its curve was read at."""

    def update(self, db: sqlite_utils.Database, run_ids: list[int]) -> dict[int, RunCurve]:
        """Bring ``run_ids`` up to date (one query for all of them); returns their curves."""
        for run_id in run_ids:
            self.curves.setdefault(run_id, RunCurve())
        fresh = eval_series(db, {r: self.curves[r].last_step for r in run_ids})
        for run_id, (steps, walls, returns) in fresh.items():
            self.curves[run_id].extend(steps, walls, returns)
        return {r: self.curves[r] for r in run_ids}

    def forget(self, current: Mapping[int, int]) -> None:
        """Drop runs that no longer exist, and those whose records were replaced since they were read.

        ``current``: run id → revision, as read before this poll reads any record."""
        for run_id in list(self.curves):
            if current.get(run_id) != self.revisions.get(run_id):
                del self.curves[run_id]
        self.revisions = dict(current)

    def version(self, run_ids: list[int]) -> tuple[int, ...]:
        """Changes whenever one of the runs gets a new evaluation."""
        return tuple(self.curves[r].size if r in self.curves else -1 for r in run_ids)


QUANTILE_LINES = ("p10", "p50", "p90")


@dataclass
class RunQuantiles:
    """A quantity's quantiles per block of updates (1,000 by default) over training."""

    steps: list[float] = field(default_factory=list)
    values: list[tuple[float, float, float]] = field(default_factory=list)
    spans: list[int] = field(default_factory=list)
    """Updates each block covers (values × stride: TD3's actor-step quantities cover twice their count);
    0 for a block of one value (one per evaluation: :data:`agents.evaluation.EVAL_AT_BOUND`)."""
    last_first_step: int = -1

    @property
    def per_evaluation(self) -> bool:
        """Every block one value: a quantity recorded once per evaluation, not per update."""
        return bool(self.spans) and not any(self.spans)


def block_quantiles(columns: tuple[str, ...], values: np.ndarray) -> tuple[float, float, float]:
    """p10/p50/p90 of a logged quantity over one block of updates.

    One value per batch (λ of DDPG, TD3): quantiles across the block's batches. Per-transition
    values (SAC's λ_i): the block's mean of each batch's own p10/p50/p90.
    """
    if len(columns) == 1:
        p10, p50, p90 = np.quantile(values[:, 0], (0.1, 0.5, 0.9))
        return float(p10), float(p50), float(p90)
    index = [columns.index(name) for name in QUANTILE_LINES]
    p10, p50, p90 = values[:, index].mean(axis=0)
    return float(p10), float(p50), float(p90)


class QuantityCache:
    """Per run and logged quantity, the quantile lines, decoded once per stored block."""

    def __init__(self) -> None:
        self.runs: dict[tuple[int, str], RunQuantiles] = {}
        self.revisions: dict[int, int] = {}

    def update(self, db: sqlite_utils.Database, run_id: int, quantity: str = "lambda") -> RunQuantiles:
        run = self.runs.setdefault((run_id, quantity), RunQuantiles())
        for _, first_step, columns, values, stride in quantity_blocks(db, run_id, run.last_first_step, quantity):
            run.steps.append(first_step + (len(values) - 1) * stride / 2)
            run.values.append(block_quantiles(columns, values))
            run.spans.append(len(values) * stride if len(values) > 1 else 0)
            run.last_first_step = first_step
        return run

    def forget(self, current: Mapping[int, int]) -> None:
        """As :meth:`EvalCache.forget`."""
        for key in [key for key in self.runs if current.get(key[0]) != self.revisions.get(key[0])]:
            del self.runs[key]
        self.revisions = dict(current)


@dataclass
class Sources:
    """What every view's data is built from besides the store: the poller's caches and Compare's statistic."""

    window: FinalWindow = field(default_factory=FinalWindow)
    """Compare's final statistic."""
    until: int | None = None
    """Compare's budget for every task (None: each task's own, :mod:`store.budget`)."""
    evals: EvalCache = field(default_factory=EvalCache)
    quantities: QuantityCache = field(default_factory=QuantityCache)
