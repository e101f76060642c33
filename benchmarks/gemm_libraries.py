"""The update with its wide products in oneDNN against the same update in MKL, in one process (agents/gemm.py).

    python benchmarks/gemm_libraries.py              # TD3 and SAC on Hopper's sizes, about a minute
    python benchmarks/gemm_libraries.py --rounds 30

One torch thread. Prints one thread's 256×256×256 float32 product rate through each library, then, for each
algorithm, the time of an update (fresh agent, batch 256) with ``agents.gemm.USE_ONEDNN`` on and off, the two
alternating round by round (each round times ``--updates`` updates of each, on the same agent and batch): the
median of each, and the median of the per-round ratios MKL / oneDNN (above 1: oneDNN is faster).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from agents import gemm

try:
    from benchmarks.breakdown import matmul_rates, rates_line
    from benchmarks.microbench import make_agent, random_batch
except ModuleNotFoundError:  # run as a script (the README's way): benchmarks/ itself is on the path
    from breakdown import matmul_rates, rates_line  # type: ignore[no-redef,import-not-found]
    from microbench import make_agent, random_batch  # type: ignore[no-redef,import-not-found]


def rounds_of(algo: str, rounds: int, updates: int, progress: Progress) -> tuple[list[float], list[float]]:
    """Seconds per update with oneDNN and with MKL, one of each per round."""
    agent, batch = make_agent(algo), random_batch()
    times: dict[bool, list[float]] = {True: [], False: []}
    task = progress.add_task(algo, total=rounds)
    for _ in range(2):  # warm up both (oneDNN builds a kernel per new shape)
        for use in (True, False):
            gemm.USE_ONEDNN = use
            agent.update(batch)
    for _ in range(rounds):
        for use in (True, False):
            gemm.USE_ONEDNN = use
            start = time.perf_counter()
            for _ in range(updates):
                agent.update(batch)
            times[use].append((time.perf_counter() - start) / updates)
        progress.advance(task)
    return times[True], times[False]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--updates", type=int, default=20, help="updates per library per round")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if gemm._ONEDNN is None:
        raise SystemExit("this torch has no usable oneDNN linear operator: nothing to compare")
    console = Console()
    chosen = gemm.USE_ONEDNN
    table = Table("algo", "oneDNN, ms / update", "MKL, ms / update", "MKL / oneDNN, per round: median (range)")
    try:
        with Progress(console=console) as progress:
            for algo in ("td3", "sac"):
                onednn, mkl = rounds_of(algo, args.rounds, args.updates, progress)
                ratios = [m / o for m, o in zip(mkl, onednn, strict=True)]
                table.add_row(
                    algo.upper(),
                    f"{statistics.median(onednn) * 1e3:.2f}",
                    f"{statistics.median(mkl) * 1e3:.2f}",
                    f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})",
                )
    finally:
        gemm.USE_ONEDNN = chosen
    console.print(rates_line(matmul_rates()))
    console.print(table)


if __name__ == "__main__":
    main()
