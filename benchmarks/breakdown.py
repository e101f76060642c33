"""Where a training run's time goes, per environment step, beside the core's matrix rate (issue 68).

    python benchmarks/breakdown.py                                  # TD3 and SAC on Hopper-v4, fresh agents
    python benchmarks/breakdown.py --algo td3 --steps 3000 \\
        --checkpoint runs/hopper-300k.db-runs/1/checkpoint.pt       # a trained policy: long evaluation episodes

Each algorithm runs in a fresh process with one torch thread, as a worker runs it: the Trainer wired to a real
SQLite store (``StoreBinding``), the paper's evaluation (10 episodes every 1,000 steps) and ``--steps`` learning
steps (after ``--start`` random ones; with ``--checkpoint``, from the checkpoint's step, its policy and buffer,
checkpointing to a scratch file). Timers wrap each part of the loop from the first update on: acting and the
environment (training and evaluation apart), replay adding and sampling, the update, the training statistics
and logged quantities, and the store. Inside the update, the optimiser steps and the target networks' soft
updates are timed the same way; the matrix products' share comes from the torch profiler over ``--profile``
further updates on the run's own batches (self CPU time of mm, addmm, bmm, baddbmm and oneDNN's linear), applied to the
update's time in the loop. The profiler adds a few microseconds to every operator, the small ones
proportionally most, so that share is a slight underestimate.

Beside the table: one thread's 256×256×256 float32 matmul rate (best of 5 × 200 products; through MKL and
through oneDNN, the faster being the core's rate, :mod:`agents.gemm`) and the update's
achieved rate, its floating-point operations (``torch.utils.flop_counter``, over ``policy_delay`` updates) over
its mean time in the loop.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore")

MATRIX_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "mkldnn::_linear_pointwise")
"""The profiler's names of matrix products (a ``matmul`` or ``linear`` lands in one of them; the last is
oneDNN's, :mod:`agents.gemm`)."""
ORDER = (
    "acting", "environment", "replay add", "replay sampling", "update", "of which matrix products",
    "of which optimiser steps", "of which soft updates", "of which the rest", "training statistics",
    "evaluation", "of which acting", "of which environment", "store", "rest of the loop",
)  # fmt: skip


class Timers:
    """Seconds and calls per named part, counted only once ``on`` (from the first update); a part's call inside
    another call of the same part (the store's flush inside its tick) counts once, as the outer one."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.inside: dict[str, int] = defaultdict(int)
        self.on = False
        self.began = 0.0
        """When the first update started."""
        self.first_step = 0
        """The trainer's step then."""

    def wrap(self, name: str | Callable[..., str], fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            part = name(*args, **kwargs) if callable(name) else name
            self.inside[part] += 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.inside[part] -= 1
                if self.on and not self.inside[part]:
                    self.seconds[part] += time.perf_counter() - start
                    self.calls[part] += 1

        return timed


def matmul_rates() -> dict[str, float]:
    """One thread's 256×256×256 float32 product rate, FLOP/s (best of 5 × 200), through each library torch
    reaches here: MKL (``torch.mm``) and, where torch has it, oneDNN (:mod:`agents.gemm`)."""
    import torch

    from agents import gemm

    a, b, out = torch.randn(256, 256), torch.randn(256, 256), torch.empty(256, 256)
    products: dict[str, Callable[[], object]] = {"mkl": lambda: torch.mm(a, b, out=out)}
    if gemm._ONEDNN is not None:
        onednn = gemm._ONEDNN
        products["onednn"] = lambda: onednn(a, b, None, "none", [], "")
    rates = {}
    for name, product in products.items():
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(200):
                product()
            best = min(best, (time.perf_counter() - start) / 200)
        rates[name] = 2 * 256**3 / best
    return rates


def rates_line(rates: dict[str, float]) -> str:
    """The matmul rates in words, and which library the update's wide products go to."""
    from agents import gemm

    each = ", ".join(f"{name} {rate / 1e9:.1f}" for name, rate in rates.items())
    return (
        f"one thread's 256×256×256 float32 matmul: {each} GFLOP/s (the core's rate: the fastest);"
        f" the update's wide products go to {gemm.backend()}"
    )


def matmul_rate() -> float:
    """The core's 256×256×256 float32 product rate, FLOP/s: the fastest library's (:func:`matmul_rates`)."""
    return max(matmul_rates().values())


def update_flops(trainer: Any, update: Callable[..., Any] | None = None) -> float:
    """Floating-point operations of one of ``trainer``'s updates, on its own batches: the mean over a cycle of
    the actor's delay (TD3 steps its actor every other update). ``update``: the agent's own, if it was wrapped.
    The updates change the agent: call it after the timed run."""
    from torch.utils.flop_counter import FlopCounterMode

    update = update or trainer.agent.update
    delay = max(int(trainer.config.to_dict().get("policy_delay") or 1), 1)
    batches = [trainer.sample() for _ in range(delay)]
    with FlopCounterMode(display=False) as counter:  # oneDNN's products too (agents.gemm teaches it them)
        for batch, correction in batches:
            update(batch, correction)
    return float(counter.get_total_flops()) / delay


def one(algo: str, env_id: str, start: int, steps: int, profiled: int, checkpoint: str | None) -> dict[str, Any]:
    """Run one algorithm with the timers; the parts' seconds per learning step, and the rates."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from agents import TrainConfig, Trainer
    from agents.training import EVAL_SEED_OFFSET
    from offpoc_tui.runtime.lifecycle import StoreBinding
    from store import RunSpec, open_store
    from store.runs import create_runs
    from store.writer import RunWriter

    torch.set_num_threads(1)
    scratch = Path(tempfile.mkdtemp())
    if checkpoint is None:
        config = TrainConfig.make(algo=algo, env_id=env_id, start_steps=start, total_steps=start + steps, threads=1)
        until = start + steps
    else:
        probe = Trainer.resume(checkpoint)
        config, until = probe.config, probe.step + steps
        del probe
    resolved = config.resolved()
    db = open_store(scratch / "breakdown.db", create=True)
    spec = RunSpec("breakdown", resolved.algo, resolved.env_id, resolved.correction, None, resolved.seed,
                   resolved.total_steps, resolved.to_dict())  # fmt: skip
    (run_id,) = create_runs(db, [spec])
    writer = RunWriter(db, run_id)
    binding = StoreBinding(writer, threading.Event())
    if checkpoint is None:
        trainer = Trainer(config, binding.sink, should_stop=binding.should_stop)
    else:  # its checkpoints go to a scratch file, never over the run's own
        trainer = Trainer.resume(checkpoint, binding.sink, binding.should_stop, until, checkpoint_path=scratch / "c.pt")
    binding.trainer = trainer
    if checkpoint is not None:  # a resumed evaluator runs its first evaluation both ways: not in the timed steps
        trainer.evaluator.evaluate(trainer.agent, resolved.seed + EVAL_SEED_OFFSET)
    timers = Timers()
    agent, env = trainer.agent, trainer.env
    update = agent.update

    def first_update(*args: Any) -> Any:
        if not timers.on:
            timers.on, timers.began, timers.first_step = True, time.perf_counter(), trainer.step
        return update(*args)

    parts: list[tuple[Any, str, str | Callable[..., str]]] = [
        (agent, "act", lambda obs, explore, rng: "acting" if explore else "of which acting"),
        (agent, "greedy_actions", "of which acting"),  # the evaluation's episodes stepped together
        (env, "step", "environment"),
        *((eval_env, "step", "of which environment") for eval_env in [trainer.evaluator.env, *trainer.evaluator.envs]),
        (trainer.buffer, "add", "replay add"),
        (trainer, "sample", "replay sampling"),
        (agent, "critic_step", "of which optimiser steps"),
        (agent, "actor_step", "of which optimiser steps"),
        (agent, "update_targets", "of which soft updates"),
        (trainer.stats, "add", "training statistics"),
        (trainer.quantities, "add", "training statistics"),
        (trainer.evaluator, "evaluate", "evaluation"),
    ]
    parts += [(writer, name, "store") for name in ("add_eval", "add_episode", "add_train_stats", "add_quantities",
                                                    "add_histogram", "tick", "flush")]  # fmt: skip
    setattr(agent, "update", timers.wrap("update", first_update))  # noqa: B010 (an instance's method, replaced)
    for owner, attribute, part in parts:
        setattr(owner, attribute, timers.wrap(part, getattr(owner, attribute)))
    trainer.run()
    loop = time.perf_counter() - timers.began
    learning_steps = trainer.step - timers.first_step
    timers.on = False

    rates = matmul_rates()
    # The update's matrix share and its floating-point operations, on the run's own batches.
    batches = [trainer.sample() for _ in range(profiled)]
    flops = update_flops(trainer, update)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch, correction in batches:
            update(batch, correction)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    matrix = sum(e.self_cpu_time_total for e in events if e.key in MATRIX_OPS)
    per_step = {part: seconds / learning_steps for part, seconds in timers.seconds.items()}
    update_s = per_step["update"]
    per_step["of which matrix products"] = update_s * matrix / total
    per_step["of which the rest"] = update_s - sum(
        per_step.get(p, 0.0) for p in ("of which matrix products", "of which optimiser steps", "of which soft updates")
    )
    counted = [p for p in per_step if not p.startswith("of which")]
    per_step["rest of the loop"] = loop / learning_steps - sum(per_step[p] for p in counted)
    return {
        "algo": resolved.algo, "env": resolved.env_id, "steps": learning_steps, "from": timers.first_step,
        "sps": learning_steps / loop, "per_step": per_step, "update_calls": timers.calls["update"],
        "update_flops": flops, "update_seconds": timers.seconds["update"] / max(timers.calls["update"], 1),
        "matmul_rate": max(rates.values()), "matmul_rates": rates, "cpu": cpu_model(),
    }  # fmt: skip


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", nargs="+", default=["td3", "sac"])
    parser.add_argument("--env", default="Hopper-v4")
    parser.add_argument("--start", type=int, default=1000, help="random steps before learning (fresh agents)")
    parser.add_argument("--steps", type=int, default=5000, help="learning steps timed")
    parser.add_argument("--profile", type=int, default=100, help="updates profiled for the matrix share")
    parser.add_argument("--checkpoint", help="continue this run's checkpoint (its algorithm) instead")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.algo[0], args.env, args.start, args.steps, args.profile, args.checkpoint)))
        return

    from rich.console import Console
    from rich.table import Table

    console = Console()
    algos = [None] if args.checkpoint else args.algo
    results = []
    with console.status("measuring") as status:
        for algo in algos:
            status.update(f"{algo or args.checkpoint}: {args.steps:,} learning steps, then {args.profile} profiled")
            command = [sys.executable, __file__, "--one", "--env", args.env, "--start", str(args.start),
                       "--steps", str(args.steps), "--profile", str(args.profile)]  # fmt: skip
            command += ["--checkpoint", args.checkpoint] if args.checkpoint else ["--algo", algo]
            out = subprocess.run(command, capture_output=True, text=True, check=True)
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    console.print(f"{results[0]['cpu']}; {rates_line(results[0]['matmul_rates'])}")
    for r in results:
        step_ms = 1e3 / r["sps"]
        table = Table(
            title=f"{r['algo'].upper()} on {r['env']}: {r['steps']:,} learning steps from step {r['from']:,},"
            f" {r['sps']:.1f} steps/s ({step_ms:.2f} ms a step)"
        )
        for column in ("part", "ms per step", "share of the run"):
            table.add_column(column, justify="left" if column == "part" else "right")
        for part in ORDER:
            if part in r["per_step"]:
                ms = 1e3 * r["per_step"][part]
                name = f"  {part}" if part.startswith("of which") else part
                table.add_row(name, f"{ms:.3f}", f"{100 * ms / step_ms:.1f}%")
        console.print(table)
        achieved = r["update_flops"] / r["update_seconds"]
        console.print(
            f"update: {r['update_flops'] / 1e9:.3f} GFLOP in {1e3 * r['update_seconds']:.2f} ms = "
            f"{achieved / 1e9:.1f} GFLOP/s, {100 * achieved / r['matmul_rate']:.0f}% of this process's matmul rate"
            f" ({r['matmul_rate'] / 1e9:.1f} GFLOP/s)\n"
        )


if __name__ == "__main__":
    main()
