"""Lanes against processes: K runs in one lane group against the same K runs as K processes, on one core.

    python benchmarks/lanes.py                          # TD3 and SAC on Hopper-v4, K = 1, 2, 4, 8, core 0
    python benchmarks/lanes.py --algos td3 --lanes 1 4 --window 20
    python benchmarks/lanes.py --lanes 4 --repeats 3    # every case three times, interleaved: medians, ratio range
    python benchmarks/lanes.py --device cuda            # on a GPU: lane groups alone, K = 1, 5, 10, 20, 40

Each case starts fresh processes pinned to one CPU core (``--core``): one process training a lane group of K
lanes (seeds 0..K-1, no correction), or K processes training one run each. Every process trains past its
uniform-random start phase first, says it is ready, and waits; all start together, and each counts the
environment steps (each with one gradient update) it makes in the next ``--window`` seconds. The figure
is the aggregate: steps of all K runs per second. The ratio is lanes over processes in the same case; above
1.0 the group is faster. On a CPU one run alone (one process on the core) is measured too, and the group's
aggregate is put against it: where a lane's step costs what a solo run's does (the group as fast as one run),
the ratio is what K processes lose to sharing the core, and only lanes cheaper than solo runs can raise it.
With ``--device cuda`` the networks and the stacked update go to the GPU (the environments stay on the CPU),
only lane groups run, and the GPU memory each lane needs is reported.
Each group's time is split: in its environments' ``step`` (CPU work), in acting (each lane's forward pass and
its copy back to the CPU), and the rest (the stacked update, sampling, the lanes' bookkeeping).
On a CPU each group's ceiling is printed too: the steps/s it would make if each lane's update did a solo
update's matrix-product FLOPs at the core's 256³ matmul rate and nothing but its environments' measured steps
took any other time, over the K processes' steps/s: a ratio no group could pass without fewer FLOPs or a
faster core (Adam and the elementwise passes count as free).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

try:
    from benchmarks.breakdown import matmul_rate, matmul_rates, rates_line, update_flops
except ModuleNotFoundError:  # run as a script (the README's way): benchmarks/ itself is on the path
    from breakdown import matmul_rate, matmul_rates, rates_line, update_flops  # type: ignore[no-redef,import-not-found]

CPU_LANES = (1, 2, 4, 8)
GPU_LANES = (1, 5, 10, 20, 40)


def _config(algo: str, seed: int, device: str, start: int) -> object:
    from agents import TrainConfig

    return TrainConfig(
        algo=algo, env_id="Hopper-v4", seed=seed, total_steps=10_000_000, start_steps=start, buffer_size=200_000,
        eval_freq=10_000_000, eval_episodes=1, stats_every=1000, checkpoint_every=0, device=device,
    )  # fmt: skip


def child(mode: str, algo: str, lanes: int, first_seed: int, window: float, device: str, start: int) -> None:
    """One benchmark process: train past the start phase, print ``ready``, wait for ``go`` on stdin, then count
    the steps of the next ``window`` seconds and print them as JSON."""
    warnings.filterwarnings("ignore")
    import torch

    from agents import Trainer
    from agents.lanes import LaneGroup

    seeds = range(first_seed, first_seed + (lanes if mode == "lanes" else 1))
    trainers = [Trainer(_config(algo, seed, device, start)) for seed in seeds]  # type: ignore[arg-type]
    ready_at = start + 200
    marks: dict[str, float] = {}

    def should_stop(trainer: Trainer = trainers[0]) -> bool:
        if "go" not in marks and trainer.step >= ready_at:
            print("ready", flush=True)
            sys.stdin.readline()
            marks["go"], marks["step"] = time.perf_counter(), trainer.step
        if "go" in marks and time.perf_counter() - marks["go"] >= window:
            marks.setdefault("end", time.perf_counter())
            marks.setdefault("end_step", trainer.step)
            return True
        return False

    spent = {"env": 0.0, "act": 0.0}
    cuda = device.startswith("cuda")

    def timed(part: str, call: Callable[..., Any]) -> Callable[..., Any]:
        """``call``, its time inside the counted window added to ``spent[part]``."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if cuda:  # the update's kernels run on after it returns: their time is not this call's
                torch.cuda.synchronize()
            start = time.perf_counter()
            out = call(*args, **kwargs)
            if "go" in marks and "end" not in marks:
                spent[part] += time.perf_counter() - start
            return out

        return wrapper

    for trainer in trainers:  # where the time goes: the environments (CPU), acting (a forward pass each)
        trainer.env.step = timed("env", trainer.env.step)  # type: ignore[method-assign]
        trainer.agent.act = timed("act", trainer.agent.act)  # type: ignore[method-assign]
    trainers[0]._should_stop = should_stop
    for trainer in trainers[1:]:
        trainer._should_stop = lambda: "end" in marks
    if mode == "lanes":
        LaneGroup(trainers).run()
    else:
        trainers[0].run()
    steps = (marks["end_step"] - marks["step"]) * len(trainers)
    seconds = marks["end"] - marks["go"]
    result = {"steps": steps, "seconds": seconds, "env_share": spent["env"] / seconds}
    result["act_share"] = spent["act"] / seconds
    if cuda:
        result["gpu_bytes"] = torch.cuda.max_memory_allocated()
    elif mode == "lanes":  # the ceiling: each lane's update (a solo one's products) at the matmul rate
        result["update_flops_per_step"] = update_flops(trainers[0])
        result["matmul_rate"] = matmul_rate()
        result["env_seconds_per_step"] = spent["env"] / steps
    print(json.dumps(result), flush=True)


def case(mode: str, algo: str, lanes: int, args: argparse.Namespace) -> dict[str, float]:
    """Aggregate steps/s of ``lanes`` runs as one group (``lanes``) or as that many processes, on one core."""
    count = 1 if mode == "lanes" else lanes
    command = [sys.executable, __file__, "--child", mode, "--algos", algo, "--lanes", str(lanes)]
    command += ["--window", str(args.window), "--device", args.device, "--start", str(args.start)]
    processes = []
    for i in range(count):
        processes.append(
            subprocess.Popen(
                [*command, "--first-seed", str(i)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                preexec_fn=(lambda: os.sched_setaffinity(0, {args.core})) if args.device == "cpu" else None,
                env={**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"},
            )
        )
    for process in processes:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if line != "ready":
            raise SystemExit(f"a benchmark process failed before it was ready: {line!r}")
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    results = []
    for process in processes:
        out, _ = process.communicate()
        results.append(json.loads(out.strip().splitlines()[-1]))
    seconds = max(r["seconds"] for r in results)
    summary = {"sps": sum(r["steps"] for r in results) / seconds}
    for share in ("env_share", "act_share"):  # of each process's wall time, averaged over the processes
        summary[share] = sum(r[share] for r in results) / len(results)
    if "gpu_bytes" in results[0]:
        summary["gpu_mib_per_lane"] = results[0]["gpu_bytes"] / 2**20 / lanes
    if "matmul_rate" in results[0]:
        one = results[0]
        summary["ceiling_sps"] = 1 / (one["update_flops_per_step"] / one["matmul_rate"] + one["env_seconds_per_step"])
    return summary


def _median(summaries: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over a case's repeats."""
    return {key: statistics.median(s[key] for s in summaries) for key in summaries[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["td3", "sac"])
    parser.add_argument(
        "--lanes", nargs="+", type=int, default=None, help="K values (default 1 2 4 8; GPU 1 5 10 20 40)"
    )
    parser.add_argument("--window", type=float, default=30.0, help="seconds counted per case (default 30)")
    parser.add_argument("--start", type=int, default=1000, help="each run's uniform-random start phase, steps")
    parser.add_argument("--core", type=int, default=0, help="the CPU core every process is pinned to")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda: lane groups alone, on the GPU")
    parser.add_argument("--repeats", type=int, default=1, help="times each case runs, interleaved (default 1)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--first-seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, not {args.repeats}")
    if args.child is not None:
        child(args.child, args.algos[0], args.lanes[0], args.first_seed, args.window, args.device, args.start)
        return
    gpu = args.device.startswith("cuda")
    if gpu:
        import torch

        if not torch.cuda.is_available():
            raise SystemExit(f"--device {args.device}: no CUDA device here (torch {torch.__version__})")
    ks = args.lanes or list(GPU_LANES if gpu else CPU_LANES)
    modes = ["lanes"] if gpu else ["lanes", "processes"]
    console = Console(width=160)
    rows = []
    alone: dict[str, list[float]] = {}
    with Progress(console=console) as progress:
        measure_alone = not gpu and 1 not in ks  # with K = 1, its one process is the run alone
        per_algo = len(ks) * len(modes) + (1 if measure_alone else 0)
        task = progress.add_task("cases", total=len(args.algos) * per_algo * args.repeats)
        for algo in args.algos:
            runs: dict[int, dict[str, list[dict[str, float]]]] = {k: {mode: [] for mode in modes} for k in ks}
            for repeat in range(args.repeats):  # every case once a repeat: a slow spell of the machine hits them all
                if measure_alone:
                    progress.update(task, description=f"{algo} one run alone ({repeat + 1}/{args.repeats})")
                    alone.setdefault(algo, []).append(case("processes", algo, 1, args)["sps"])
                    progress.advance(task)
                for k in ks:
                    for mode in modes:
                        progress.update(task, description=f"{algo} K={k} {mode} ({repeat + 1}/{args.repeats})")
                        runs[k][mode].append(case(mode, algo, k, args))
                        progress.advance(task)
                if not gpu and not measure_alone:
                    alone.setdefault(algo, []).append(runs[1]["processes"][-1]["sps"])
            for k in ks:
                row: dict[str, Any] = {"algo": algo, "k": k}
                row.update({mode: _median(runs[k][mode]) for mode in modes})
                row["repeats"] = runs[k]  # each repeat's figures, as measured (the JSON keeps them)
                if not gpu:
                    row["ratios"] = [g["sps"] / p["sps"] for g, p in zip(runs[k]["lanes"], runs[k]["processes"])]
                    row["alone_sps"] = statistics.median(alone[algo])
                    row["alone_repeats"] = alone[algo]
                rows.append(row)
    where = f"GPU ({args.device})" if gpu else f"one CPU core (core {args.core})"
    title = f"Hopper-v4, aggregate env steps/s with one update per step, on {where}, {args.window:.0f} s a case"
    if args.repeats > 1:
        title += (
            f", medians of {args.repeats} repeats (lanes / processes: each repeat's ratio, median and lowest–highest)"
        )
    table = Table(title=title)
    table.add_column("algo")
    for column in ("K", "lane group (steps/s)"):
        table.add_column(column, justify="right")
    extra = ("GPU memory per lane (MiB)",) if gpu else ("K processes (steps/s)", "lanes / processes", "its ceiling")
    extra += () if gpu else ("group / one run alone",)
    extra += ("group: in environments", "acting", "updates and the rest")
    for column in extra:
        table.add_column(column, justify="right")
    for row in rows:
        group: dict[str, float] = row["lanes"]  # type: ignore[assignment]
        cells = [str(row["algo"]), str(row["k"]), f"{group['sps']:.0f}"]
        if gpu:
            cells.append(f"{group['gpu_mib_per_lane']:.0f}")
        else:
            apart: dict[str, float] = row["processes"]  # type: ignore[assignment]
            ceiling = group["ceiling_sps"] / apart["sps"]
            ratios = row["ratios"]
            ratio = f"{statistics.median(ratios):.2f}"
            if len(ratios) > 1:
                ratio += f" ({min(ratios):.2f}–{max(ratios):.2f})"
            cells += [f"{apart['sps']:.0f}", ratio, f"{ceiling:.2f}", f"{group['sps'] / row['alone_sps']:.2f}"]
        rest = 1.0 - group["env_share"] - group["act_share"]
        cells += [f"{group['env_share']:.0%}", f"{group['act_share']:.0%}", f"{rest:.0%}"]
        table.add_row(*cells)
    console.print(table)
    if not gpu:
        import torch

        torch.set_num_threads(1)  # as each case's processes run (OMP_NUM_THREADS=1)
        console.print(f"one thread here: {rates_line(matmul_rates())}")
        console.print(
            "group / one run alone: the group's steps/s (all K lanes) over one run's alone on the core (one process);"
            " at 1.00 a lane's step costs what a solo run's does, and lanes / processes is what K processes lose to"
            " sharing the core"
        )
        console.print(
            "its ceiling: the lanes / processes ratio if each lane's update did a solo update's matrix-product FLOPs"
            " at the core's 256³ float32 matmul rate (the fastest library's) and nothing but its environments' steps"
            " (as measured) took any other time"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
