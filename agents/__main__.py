"""Train one run from the command line, without the app: ``python -m agents td3 Hopper-v4``.

    python -m agents td3 Hopper-v4 --correction acoffpoc --steps 100000 --records run.jsonl
    python -m agents sac Walker2d-v4 --correction acoffpoc --set divergence=symkl --set seed=3

Shows a progress bar with the last evaluation, SPS and mean λ; ``--records``
writes every record as a JSON line. Ctrl-C stops cleanly (and checkpoints with
``--checkpoint``). Bad input: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import threading
from pathlib import Path
from typing import IO, Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from agents import corrections
from agents.config import ConfigError, TrainConfig
from agents.config_text import parse_count, with_overrides
from agents.envs import EnvError
from agents.plugins import algorithm_names
from agents.quantities import Quantity
from agents.signals import signal_setter
from agents.sink import EvalRecord, QuantityBlock, Record, Sink, TrainStatsRecord
from agents.training import Trainer

NO_VALUES: dict[str, Any] = {"ret": "–", "sps": "–", "logged": "λ –"}
"""The progress bar's fields before the first evaluation, statistics and weights."""


class ProgressSink(Sink):
    """Drives the progress bar and optionally appends JSON lines."""

    def __init__(self, progress: Progress, task: Any, out: IO[str] | None) -> None:
        self.progress, self.task, self.out = progress, task, out
        self.fields: dict[str, Any] = dict(NO_VALUES)
        self.shown: Quantity | None = None
        """The first quantity the correction logs (λ for AC-Off-POC): the bar shows it by its label."""

    def _write(self, record: Record) -> None:
        if self.out is not None:
            data = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in dataclasses.asdict(record).items()}
            self.out.write(json.dumps({"type": type(record).__name__, **data}) + "\n")

    def on_eval(self, record: EvalRecord) -> None:
        self._write(record)
        self.fields["ret"] = f"{record.return_mean:.1f}"
        self.progress.update(self.task, completed=record.step, **self.fields)
        self.progress.console.print(
            f"step {record.step:>9,}  return {record.return_mean:10.1f} ± {record.return_std:.1f}"
        )

    def on_train_stats(self, record: TrainStatsRecord) -> None:
        self._write(record)
        self.fields["sps"] = f"{record.sps:.0f}"
        self.progress.update(self.task, completed=record.step, **self.fields)

    def on_quantities(self, record: QuantityBlock) -> None:
        self._write(record)
        self.shown = self.shown or record.quantity
        if record.quantity == self.shown:
            self.fields["logged"] = f"{record.quantity.label} {float(record.values[:, 0].mean()):.3f}"

    def on_episode(self, record: Record) -> None:
        self._write(record)

    def on_quantity_histogram(self, record: Record) -> None:
        self._write(record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agents", description=__doc__.split("\n")[0])
    parser.add_argument("algo", choices=algorithm_names())
    parser.add_argument("env", help="gymnasium id with a Box action space, e.g. Hopper-v4")
    parser.add_argument("--correction", default="none", help=f"one of: {corrections.summaries()}")
    parser.add_argument("--steps", type=parse_count, help="total environment steps, e.g. 1M (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any config field or option")
    parser.add_argument("--records", type=Path, help="append every record to this JSON-lines file")
    parser.add_argument("--checkpoint", type=Path, help="checkpoint file (written periodically and on stop)")
    args = parser.parse_args(argv)
    malformed = [item for item in args.set if "=" not in item]
    if malformed:
        print(f"error: --set takes KEY=VALUE, got {malformed[0]!r}", file=sys.stderr)
        return 2
    overrides = dict(item.split("=", 1) for item in args.set)
    try:
        config = TrainConfig(algo=args.algo, env_id=args.env, correction=args.correction, seed=args.seed)
        if args.steps is not None:
            config = dataclasses.replace(config, total_steps=args.steps)
        config = with_overrides(config, overrides).resolved()
        stop = threading.Event()
        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
        columns.append(TextColumn("return {task.fields[ret]}  SPS {task.fields[sps]}  {task.fields[logged]}"))
        with Progress(*columns) as progress:
            description = f"{config.algo} {config.env_id} {config.correction}"
            task = progress.add_task(description, total=config.total_steps, **NO_VALUES)
            sink = ProgressSink(progress, task, None)
            # Built before any file is opened: an unusable env writes nothing.
            trainer = Trainer(config, sink, checkpoint_path=args.checkpoint, should_stop=stop)
            if args.checkpoint is not None:
                args.checkpoint.parent.mkdir(parents=True, exist_ok=True)
            sink.out = args.records.open("a") if args.records else None
            # Ctrl-C asks the loop to stop between steps (it checkpoints with --checkpoint).
            previous = signal.signal(signal.SIGINT, signal_setter(stop))
            try:
                result = trainer.run()
            finally:
                signal.signal(signal.SIGINT, previous)
                if sink.out is not None:
                    sink.out.close()
    except (ConfigError, EnvError) as error:
        print(f"error: {error}", file=sys.stderr)  # one line, never wrapped
        return 2
    except OSError as error:  # a checkpoint or records file that cannot be written
        print(f"error: {error}", file=sys.stderr)
        return 1
    Console().print(f"{result.status} at step {result.step:,} after {result.wall_time:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
