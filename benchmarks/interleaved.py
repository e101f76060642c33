"""Throughput ratios from runs interleaved in one process, chunk by chunk.

    python benchmarks/interleaved.py                    # TD3 and SAC on Hopper-v4, about 5 minutes
    python benchmarks/interleaved.py --algos sac --no-sb3 --steps 4000

``throughput.py`` runs each case in its own process, one after another; on this
shared VM the speed of repeats of one case differs by ±10% and more, so
overheads of a few percent come out ±10 points. Here every case of an algorithm
(Stable-Baselines3, ours ``none``, ours ``acoffpoc`` with each divergence) lives
in one process: each runs its random phase and one untimed turn, then they take
turns, ``--chunk`` learning steps at a time, in an order rotated every round. Each round gives
every case the same minute of the machine, so the round's ratios (ours / SB3,
acoffpoc / none) cancel most of the drift. The ratios reported are medians over
rounds, with the range, and the ratio of total times.

Same hyperparameters and one torch thread as ``throughput.py``. Stable-Baselines3
continues with ``learn(chunk, reset_num_timesteps=False)``; its per-call setup is
counted in its time. The objects the runs hold after their random phases are
frozen out of Python's cyclic garbage collector (``gc.freeze``), so a
collection one run triggers does not walk the other runs' objects.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import warnings
from collections.abc import Callable

from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from throughput import LABELS, ours_config, paired_ratios, sb3_model

from agents import Sink, Trainer
from agents.corrections.divergences import DIVERGENCES

warnings.filterwarnings("ignore")


class OursChunks:
    """One of our runs, advanced ``chunk`` steps per call through the cooperative stop."""

    def __init__(self, algo: str, env_id: str, start: int, steps: int, correction: str, divergence: str) -> None:
        self.target = start
        # One step past the last turn: every turn ends on the stop, never on the end-of-run evaluation.
        config = ours_config(algo, env_id, start, steps + 1, correction, divergence)
        self.trainer = Trainer(config, Sink(), should_stop=lambda: self.trainer.step >= self.target)
        self.trainer.run()  # the random phase (and the first evaluation), untimed

    def __call__(self, chunk: int) -> None:
        self.target += chunk
        self.trainer.run()


class SB3Chunks:
    """Stable-Baselines3, continued ``chunk`` steps per call."""

    def __init__(self, algo: str, env_id: str, start: int) -> None:
        self.model = sb3_model(algo, env_id, start)

    def __call__(self, chunk: int) -> None:
        self.model.learn(chunk, reset_num_timesteps=False)


def ratio_summary(times: dict[str, list[float]], case: str, peer: str) -> tuple[float, float, float, float]:
    """Time of ``case`` over time of ``peer``: median over rounds, min, max, and the ratio of totals."""
    ratios = paired_ratios(times[case], times[peer])
    return statistics.median(ratios), min(ratios), max(ratios), sum(times[case]) / sum(times[peer])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="Hopper-v4")
    parser.add_argument("--algos", default="td3,sac")
    parser.add_argument("--start", type=int, default=1000, help="random start steps before timing")
    parser.add_argument("--steps", type=int, default=2000, help="timed learning steps per case")
    parser.add_argument("--chunk", type=int, default=200, help="learning steps per turn")
    parser.add_argument("--no-sb3", action="store_true", help="skip the Stable-Baselines3 peer")
    args = parser.parse_args()
    if args.steps % args.chunk:
        parser.error("--steps must be a multiple of --chunk")

    console = Console(width=140)
    table = Table(title=f"Interleaved on {args.env}: {args.chunk}-step turns, {args.steps:,} learning steps per case")
    for column in ("algo", "case", "SPS (all rounds)", "vs", "time ratio, median over rounds (range)", "of totals"):
        table.add_column(column, justify="left" if column in ("algo", "case", "vs") else "right")
    rounds = args.steps // args.chunk
    for algo in args.algos.split(","):
        cases: dict[str, Callable[[int], None]] = {}
        with console.status(f"{algo.upper()}: building the runs, their random phases and a first turn"):
            if not args.no_sb3:
                cases["sb3"] = SB3Chunks(algo, args.env, args.start)
            run_steps = args.chunk + args.steps  # the untimed first turn, then the timed ones
            cases["none"] = OursChunks(algo, args.env, args.start, run_steps, "none", "jsd")
            for divergence in DIVERGENCES:
                cases[divergence] = OursChunks(algo, args.env, args.start, run_steps, "acoffpoc", divergence)
            # One untimed turn each: a run's first updates (optimiser state, first allocations) and
            # the process's first matrix products cost more, and would fall on round 0's order.
            for run in cases.values():
                run(args.chunk)
        names = list(cases)
        # Freeze what the runs hold so far: Python's cyclic collector then walks only what each turn
        # allocates, not every run's objects on behalf of whichever turn triggers a collection.
        gc.collect()
        gc.freeze()
        times: dict[str, list[float]] = {name: [] for name in names}
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task(f"{algo.upper()} rounds", total=rounds)
            for r in range(rounds):
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    began = time.perf_counter()
                    cases[name](args.chunk)
                    times[name].append(time.perf_counter() - began)
                progress.advance(task)
        gc.unfreeze()  # this algorithm's runs may go now
        del cases

        for name in names:
            sps = f"{args.steps / sum(times[name]):.1f}"
            label = LABELS.get(name, f"ours acoffpoc {name}")
            if name == "none" and "sb3" in times:  # speed-up: SB3's time for the same steps over ours
                median, low, high, total = ratio_summary(times, "sb3", name)
                table.add_row(
                    algo.upper(), label, sps, "SB3", f"{median:.2f} ({low:.2f} to {high:.2f})", f"{total:.2f}"
                )
            elif name in DIVERGENCES:  # overhead: acoffpoc's time over none's, minus 1
                median, low, high, total = (100 * (r - 1) for r in ratio_summary(times, name, "none"))
                spread = f"{median:+.1f}% ({low:+.1f}% to {high:+.1f}%)"
                table.add_row(algo.upper(), label, sps, "none", spread, f"{total:+.1f}%")
            else:
                table.add_row(algo.upper(), label, sps, "", "", "")
    console.print(table)
    console.print(
        "vs SB3: SB3's time for the same steps over ours (ours / SB3 in SPS); vs none: acoffpoc's time / none's − 1"
    )


if __name__ == "__main__":
    main()
