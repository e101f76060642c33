"""What the store costs a training run: the same run with and without writing into SQLite.

    python benchmarks/store_overhead.py                   # TD3 + AC-Off-POC on Hopper-v4, 3 repeats
    python benchmarks/store_overhead.py --algo sac --steps 3000 --repeats 5

"without" is the bare Trainer (no sink); "with" is exactly what a worker runs:
the Trainer wired to a real SQLite file through offpoc_tui.runtime.lifecycle.StoreBinding
(records buffered, one transaction per second, heartbeat every step check).
Each case runs in a fresh subprocess, cases alternate across repeats, and the
medians are compared. Because end-to-end SPS on a shared VM is noisy (about
±5-10%), the "with" case also times every call into the store in-process and
reports that time as a share of the run: the precise figure for the ≤ 2% target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agents import plugins

warnings.filterwarnings("ignore")


class _Timed:
    """Wraps an object's methods, summing the seconds spent in them."""

    def __init__(self, target: Any, names: list[str]) -> None:
        self.seconds = 0.0
        for name in names:
            setattr(target, name, self._wrap(getattr(target, name)))

    def _wrap(self, method: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


def one(case: str, algo: str, env_id: str, start: int, steps: int) -> dict[str, float]:
    from agents import TrainConfig, Trainer
    from offpoc_tui.runtime.lifecycle import StoreBinding
    from store import RunSpec, open_store
    from store.runs import create_runs
    from store.writer import RunWriter

    config = TrainConfig(
        algo=algo, env_id=env_id, correction="acoffpoc", start_steps=start, correction_start=start,
        total_steps=start + steps, eval_freq=1000, eval_episodes=2, seed=0,
    )  # fmt: skip
    if case == "without":
        trainer = Trainer(config)
        timed = None
    else:
        db = open_store(Path(tempfile.mkdtemp()) / "bench.db", create=True)
        resolved = config.resolved()
        spec = RunSpec("bench", algo, env_id, "acoffpoc", "jsd", 0, resolved.total_steps, resolved.to_dict())
        (run_id,) = create_runs(db, [spec])
        writer = RunWriter(db, run_id)
        timed = _Timed(
            writer, ["add_eval", "add_episode", "add_train_stats", "add_quantities", "add_histogram", "tick"]
        )
        binding = StoreBinding(writer, threading.Event())
        trainer = Trainer(config, binding.sink, should_stop=binding.should_stop)
        binding.trainer = trainer
    begin = time.perf_counter()
    result = trainer.run()
    seconds = time.perf_counter() - begin
    return {"sps": result.step / seconds, "store_share": (timed.seconds / seconds) if timed else 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algo", default="td3", choices=plugins.algorithm_names())
    parser.add_argument("--env", default="Hopper-v4")
    parser.add_argument("--start", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=5000, help="steps after the start phase")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.algo, args.env, args.start, args.steps)))
        return
    console = Console()
    results: dict[str, list[dict[str, float]]] = {"without": [], "with": []}
    with console.status("measuring") as status:
        for repeat in range(args.repeats):
            for case in ("without", "with"):
                status.update(f"repeat {repeat + 1}/{args.repeats}: {case} the store")
                out = subprocess.run(
                    [sys.executable, __file__, "--one", case, "--algo", args.algo, "--env", args.env,
                     "--start", str(args.start), "--steps", str(args.steps)],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                results[case].append(json.loads(out.stdout.strip().splitlines()[-1]))
    without = statistics.median(r["sps"] for r in results["without"])
    with_store = statistics.median(r["sps"] for r in results["with"])
    share = statistics.median(r["store_share"] for r in results["with"])
    table = Table(
        title=f"{args.algo} + AC-Off-POC on {args.env}, {args.start + args.steps:,} steps, median of {args.repeats}"
    )
    table.add_column("case")
    table.add_column("SPS (steps/s)", justify="right")
    table.add_column("runs (steps/s)", justify="right")
    table.add_row("without the store", f"{without:.1f}", " ".join(f"{r['sps']:.1f}" for r in results["without"]))
    table.add_row("with the store", f"{with_store:.1f}", " ".join(f"{r['sps']:.1f}" for r in results["with"]))
    console.print(table)
    console.print(f"with/without SPS ratio: {with_store / without:.3f}  (end to end, includes run-to-run noise)")
    console.print(f"time inside store calls: {100 * share:.2f}% of the run  (target ≤ 2%)")


if __name__ == "__main__":
    main()
