"""Where a training step's time goes, measured inside the real loop (the peer: the same calls alone).

    python -m benchmarks.diagnostics.loop_profile                            # TD3, no correction
    python -m benchmarks.diagnostics.loop_profile --algo td3 --correction acoffpoc --divergence kl

Runs the Trainer on Hopper-v4 (1,000 random steps, then 3,000 learning steps, one
torch thread) with timers around the action, the environment step, storing and
sampling replay, the update and, with a correction, the similarity weight inside
the update (and of it, the similarity without the policy pass on the batch) and
its recording (block row and histogram), and the training statistics'
accumulation. Then times the action, the environment step, sampling,
the update and the weight on their own, in a tight loop (the update and the
weight on one fixed batch), as micro-benchmarks do. In the loop each phase
starts with caches filled by the previous one, so small operations cost
several times more than alone; the ratio column shows by how much.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from agents import Sink, TrainConfig, Trainer, plugins
from agents.corrections import acoffpoc
from agents.corrections.divergences import DIVERGENCES
from benchmarks.microbench import seconds_per_call

warnings.filterwarnings("ignore")

WEIGHT = "weight (inside update)"
SIMILARITY = "of which similarity"


class PhaseTimer:
    """Accumulates wall time per named call."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1

        return timed

    def per_call(self, name: str) -> float:
        return self.seconds[name] / max(self.calls[name], 1)


class TimedCorrection:
    """The run's correction, its calls timed (attributes pass through)."""

    def __init__(self, correction: Any, timer: PhaseTimer) -> None:
        self._correction = correction
        self._call = timer.wrap(WEIGHT, correction.__call__)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._correction, name)

    def __call__(self, *args: Any) -> Any:
        return self._call(*args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", default="td3", choices=plugins.algorithm_names())
    parser.add_argument("--env", default="Hopper-v4")
    parser.add_argument("--correction", default="none", choices=["none", "acoffpoc"])
    parser.add_argument("--divergence", default="jsd", choices=DIVERGENCES)
    parser.add_argument("--steps", type=int, default=3000, help="learning steps after 1,000 random ones")
    args = parser.parse_args()

    start = 1000
    config = TrainConfig.make(
        algo=args.algo,
        env_id=args.env,
        correction=args.correction,
        **({"divergence": args.divergence} if args.correction == "acoffpoc" else {}),  # AC-Off-POC's option
        start_steps=start,
        correction_start=start,
        total_steps=start + args.steps,
        eval_freq=10**9,
        eval_episodes=1,
        stats_every=start,
        threads=1,
    )
    trainer = Trainer(config, Sink())
    timer = PhaseTimer()
    agent, buffer, env = trainer.agent, trainer.buffer, trainer.env
    act, update, sample, add, step = agent.act, agent.update, buffer.sample, buffer.add, env.step
    agent.act = timer.wrap("action", act)  # type: ignore[method-assign]
    env.step = timer.wrap("environment step", step)  # type: ignore[method-assign]
    buffer.add = timer.wrap("replay add", add)  # type: ignore[method-assign]
    buffer.sample = timer.wrap("replay sample", sample)  # type: ignore[method-assign]
    agent.update = timer.wrap("update", update)  # type: ignore[method-assign]
    trainer.stats.add = timer.wrap("training statistics", trainer.stats.add)  # type: ignore[method-assign]
    trainer.quantities.add = timer.wrap("quantity record", trainer.quantities.add)  # type: ignore[method-assign]
    correction = trainer.correction
    if args.correction != "none":
        trainer.correction = TimedCorrection(correction, timer)  # type: ignore[assignment]
    # The similarity without the policy pass on the batch: the corrections look it up in their module.
    similarities = {name: getattr(acoffpoc, name) for name in ("batch_similarity", "transition_similarity")}
    for name, fn in similarities.items():
        setattr(acoffpoc, name, timer.wrap(SIMILARITY, fn))
    began = time.perf_counter()
    trainer.run()
    loop = time.perf_counter() - began
    for name, fn in similarities.items():
        setattr(acoffpoc, name, fn)

    # The same calls alone, on the trained agent and one fixed batch.
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    generator = torch.Generator().manual_seed(0)
    exclude_random = correction.excludes_random_phase
    batch = sample(trainer.config.batch_size, generator, exclude_random)
    weight_on = correction if args.correction != "none" else None
    zero_action = np.zeros(agent.action_dim, dtype=np.float32)

    def env_step() -> None:
        if any(step(zero_action)[2:4]):
            env.reset()

    alone = {
        "action": seconds_per_call(lambda: act(obs, True, rng)),
        "environment step": seconds_per_call(env_step),
        "replay sample": seconds_per_call(lambda: sample(trainer.config.batch_size, generator, exclude_random)),
        "update": seconds_per_call(lambda: update(batch, weight_on)),
    }
    if weight_on is not None:
        with torch.no_grad():
            alone[WEIGHT] = seconds_per_call(lambda: correction.weights(batch, agent))

    label = args.algo.upper() + (f" + {args.correction} {args.divergence}" if args.correction != "none" else "")
    table = Table(title=f"{label} on {args.env}: {trainer.step:,} steps in {loop:.1f} s, 1 torch thread")
    for column in ("phase", "calls", "µs per call in the loop", "µs per call alone", "loop / alone"):
        table.add_column(column, justify="left" if column == "phase" else "right")
    phases = [name for name in timer.seconds if name != SIMILARITY]
    if SIMILARITY in timer.seconds:
        phases.insert(phases.index(WEIGHT) + 1, SIMILARITY)
    for name in phases:
        in_loop = timer.per_call(name)
        ratio = f"{in_loop / alone[name]:.1f}" if name in alone else ""
        standalone = f"{alone[name] * 1e6:.0f}" if name in alone else ""
        table.add_row(name, f"{timer.calls[name]:,}", f"{in_loop * 1e6:.0f}", standalone, ratio)
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
