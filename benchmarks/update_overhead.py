"""Each correction's update time against its baseline's, interleaved in one process (about 2 minutes).

    python benchmarks/update_overhead.py [--algos td3,sac] [--rounds 15] [--calls 40]
    python benchmarks/update_overhead.py --corrections geoff-pac --options geoff_m2=one

Every case is a real run of Hopper-v4 trained 3,000 steps (1,000 random), so its replay buffer,
its correction's state (Geoff-PAC's density ratio and per-slot cache, IPG's window) and its
recorders are what a run has. Then one update of the training loop, ``Trainer._update`` (sample a
batch, the correction's weights and own networks, the critic and actor steps, the logged
quantities), is timed ``calls`` times per case, the cases taking turns for ``rounds`` rounds, so a
loaded machine slows every case alike; the ratio of medians is the overhead. One torch thread.
Targets: RIS-Off-PAC, IPG, ACE ≤ +15%, Geoff-PAC ≤ +50%.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from agents import TrainConfig, Trainer, corrections
from agents.config_text import with_overrides

COMPETITORS = tuple(c for c in corrections.names() if c not in ("none", "acoffpoc"))
"""Every registered correction but the baseline and AC-Off-POC: the paper's four, and any plug-in."""


def trained(algo: str, correction: str, options: dict[str, str]) -> Trainer:
    config = TrainConfig.make(algo=algo, env_id="Hopper-v4", correction=correction, total_steps=3000, start_steps=1000,
                         correction_start=1000, eval_freq=3000, eval_episodes=1, stats_every=1000)  # fmt: skip
    trainer = Trainer(with_overrides(config, options if correction != "none" else {}))
    trainer.run()
    return trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", default="td3,sac")
    parser.add_argument("--corrections", default=",".join(COMPETITORS))
    parser.add_argument("--options", action="append", default=[], metavar="FIELD=VALUE", help="for the corrections")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=40, help="updates per case per round")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    options = dict(item.split("=", 1) for item in args.options)
    algos, corrections = args.algos.split(","), ["none", *args.corrections.split(",")]
    cases = [(algo, correction) for algo in algos for correction in corrections]
    seconds: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
    with Progress() as progress:
        task = progress.add_task("training the cases", total=len(cases) * (1 + args.rounds))
        trainers = {}
        for case in cases:
            trainers[case] = trained(*case, options)
            progress.advance(task)
        progress.update(task, description="timing updates")
        for _ in range(args.rounds):
            for case in cases:
                trainer = trainers[case]
                start = time.perf_counter()
                for _ in range(args.calls):
                    trainer._update()
                seconds[case].append((time.perf_counter() - start) / args.calls)
                progress.advance(task)
    table = Table(title="Update time on Hopper-v4 (sample, weights, critic and actor steps, logging), 1 torch thread")
    for column in ("algo", "correction", "backend", "ms per update (median)", "vs none"):
        table.add_column(column, justify="left" if column in ("algo", "correction", "backend") else "right")
    for algo, correction in cases:
        median = statistics.median(seconds[(algo, correction)])
        base = statistics.median(seconds[(algo, "none")])
        ratio = "" if correction == "none" else f"{(median / base - 1) * 100:+.1f}%"
        backend = trainers[(algo, correction)].config.backend
        table.add_row(algo.upper(), correction, backend, f"{median * 1e3:.2f}", ratio)
    Console(width=120).print(table)
    if options:
        print(f"corrections' options: {' '.join(args.options)}")


if __name__ == "__main__":
    main()
