"""Issue 66: does another library's TD3 get stuck on Hopper-v4's ~300 plateau as often as ours?

Two of our four TD3 seeds on Hopper-v4 end 250k–300k near 325, below every published Hopper-v2 seed; the
published curves show the same plateau in 5 of 57 TD3-family seeds. This trains Stable-Baselines3's TD3 with
the paper's settings (``benchmarks/throughput.py``'s ``sb3_model``: 256-256, batch 256, Adam 3e-4, 25k random
steps, exploration noise 0.1, policy delay 2, target smoothing 0.2/0.5) and the paper's schedule of evaluations
(10 deterministic episodes every 1,000 steps, SB3's ``evaluate_policy``), one seed per process, and writes each
evaluation as it comes to ``DIR/sb3-td3-<env>-seed<N>.json`` (rewritten whole, atomically). The evaluation
environment is seeded once, with seed + 100, and its generator goes on from one evaluation to the next, so
unlike ours each evaluation meets new initial states; a window's mean is over its 50 evaluations' 500
episodes either way. ``report`` prints each seed's mean return over a window (the same as ``offpoc export --table
finals``: evaluations within the last ``--last-steps`` steps up to ``--until``) and its episodes' mean length.

    python -m benchmarks.diagnostics.sb3_plateau train --seed 0 --out runs/sb3-plateau
    python -m benchmarks.diagnostics.sb3_plateau report --out runs/sb3-plateau --until 300000
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.throughput import EVAL_EPISODES, EVAL_EVERY, sb3_model
from store.stats import FinalWindow

START = 25_000
"""TD3's uniform-random steps, the paper's (and ours, ``agents/algorithms/td3.py``)."""


def curve_path(out: Path, env_id: str, seed: int) -> Path:
    return out / f"sb3-td3-{env_id}-seed{seed}.json"


def write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def train(env_id: str, seed: int, steps: int, out: Path) -> None:
    import gymnasium as gym
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    out.mkdir(parents=True, exist_ok=True)
    path = curve_path(out, env_id, seed)
    data: dict[str, Any] = {"library": "stable-baselines3", "algo": "td3", "env": env_id, "seed": seed}
    data |= {"start": START, "steps": [], "returns": [], "lengths": []}
    eval_env = Monitor(gym.make(env_id))
    eval_env.reset(seed=seed + 100)
    model = sb3_model("td3", env_id, START, seed=seed)

    class Evaluate(BaseCallback):
        def __init__(self, progress: Progress, task: Any) -> None:
            super().__init__()
            self.progress, self.task = progress, task

        def _on_step(self) -> bool:
            step = self.model.num_timesteps
            if step % EVAL_EVERY == 0:
                returns, lengths = evaluate_policy(
                    self.model, eval_env, n_eval_episodes=EVAL_EPISODES, deterministic=True, return_episode_rewards=True
                )
                data["steps"].append(step)
                data["returns"].append(float(np.mean(returns)))
                data["lengths"].append(float(np.mean(lengths)))
                write(path, data)
                self.progress.update(
                    self.task, completed=step, description=f"seed {seed}: return {data['returns'][-1]:,.0f}"
                )
            return True

    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} steps"))
    with Progress(*columns, TimeRemainingColumn()) as progress:
        task = progress.add_task(f"seed {seed}", total=steps, completed=START)
        model.learn(steps - START, reset_num_timesteps=False, callback=Evaluate(progress, task))


def report(out: Path, env_id: str, until: int, last_steps: int) -> None:
    window = FinalWindow(steps=last_steps)
    print(f"Stable-Baselines3 TD3 on {env_id}: each seed's mean return over steps {until - last_steps:,}–{until:,}\n")
    print("| seed | return | mean episode length (steps) | evaluations in the window |")
    print("|---|---|---|---|")
    for path in sorted(out.glob(f"sb3-td3-{env_id}-seed*.json"), key=lambda p: json.loads(p.read_text())["seed"]):
        data = json.loads(path.read_text())
        steps, returns, lengths = (np.asarray(data[k]) for k in ("steps", "returns", "lengths"))
        if not len(steps) or steps[-1] < until:
            reached = f"{steps[-1]:,}" if len(steps) else "no evaluation yet"
            print(f"| {data['seed']} | – (short of the budget, at {reached}) | – | – |")
            continue
        upto = steps <= until
        chosen, values = window.select(steps[upto], returns[upto], start=data["start"])
        _, length = window.select(steps[upto], lengths[upto], start=data["start"])
        print(f"| {data['seed']} | {values.mean():,.0f} | {length.mean():,.0f} | {len(chosen)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train one seed to --steps, writing its evaluations as they come")
    t.add_argument("--seed", type=int, required=True)
    t.add_argument("--steps", type=int, default=300_000)
    r = sub.add_parser("report", help="each trained seed's mean return over the window")
    r.add_argument("--until", type=int, default=300_000)
    r.add_argument("--last-steps", type=int, default=50_000)
    for p in (t, r):
        p.add_argument("--out", type=Path, required=True)
        p.add_argument("--env", default="Hopper-v4")
    args = parser.parse_args()
    if args.command == "train":
        if args.steps <= START or args.steps % EVAL_EVERY:
            parser.error(f"--steps must be a multiple of {EVAL_EVERY:,} above {START:,}")
        train(args.env, args.seed, args.steps, args.out)
    else:
        report(args.out, args.env, args.until, args.last_steps)


if __name__ == "__main__":
    main()
