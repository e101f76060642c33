"""The training worker: one run in its own process, its records written into the store.

    python -m offpoc_tui.worker --db offpoc.db --run 7      # started by the scheduler

It claims the run (queued → running), trains it (from its own checkpoint when
the store records one: :mod:`offpoc_tui.checkpoints`), writes through a
:class:`store.writer.RunWriter`, and ends it as ``finished``, ``stopped``
(SIGTERM, SIGINT or the store's stop request: checkpoint first) or ``failed`` (the exception and its
traceback stored; a checkpoint that is not the run's: one line). Checkpoints and
the log live in the store's run files, ``<store>-runs/<id>/`` (:mod:`store.files`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

import sqlite_utils

from agents import (
    CheckpointRecord,
    CheckpointSaved,
    EpisodeRecord,
    EvalRecord,
    QuantityBlock,
    QuantityHistogram,
    Sink,
    TrainConfig,
    Trainer,
    TrainStatsRecord,
)
from agents.checkpoint import CheckpointMismatch
from offpoc_tui.checkpoints import open_trainer
from store import open_store
from store.files import RunFiles
from store.runs import NOT_OWNER_EXIT, NotOwner, RunRow, claim, finish, get_run
from store.writer import LocalLink, NonFinite, RunWriter


class StoreSink(Sink):
    """Hands a trainer's records to a run's writer."""

    def __init__(self, writer: RunWriter, counters: Callable[[], tuple[int, int] | None] = lambda: None) -> None:
        self.writer = writer
        self.counters = counters
        """The trainer's (step, updates), written at each checkpoint; None before there is a trainer."""

    def on_eval(self, record: EvalRecord) -> None:
        self.writer.add_eval(
            record.step, record.wall_time, record.return_mean, record.return_std, record.returns, record.lengths
        )

    def on_episode(self, record: EpisodeRecord) -> None:
        self.writer.add_episode(record.step, record.episode, record.ret, record.length)

    def on_train_stats(self, record: TrainStatsRecord) -> None:
        self.writer.add_train_stats(
            record.step, record.updates, record.critic_loss, record.actor_loss, record.q_mean, record.alpha, record.sps
        )

    def on_quantities(self, record: QuantityBlock) -> None:
        self.writer.add_weights(record.columns, record.updates, record.steps, record.values, record.quantity)

    def on_quantity_histogram(self, record: QuantityHistogram) -> None:
        self.writer.add_histogram(record.step, record.counts, record.quantity)

    def on_checkpoint(self, record: CheckpointRecord) -> None:
        # Everything up to the checkpoint must be in the store before the checkpoint exists:
        # a resumed run only repeats what comes after it. The flush also checks that this worker
        # still owns the run (store.runs.NotOwner otherwise): a stale worker writes no checkpoint.
        self.writer.flush(*(self.counters() or (None, None)))

    def on_checkpoint_saved(self, record: CheckpointSaved) -> None:
        # Only now, with the file in place, does the store name its step (and the flush writes it at
        # once: it restarts the writer's clock, so checkpoints less than a flush interval apart would
        # otherwise never write their progress).
        self.writer.add_checkpoint(record.step)
        self.writer.flush(*(self.counters() or (None, None)))


class StoreBinding:
    """A trainer wired to the store: records through the sink, progress and heartbeat on every step."""

    def __init__(self, writer: RunWriter, stop: threading.Event) -> None:
        self.writer = writer
        self.stop = stop
        self.sink = StoreSink(writer, counters=self.counters)
        self.trainer: Trainer | None = None

    def counters(self) -> tuple[int, int] | None:
        """The trainer's (step, updates), once there is a trainer."""
        return None if self.trainer is None else (self.trainer.step, self.trainer.agent.updates)

    def should_stop(self) -> bool:
        """The trainer asks before every step: flush when due, then answer."""
        if self.trainer is not None:
            self.writer.tick(self.trainer.step, self.trainer.agent.updates)
        return self.stop.is_set() or self.writer.stop_requested

    def build(self, run: RunRow, config: TrainConfig, files: RunFiles) -> Trainer:
        """The run's trainer (see :func:`offpoc_tui.checkpoints.open_trainer`); says where it starts."""
        trainer, start = open_trainer(run, config, files, self.sink, self.should_stop)
        if run["steps"] > trainer.step:  # records of the trajectory abandoned after the checkpoint
            self.writer.rewind(trainer.step)
            start += f" (records past step {trainer.step:,} replaced)"
        what = f"{config.algo} {config.env_id} {config.correction} seed {config.seed}"
        print(f"run {run['id']}: {what}, {start}", flush=True)
        self.trainer = trainer
        return trainer


def run_worker(db_path: Path, run_id: int) -> int:
    """Train run ``run_id`` to its end; the process exit status."""
    db = open_store(db_path)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    owner = claim(db, run_id, os.getpid())
    if owner is None:
        print(f"run {run_id} is not queued any more; nothing to do", flush=True)
        return 0
    binding = StoreBinding(RunWriter(LocalLink(db, owner), run_id), stop)
    try:
        run = get_run(db, run_id)
        assert run is not None
        config = TrainConfig.from_dict(json.loads(run["config"]))
        trainer = binding.build(run, config, RunFiles.of(db, db_path))
        result = trainer.run()
        binding.writer.flush(result.step, result.updates)
        if not finish(db, run_id, result.status, owner=owner):
            raise NotOwner(f"run {run_id} is no longer this worker's: its end is not recorded")
        print(f"{result.status} at step {result.step} after {result.wall_time:.0f} s", flush=True)
        return 0
    except NotOwner as error:  # someone else's run now (resumed elsewhere, or deleted): write nothing more
        print(error, file=sys.stderr, flush=True)
        return NOT_OWNER_EXIT
    except (CheckpointMismatch, NonFinite) as error:  # not a bug: the line says all, no traceback
        print(error, file=sys.stderr, flush=True)
        _record_failure(db, binding, run_id, owner, str(error), None)
        return 1
    except Exception as error:
        text = traceback.format_exc()
        print(text, file=sys.stderr, flush=True)
        _record_failure(db, binding, run_id, owner, f"{type(error).__name__}: {error}", text)
        return 1


def _record_failure(
    db: sqlite_utils.Database, binding: StoreBinding, run_id: int, owner: str, error: str, text: str | None
) -> None:
    """Keep what was measured before the failure, then mark the run failed (if it is still this worker's).

    Each write is tried on its own: when the store itself is the failure (a full disk), the status
    matters more than the pending records, and a store that cannot take even that leaves the run to be
    found ``lost`` by the next reader."""
    trainer = binding.trainer
    if trainer is not None:
        try:
            binding.writer.flush(trainer.step, trainer.agent.updates)
        except (sqlite3.Error, NotOwner) as flush_error:
            print(f"could not write pending records: {flush_error}", file=sys.stderr, flush=True)
    line = error.splitlines()[0] if error else "failed"
    try:
        finish(db, run_id, "failed", error=line, traceback=text, owner=owner)
    except sqlite3.Error as finish_error:
        print(f"could not record the failure: {finish_error}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offpoc_tui.worker", description="Train one queued run.")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--run", type=int, required=True)
    args = parser.parse_args(argv)
    return run_worker(args.db, args.run)


if __name__ == "__main__":
    sys.exit(main())
