"""The training worker: one run in its own process, its records written into the store.

    python -m offpoc_tui.worker --db offpoc.db --run 7      # started by the launcher

It claims the run (queued → running), trains it (from its checkpoint when one
exists), writes through a :class:`store.writer.RunWriter`, and ends it as
``finished``, ``stopped`` (SIGTERM or SIGINT: checkpoint first) or ``failed``
(the exception and its traceback stored). Checkpoints and the log live in
``offpoc-runs/<id>/``.
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
from pathlib import Path

import sqlite_utils

from agents import (
    CheckpointRecord,
    EpisodeRecord,
    EvalRecord,
    Sink,
    TrainConfig,
    Trainer,
    TrainStatsRecord,
    WeightBlock,
    WeightHistogram,
)
from store import open_store
from store.runs import claim, finish, get_run, run_dir
from store.writer import RunWriter

CHECKPOINT = "checkpoint.pt"


class StoreSink(Sink):
    """Hands a trainer's records to a run's writer."""

    def __init__(self, writer: RunWriter) -> None:
        self.writer = writer

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

    def on_weights(self, record: WeightBlock) -> None:
        self.writer.add_weights(record.columns, record.updates, record.steps, record.values)

    def on_weight_histogram(self, record: WeightHistogram) -> None:
        self.writer.add_histogram(record.step, record.counts)

    def on_checkpoint(self, record: CheckpointRecord) -> None:
        # Everything up to the checkpoint must be in the store before the checkpoint exists:
        # a resumed run only repeats what comes after it.
        self.writer.add_checkpoint(record.step)
        self.writer.flush()


class StoreBinding:
    """A trainer wired to the store: records through the sink, progress and heartbeat on every step."""

    def __init__(self, writer: RunWriter, stop: threading.Event) -> None:
        self.writer = writer
        self.stop = stop
        self.sink = StoreSink(writer)
        self.trainer: Trainer | None = None

    def should_stop(self) -> bool:
        """The trainer asks before every step: flush when due, then answer."""
        if self.trainer is not None:
            self.writer.tick(self.trainer.step, self.trainer.agent.updates)
        return self.stop.is_set()

    def build(self, config: TrainConfig, checkpoint: Path) -> Trainer:
        if checkpoint.exists():
            trainer = Trainer.resume(checkpoint, self.sink, self.should_stop, total_steps=config.total_steps)
        else:
            trainer = Trainer(config, self.sink, checkpoint_path=checkpoint, should_stop=self.should_stop)
        self.trainer = trainer
        return trainer


def run_worker(db_path: Path, run_id: int) -> int:
    """Train run ``run_id`` to its end; the process exit status."""
    db = open_store(db_path)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if not claim(db, run_id, os.getpid()):
        print(f"run {run_id} is not queued any more; nothing to do", flush=True)
        return 0
    binding = StoreBinding(RunWriter(db, run_id), stop)
    try:
        run = get_run(db, run_id)
        assert run is not None
        config = TrainConfig.from_dict(json.loads(run["config"]))
        checkpoint = run_dir(db_path, run_id) / CHECKPOINT
        print(f"run {run_id}: {config.algo} {config.env_id} {config.correction} seed {config.seed}", flush=True)
        trainer = binding.build(config, checkpoint)
        if trainer.step:
            print(f"resuming from {checkpoint} at step {trainer.step}", flush=True)
        result = trainer.run()
        binding.writer.flush(result.step, result.updates)
        finish(db, run_id, result.status)
        print(f"{result.status} at step {result.step} after {result.wall_time:.0f} s", flush=True)
        return 0
    except Exception as error:
        text = traceback.format_exc()
        print(text, file=sys.stderr, flush=True)
        _record_failure(db, binding, run_id, f"{type(error).__name__}: {error}", text)
        return 1


def _record_failure(db: sqlite_utils.Database, binding: StoreBinding, run_id: int, error: str, text: str) -> None:
    """Keep what was measured before the failure, then mark the run failed."""
    trainer = binding.trainer
    if trainer is not None:
        try:
            binding.writer.flush(trainer.step, trainer.agent.updates)
        except sqlite3.Error as flush_error:  # the failure may be the store itself; the status still matters more
            print(f"could not write pending records: {flush_error}", file=sys.stderr, flush=True)
    finish(db, run_id, "failed", error=error.splitlines()[0] if error else "failed", traceback=text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offpoc_tui.worker", description="Train one queued run.")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--run", type=int, required=True)
    args = parser.parse_args(argv)
    return run_worker(args.db, args.run)


if __name__ == "__main__":
    sys.exit(main())
