"""Subnormal floats in Adam's state after real training, and what an Adam step costs with them.

    python -m benchmarks.diagnostics.subnormals                  # TD3 and SAC on Hopper-v4, about a minute
    python -m benchmarks.diagnostics.subnormals --algos td3 --no-sb3
    python -m benchmarks.diagnostics.subnormals --algos sac --divergence symkl --no-sb3

Trains each algorithm as ``throughput.py`` does (1,000 random steps, then 2,000
learning steps, one torch thread), with :class:`agents.optim.AdamStep`'s
flushing turned off so that the state is what plain float32 arithmetic leaves.
Then, for each optimiser, prints the share of subnormal entries in Adam's first
and second moments, and times one step on that state and its last gradients
without flushing (the peer) and with it, as a ratio; and the share left after
the flushed steps. Unless ``--no-sb3``, it also counts the subnormal first
moments in Stable-Baselines3's optimisers after the same training: plain
``torch.optim.Adam`` steps carry them along too.
"""

from __future__ import annotations

import argparse
import warnings

import torch
from rich import box
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from agents import Sink, Trainer, TrainStatsRecord
from agents.corrections.divergences import DIVERGENCES
from agents.optim import AdamStep
from benchmarks.microbench import seconds_per_call
from benchmarks.throughput import ours_config, sb3_model

warnings.filterwarnings("ignore")

TINY = torch.finfo(torch.float32).tiny
"""The smallest normal float32: anything nonzero below it in magnitude is subnormal."""


def subnormal_share(tensors: list[torch.Tensor]) -> float:
    """The share of entries, over all of ``tensors``, that are subnormal."""
    count = sum(int(((t != 0) & (t.abs() < TINY)).sum()) for t in tensors)
    return count / sum(t.numel() for t in tensors)


def moments(optimizer: torch.optim.Optimizer) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(first moments, second moments) of an Adam optimiser's state."""
    states = list(optimizer.state.values())
    return [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]


class _Progress(Sink):
    def __init__(self, progress: Progress, task: int) -> None:
        self.progress, self.task = progress, task

    def on_train_stats(self, record: TrainStatsRecord) -> None:
        self.progress.update(self.task, completed=record.step)


def trained_steps(algo: str, env_id: str, start: int, steps: int, divergence: str | None) -> dict[str, AdamStep]:
    """The agent's Adam steps (by name) after training without flushing (with ``acoffpoc`` given a divergence)."""
    if divergence is None:
        config = ours_config(algo, env_id, start, steps)
    else:
        config = ours_config(algo, env_id, start, steps, "acoffpoc", divergence)
    with Progress(transient=True) as progress:
        task = progress.add_task(f"training {algo.upper()} on {env_id}", total=start + steps)
        trainer = Trainer(config, _Progress(progress, task))
        names = {id(optimizer): name for name, optimizer in trainer.agent.optimizers().items()}
        adam_steps = {
            names[id(step.optimizer)]: step for step in vars(trainer.agent).values() if isinstance(step, AdamStep)
        }
        for step in adam_steps.values():
            step.flush_subnormals = False
        trainer.run()
    return adam_steps


def sb3_first_moment_shares(algo: str, env_id: str, start: int, steps: int, console: Console) -> dict[str, float]:
    """The subnormal share of each of Stable-Baselines3's Adam first moments after the same training."""
    with console.status(f"training Stable-Baselines3's {algo.upper()} on {env_id}"):
        model = sb3_model(algo, env_id, start)
        model.learn(steps, reset_num_timesteps=False)
    return {name: subnormal_share(moments(getattr(model, name).optimizer)[0]) for name in ("actor", "critic")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="Hopper-v4")
    parser.add_argument("--start", type=int, default=1000, help="random start steps")
    parser.add_argument("--steps", type=int, default=2000, help="learning steps")
    parser.add_argument("--algos", default="td3,sac")
    parser.add_argument("--divergence", choices=sorted(DIVERGENCES), help="train with acoffpoc (default: none)")
    parser.add_argument("--no-sb3", action="store_true", help="skip counting Stable-Baselines3's subnormals")
    args = parser.parse_args()
    torch.set_num_threads(1)
    console = Console()

    trained = f"{args.start:,} random and {args.steps:,} learning steps on {args.env}"
    correction = f", acoffpoc {args.divergence}" if args.divergence else ""
    title = f"Adam's state after {trained}{correction}"
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, collapse_padding=True)
    for column in ("algo", "optimiser", "params", "m", "SB3 m", "v", "step, µs", "flushed, µs", "ratio"):
        table.add_column(column, justify="left" if column in ("algo", "optimiser") else "right", no_wrap=True)
    left_after = []
    for algo in args.algos.split(","):
        sb3_shares = {} if args.no_sb3 else sb3_first_moment_shares(algo, args.env, args.start, args.steps, console)
        for name, step in trained_steps(algo, args.env, args.start, args.steps, args.divergence).items():
            first, second = moments(step.optimizer)
            shares = subnormal_share(first), subnormal_share(second)
            plain = seconds_per_call(step, repeats=5, calls=20)  # the state stays subnormal: nothing flushes it
            step.flush_subnormals = True
            flushed = seconds_per_call(step, repeats=5, calls=20)
            left_after.append(subnormal_share(moments(step.optimizer)[0]))
            table.add_row(
                algo.upper(),
                name,
                f"{sum(p.numel() for p in step.params):,}",
                f"{shares[0]:.1%}",
                f"{sb3_shares[name]:.1%}" if name in sb3_shares else "",
                f"{shares[1]:.1%}",
                f"{plain * 1e6:.0f}",
                f"{flushed * 1e6:.0f}",
                f"{plain / flushed:.2f}",
            )
    console.print(table)
    console.print(
        "m, v: the share of Adam's first and second moments that is subnormal (nonzero, below 1.2e-38); "
        "SB3 m: the same in Stable-Baselines3's Adam after the same training; "
        "step: one step on that state without flushing (the peer); flushed: with AdamStep's flushing; "
        f"ratio: step / flushed. After the flushed steps, {max(left_after):.1%} of any first moment was subnormal."
    )


if __name__ == "__main__":
    main()
