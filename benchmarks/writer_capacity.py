"""How many concurrent Ray runs one store writer serves: batches per second through the writer actor.

    python benchmarks/writer_capacity.py [--runs 200] [--producers 2] [--seconds 10]

Simulates ``--runs`` concurrent runs from ``--producers`` Ray tasks (on this machine's cores).
Each batch is what a TD3 + AC-Off-POC run at 200 steps/s ships after one second: a block of 200 λ
values (16-bit, as stored), a training episode, every fifth batch an evaluation of 10 episodes,
and the run's progress and heartbeat. Every producer sends its runs' batches one at a time and
waits for each reply (the workers' back-pressure). The peer, in the same run: the same batches
committed by one process straight into SQLite (:func:`store.links.commit`), the writer's floor.
Runs ship one batch a second, so batches per second is the number of runs one head serves.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from store import open_store
from store.codec import encode_episodes, encode_values
from store.links import Rows, commit
from store.runs import RunSpec, create_runs

STEPS_PER_BATCH = 200


def batch(run_id: int, index: int) -> tuple[Rows, dict[str, Any]]:
    """The rows a run ships after its ``index``-th second of training."""
    rng = np.random.default_rng(index)
    first = 1 + index * STEPS_PER_BATCH
    values = rng.uniform(0.4, 1.0, (STEPS_PER_BATCH, 1))
    rows: Rows = {
        "evaluations": [],
        "episodes": [(run_id, first + 100, index, float(rng.normal(1000, 50)), 100)],
        "train": [],
        "quantities": [(run_id, "lambda", "λ", 0.0, 1.0)] if index == 0 else [],
        "quantity_blocks": [
            (run_id, "lambda", first, first, STEPS_PER_BATCH, "lambda", float(values.mean()), encode_values(values))
        ],
        "histograms": [],
    }
    if index % 5 == 4:
        returns = rng.normal(1000, 50, 10).tolist()
        rows["evaluations"].append(
            (run_id, first + STEPS_PER_BATCH - 1, time.time(), float(np.mean(returns)), 50.0, 1000.0,
             *encode_episodes(returns, [1000] * 10))
        )  # fmt: skip
    progress = {"steps": first + STEPS_PER_BATCH - 1, "updates": first, "heartbeat": time.time()}
    return rows, progress


def fresh_store(path: Path, runs: int) -> list[int]:
    db = open_store(path, create=True)
    spec = RunSpec("capacity", "td3", "Hopper-v4", "acoffpoc", "jsd", 0, 1_000_000, {})
    ids = create_runs(db, [spec] * runs)
    db.execute("UPDATE runs SET status = 'running'")
    db.conn.commit()
    db.close()
    return ids


def direct(path: Path, ids: list[int], seconds: float) -> float:
    """Batches per second, committed by this process straight into the file."""
    db = open_store(path)
    sent, index, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for run_id in ids:
            commit(db, run_id, *batch(run_id, index))
            sent += 1
        index += 1
    return sent / (time.perf_counter() - start)


def produce(writer: Any, ids: list[int], seconds: float) -> int:
    import ray

    sent, index, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for run_id in ids:
            ray.get(writer.commit.remote(run_id, *batch(run_id, index)))
            sent += 1
        index += 1
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    os.environ |= {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}
    os.environ.setdefault("RAY_TMPDIR", f"/tmp/offpoc-ray-{os.getpid()}")
    import ray

    from offpoc_tui.runtime.ray_backend import StoreWriter

    with tempfile.TemporaryDirectory(prefix="offpoc-writer-") as tmp:
        peer = direct(Path(tmp) / "direct.db", fresh_store(Path(tmp) / "direct.db", args.runs), args.seconds)
        ids = fresh_store(Path(tmp) / "ray.db", args.runs)
        ray.init(num_cpus=args.producers, include_dashboard=False, logging_level="WARNING")
        try:
            writer = ray.remote(StoreWriter).options(num_cpus=0).remote(str(Path(tmp) / "ray.db"))
            ray.get(writer.open.remote(ids[0]))  # started and connected
            task = ray.remote(produce).options(num_cpus=1)
            shares = [ids[i :: args.producers] for i in range(args.producers)]
            ray.get([task.remote(writer, [ids[0]], 1.0) for _ in range(args.producers)])  # workers warm
            start = time.perf_counter()
            sent = sum(ray.get([task.remote(writer, share, args.seconds) for share in shares]))
            through_ray = sent / (time.perf_counter() - start)
        finally:
            ray.shutdown()
    print(f"{args.runs} simulated runs, {args.producers} producers, {args.seconds:.0f} s each")
    print(f"direct SQLite commits (one process): {peer:,.0f} batches/s")
    print(f"through the Ray writer actor:        {through_ray:,.0f} batches/s ({through_ray / peer:.2f} of direct)")
    print(f"at one batch per run per second, one head serves about {through_ray:,.0f} concurrent runs")


if __name__ == "__main__":
    main()
