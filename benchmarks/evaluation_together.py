"""The evaluation's episodes stepped together: the same evaluations as before, and what it saves (issue 68).

    # the evaluations of one seed of TD3 and SAC on Hopper-v4 over 20k steps, at an older checkout and today's
    git worktree add /tmp/before a8f9f31
    PYTHONPATH=/tmp/before python benchmarks/evaluation_together.py --save before.json
    python benchmarks/evaluation_together.py --against before.json
    PYTHONPATH=/tmp/before python benchmarks/evaluation_together.py --env HalfCheetah-v4 --algos sac --save cheetah.json

    # milliseconds per evaluation, alone against together, on a trained policy's long episodes
    python benchmarks/evaluation_together.py --checkpoint runs/hopper-300k.db-runs/1447/checkpoint.pt

``--save``/``--against`` train each algorithm for ``--steps`` steps (learning from step 1,000, the paper's
evaluation every 1,000 steps: 10 deterministic episodes) through the Trainer's public API, which every checkout
since the evaluation protocol has, and compare every evaluation's returns and lengths: the largest relative
difference of a return, max |a − b| / |b|, over every episode of every evaluation. (The records hold no action
shares; ``tests/agents/test_evaluation.py`` compares those too.)

``--checkpoint`` loads a run's checkpoint and times its policy's evaluation both ways, interleaved over
``--repeats`` rounds (the median, ms per evaluation), on one torch thread: the ratio is the saving on that
policy's episodes, whose length decides it (a policy that falls at step 20 has little acting to save).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from agents import RecordingSink, TrainConfig, Trainer
from agents.training import EVAL_SEED_OFFSET

ALGOS = ("td3", "sac")
ENV = "Hopper-v4"
"""The defaults of ``--algos`` and ``--env``."""


def evaluations(algo: str, env: str, steps: int, progress: Progress) -> list[dict[str, Any]]:
    """Every evaluation of one seed's run: its step, returns and lengths."""
    config = TrainConfig.make(algo=algo, env_id=env, start_steps=1_000, total_steps=steps, threads=1, seed=0)
    sink = RecordingSink()
    task = progress.add_task(f"{algo} on {env}", total=steps)
    trainer = Trainer(config, sink)
    step = trainer.env_step

    def counted() -> None:
        step()
        progress.update(task, completed=trainer.step)

    trainer.env_step = counted  # type: ignore[method-assign]
    trainer.run()
    together = getattr(getattr(trainer, "evaluator", None), "together", None)
    progress.update(task, description=f"{algo} on {env} (episodes stepped together: {together})")
    return [{"step": e.step, "returns": list(e.returns), "lengths": list(e.lengths)} for e in sink.evals]


def compare(env: str, saved: dict[str, list[dict[str, Any]]], today: dict[str, list[dict[str, Any]]]) -> Table:
    table = Table(title=f"Evaluations of one seed on {env}: saved against today's")
    for column in ("algorithm", "evaluations", "episodes", "lengths equal", "largest relative difference"):
        table.add_column(column, justify="right")
    for algo, before in saved.items():
        after = today[algo]
        pairs = [(a, b) for e, f in zip(after, before, strict=True) for a, b in zip(e["returns"], f["returns"])]
        worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in pairs)
        equal = all(e["lengths"] == f["lengths"] and e["step"] == f["step"] for e, f in zip(after, before))
        table.add_row(algo, str(len(after)), str(len(pairs)), "yes" if equal else "NO", f"{worst:.1e}")
    return table


def timing(checkpoint: Path, repeats: int) -> list[str]:
    from agents.evaluation import evaluate

    torch.set_num_threads(1)
    trainer = Trainer.resume(checkpoint)
    evaluator, agent, seed = trainer.evaluator, trainer.agent, trainer.config.seed + EVAL_SEED_OFFSET
    reference = evaluator.evaluate(agent, seed)  # the first evaluation settles whether they step together
    times: dict[str, list[float]] = {"alone": [], "together": []}
    for round_ in range(repeats):
        for way in ("alone", "together") if round_ % 2 == 0 else ("together", "alone"):
            began = time.perf_counter()
            result = evaluate(agent, evaluator.env, evaluator.episodes, seed) if way == "alone" else None
            if result is None:
                result = evaluator.evaluate(agent, seed)
            times[way].append(time.perf_counter() - began)
            assert result.returns == reference.returns
    alone, together = (statistics.median(times[w]) * 1e3 for w in ("alone", "together"))
    return [
        f"{trainer.config.algo}, step {trainer.step:,}",
        f"{statistics.mean(reference.lengths):,.0f}",
        str(evaluator.together),
        f"{alone:,.1f}",
        f"{together:,.1f}",
        f"{alone / together:.2f}×",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--save", type=Path, help="write this checkout's evaluations to a JSON file")
    mode.add_argument("--against", type=Path, help="compare today's evaluations with a saved file's")
    mode.add_argument("--checkpoint", type=Path, nargs="+", help="time evaluations on checkpoints' policies")
    parser.add_argument("--steps", type=int, default=20_000, help="steps of each run (--save, --against)")
    parser.add_argument("--env", default=ENV, help=f"the task (--save; default {ENV})")
    parser.add_argument("--algos", nargs="+", default=list(ALGOS), help="the algorithms (--save; default td3 sac)")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds of each way (--checkpoint)")
    args = parser.parse_args()
    console = Console()
    if args.checkpoint:
        table = Table(title="One evaluation of 10 episodes on the checkpoint's task: alone against stepped together")
        for column in ("policy", "mean episode (steps)", "together", "alone, ms", "together, ms", "alone / together"):
            table.add_column(column, justify="right")
        for path in args.checkpoint:
            table.add_row(*timing(path, args.repeats))
        console.print(table)
        return
    torch.set_num_threads(1)
    env, algos = args.env, args.algos
    if args.against:  # the saved file's task and algorithms
        saved_file = json.loads(args.against.read_text())
        env, saved = saved_file["env"], saved_file["runs"]
        algos = list(saved)
    with Progress(console=console) as progress:
        today = {algo: evaluations(algo, env, args.steps, progress) for algo in algos}
    if args.save:
        args.save.write_text(json.dumps({"env": env, "runs": today}))
        console.print(f"saved {sum(len(v) for v in today.values())} evaluations on {env} to {args.save}")
    else:
        console.print(compare(env, saved, today))


if __name__ == "__main__":
    main()
