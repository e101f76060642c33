"""AdaStop on data no one here wrote: error control, power and cost on the paper's published curves.

    python benchmarks/sequential_evidence.py [--replays 12] [--orders 40] [--estimand final|auc]

The published curves (``../shared/reference-curves``: 3 algorithms × 8 tasks × 6 methods × 10 seeds)
are the test bed; each seed's statistic is the paper's (the mean of its last 10 evaluations, i.e. the
last 10,000 of 1M steps) or, with ``--estimand auc``, its curve's mean over the whole budget.

**A/A (error control).** For every (algorithm, task, method), ``--replays`` studies whose arms all draw
their seeds from that one method's 10 (with replacement: 10 seeds are fewer than K·n, and draws with
replacement from one pool keep the arms exchangeable, so "no difference" holds exactly): two arms (one
comparison) and six arms compared with the first (five comparisons, as a task's study of the baseline
against five methods), design n = 5, K = 4, α = 0.05. The rate of any "different" decision is the
family-wise error, to be ≤ α within its Monte-Carlo error. Beside it, on the same draws: how often
Welch's p < 0.05 for some pair at one of the same four looks (the dashboard's fixed-sample p, read live).

**Power and cost.** For every (algorithm, task): the baseline against AC-Off-POC and each competitor
(one study of five comparisons per task), design n = 5, K = 2, so a study uses at most the 10 published
seeds; the seeds enter in ``--orders`` random orders (which five come first changes the first interim).
Against it the fixed test on all 10 seeds: Welch's p < 0.05 per pair, and with Holm's step-down over the
task's five pairs (the same family-wise control as AdaStop's).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from store.sequential import Design, decide
from store.stats import welch_p

ROOT = Path(__file__).resolve().parents[1] / ".." / "shared" / "reference-curves" / "Learning Curves"
METHODS = {"": "baseline", "AC-Off-POC_": "AC-Off-POC", "ACE_": "ACE", "Geoff-PAC_": "Geoff-PAC", "IPG_": "IPG"}
METHODS["RIS-Off-PAC_"] = "RIS-Off-PAC"
ALPHA = 0.05


def load(root: Path, estimand: str) -> dict[tuple[str, str, str], np.ndarray]:
    """(algo, env, method) → (10,) per-seed statistic."""
    out: dict[tuple[str, str, str], np.ndarray] = {}
    for algo_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for env_dir in sorted(p for p in algo_dir.iterdir() if p.is_dir()):
            for prefix, method in METHODS.items():
                curves = [np.load(env_dir / f"{prefix}{algo_dir.name}_{env_dir.name}_{s}.npy") for s in range(10)]
                if estimand == "final":
                    out[algo_dir.name, env_dir.name, method] = np.array([c[-10:].mean() for c in curves])
                else:  # area under the curve over the budget, per step: the trapezoid mean of equally spaced points
                    out[algo_dir.name, env_dir.name, method] = np.array(
                        [np.trapezoid(c) / (len(c) - 1) for c in curves]
                    )
    return out


def welch_any_look(values: dict[str, np.ndarray], pairs: list[tuple[str, str]], design: Design) -> bool:
    n = design.interim_seeds
    return any(
        welch_p(values[a][: k * n], values[b][: k * n]) < ALPHA
        for k in range(1, design.max_interims + 1)
        for a, b in pairs
    )


def holm(pvalues: list[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down: which hypotheses are rejected with family-wise error ≤ α."""
    order = np.argsort(pvalues)
    rejected = [False] * len(pvalues)
    for rank, i in enumerate(order):
        if pvalues[i] > alpha / (len(pvalues) - rank):
            break
        rejected[i] = True
    return rejected


def error_control(data: dict, replays: int, progress: Progress, seed: int) -> list[tuple[str, int, float, float]]:
    design = Design(alpha=ALPHA, interim_seeds=5, max_interims=4)
    rng = np.random.default_rng(seed)
    rows = []
    for arms in (2, 6):
        pairs = [(f"arm{i}", "arm0") for i in range(1, arms)]
        task = progress.add_task(f"A/A, {arms} arms", total=len(data) * replays)
        adastop = welch = count = 0
        for pool in data.values():
            for _ in range(replays):
                values = {f"arm{i}": rng.choice(pool, size=design.seeds_at_most) for i in range(arms)}
                outcome = decide(values, pairs, replace(design, seed=int(rng.integers(2**31))))
                adastop += any(v in ("larger", "smaller") for v in outcome.verdicts.values())
                welch += welch_any_look(values, pairs, design)
                count += 1
                progress.advance(task)
        rows.append(
            (f"{arms} arms, {arms - 1} comparison{'s' if arms > 2 else ''}", count, adastop / count, welch / count)
        )
    return rows


def power_and_cost(data: dict, orders: int, progress: Progress, seed: int, design: Design) -> list[dict]:
    rng = np.random.default_rng(seed)
    tasks = sorted({(a, e) for a, e, _ in data})
    others = [m for m in METHODS.values() if m != "baseline"]
    rows = []
    bar = progress.add_task(f"baseline against each method, n = {design.interim_seeds}, K = {design.max_interims}",
                            total=len(tasks) * orders)  # fmt: skip
    for algo, env in tasks:
        pairs = [(m, "baseline") for m in [*others]]
        pvalues = [welch_p(data[algo, env, m], data[algo, env, "baseline"]) for m in others]
        fixed_holm = holm(pvalues)
        verdicts: dict[str, list[str]] = {m: [] for m in others}
        seeds_used: dict[str, list[int]] = {m: [] for m in others}
        for _ in range(orders):
            values = {m: rng.permutation(data[algo, env, m]) for m in ["baseline", *others]}
            outcome = decide(values, pairs, replace(design, seed=int(rng.integers(2**31))))
            for m in others:
                verdicts[m].append(outcome.verdicts[m, "baseline"])
                seeds_used[m].append(design.interim_seeds * outcome.decided_at[m, "baseline"])
            progress.advance(bar)
        for m, p, h in zip(others, pvalues, fixed_holm, strict=True):
            different = np.mean([v in ("larger", "smaller") for v in verdicts[m]])
            rows.append(
                {
                    "algo": algo,
                    "env": env,
                    "method": m,
                    "welch_p": p,
                    "fixed": p < ALPHA,
                    "fixed_holm": h,
                    "sequential_different": float(different),
                    "majority": different > 0.5,
                    "seeds": float(np.mean(seeds_used[m])),
                    "direction": max(set(verdicts[m]), key=verdicts[m].count),
                }
            )
    return rows


def _per_order(power: list[dict], column: str) -> float:
    return float(np.mean([(r["sequential_different"] if r[column] else 1 - r["sequential_different"]) for r in power]))


def _seed_share(power: list[dict], column: str) -> str:
    rows = [r for r in power if r[column]]
    return f"{np.mean([r['seeds'] for r in rows]) / 10:.1%} of 10" if rows else "–"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the published curves' 'Learning Curves' folder")
    parser.add_argument("--replays", type=int, default=12, help="A/A studies per (algorithm, task, method)")
    parser.add_argument("--orders", type=int, default=40, help="seed orders per task for power and cost")
    parser.add_argument("--estimand", choices=("final", "auc"), default="final")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--designs", default="5x2,2x5,3x3", help="power and cost: designs n×K (seeds per interim × interims), n·K ≤ 10"
    )
    args = parser.parse_args()
    console = Console()
    data = load(args.root.resolve(), args.estimand)
    started = time.perf_counter()
    designs = [Design(alpha=ALPHA, interim_seeds=int(d.split("x")[0]), max_interims=int(d.split("x")[1]))
               for d in args.designs.split(",")]  # fmt: skip
    with Progress(console=console, transient=True) as progress:
        aa = error_control(data, args.replays, progress, args.seed)
        powers = [power_and_cost(data, args.orders, progress, args.seed + 1, d) for d in designs]

    table = Table(title=f"A/A on the published seeds ({args.estimand}): n = 5, K = 4, α = {ALPHA}")
    for column in ("arms", "studies", "AdaStop: any 'different'", "± MC (95%)", "Welch p < 0.05 at any look"):
        table.add_column(column, justify="right")
    for label, count, rate, welch in aa:
        table.add_row(
            label, f"{count:,}", f"{rate:.4f}", f"{1.96 * (ALPHA * (1 - ALPHA) / count) ** 0.5:.4f}", f"{welch:.4f}"
        )
    console.print(table)

    summary = Table(
        title=f"Baseline against each method, {len(powers[0])} pairs: AdaStop vs the fixed test on 10 seeds"
    )
    summary.add_column("")
    for design in designs:
        summary.add_column(f"n = {design.interim_seeds}, K = {design.max_interims}", justify="right")
    lines: list[tuple[str, Any]] = [
        ("pairs fixed Welch calls different (p < 0.05)", lambda p: f"{sum(r['fixed'] for r in p)}"),
        ("… with Holm over each task's five pairs", lambda p: f"{sum(r['fixed_holm'] for r in p)}"),
        ("pairs AdaStop calls different (majority of orders)", lambda p: f"{sum(r['majority'] for r in p)}"),
        (
            "same verdict as fixed Welch (majority)",
            lambda p: f"{np.mean([r['majority'] == r['fixed'] for r in p]):.1%}",
        ),
        ("same verdict as fixed Welch (every order)", lambda p: f"{_per_order(p, 'fixed'):.1%}"),
        (
            "same verdict as Welch + Holm (majority)",
            lambda p: f"{np.mean([r['majority'] == r['fixed_holm'] for r in p]):.1%}",
        ),
        ("seeds used where fixed Welch says different", lambda p: _seed_share(p, "fixed")),
        ("seeds used where Welch + Holm says different", lambda p: _seed_share(p, "fixed_holm")),
        ("seeds used, all pairs", lambda p: f"{np.mean([r['seeds'] for r in p]) / 10:.1%} of 10"),
    ]
    for label, cell in lines:
        summary.add_row(label, *[cell(p) for p in powers])
    console.print(summary)
    power = powers[0]

    detail = Table(title=f"Per pair, n = {designs[0].interim_seeds}, K = {designs[0].max_interims} (share of orders"
                         " decided different, modal verdict, mean seeds)")  # fmt: skip
    for column in (
        "algo",
        "env",
        "method",
        "Welch p (10 seeds)",
        "fixed",
        "Holm",
        "seq. different",
        "verdict",
        "seeds",
    ):
        detail.add_column(column)
    for r in power:
        detail.add_row(
            r["algo"],
            r["env"],
            r["method"],
            f"{r['welch_p']:.3g}",
            "diff" if r["fixed"] else "-",
            "diff" if r["fixed_holm"] else "-",
            f"{r['sequential_different']:.0%}",
            r["direction"],
            f"{r['seeds']:.1f}",
        )
    console.print(detail)
    console.print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
