"""Issue 66: each seed trained here beside the published seeds' range at one window, and the sequential verdict.

For one algorithm on one environment family: each seed's final return (``offpoc export --table finals``: the mean
over the last ``--last-steps`` steps up to ``--until``), whether it lies within the published seeds' lowest and
highest there (seeds flagged as copies of another left out, as ``--dedupe`` does; every divergence of a correction
against its published curves, which are of one), its mean λ; then AdaStop
(docs/sequential.md) on the seeds trained here that have reached the budget, each correction against the
baseline (``none``), ``--interim-seeds`` seeds an interim, with the difference's repeated confidence
interval. Seeds short of the budget are listed and left out of the verdict. The verdict takes as many seeds from
every method as the one with the fewest has, in run order (it prints which); ``--verdict-methods`` leaves the
others out of it.

    python -m benchmarks.diagnostics.seeds_in_range --db runs/hopper-300k.db --algo td3 --env Hopper \\
        --until 300000 --last-steps 50000 --interim-seeds 2 --verdict-methods none acoffpoc/jsd

The store must hold the published curves too: ``offpoc import reference ../shared/reference-curves --db DB``
(into a store that is training, too: the import is one transaction beside the workers' writes).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path
from typing import Any

from store import open_store
from store.export import columns
from store.sequential import Design, decide, interval
from store.stats import FinalWindow
from store.summary import final_rows


def method_of(row: dict[str, Any]) -> str:
    return row["correction"] if row["correction"] == "none" else f"{row['correction']}/{row['divergence']}"


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--algo", required=True)
    parser.add_argument("--env", required=True, help="an id or a family (Hopper)")
    parser.add_argument("--until", type=positive, required=True)
    parser.add_argument("--last-steps", type=positive, default=50_000)
    parser.add_argument("--interim-seeds", type=positive, default=2)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument(
        "--verdict-methods",
        nargs="+",
        metavar="METHOD",
        help="the methods the verdict compares (as the table names them: none, acoffpoc/jsd, ...); default all. "
        "The verdict takes as many seeds from each as its method with the fewest has, so leave out a method "
        "trained on fewer seeds to decide on the others' every seed",
    )
    args = parser.parse_args()

    db = open_store(args.db)
    header = columns("finals")
    rows = [
        dict(zip(header, r, strict=True))
        for r in final_rows(
            db, FinalWindow(steps=args.last_steps), args.until, dedupe=True, algos=[args.algo], envs=[args.env]
        )
    ]
    published: dict[str, list[float]] = defaultdict(list)  # by correction: the published curves are of one
    for row in rows:  # divergence each (AC-Off-POC's imported as jsd, made by the authors' code's symkl)
        if row["source"] == "published" and row["final_return"] is not None:
            published[row["correction"]].append(row["final_return"])
    window = f"steps {args.until - args.last_steps:,}–{args.until:,}"
    print(f"{args.algo} on {args.env}: each seed's mean return over {window}, against the published seeds there\n")
    print("| run | method | seed | return | published seeds: lowest–highest (mean, n) | within? | mean λ |")
    print("|---|---|---|---|---|---|---|")
    ours: dict[str, list[float]] = defaultdict(list)
    seeds_of: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        if row["source"] != "offpoc":
            continue
        method, final = method_of(row), row["final_return"]
        span = published.get(row["correction"], [])
        ref = f"{min(span):,.0f}–{max(span):,.0f} ({sum(span) / len(span):,.0f}, {len(span)})" if span else "none"
        if final is None:
            if row["reached"] is None:
                why = "no evaluation yet"
            elif row["budget"] is not None and row["reached"] >= row["budget"]:
                why = "no evaluation in the window after learning starts"
            else:
                why = f"short of the budget, at {row['reached']:,}"
            print(f"| {row['run_id']} | {method} | {row['seed']} | – ({why}) | {ref} | – | – |")
            continue
        ours[method].append(final)
        seeds_of[method].append(row["seed"])
        inside = (
            "–" if not span else "yes" if min(span) <= final <= max(span) else "below" if final < min(span) else "above"
        )
        lam = f"{row['mean_lambda']:.3f}" if row["mean_lambda"] is not None else "–"
        print(f"| {row['run_id']} | {method} | {row['seed']} | {final:,.0f} | {ref} | {inside} | {lam} |")

    if args.verdict_methods:
        unknown = sorted(set(args.verdict_methods) - set(ours))
        if unknown:
            print(f"\nno verdict: no seeds at the budget for {', '.join(unknown)}")
            return
        ours = defaultdict(list, {m: v for m, v in ours.items() if m in args.verdict_methods})
    methods = [m for m in ours if m != "none"]
    if "none" not in ours or not methods:
        print("\nno verdict: the baseline and a correction both need seeds at the budget")
        return
    seeds = min(len(v) for v in ours.values())
    n = args.interim_seeds
    interims = seeds // n
    if interims < 1:
        print(f"\nno verdict: {seeds} seeds per method, fewer than one interim of {n}")
        return
    design = Design(alpha=args.alpha, interim_seeds=n, max_interims=interims)
    values = {m: v[: interims * n] for m, v in ours.items()}
    pairs = [(m, "none") for m in methods]
    outcome = decide(values, pairs, design)
    print(f"\nAdaStop, α = {args.alpha} over {len(pairs)} comparison(s), {n} seeds an interim, {interims} interim(s):")
    used = "; ".join(f"{m} {', '.join(map(str, seeds_of[m][: interims * n]))}" for m in ["none", *methods])
    print(f"  seeds, in the order the interims take them: {used}")
    for pair in pairs:
        last = outcome.decided_at.get(pair, len(outcome.interims))
        interim = outcome.interims[last - 1]  # its statistic and Holm's level there, as the study computed them
        low, high = interval(values, pair, design, last, remaining=round(args.alpha / interim.levels[pair]))
        diff = interim.statistics[pair]
        print(
            f"  {pair[0]} − none: {diff:+,.0f} [{low:,.0f}, {high:,.0f}] after {last} interim(s):"
            f" {outcome.verdicts[pair]}"
        )


if __name__ == "__main__":
    main()
