"""What a sequential decision costs a dashboard poll: ours against the authors' `adastop` package.

    python benchmarks/decision_cost.py [--repeats 5]

10 methods × 20 seeds (n = 5, K = 4, B = 10,000 permutations), every method against the first (9
comparisons) and all pairs (45). Ours (``store.sequential.decide``) recomputes all four interims from
the seeds' values, cold; the dashboard then remembers the outcome per input (``store.studies``), so a
poll between two interims costs a cache lookup, also timed. The peer is ``adastop`` 0.1.3's
``MultipleAgentsComparator`` run interim by interim on the same values (its Python loop over
permutations; 9 comparisons only, 45 takes minutes). Medians of ``--repeats`` runs, one process.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from rich.console import Console
from rich.table import Table

from store.sequential import Design, decide
from store.studies import _decide

DESIGN = Design(alpha=0.05, interim_seeds=5, max_interims=4, permutations=10_000)


def median_seconds(call: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def theirs(values: dict[str, np.ndarray], comparisons: list[tuple[int, int]]) -> None:
    from adastop import MultipleAgentsComparator

    comparator = MultipleAgentsComparator(n=5, K=4, B=10_000, comparisons=np.array(comparisons), alpha=0.05, seed=0)
    for k in range(1, 5):
        if comparator.is_finished:
            break
        comparator.partial_compare({m: v[: 5 * k] for m, v in values.items()}, verbose=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    values = {f"m{i}": rng.normal(0.05 * i, 1.0, 20) for i in range(10)}  # small effects: all four interims run
    names = list(values)
    against_first = [(m, names[0]) for m in names[1:]]
    all_pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    key = tuple((m, tuple(v)) for m, v in values.items())

    table = Table(title="One decision, 10 methods × 20 seeds, n = 5, K = 4, B = 10,000 (median seconds)")
    for column in ("comparisons", "ours, cold", "ours, remembered", "adastop 0.1.3", "adastop / ours"):
        table.add_column(column, justify="right")
    for label, pairs in (("9 (vs the first)", against_first), ("45 (all pairs)", all_pairs)):
        cold = median_seconds(lambda p=pairs: decide(values, p, DESIGN), args.repeats)
        _decide(key, tuple(pairs), DESIGN)
        warm = median_seconds(lambda p=pairs: _decide(key, tuple(p), DESIGN), args.repeats)
        if len(pairs) == 9:
            index = [(names.index(a), names.index(b)) for a, b in pairs]
            peer = median_seconds(lambda i=index: theirs(values, i), max(1, args.repeats // 2))
            peer_cells = [f"{peer:.3f}", f"{peer / cold:.0f}×"]
        else:
            peer_cells = ["–", "–"]
        table.add_row(label, f"{cold:.3f}", f"{warm * 1e6:.1f} µs", *peer_cells)
    Console().print(table)


if __name__ == "__main__":
    main()
