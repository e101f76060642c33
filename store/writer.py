"""The worker's writer: buffers a run's records and writes them in batched transactions.

One writer per worker process. Records accumulate in memory; :meth:`RunWriter.tick`
(called every environment step, it costs a clock read) writes them, plus the run's
progress and heartbeat, in one transaction at most every :data:`FLUSH_INTERVAL_S`,
through a :class:`~store.links.Link` that checks the worker still owns the run.

A resumed run never stores a step twice, nor a step of the trajectory it abandoned: before it
trains, :meth:`RunWriter.rewind` deletes what the run recorded past the step it resumes from
(:func:`store.links.rewind`); from then on the writer drops records at or before the last step
stored. Each commit answers whether ``offpoc stop`` asked the run to stop
(:attr:`RunWriter.stop_requested`).
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np
import sqlite_utils

from store.codec import encode_counts, encode_episodes, encode_values, regular_runs
from store.links import INSERTS, LAST_STEP_SQL, MEAN_LAMBDA_QUANTITY, Link, LocalLink, Rows

FLUSH_INTERVAL_S = 1.0
RATE_WINDOW_S = 20.0
"""The run's speed (``runs.sps``) is its steps over about the last this many seconds of flushes: the rate now,
not a figure left from the random phase or a block measured before the last pause."""


class Described(Protocol):
    """What the store keeps of a logged quantity (``agents.quantities.Quantity`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...


class QuantityInfo(NamedTuple):
    name: str
    label: str
    low: float = 0.0
    high: float = 1.0


LAMBDA = QuantityInfo(MEAN_LAMBDA_QUANTITY, "λ")
"""The quantity AC-Off-POC logs, a weight on [0, 1]; its mean is the run's ``mean_lambda``."""


class NonFinite(ValueError):
    """A record holds NaN or ±inf (an environment's bad reward, a diverged network): the run ends ``failed``
    with this one line, never with the record silently dropped (SQLite stores NaN as NULL)."""


def _finite(what: str, step: int, *values: float | None, hint: str = "") -> None:
    for value in values:
        if value is not None and not math.isfinite(value):
            raise NonFinite(f"{what} is {value} at step {step:,}{hint}")


class RunWriter:
    """Buffered, batched writes of one run's observations and progress."""

    def __init__(self, db: sqlite_utils.Database | Link, run_id: int, flush_interval: float = FLUSH_INTERVAL_S) -> None:
        self.link: Link = LocalLink(db) if isinstance(db, sqlite_utils.Database) else db
        self.run_id = run_id
        self.flush_interval = flush_interval
        self.pending: Rows = {table: [] for table in INSERTS}
        start = self.link.open(run_id)
        self.last_step = dict(start.last_step)
        """(table, quantity or '') → the last step stored; missing: none."""
        self.quantities: set[str] = set()
        """Logged quantities described in the store by this writer."""
        self.progress: dict[str, Any] = {"best_return": start.best_return}
        self.stop_requested = False
        """Whether the store asked this run to stop (``offpoc stop`` of a run it cannot signal)."""
        self._last_flush = time.monotonic()
        self._rate: collections.deque[tuple[float, int]] = collections.deque()
        """(monotonic time, step) at the flushes of the last :data:`RATE_WINDOW_S`."""

    def _fresh(self, table: str, step: int, quantity: str = "") -> bool:
        return step > self.last_step.get((table, quantity), -1)

    # ---- records ---------------------------------------------------------------------
    def add_eval(
        self,
        step: int,
        wall_time: float,
        return_mean: float,
        return_std: float,
        returns: Sequence[float],
        lengths: Sequence[int],
    ) -> None:
        if not self._fresh("evaluations", step):
            return
        hint = ": the environment returned a non-finite reward, or the policy a non-finite action"
        _finite("the evaluation return", step, return_mean, *returns, hint=hint)
        self.pending["evaluations"].append(
            (self.run_id, step, wall_time, return_mean, return_std, float(np.mean(lengths)) if lengths else 0.0,
             *encode_episodes(returns, lengths))
        )  # fmt: skip
        best = self.progress.get("best_return")
        self.progress.update(
            last_return=return_mean, best_return=return_mean if best is None else max(best, return_mean)
        )
        self.progress["wall_time"] = wall_time

    def add_episode(self, step: int, episode: int, ret: float, length: int) -> None:
        _finite(f"training episode {episode:,}'s return", step, ret, hint=": the environment returned it")
        if self._fresh("episodes", step):
            self.pending["episodes"].append((self.run_id, step, episode, ret, length))

    def add_train_stats(
        self,
        step: int,
        updates: int,
        critic_loss: float | None,
        actor_loss: float | None,
        q_mean: float | None,
        alpha: float | None,
        sps: float,
    ) -> None:
        for what, value in (("the critic loss", critic_loss), ("the actor loss", actor_loss), ("mean Q", q_mean)):
            _finite(what, step, value, hint=": training diverged")
        _finite("α", step, alpha, hint=": training diverged")
        if self._fresh("train", step):
            self.pending["train"].append((self.run_id, step, updates, critic_loss, actor_loss, q_mean, alpha, sps))

    def _describe(self, quantity: Described) -> str:
        """Store a logged quantity's label and histogram range, once per run; returns its name."""
        if quantity.name not in self.quantities:
            self.quantities.add(quantity.name)
            self.pending["quantities"].append((self.run_id, quantity.name, quantity.label, quantity.low, quantity.high))
        return quantity.name

    def add_quantities(
        self,
        columns: Sequence[str],
        updates: np.ndarray,
        steps: np.ndarray,
        values: np.ndarray,
        quantity: Described = LAMBDA,
    ) -> None:
        """A block of a logged quantity (λ by default): (n,) updates and steps, (n, columns) values.

        A quantity on [0, 1] is a weight, stored to 16 bits (see :mod:`store.codec`); any other as float32.
        """
        if values.size and not np.isfinite(values).all():
            first = int(np.argwhere(~np.isfinite(values).all(axis=1))[0][0])
            _finite(quantity.name, int(steps[first]), float(values[first][~np.isfinite(values[first])][0]),
                    hint=": training diverged")  # fmt: skip
        name = self._describe(quantity)
        unit = (quantity.low, quantity.high) == (0.0, 1.0)
        keep = steps > self.last_step.get(("quantity_blocks", name), -1)
        updates, steps, values = updates[keep], steps[keep], values[keep]
        for part, stride in regular_runs(updates, steps):
            block = values[part]
            mean = float(block[:, 0].mean())
            self.pending["quantity_blocks"].append(
                (self.run_id, name, int(updates[part][0]), int(steps[part][0]), len(block), ",".join(columns),
                 mean, encode_values(block, unit), stride)
            )  # fmt: skip
            if name == LAMBDA.name:
                self.progress["mean_lambda"] = mean

    def add_histogram(self, step: int, counts: np.ndarray, quantity: Described = LAMBDA) -> None:
        """A quantity's histogram over the interval ending at ``step``, bins evenly on its [low, high]."""
        name = self._describe(quantity)
        if self._fresh("histograms", step, name):
            self.pending["histograms"].append((self.run_id, name, step, encode_counts(counts)))

    def rewind(self, step: int, checkpoint: int | None = None, updates: int = 0) -> None:
        """The run resumes at ``step`` (from its checkpoint there, or from the start: ``checkpoint`` None):
        what it recorded past it (the abandoned trajectory) goes, and the resumed run's records take its
        place; nothing is doubled, nothing of the two trajectories mixed."""
        for rows in self.pending.values():
            rows.clear()
        start = self.link.rewind(self.run_id, step, checkpoint, updates)
        self.last_step = dict(start.last_step)
        self.progress = {"best_return": start.best_return}

    # ---- writing ---------------------------------------------------------------------
    def tick(self, step: int, updates: int, training_time: Callable[[], float] | None = None) -> None:
        """Flush when the interval has passed (call it often; it is a clock read otherwise); ``training_time``
        is asked only then."""
        if time.monotonic() - self._last_flush >= self.flush_interval:
            self.flush(step, updates, None if training_time is None else training_time())

    def flush(self, step: int | None = None, updates: int | None = None, training_time: float | None = None) -> None:
        """Write everything pending, the progress and the heartbeat, in one transaction.

        ``step`` and ``updates`` update the run's counters when given, and with them its speed over the last
        :data:`RATE_WINDOW_S`; ``training_time`` (seconds) its time.
        """
        if training_time is not None:  # kept: a later flush without it (a checkpoint's) must not write an older one
            self.progress["wall_time"] = training_time
        progress = {k: v for k, v in self.progress.items() if k != "best_return" or v is not None}
        if step is not None and updates is not None:
            progress |= {"steps": step, "updates": updates}
            rate = self._recent_rate(step)
            if rate is not None:
                progress["sps"] = rate
        progress["heartbeat"] = time.time()
        self.stop_requested = self.link.commit(self.run_id, self.pending, progress) or self.stop_requested
        for table, rows in self.pending.items():
            for row in rows if table in LAST_STEP_SQL else ():
                key, step = self._row_step(table, row)
                self.last_step[key] = max(self.last_step.get(key, -1), step)
            rows.clear()
        self._last_flush = time.monotonic()

    def _recent_rate(self, step: int) -> float | None:
        """Steps per second since the oldest flush within the window; None until a second has passed."""
        now = time.monotonic()
        samples = self._rate
        if samples and step < samples[-1][1]:  # rewound: the samples before belong to another trajectory
            samples.clear()
        samples.append((now, step))
        while len(samples) > 2 and now - samples[1][0] >= RATE_WINDOW_S:
            samples.popleft()
        first_time, first_step = samples[0]
        return (step - first_step) / (now - first_time) if now - first_time >= 1.0 else None

    @staticmethod
    def _row_step(table: str, row: Sequence[Any]) -> tuple[tuple[str, str], int]:
        """The (table, quantity) a pending row belongs to, and its last step."""
        if table == "quantity_blocks":
            return (table, row[1]), int(row[3] + (row[4] - 1) * row[8])  # first step + (count − 1) × stride
        if table == "histograms":
            return (table, row[1]), int(row[2])
        return (table, ""), int(row[1])
