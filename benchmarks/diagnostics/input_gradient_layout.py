"""Whole updates with narrow input gradients plain against transposed: does the layout matter?

    python -m benchmarks.diagnostics.input_gradient_layout            # TD3 and SAC, 10 rounds: about a minute

The fast backend computes narrow input gradients g·W (a critic's action gradient, (256, 256) @
(256, 3) on Hopper) as one matrix product; ``agents.backprop.TRANSPOSE_NARROW_INPUT_GRADIENT``
picks its layout. This times whole updates (the actor stepping every second update, as TD3 does)
with each layout in turn on the same agent, one torch thread, and prints the median time per
update of each and the median of the per-round ratios, so a choice is made on what a training
step costs rather than on one product alone.
"""

from __future__ import annotations

import argparse
import statistics
from functools import partial

import torch
from rich.console import Console
from rich.table import Table

from agents import backprop
from benchmarks.microbench import cpu_vendor, make_agent, random_batch, seconds_per_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algos", default="td3,sac")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    table = Table(title="Whole updates: narrow input gradients transposed against plain (1 torch thread)")
    for column in ("algo", "transposed, ms/update", "plain, ms/update", "plain / transposed, per round (median)"):
        table.add_column(column, justify="left" if column == "algo" else "right")
    original = backprop.TRANSPOSE_NARROW_INPUT_GRADIENT
    try:
        for algo in args.algos.split(","):
            agent, batch = make_agent(algo), random_batch()
            update = partial(agent.update, batch)
            times: dict[bool, list[float]] = {True: [], False: []}
            for round_ in range(args.rounds):
                for transposed in (True, False) if round_ % 2 == 0 else (False, True):
                    backprop.TRANSPOSE_NARROW_INPUT_GRADIENT = transposed
                    times[transposed].append(seconds_per_call(update, repeats=3, calls=20))
            ratios = [p / t for p, t in zip(times[False], times[True], strict=True)]
            table.add_row(
                algo.upper(),
                f"{statistics.median(times[True]) * 1e3:.3f}",
                f"{statistics.median(times[False]) * 1e3:.3f}",
                f"{statistics.median(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f})",
            )
    finally:
        backprop.TRANSPOSE_NARROW_INPUT_GRADIENT = original
    Console().print(table)
    print(f"CPU {cpu_vendor() or 'unknown'}; this machine's default: transposed = {original}")


if __name__ == "__main__":
    main()
