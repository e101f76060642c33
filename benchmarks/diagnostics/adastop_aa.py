"""A/A error of AdaStop's reference: the authors' package against ours, on normal data.

    python -m benchmarks.diagnostics.adastop_aa [--studies 1500] [--arms 2]

Each study draws ``--arms`` methods from one normal distribution (n = 5, K = 4, α = 0.05, B = 10,000)
and runs the whole sequential procedure; the rate of any "different" is the family-wise error, which
should be ≤ α within its Monte-Carlo error. The package (``adastop`` 0.1.3) reads its boundary from the
largest signed difference and compares |S| with it (about 2α with two arms); ours reads it from |S| and
shuffles all methods together (see docs/sequential.md).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np
from adastop import MultipleAgentsComparator
from rich.progress import track

from store.sequential import Design, decide

DESIGN = Design(alpha=0.05, interim_seeds=5, max_interims=4)


def package(values: dict[str, np.ndarray], pairs: list[tuple[int, int]], seed: int) -> bool:
    comparator = MultipleAgentsComparator(n=5, K=4, B=10_000, comparisons=np.array(pairs), alpha=0.05, seed=seed)
    k = 0
    while not comparator.is_finished:
        k += 1
        comparator.partial_compare({m: v[: 5 * k] for m, v in values.items()}, verbose=False)
    return any(d in ("larger", "smaller") for d in comparator.decisions.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=1500)
    parser.add_argument("--arms", type=int, default=2)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    names = [f"m{i}" for i in range(args.arms)]
    pairs = [(i, 0) for i in range(1, args.arms)]
    theirs = ours = 0
    for study in track(range(args.studies), description="A/A studies"):
        values = {m: rng.normal(size=20) for m in names}
        theirs += package(values, pairs, study)
        outcome = decide(values, [(names[i], names[j]) for i, j in pairs], replace(DESIGN, seed=study))
        ours += any(v in ("larger", "smaller") for v in outcome.verdicts.values())
    error = 1.96 * (0.05 * 0.95 / args.studies) ** 0.5
    print(f"{args.studies} studies, {args.arms} arms: package {theirs / args.studies:.4f}, ours"
          f" {ours / args.studies:.4f} (± {error:.4f} at 95% around α = 0.05)")  # fmt: skip


if __name__ == "__main__":
    main()
