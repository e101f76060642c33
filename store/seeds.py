"""One run per seed: the runs a method's statistics count.

A method's seeds are its independent replications. Two runs of one method trained here with the same
seed, on one environment (say `sweeps/quick.toml`'s seed 0 at 3,000 steps and a `--compare` study's
seed 0 at 100,000 steps, which differ only in their budget or evaluation schedule), are the same
replication trained twice: counting both would count one seed as two and shrink every interval and
p-value. So each method keeps one run per seed, the one that has reached furthest (it counts at the most
budgets; ties: the newest), and the others are left out, said by the table that leaves them out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from store.tasks import source_of
from store.variants import method_of

Run = TypeVar("Run", bound=Mapping[str, Any])


def one_per_seed(runs: Sequence[Run], reach: Mapping[int, int]) -> tuple[list[Run], list[tuple[Run, Run]]]:
    """(``runs`` with one per method and seed, in their order; (left out, kept instead) for each other).

    A method is :func:`store.variants.method_of` and the run's ``variant``; ``reach``: each run's latest
    evaluated step (a run without an evaluation reaches nowhere). Imported runs and runs without a seed stand alone."""
    best: dict[tuple[Any, ...], Run] = {}
    for run in runs:
        if not _own(run):
            continue
        key = (*method_of(run), run.get("variant", ""), run["seed"])
        held = best.get(key)
        if held is None or (reach.get(run["id"], -1), run["id"]) > (reach.get(held["id"], -1), held["id"]):
            best[key] = run
    kept, dropped = [], []
    for run in runs:
        if not _own(run):
            kept.append(run)
            continue
        chosen = best[(*method_of(run), run.get("variant", ""), run["seed"])]
        if chosen is run:
            kept.append(run)
        else:
            dropped.append((run, chosen))
    return kept, dropped


def _own(run: Mapping[str, Any]) -> bool:
    """A run trained here with a seed. Imported curves keep theirs: the published ones are distinct seeds
    already, and a zoo import's seed is its folder's number (or one given for a whole folder), which two
    different runs may share; copies among imports are :mod:`store.duplicates`' to find."""
    return run.get("seed") is not None and source_of(run) == "offpoc"


def repeats_note(dropped: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> str:
    """``2 runs repeat a seed of their method, left out (run 1 for run 9, run 3 for run 11): one run a seed,
    the one that reached furthest``; empty when none."""
    if not dropped:
        return ""
    pairs = ", ".join(f"run {a['id']} for run {b['id']}" for a, b in dropped[:4])
    more = f", {len(dropped) - 4} more" if len(dropped) > 4 else ""
    said = "runs repeat a seed of their" if len(dropped) > 1 else "run repeats a seed of its"
    return f"{len(dropped)} {said} method, left out ({pairs}{more}): one run a seed, the one that reached furthest"
