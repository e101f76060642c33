"""Runs as TensorBoard event files: a folder per run, ``algo/env/correction/seedN``, that TensorBoard,
``wandb sync`` and Aim's converters read.

Each run's folder holds one event file, written with TensorBoard's own protos and writer (the
``tensorboard`` extra), with these tags, at the environment step they were recorded:

- ``eval/return_mean``, ``eval/return_std``, ``eval/length_mean``: each evaluation;
- ``train/critic_loss``, ``train/actor_loss``, ``train/q_mean``, ``train/alpha``, ``train/sps``: each
  training-statistics block (a value the algorithm has not, such as TD3's α, is left out);
- ``QUANTITY/block_mean`` (``lambda/block_mean`` for AC-Off-POC's λ): the mean over each stored block of
  updates, at the block's last step;
- ``QUANTITY/histogram``: each histogram the run stored, over the quantity's range.

Event times are the run's start plus its training time at each evaluation (steps between evaluations
take times in proportion); an imported curve, with no times, gets its import time. The folder name
adds ``-SOURCE`` for imported curves (``seed0-published``), the divergence to AC-Off-POC's correction
(``acoffpoc-jsd``), and ``-runID`` where two runs would share a folder.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils

from store.codec import decode_counts
from store.runs import RunRow
from store.tasks import source_of

TRAIN_TAGS = ("critic_loss", "actor_loss", "q_mean", "alpha", "sps")
UNSAFE = re.compile(r"[^A-Za-z0-9_.+=@-]+")


class TensorBoardMissing(RuntimeError):
    """The ``tensorboard`` package is not installed."""


def _writer_parts() -> tuple[Any, Any, Any, Any]:
    try:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError:
        raise TensorBoardMissing(
            "--format tensorboard needs the tensorboard package: pip install -c constraints.txt -e '.[tensorboard]'"
        ) from None
    return Event, HistogramProto, Summary, EventFileWriter


def folder_names(runs: list[RunRow]) -> dict[int, Path]:
    """Each run's folder, relative: ``algo/env/correction/seedN``, told apart where two would meet."""

    def safe(text: str) -> str:
        return UNSAFE.sub("_", text).strip("._") or "_"

    names: dict[int, Path] = {}
    for run in runs:
        method = run["correction"] + (f"-{run['divergence']}" if run.get("divergence") else "")
        source = source_of(run)
        leaf = f"seed{run['seed']}" + ("" if source == "offpoc" else f"-{source}")
        names[run["id"]] = Path(safe(run["algo"]), safe(run["env"]), safe(method), safe(leaf))
    counts: dict[Path, int] = {}
    for path in names.values():
        counts[path] = counts.get(path, 0) + 1
    return {i: p.with_name(f"{p.name}-run{i}") if counts[p] > 1 else p for i, p in names.items()}


def write_runs(
    db: sqlite_utils.Database, runs: list[RunRow], root: Path, done: Callable[[RunRow, int], None] = lambda *_: None
) -> int:
    """Write each run's event file under ``root`` (which exists); the events written. ``done`` hears each run
    and its events (a progress bar)."""
    Event, HistogramProto, Summary, EventFileWriter = _writer_parts()
    total = 0
    for run, folder in zip(runs, folder_names(runs).values(), strict=True):
        path = root / folder
        path.mkdir(parents=True)
        writer = EventFileWriter(str(path))
        events = 0
        for wall, step, value in _events(db, run, Summary, HistogramProto):
            writer.add_event(Event(wall_time=wall, step=step, summary=Summary(value=[value])))
            events += 1
        writer.close()
        total += events
        done(run, events)
    return total


def _events(
    db: sqlite_utils.Database, run: RunRow, Summary: Any, HistogramProto: Any
) -> Iterator[tuple[float, int, Any]]:
    """(wall time, step, Summary.Value) of everything the run recorded."""
    run_id = run["id"]
    evaluations = db.execute(
        "SELECT step, wall_time, return_mean, return_std, length_mean FROM evaluations WHERE run_id = ? ORDER BY step",
        [run_id],
    ).fetchall()
    start = float(run.get("started") or run.get("created") or 0.0)
    timed = [(step, wall) for step, wall, *_ in evaluations if wall is not None]
    steps_known = np.asarray([s for s, _ in timed], dtype=np.float64)
    walls_known = np.asarray([w for _, w in timed], dtype=np.float64)

    def when(step: int) -> float:
        if not len(steps_known):
            return start
        return start + float(np.interp(step, steps_known, walls_known))

    def scalar(tag: str, value: float) -> Any:
        return Summary.Value(tag=tag, simple_value=float(value))

    for step, _, mean, std, length in evaluations:
        for tag, value in (("eval/return_mean", mean), ("eval/return_std", std), ("eval/length_mean", length)):
            if value is not None:
                yield when(step), step, scalar(tag, value)
    columns = ", ".join(TRAIN_TAGS)
    for step, *values in db.execute(f"SELECT step, {columns} FROM train WHERE run_id = ? ORDER BY step", [run_id]):
        for tag, value in zip(TRAIN_TAGS, values, strict=True):
            if value is not None:
                yield when(step), step, scalar(f"train/{tag}", value)
    for quantity, first_step, count, stride, mean in db.execute(
        "SELECT quantity, first_step, count, stride, mean FROM quantity_blocks WHERE run_id = ?"
        " ORDER BY quantity, first_step",
        [run_id],
    ):
        last = first_step + (count - 1) * stride
        yield when(last), last, scalar(f"{quantity}/block_mean", mean)
    ranges = {
        name: (low, high)
        for name, low, high in db.execute("SELECT name, low, high FROM quantities WHERE run_id = ?", [run_id])
    }
    for quantity, step, text in db.execute(
        "SELECT quantity, step, counts FROM histograms WHERE run_id = ? ORDER BY quantity, step", [run_id]
    ):
        counts = np.asarray(decode_counts(text), dtype=np.float64)
        low, high = ranges.get(quantity, (0.0, 1.0))
        edges = np.linspace(low, high, len(counts) + 1)
        centres = (edges[:-1] + edges[1:]) / 2
        histogram = HistogramProto(
            min=float(low), max=float(high), num=float(counts.sum()), sum=float((centres * counts).sum()),
            sum_squares=float((centres**2 * counts).sum()), bucket_limit=edges[1:].tolist(), bucket=counts.tolist(),
        )  # fmt: skip
        yield when(step), step, Summary.Value(tag=f"{quantity}/histogram", histo=histogram)
