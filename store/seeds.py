"""One run per seed: the runs a method's statistics count.

A method's seeds are its independent replications. Two runs of one method with the same seed, on one
environment from one source (say `sweeps/quick.toml`'s seed 0 at 3,000 steps and a `--compare` study's
seed 0 at 100,000 steps, which differ only in their budget or evaluation schedule), are the same
replication trained twice: counting both would count one seed as two and shrink every interval and
p-value. So each method keeps one run per seed, the one that has reached furthest (it counts at the most
budgets; ties: the newest), and the others are left out, said by the table that leaves them out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from store.variants import method_of

Run = TypeVar("Run", bound=Mapping[str, Any])


def one_per_seed(runs: Sequence[Run], reach: Mapping[int, int]) -> tuple[list[Run], list[tuple[Run, Run]]]:
    """(``runs`` with one per method and seed, in their order; (left out, kept instead) for each other).

    A method is :func:`store.variants.method_of` and the run's ``variant``; ``reach``: each run's latest
    evaluated step (a run without an evaluation reaches nowhere). A run without a seed stands alone."""
    best: dict[tuple[Any, ...], Run] = {}
    for run in runs:
        if run.get("seed") is None:
            continue
        key = (*method_of(run), run.get("variant", ""), run["seed"])
        held = best.get(key)
        if held is None or (reach.get(run["id"], -1), run["id"]) > (reach.get(held["id"], -1), held["id"]):
            best[key] = run
    kept, dropped = [], []
    for run in runs:
        if run.get("seed") is None:
            kept.append(run)
            continue
        chosen = best[(*method_of(run), run.get("variant", ""), run["seed"])]
        if chosen is run:
            kept.append(run)
        else:
            dropped.append((run, chosen))
    return kept, dropped


def repeats_note(dropped: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> str:
    """``2 runs repeat a seed of their method, left out (run 1 for run 9, run 3 for run 11): one run a seed,
    the one that reached furthest``; empty when none."""
    if not dropped:
        return ""
    pairs = ", ".join(f"run {a['id']} for run {b['id']}" for a, b in dropped[:4])
    more = f", {len(dropped) - 4} more" if len(dropped) > 4 else ""
    said = "runs repeat a seed of their" if len(dropped) > 1 else "run repeats a seed of its"
    return f"{len(dropped)} {said} method, left out ({pairs}{more}): one run a seed, the one that reached furthest"
