"""The worker's writer: buffers a run's records and writes them in batched transactions.

One writer per worker process. Records accumulate in memory; :meth:`RunWriter.tick`
(called every environment step, it costs a clock read) writes them, plus the run's
progress and heartbeat, in one transaction at most every :data:`FLUSH_INTERVAL_S`.

Resumed runs never write a step twice: at open the writer reads, per table, the
last step already stored for the run and drops records at or before it (the first
writer of a step wins; a lost worker's evaluations stay).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import sqlite_utils

from store.codec import contiguous_runs, encode_counts, encode_episodes, encode_weights
from store.db import write

FLUSH_INTERVAL_S = 1.0

_INSERT = {
    "evaluations": "INSERT OR IGNORE INTO evaluations (run_id, step, wall_time, return_mean, return_std, length_mean,"
    " returns, lengths) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "episodes": "INSERT OR IGNORE INTO episodes (run_id, step, episode, return, length) VALUES (?, ?, ?, ?, ?)",
    "train": "INSERT OR IGNORE INTO train (run_id, step, updates, critic_loss, actor_loss, q_mean, alpha, sps)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "weights": "INSERT OR IGNORE INTO weights (run_id, first_update, first_step, count, columns, mean, data)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)",
    "histograms": "INSERT OR IGNORE INTO histograms (run_id, step, counts) VALUES (?, ?, ?)",
}
_LAST_STEP = {
    "evaluations": "SELECT MAX(step) FROM evaluations WHERE run_id = ?",
    "episodes": "SELECT MAX(step) FROM episodes WHERE run_id = ?",
    "train": "SELECT MAX(step) FROM train WHERE run_id = ?",
    "weights": "SELECT MAX(first_step + count - 1) FROM weights WHERE run_id = ?",
    "histograms": "SELECT MAX(step) FROM histograms WHERE run_id = ?",
}


class RunWriter:
    """Buffered, batched writes of one run's observations and progress."""

    def __init__(self, db: sqlite_utils.Database, run_id: int, flush_interval: float = FLUSH_INTERVAL_S) -> None:
        self.db = db
        self.run_id = run_id
        self.flush_interval = flush_interval
        self.pending: dict[str, list[Sequence[Any]]] = {table: [] for table in _INSERT}
        stored = {table: db.execute(sql, [run_id]).fetchone()[0] for table, sql in _LAST_STEP.items()}
        self.last_step = {table: -1 if step is None else int(step) for table, step in stored.items()}
        row = db.execute("SELECT best_return FROM runs WHERE id = ?", [run_id]).fetchone()
        self.progress: dict[str, Any] = {"best_return": row[0] if row else None}
        self._last_flush = time.monotonic()

    def _fresh(self, table: str, step: int) -> bool:
        return step > self.last_step[table]

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
        if self._fresh("train", step):
            self.pending["train"].append((self.run_id, step, updates, critic_loss, actor_loss, q_mean, alpha, sps))
        self.progress["sps"] = sps

    def add_weights(self, columns: Sequence[str], updates: np.ndarray, steps: np.ndarray, values: np.ndarray) -> None:
        """A block of per-update weights, (n,) updates and steps, (n, columns) values."""
        keep = steps > self.last_step["weights"]
        updates, steps, values = updates[keep], steps[keep], values[keep]
        for part in contiguous_runs(updates, steps):
            block = values[part]
            mean = float(block[:, 0].mean())
            self.pending["weights"].append(
                (self.run_id, int(updates[part][0]), int(steps[part][0]), len(block), ",".join(columns), mean,
                 encode_weights(block))
            )  # fmt: skip
            self.progress["mean_lambda"] = mean

    def add_histogram(self, step: int, counts: np.ndarray) -> None:
        if self._fresh("histograms", step):
            self.pending["histograms"].append((self.run_id, step, encode_counts(counts)))

    def add_checkpoint(self, step: int) -> None:
        self.progress["checkpoint_step"] = step

    # ---- writing ---------------------------------------------------------------------
    def tick(self, step: int, updates: int) -> None:
        """Flush when the interval has passed (call it often; it is a clock read otherwise)."""
        if time.monotonic() - self._last_flush >= self.flush_interval:
            self.flush(step, updates)

    def flush(self, step: int | None = None, updates: int | None = None) -> None:
        """Write everything pending, the progress and the heartbeat, in one transaction.

        ``step`` and ``updates`` update the run's counters when given.
        """
        progress = {k: v for k, v in self.progress.items() if k != "best_return" or v is not None}
        if step is not None and updates is not None:
            progress |= {"steps": step, "updates": updates}
        progress["heartbeat"] = time.time()
        assignments = ", ".join(f"{key} = ?" for key in progress)
        with write(self.db):
            for table, rows in self.pending.items():
                if rows:
                    self.db.conn.executemany(_INSERT[table], rows)
            self.db.execute(f"UPDATE runs SET {assignments} WHERE id = ?", [*progress.values(), self.run_id])
        for table, rows in self.pending.items():
            if rows:
                self.last_step[table] = max(self.last_step[table], max(self._row_step(table, r) for r in rows))
                rows.clear()
        self._last_flush = time.monotonic()

    @staticmethod
    def _row_step(table: str, row: Sequence[Any]) -> int:
        return int(row[2] + row[3] - 1) if table == "weights" else int(row[1])
