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
Against it the fixed tests on all 10 seeds: Welch's p < 0.05 per pair, and the two-sided permutation test of
the mean difference (all C(20, 10) splits) with Holm's step-down over the task's five pairs (the same
family-wise control as AdaStop's): the share of that test's differences the study finds, order by order.

**Partial null (strong control).** ``--partial`` studies each: five comparisons with the baseline where one
method equals it and four differ: on normal data, four tight methods (sd 0.05) at means ±0.3 and ±0.6 against
N(0, 1); on the published seeds, per task, the equal method drawn from the baseline's seeds and the four others
from AC-Off-POC's, ACE's, Geoff-PAC's and IPG's; n = 5, K = 2. The rate at which the equal pair is called
different, with its 95% Wilson interval, is to be ≤ α.

**Coverage.** ``--coverage`` studies per shift (0, 0.5, 1 and 2 sd) of two methods on normal data, the
default design (n = 5, K = 4; 2,000 permutation samples), each stopped where its test stops: the share whose
repeated confidence interval at the stop covers the true difference, against the same seeds' fixed-sample
interval (the test inverted as if the seeds at the stop had been planned as one look).

**No undoing.** 200 draws of a baseline N(0, 1) and a method N(1.3, 1), 10 seeds each: the pairs decided in a
study of the two alone, and how many stay decided (the same way) when a third method N(20, 1) joins it.
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from store.sequential import Design, decide, interval
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


def wilson(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion."""
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * (p * (1 - p) / trials + z * z / (4 * trials * trials)) ** 0.5 / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


class FixedPermutation:
    """The two-sided permutation test of a difference in means, every split of 2·seeds values enumerated."""

    def __init__(self, seeds: int) -> None:
        self.seeds = seeds
        self.splits = np.array(list(itertools.combinations(range(2 * seeds), seeds)), dtype=np.int8)

    def p(self, a: np.ndarray, b: np.ndarray) -> float:
        pooled = np.concatenate([a, b])
        first = pooled[self.splits].sum(axis=1)
        difference = np.abs(2 * first - pooled.sum()) / self.seeds  # |mean of one side − mean of the other|
        observed = abs(a.mean() - b.mean())
        return float(np.mean(difference >= observed - 1e-12 * max(1.0, observed)))


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


def power_and_cost(
    data: dict, orders: int, progress: Progress, seed: int, design: Design, fixed: FixedPermutation
) -> list[dict]:
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
        permutation_holm = holm([fixed.p(data[algo, env, m], data[algo, env, "baseline"]) for m in others])
        signs = {m: np.sign(data[algo, env, m].mean() - data[algo, env, "baseline"].mean()) for m in others}
        verdicts: dict[str, list[str]] = {m: [] for m in others}
        seeds_used: dict[str, list[int]] = {m: [] for m in others}
        for _ in range(orders):
            values = {m: rng.permutation(data[algo, env, m]) for m in ["baseline", *others]}
            outcome = decide(values, pairs, replace(design, seed=int(rng.integers(2**31))))
            for m in others:
                verdicts[m].append(outcome.verdicts[m, "baseline"])
                seeds_used[m].append(design.interim_seeds * outcome.decided_at[m, "baseline"])
            progress.advance(bar)
        for m, p, h, ph in zip(others, pvalues, fixed_holm, permutation_holm, strict=True):
            different = np.mean([v in ("larger", "smaller") for v in verdicts[m]])
            agreeing = np.mean([v == ("larger" if signs[m] > 0 else "smaller") for v in verdicts[m]])
            rows.append(
                {
                    "algo": algo,
                    "env": env,
                    "method": m,
                    "welch_p": p,
                    "fixed": p < ALPHA,
                    "fixed_holm": h,
                    "permutation_holm": ph,
                    "sequential_same_sign": float(agreeing),
                    "sequential_different": float(different),
                    "majority": different > 0.5,
                    "seeds": float(np.mean(seeds_used[m])),
                    "direction": max(set(verdicts[m]), key=verdicts[m].count),
                }
            )
    return rows


def partial_null(data: dict, studies: int, progress: Progress, seed: int) -> list[tuple[str, int, int]]:
    """(setting, studies, studies that called the equal pair different)."""
    design = Design(alpha=ALPHA, interim_seeds=5, max_interims=2)
    pairs = [(f"m{i}", "base") for i in range(5)]
    rng = np.random.default_rng(seed)
    tasks = sorted({(a, e) for a, e, _ in data})
    settings: list[tuple[str, Any]] = [(f"normal, four at ±{spread}", spread) for spread in (0.3, 0.6)] + [
        ("published seeds, four competitors", None)
    ]
    rows = []
    for label, spread in settings:
        bar = progress.add_task(f"partial null: {label}", total=studies)
        different = 0
        for _ in range(studies):
            if spread is not None:
                values = {"base": rng.normal(0.0, 1.0, 10), "m0": rng.normal(0.0, 1.0, 10)}
                for i, mean in enumerate((spread, -spread, spread, -spread), start=1):
                    values[f"m{i}"] = rng.normal(mean, 0.05, 10)
            else:
                algo, env = tasks[int(rng.integers(len(tasks)))]
                base = data[algo, env, "baseline"]
                values = {"base": rng.choice(base, 10), "m0": rng.choice(base, 10)}
                for i, method in enumerate(("AC-Off-POC", "ACE", "Geoff-PAC", "IPG"), start=1):
                    values[f"m{i}"] = rng.choice(data[algo, env, method], 10)
            outcome = decide(values, pairs, replace(design, seed=int(rng.integers(2**31))))
            different += outcome.verdicts["m0", "base"] in ("larger", "smaller")
            progress.advance(bar)
        rows.append((label, studies, different))
    return rows


def coverage(studies: int, progress: Progress, seed: int) -> list[tuple[float, int, float, float, float]]:
    """(shift, studies, share stopped early, coverage of the repeated interval, of the fixed-sample one)."""
    design = Design(alpha=ALPHA, interim_seeds=5, max_interims=4, permutations=2000)
    rng = np.random.default_rng(seed)
    rows = []
    for shift in (0.0, 0.5, 1.0, 2.0):
        bar = progress.add_task(f"coverage, shift {shift} sd", total=studies)
        early = covered = fixed = 0
        for _ in range(studies):
            values = {"a": rng.normal(shift, 1.0, 20), "b": rng.normal(0.0, 1.0, 20)}
            study = replace(design, seed=int(rng.integers(2**31)))
            stop = decide(values, [("a", "b")], study).decided_at["a", "b"]
            low, high = interval(values, ("a", "b"), study, stop)
            one_look = replace(study, interim_seeds=5 * stop, max_interims=1)
            seen = {m: v[: 5 * stop] for m, v in values.items()}
            fixed_low, fixed_high = interval(seen, ("a", "b"), one_look, 1)
            early += stop < design.max_interims
            covered += low <= shift <= high
            fixed += fixed_low <= shift <= fixed_high
            progress.advance(bar)
        rows.append((shift, studies, early / studies, covered / studies, fixed / studies))
    return rows


def no_undoing(seed: int) -> tuple[int, int]:
    """(pairs decided alone, of them still decided the same way with a far-better third method)."""
    design = Design(alpha=ALPHA, interim_seeds=5, max_interims=2)
    rng = np.random.default_rng(seed)
    decided = kept = 0
    for _ in range(200):
        values = {"base": rng.normal(0, 1, 10), "m1": rng.normal(1.3, 1, 10), "far": rng.normal(20, 1, 10)}
        study = replace(design, seed=int(rng.integers(2**31)))
        alone = decide({m: values[m] for m in ("base", "m1")}, [("m1", "base")], study).verdicts["m1", "base"]
        if alone in ("larger", "smaller"):
            decided += 1
            kept += decide(values, [("m1", "base"), ("far", "base")], study).verdicts["m1", "base"] == alone
    return decided, kept


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
    parser.add_argument("--partial", type=int, default=2000, help="partial-null studies per setting")
    parser.add_argument("--coverage", type=int, default=2000, help="coverage studies per shift")
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
        fixed = FixedPermutation(10)
        powers = [power_and_cost(data, args.orders, progress, args.seed + 1, d, fixed) for d in designs]
        partial = partial_null(data, args.partial, progress, args.seed + 2)
        covering = coverage(args.coverage, progress, args.seed + 4)
    decided, kept = no_undoing(args.seed + 3)

    table = Table(title="Coverage of the difference's 95% interval at the stop, n = 5, K = 4, normal data")
    for column in ("shift (sd)", "studies", "stopped early", "repeated interval", "fixed-sample interval"):
        table.add_column(column, justify="right")
    for shift, count, early, covered, fixed in covering:
        table.add_row(f"{shift}", f"{count:,}", f"{early:.1%}", f"{covered:.1%}", f"{fixed:.1%}")
    console.print(table)

    table = Table(title=f"Partial null: one method equal to the baseline among five, n = 5, K = 2, α = {ALPHA}")
    for column in ("setting", "studies", "equal pair called different", "95% interval"):
        table.add_column(column, justify="right")
    for label, count, different in partial:
        low, high = wilson(different, count)
        table.add_row(label, f"{count:,}", f"{different / count:.4f}", f"[{low:.4f}, {high:.4f}]")
    console.print(table)
    console.print(
        f"No undoing: {decided} of 200 pairs decided alone; {kept} of them ({kept / max(decided, 1):.1%}) still"
        " decided, the same way, with a far-better third method in the study"
    )

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
        ("pairs the permutation test + Holm calls different", lambda p: f"{sum(r['permutation_holm'] for r in p)}"),
        (
            "… of them found by the study, same sign (every order)",
            lambda p: f"{np.mean([r['sequential_same_sign'] for r in p if r['permutation_holm']]):.1%}",
        ),
        ("seeds used where the permutation test + Holm says different", lambda p: _seed_share(p, "permutation_holm")),
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
