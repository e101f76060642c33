"""Issue 49: how much of each run's actor sits at its action bounds, over a window of steps.

For every run of a store (or those named): the mean of ``at_bound`` (the share of π(s) entries on
replayed states within 1% of the bounds, per actor update) over env steps (--from, --to], the share of
evaluation actions at the bounds and the return at the last evaluation in the window, the mean λ and
the decay's share of the critic's gradient over the window, and where the critic's decay entered
(``critic_decay_form``, where it matters: a decay and a correction; runs stored before the option
read as adam). A last table pairs methods by
seed: each correction against the plain run of the same seed, algorithm and environment.

    python -m benchmarks.diagnostics.saturation_share --db offpoc.db --from 5000 --to 10000
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from agents.config import TrainConfig
from agents.plugins import algorithm_names
from store import open_store
from store.reader import configs, list_runs, quantity_rows


def in_window(db: Any, run_id: int, quantity: str, low: int, high: int) -> list[float]:
    """A run's values of ``quantity`` logged at env steps in (low, high], in order."""
    return [float(v[0]) for _, step, _, v in quantity_rows(db, run_id, quantity) if low < step <= high]


def window_mean(db: Any, run_id: int, quantity: str, low: int, high: int) -> float | None:
    values = in_window(db, run_id, quantity, low, high)
    return statistics.fmean(values) if values else None


def last_in_window(db: Any, run_id: int, quantity: str, low: int, high: int) -> float | None:
    values = in_window(db, run_id, quantity, low, high)
    return values[-1] if values else None


def cell(value: float | None, form: str = "{:.2f}") -> str:
    return "–" if value is None else form.format(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--from", dest="low", type=int, default=5000, help="window start, env steps (exclusive)")
    parser.add_argument("--to", dest="high", type=int, default=10000, help="window end, env steps (inclusive)")
    parser.add_argument("runs", type=int, nargs="*")
    args = parser.parse_args()
    db = open_store(args.db)
    runs = list_runs(db, run_ids=args.runs) if args.runs else list_runs(db)
    stored = configs(db, [r["id"] for r in runs])
    rows = []
    print(f"window: env steps ({args.low:,}, {args.high:,}]")
    header = "run  algo  env             correction  decay  seed  π(s) at bounds  eval at bounds  return"
    print(header + "     λ    decay share")
    for r in runs:
        config = TrainConfig.from_dict(stored[r["id"]])
        form = config.critic_decay_form if config.decay_form_matters() else "–"
        ret = db.execute(
            "SELECT return_mean FROM evaluations WHERE run_id = ? AND step > ? AND step <= ? ORDER BY step DESC",
            [r["id"], args.low, args.high],
        ).fetchone()
        row = {
            "run": r, "form": form,
            "at_bound": window_mean(db, r["id"], "at_bound", args.low, args.high),
            "eval": last_in_window(db, r["id"], "eval_at_bound", args.low, args.high),
            "return": ret[0] if ret else None,
            "lambda": window_mean(db, r["id"], "lambda", args.low, args.high),
            "decay": window_mean(db, r["id"], "decay_share", args.low, args.high),
        }  # fmt: skip
        rows.append(row)
        print(f"{r['id']:>3}  {r['algo']:<5} {r['env']:<15} {r['correction']:<11} {form:<5} {r['seed']:>5}"
              f"  {cell(row['at_bound']):>14}  {cell(row['eval']):>14}  {cell(row['return'], '{:,.0f}'):>6}"
              f"  {cell(row['lambda']):>5}  {cell(row['decay'], '{:.3f}'):>11}")  # fmt: skip
    # The baseline: the plain run of the seed at the algorithm's default decay; every other run against it.
    default = {a: TrainConfig(algo=a).resolved().critic_weight_decay for a in algorithm_names()}
    decay = {x["run"]["id"]: stored[x["run"]["id"]].get("critic_weight_decay") for x in rows}
    plain = {
        (x["run"]["algo"], x["run"]["env"], x["run"]["seed"]): x
        for x in rows
        if x["run"]["correction"] == "none" and decay[x["run"]["id"]] in (None, default[x["run"]["algo"]])
    }
    pairs: dict[str, list[tuple[float, float]]] = {}
    for x in rows:
        run = x["run"]
        base = plain.get((run["algo"], run["env"], run["seed"]))
        if base is None or base is x or None in (x["at_bound"], base["at_bound"]):
            continue
        label = run["correction"] + (f" (decay {x['form']})" if run["correction"] != "none" else "")
        if decay[run["id"]] not in (None, default[run["algo"]]):
            label += f", critic_weight_decay {decay[run['id']]}"
        pairs.setdefault(label, []).append((base["at_bound"], x["at_bound"]))
    if pairs:
        print("\nπ(s) at the bounds, each method against the plain run of the same seed (mean over seeds):")
        for label, values in sorted(pairs.items()):
            base, other = (statistics.fmean(v) for v in zip(*values, strict=True))
            higher = sum(c > b for b, c in values)
            print(f"  {label}: {other:.2f} against {base:.2f} plain, higher in {higher} of {len(values)} seeds")


if __name__ == "__main__":
    main()
