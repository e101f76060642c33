"""What the check for copied seeds costs as a group grows: candidate pairs against every pair.

    python benchmarks/duplicate_check.py                       # 250, 500, 1,000 seeds in one group
    python benchmarks/duplicate_check.py --seeds 1250 --points 1001

A synthetic group of seeds (one method on one task, evaluated at the same steps), each a rising
learning curve with its own random-walk drift plus evaluation noise, and one seed in 50 a copy of
another plus white noise (what the published curves hold). Independent pairs correlate at a median
of about 0.8, more than the published curves' 0.33: a harder case for the candidate filter. Both ways
are timed on the same store in one run and must flag the same seeds; the ratio is the peer
comparison (every pair is what the check did before).
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from store import RunSpec, duplicates, open_store
from store.curve_imports import Curve, import_curves


def synthetic(seeds: int, points: int, rng: np.random.Generator) -> list[Curve]:
    steps = np.arange(points, dtype=np.int64) * 1000
    t = np.linspace(0, 1, points)
    curves: list[Curve] = []
    values: list[np.ndarray] = []
    for seed in range(seeds):
        if seed % 50 == 49:  # a copy of an earlier seed plus white noise
            curve = values[rng.integers(len(values))] + rng.normal(0, 1.4, points)
        else:
            rise = rng.uniform(500, 4000) * (1 - np.exp(-t / rng.uniform(0.05, 0.5)))
            drift = np.cumsum(rng.normal(0, 1, points))
            drift *= 0.5 * rise.std() / max(drift.std(), 1e-9)  # seeds wander apart: a drift half the rise
            curve = rise + drift + rng.normal(0, 60, points)
        values.append(curve)
        run = RunSpec("synthetic", "td3", "Hopper-v2", "none", None, seed, int(steps[-1]), {"seed": seed})
        curves.append(Curve(run, f"synthetic:{seed}", f"synthetic/{seed}", steps, curve))
    return curves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[250, 500, 1000])
    parser.add_argument("--points", type=int, default=201, help="evaluations per seed")
    args = parser.parse_args()
    table = Table(title=f"copied-seed check, one group, {args.points} evaluations per seed")
    for column in ("seeds", "pairs", "candidates", "candidate check (s)", "every pair (s)", "speed-up", "same flags"):
        table.add_column(column, justify="right")
    candidates_of = duplicates._candidates
    for count in args.seeds:
        with tempfile.TemporaryDirectory() as folder:
            db = open_store(Path(folder) / "dup.db", create=True)
            import_curves(db, synthetic(count, args.points, np.random.default_rng(count)))
            curves = {r[0]: duplicates._curve(db, r[0]) for r in db.execute("SELECT id FROM runs ORDER BY seed")}
            candidates = len(candidates_of(curves))
            start = time.perf_counter()
            fast = duplicates.find_duplicates(db)
            fast_s = time.perf_counter() - start
            duplicates._candidates = lambda curves: list(itertools.combinations(curves, 2))
            try:
                start = time.perf_counter()
                full = duplicates.find_duplicates(db)
                full_s = time.perf_counter() - start
            finally:
                duplicates._candidates = candidates_of
            db.close()
        pairs = count * (count - 1) // 2
        same = "yes" if fast == full else f"NO ({len(fast)} vs {len(full)})"
        table.add_row(f"{count:,}", f"{pairs:,}", f"{candidates:,}", f"{fast_s:.2f}", f"{full_s:.2f}",
                      f"{full_s / fast_s:.1f}×", same)  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()
