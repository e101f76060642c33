"""How big the store gets: one 1M-step run's records written through the real writer.

    python benchmarks/store_size.py            # DDPG, TD3 and SAC, each with AC-Off-POC

Writes what a 1,000,000-step Hopper run reports with the defaults: an evaluation
every 1,000 steps (10 episodes), training statistics every 1,000 steps, 10,000
training episodes, and every logged quantity as its algorithm logs it, each with a
histogram per evaluation: λ at every update (SAC: the mean, min, max and 5 quantiles
of the λ_i, and their ESS), DDPG's and TD3's share of π(s) at the bounds at every
actor update (TD3: every other update), DDPG's decay share at every update, and every
algorithm's share of evaluation actions at the bounds, one value per evaluation. The
values are uniform random (the worst case for compression). Prints the file size
against the 25 MB per run target.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import track
from rich.table import Table

from agents.algorithms.base import DECAY_SHARE
from agents.algorithms.deterministic import AT_BOUND
from agents.evaluation import EVAL_AT_BOUND
from agents.quantities import LAMBDA, Quantity
from store import RunSpec, open_store
from store.runs import create_runs
from store.writer import RunWriter

STEPS, START, EVERY, BLOCK, EPISODES = 1_000_000, 25_000, 1_000, 1_000, 10_000
TARGET_MB = 25.0
SAC_STATISTICS = ("mean", "min", "max", "p10", "p25", "p50", "p75", "p90")
PER_UPDATE: dict[str, list[tuple[Quantity, tuple[str, ...], int]]] = {
    "ddpg": [(LAMBDA, ("lambda",), 1), (AT_BOUND, ("at_bound",), 1), (DECAY_SHARE, ("decay_share",), 1)],
    "td3": [(LAMBDA, ("lambda",), 1), (AT_BOUND, ("at_bound",), 2)],
    "sac": [(LAMBDA, SAC_STATISTICS, 1), (Quantity("lambda_ess", "ESS(λ)", 0.0, 256.0), ("lambda_ess",), 1)],
}
"""Each algorithm's per-update quantities under AC-Off-POC: (quantity, columns, logged every n-th update)."""


def write_run(path: Path, algo: str) -> float:
    db = open_store(path, create=True)
    spec = RunSpec("size", algo, "Hopper-v4", "acoffpoc", "jsd", 0, STEPS, {"total_steps": STEPS})
    (run_id,) = create_runs(db, [spec])
    writer = RunWriter(db, run_id, flush_interval=3600)
    rng = np.random.default_rng(0)
    episode_every = STEPS // EPISODES
    for step in track(range(0, STEPS + 1, EVERY), description=algo, transient=True):
        returns = rng.normal(3000, 300, 10)
        writer.add_eval(step, step / 120, float(returns.mean()), float(returns.std()), returns.tolist(), [1000] * 10)
        writer.add_quantities(("eval_at_bound",), np.array([max(0, step - START)]), np.array([step]),
                           rng.uniform(0, 1, (1, 1)).astype(np.float32), EVAL_AT_BOUND)  # fmt: skip
        writer.add_histogram(step, rng.integers(0, 1_000, 50), EVAL_AT_BOUND)
        if step == 0:
            writer.flush(step, 0)
            continue
        for end in range(step - EVERY + episode_every, step + 1, episode_every):
            writer.add_episode(end, end // episode_every, float(rng.normal(3000, 300)), episode_every)
        writer.add_train_stats(step, max(0, step - START), 1.0, -300.0, 300.0, 0.1, 120.0)
        if step > START:
            for quantity, columns, every in PER_UPDATE[algo]:
                updates = np.arange(step - EVERY - START + every, step - START + 1, every)
                values = rng.uniform(quantity.low, quantity.high, (len(updates), len(columns))).astype(np.float32)
                writer.add_quantities(columns, updates, updates + START, values, quantity)
                writer.add_histogram(step, rng.integers(0, 10_000, 50), quantity)
        writer.flush(step, max(0, step - START))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return path.stat().st_size / 1e6


def main() -> None:
    console = Console()
    table = Table(title="store size of one 1,000,000-step run")
    table.add_column("quantities logged")
    table.add_column("size (MB)", justify="right")
    table.add_column("of the 25 MB target", justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        for algo in PER_UPDATE:
            size = write_run(Path(tmp) / f"{algo}.db", algo)
            logged = ", ".join(q.name for q, _, _ in PER_UPDATE[algo])
            table.add_row(f"{algo}: {logged}, eval_at_bound", f"{size:.1f}", f"{size / TARGET_MB:.2f}")
    console.print(table)


if __name__ == "__main__":
    main()
