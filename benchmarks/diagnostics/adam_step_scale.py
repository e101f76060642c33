"""Issue 66: how much a per-batch λ changes Adam's steps, from the λ a run logged.

Deterministic AC-Off-POC scales each update's critic and actor loss by the batch's λ (the paper's λ·mean).
Adam divides its first moment (an average over ~1/(1 − β₁) = 10 steps) by the root of its second (~1/(1 − β₂)
= 1,000 steps), so a gradient λ_t·g_t moves the parameters by about

    r_t = EMA_β₁(λ)_t / √EMA_β₂(λ²)_t

times the step the unweighted gradient g would take, where g's own statistics change slowly over 1,000
updates (both averages bias-corrected as Adam's are). A constant λ gives r = 1: the plain algorithm. This
prints r's distribution over each run's updates after ``--from`` steps: how far AC-Off-POC's steps depart
from its baseline's.

    python -m benchmarks.diagnostics.adam_step_scale --db runs/hopper-300k.db --run 1444 1446 --from 50000
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from agents import plugins
from store import open_store
from store.reader import quantity_rows, run_detail


def ema(values: np.ndarray, beta: float) -> np.ndarray:
    """Adam's bias-corrected exponential average of ``values`` after each step."""
    out = np.empty_like(values)
    acc = 0.0
    for t, v in enumerate(values, start=1):
        acc = beta * acc + (1 - beta) * v
        out[t - 1] = acc / (1 - beta**t)
    return out


def step_scale(lambdas: np.ndarray, beta1: float = 0.9, beta2: float = 0.999) -> np.ndarray:
    """r_t for a sequence of per-step λ (see the module's docstring)."""
    return ema(lambdas, beta1) / np.sqrt(ema(lambdas**2, beta2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--run", type=int, nargs="+", required=True)
    parser.add_argument("--from", dest="start", type=int, default=50_000, help="leave out updates before this step")
    args = parser.parse_args()
    db = open_store(args.db)
    print("| run | seed | steps | updates | λ mean ± sd | critic's r: mean ± sd, 1st–99th pct | actor's r, the same |")
    print("|---|---|---|---|---|---|---|")
    for run_id in args.run:
        run = run_detail(db, run_id)
        if run is None:
            raise SystemExit(f"no run {run_id} in {args.db}")
        entry = plugins.algorithm(run["algo"])
        if entry is not None and entry.policy_kind == "stochastic":
            raise SystemExit(f"run {run_id} is {run['algo']}: its λ_i weigh transitions within a batch, which Adam does"
                             " not undo; r describes a per-batch λ only")  # fmt: skip
        if run["config"].get("critic_decay_form") == "adam" and run["config"].get("critic_weight_decay"):
            print(f"(run {run_id}: its critic's decay is Adam's, unscaled by λ: the critic's r overstates λ's effect)")
        rows = [(step, float(v[0])) for _, step, _, v in quantity_rows(db, run_id, "lambda")]
        steps = np.array([s for s, _ in rows])
        lam = np.array([v for _, v in rows])
        delay = int(run["config"].get("policy_delay", 1) or 1)  # the actor steps every delay-th update
        kept = steps > args.start  # Adam's averages run over every update; r is read from --from on
        if not kept.any():
            raise SystemExit(f"run {run_id} logged no per-batch λ after step {args.start:,}")

        def described(r: np.ndarray) -> str:
            low, high = np.percentile(r, [1, 99])
            return f"{r.mean():.4f} ± {r.std():.4f}, {low:.3f}–{high:.3f}"

        critic = step_scale(lam)[kept]
        actor = step_scale(lam[delay - 1 :: delay])[kept[delay - 1 :: delay]]
        print(
            f"| {run_id} | {run['seed']} | {steps[kept][0]:,}–{steps[kept][-1]:,} | {kept.sum():,} |"
            f" {lam[kept].mean():.3f} ± {lam[kept].std():.3f} | {described(critic)} | {described(actor)} |"
        )


if __name__ == "__main__":
    main()
