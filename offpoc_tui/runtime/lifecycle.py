"""A claimed run from its start to its end, the same for a local worker and a Ray task.

Each backend claims a run its own way (:mod:`offpoc_tui.runtime.worker` through the store file,
:mod:`offpoc_tui.runtime.ray_task` through the writer actor) and gets an owner token; it hands
:func:`live` a :class:`~store.links.Link` bound to that token. From there one function
makes every guarantee, once:

- every write (records, progress, the rewind, the end) checks in its transaction that the
  run is still this worker's; once it is not (declared lost and resumed elsewhere, deleted),
  the worker stops at that write without writing (:class:`~store.runs.NotOwner`);
- a resumed run's records past the step it resumes from are deleted before it trains, and the
  resumed trajectory's take their place (:meth:`~store.writer.RunWriter.rewind`);
- everything up to a checkpoint is in the store before the file is written; the written file
  is renamed into place and its step recorded in one transaction that checks the owner (a worker
  that lost its run never puts its file where the new owner's is); the run's folder is made
  again, marked, if it went;
- the end is recorded only while the run is the worker's; a non-finite record, a checkpoint
  that is not the run's or a store that moved away ends it ``failed`` with one line, any other
  exception with its traceback, after what was measured before it is flushed.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from agents import (
    CheckpointRecord,
    ConfigError,
    EpisodeRecord,
    EvalRecord,
    QuantityBlock,
    QuantityHistogram,
    Sink,
    TrainConfig,
    Trainer,
    TrainResult,
    TrainStatsRecord,
)
from agents.checkpoint import CheckpointMismatch
from offpoc_tui.runtime.checkpoints import open_trainer
from store.db import StoreError
from store.files import RunFiles
from store.links import Link, StoreBusy
from store.runs import NotOwner, RunRow
from store.writer import NonFinite, RunWriter


class StoreSink(Sink):
    """Hands a trainer's records to a run's writer."""

    def __init__(
        self,
        writer: RunWriter,
        counters: Callable[[], tuple[int, int] | None] = lambda: None,
        prepare: Callable[[], object] = lambda: None,
    ) -> None:
        self.writer = writer
        self.counters = counters
        """The trainer's (step, updates), written at each checkpoint; None before there is a trainer."""
        self.prepare = prepare
        """Makes the folder the checkpoint goes to (again, marked, if it was deleted) before it is written."""

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
        self.writer.add_quantities(record.columns, record.updates, record.steps, record.values, record.quantity)

    def on_quantity_histogram(self, record: QuantityHistogram) -> None:
        self.writer.add_histogram(record.step, record.counts, record.quantity)

    def on_checkpoint(self, record: CheckpointRecord) -> None:
        # Everything up to the checkpoint must be in the store before the checkpoint exists:
        # a resumed run only repeats what comes after it. The flush also checks that this worker
        # still owns the run (store.runs.NotOwner otherwise): a stale worker writes no checkpoint.
        # The file, once written, is put in place with its step recorded: StoreBinding.place.
        self.writer.flush(*(self.counters() or (None, None)))
        self.prepare()


class StoreBinding:
    """A trainer wired to the store: records through the sink, progress and heartbeat on every step."""

    def __init__(self, writer: RunWriter, stop: threading.Event) -> None:
        self.writer = writer
        self.stop = stop
        self.files: RunFiles | None = None
        self.sink = StoreSink(writer, counters=self.counters, prepare=self.prepare)
        self.trainer: Trainer | None = None

    def counters(self) -> tuple[int, int] | None:
        """The trainer's (step, updates), once there is a trainer."""
        return None if self.trainer is None else (self.trainer.step, self.trainer.agent.updates)

    def prepare(self) -> None:
        """The run's folder before a checkpoint is written into it: made again, marked, if it went; never
        made where the store is no longer (:meth:`~store.links.LocalLink.guard`)."""
        if self.files is not None:
            self.writer.link.guard()
            self.files.prepare(self.writer.run_id)

    def place(self, tmp: Path, path: Path) -> None:
        """Put a written checkpoint in place and record its step, in one transaction checking the owner."""
        assert self.trainer is not None
        self.writer.link.place_checkpoint(self.writer.run_id, self.trainer.step, tmp, path)

    def should_stop(self) -> bool:
        """The trainer asks before every step: flush when due, then answer."""
        if self.trainer is not None:
            trainer = self.trainer
            self.writer.tick(trainer.step, trainer.agent.updates, lambda: trainer.training_time)
        return self.stop.is_set() or self.writer.stop_requested

    def build(self, run: RunRow, config: TrainConfig, files: RunFiles) -> Trainer:
        """The run's trainer (see :func:`offpoc_tui.runtime.checkpoints.open_trainer`), and the run's records past
        the step it starts from deleted (the abandoned trajectory's); says where it starts."""
        self.files = files
        trainer, start, checkpoint = open_trainer(run, config, files, self.sink, self.should_stop)
        self.writer.rewind(trainer.step, checkpoint, trainer.agent.updates)
        if run["steps"] > trainer.step:
            start += f" (records past step {trainer.step:,} replaced)"
        what = f"{config.algo} {config.env_id} {config.correction} seed {config.seed}"
        print(f"run {run['id']}: {what}, {start}", flush=True)
        trainer.place_checkpoint = self.place
        self.trainer = trainer
        return trainer


class Outcome(NamedTuple):
    """How a worker's part in a run ended."""

    status: str
    """``finished``, ``stopped``, ``failed`` (recorded), or ``not-owner`` (the run was someone else's by then:
    nothing recorded)."""
    line: str


class LaneRefusal(RuntimeError):
    """A lane group that could not form (its lanes checkpointed at different steps): the line says why."""


ONE_LINE_FAILURES = (CheckpointMismatch, NonFinite, StoreError, StoreBusy, LaneRefusal)
"""Failures the message says all of: no traceback is stored."""


def live(run: RunRow, binding: StoreBinding, link: Link, files: RunFiles) -> Outcome:
    """Train the claimed ``run`` through ``binding`` (whose writer writes through ``link``) and record its end."""
    try:
        config = TrainConfig.from_dict(json.loads(run["config"]))
        end: TrainResult | Exception = binding.build(run, config, files).run()
    except Exception as error:
        end = error
    return conclude(run["id"], binding, link, end)


def live_group(lanes: list[tuple[RunRow, StoreBinding, Link]], files: RunFiles) -> list[Outcome]:
    """Train the claimed runs as one lane group (:class:`agents.lanes.LaneGroup`), each through its own binding
    and link as :func:`live` trains one, and record each lane's end: a lane that fails (a non-finite record,
    a checkpoint that is not its own, a write refused) ends alone, and the others train on."""
    from agents.lanes import LaneGroup

    outcomes: dict[int, Outcome] = {}

    def end(k: int, result: TrainResult | Exception) -> None:  # recorded as the lane ends, the others train on
        run, binding, link = lanes[k]
        outcomes[k] = conclude(run["id"], binding, link, result)

    built: list[int] = []
    trainers: list[Trainer] = []
    for k, (run, binding, _) in enumerate(lanes):
        try:
            trainers.append(binding.build(run, TrainConfig.from_dict(json.loads(run["config"])), files))
            built.append(k)
        except Exception as error:
            end(k, error)
    if trainers:
        try:
            group = LaneGroup(trainers, on_end=lambda i, result: end(built[i], result))
        except Exception as error:  # the group could not form: every lane it held ends with the reason, in a line
            for k in built:
                end(k, LaneRefusal(str(error)) if isinstance(error, ConfigError) else error)
        else:
            group.run()
    return [outcomes[k] for k in range(len(lanes))]


def conclude(run_id: int, binding: StoreBinding, link: Link, end: TrainResult | Exception) -> Outcome:
    """Record how a run's training ended: its result (flushed, then its end), or the exception that ended it."""
    try:
        if isinstance(end, Exception):
            raise end
        result = end
        binding.writer.flush(result.step, result.updates, result.wall_time)
        if not link.end(run_id, result.status):
            raise NotOwner(f"run {run_id} is no longer this worker's: its end is not recorded")
        return Outcome(result.status, f"{result.status} at step {result.step} after {result.wall_time:.0f} s")
    except NotOwner as error:  # someone else's run now (resumed elsewhere, or deleted): write nothing more
        print(error, file=sys.stderr, flush=True)
        return Outcome("not-owner", str(error))
    except ONE_LINE_FAILURES as error:  # not a bug: the line says all, no traceback
        print(error, file=sys.stderr, flush=True)
        return _failed(binding, link, run_id, str(error), None)
    except Exception as error:
        text = traceback.format_exc()
        print(text, file=sys.stderr, flush=True)
        return _failed(binding, link, run_id, f"{type(error).__name__}: {error}", text)


def _failed(binding: StoreBinding, link: Link, run_id: int, error: str, text: str | None) -> Outcome:
    """Keep what was measured before the failure, then mark the run failed (if it is still this worker's).

    Each write is tried on its own: when the store itself is the failure (a full disk, a store that
    moved away), the status matters more than the pending records, and a store that cannot take even
    that leaves the run to be found ``lost`` by the next reader."""
    line = error.splitlines()[0] if error else "failed"
    trainer = binding.trainer
    if trainer is not None:
        try:
            binding.writer.flush(trainer.step, trainer.agent.updates, trainer.training_time)
        except NotOwner as flush_error:
            print(flush_error, file=sys.stderr, flush=True)
            return Outcome("not-owner", str(flush_error))
        except (sqlite3.Error, StoreError) as flush_error:
            print(f"could not write pending records: {flush_error}", file=sys.stderr, flush=True)
    try:
        recorded = link.end(run_id, "failed", line, text)
    except sqlite3.Error as end_error:
        # The worker then exits 1, and the scheduler that started it records the failure with this log's last
        # line (a lane group's worker adds a line per lane after it, which the scheduler reads for that lane).
        print(f"the store did not take the failure ({end_error}); it is recorded from this log, whose last line is:",
              file=sys.stderr, flush=True)  # fmt: skip
        print(line, file=sys.stderr, flush=True)
        return Outcome("failed", line)
    if not recorded:
        return Outcome("not-owner", f"run {run_id} is no longer this worker's: its failure is not recorded")
    return Outcome("failed", line)
