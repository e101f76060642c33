"""How big the store gets: one 1M-step run's records written through the real writer.

    python benchmarks/store_size.py            # TD3 (one λ per update) and SAC (8 λ statistics per update)

Writes what a 1,000,000-step Hopper run reports with the defaults: an evaluation
every 1,000 steps (10 episodes), training statistics every 1,000 steps, a λ
histogram per evaluation, every update's weight (λ, or SAC's mean/min/max/5
quantiles of the λ_i) and 10,000 training episodes. The weights are uniform
random (the worst case for compression). Prints the file size against the
25 MB per run target.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import track
from rich.table import Table

from store import RunSpec, open_store
from store.runs import create_runs
from store.writer import RunWriter

STEPS, START, EVERY, BLOCK, EPISODES = 1_000_000, 25_000, 1_000, 1_000, 10_000
TARGET_MB = 25.0


def write_run(path: Path, columns: tuple[str, ...]) -> float:
    db = open_store(path, create=True)
    spec = RunSpec("size", "td3", "Hopper-v4", "acoffpoc", "jsd", 0, STEPS, {"total_steps": STEPS})
    (run_id,) = create_runs(db, [spec])
    writer = RunWriter(db, run_id, flush_interval=3600)
    rng = np.random.default_rng(0)
    episode_every = STEPS // EPISODES
    for step in track(range(0, STEPS + 1, EVERY), description=f"{len(columns)} weight column(s)", transient=True):
        returns = rng.normal(3000, 300, 10)
        writer.add_eval(step, step / 120, float(returns.mean()), float(returns.std()), returns.tolist(), [1000] * 10)
        if step == 0:
            writer.flush(step, 0)
            continue
        for end in range(step - EVERY + episode_every, step + 1, episode_every):
            writer.add_episode(end, end // episode_every, float(rng.normal(3000, 300)), episode_every)
        writer.add_train_stats(step, max(0, step - START), 1.0, -300.0, 300.0, 0.1, 120.0)
        if step > START:
            updates = np.arange(step - EVERY - START + 1, step - START + 1)
            values = rng.uniform(0, 1, (BLOCK, len(columns))).astype(np.float32)
            writer.add_weights(columns, updates, updates + START, values)
            writer.add_histogram(step, rng.integers(0, 10_000, 50))
        writer.flush(step, max(0, step - START))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return path.stat().st_size / 1e6


def main() -> None:
    console = Console()
    table = Table(title="store size of one 1,000,000-step run")
    table.add_column("weights per update")
    table.add_column("size (MB)", justify="right")
    table.add_column("of the 25 MB target", justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        for label, columns in [
            ("TD3/DDPG: λ", ("lambda",)),
            ("SAC: 8 statistics of the λ_i", ("mean", "min", "max", "p10", "p25", "p50", "p75", "p90")),
        ]:
            size = write_run(Path(tmp) / f"{len(columns)}.db", columns)
            table.add_row(label, f"{size:.1f}", f"{size / TARGET_MB:.2f}")
    console.print(table)


if __name__ == "__main__":
    main()
