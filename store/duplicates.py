"""Seeds that are the same run plus noise: near-identical curves within one method on one task.

Two seeds' curves are near-identical when, over the steps both evaluated, they correlate at
:data:`MIN_CORRELATION` or more and their difference is white noise (lag-1 autocorrelation within
±:data:`MAX_AUTOCORRELATION`, or 3/√n for a curve of n < 900 points): independent seeds differ
by a smooth, drifting gap, a run copied with noise added by an uncorrelated one. On the published
curves this flags 52 pairs, every one with a difference of standard deviation 1.3 to 1.5 (e.g.
``SAC_Hopper-v2`` seeds 0 and 1), and nothing else. A flagged run records the lowest seed of its
cluster as ``duplicate_of``; statistics leave flagged runs out with ``--dedupe``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlite_utils

from store.db import write
from store.reader import DEFAULT_SAMPLER, list_runs
from store.runs import RunRow
from store.tasks import source_of

MIN_CORRELATION = 0.99
MAX_AUTOCORRELATION = 0.1
MIN_POINTS = 10
"""Fewer shared evaluations than this are too few to tell."""


def near_identical(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two curves on the same steps are one run plus noise (see the module docstring)."""
    if len(a) < MIN_POINTS or np.std(a) == 0 or np.std(b) == 0:
        return False
    if np.corrcoef(a, b)[0, 1] < MIN_CORRELATION:
        return False
    gap = (a - b) - np.mean(a - b)
    power = float(np.sum(gap * gap))
    if power == 0:
        return True  # the same numbers
    # White noise's lag-1 autocorrelation spreads as 1/√n: a short curve's bound is 3 of those.
    bound = max(MAX_AUTOCORRELATION, 3 / np.sqrt(len(a)))
    return abs(float(np.sum(gap[1:] * gap[:-1])) / power) < bound


@dataclass(frozen=True)
class Duplicate:
    run_id: int
    of: int
    """The run it copies: the lowest seed of its cluster."""
    label: str
    """``td3 Hopper-v2 none [published]: seed 1 = seed 0``."""


def find_duplicates(db: sqlite_utils.Database, run_ids: list[int] | None = None) -> list[Duplicate]:
    """Near-identical seeds within each (algo, env, correction, divergence, sampler, source) among ``run_ids``
    (default: every run), compared on the steps both evaluated."""
    groups: dict[tuple[Any, ...], list[RunRow]] = {}
    for run in list_runs(db, run_ids=run_ids):
        key = (run["algo"], run["env"], run["correction"], run["divergence"], run.get("sampler"), source_of(run))
        groups.setdefault(key, []).append(run)
    found = []
    for key, runs in groups.items():
        if len(runs) < 2:
            continue
        curves = {r["id"]: _curve(db, r["id"]) for r in sorted(runs, key=lambda r: (r["seed"], r["id"]))}
        seeds = {r["id"]: r["seed"] for r in runs}
        root = {run_id: run_id for run_id in curves}
        for a, b in itertools.combinations(curves, 2):
            (steps_a, a_values), (steps_b, b_values) = curves[a], curves[b]
            _, ia, ib = np.intersect1d(steps_a, steps_b, return_indices=True)
            if near_identical(a_values[ia], b_values[ib]) and root[b] == b:
                root[b] = root[a]
        algo, env, correction, divergence, sampler, source = key
        method = correction + (f"/{divergence}" if divergence else "")
        method += f"+{sampler}" if sampler not in (None, DEFAULT_SAMPLER) else ""
        for run_id, of in root.items():
            if of != run_id:
                label = f"{algo} {env} {method} [{source}]: seed {seeds[run_id]} = seed {seeds[of]}"
                found.append(Duplicate(run_id, of, label))
    return found


def _curve(db: sqlite_utils.Database, run_id: int) -> tuple[np.ndarray, np.ndarray]:
    rows = db.execute("SELECT step, return_mean FROM evaluations WHERE run_id = ? ORDER BY step", [run_id]).fetchall()
    return np.asarray([r[0] for r in rows], dtype=np.int64), np.asarray([r[1] for r in rows], dtype=np.float64)


def flag_duplicates(db: sqlite_utils.Database, run_ids: list[int] | None = None) -> list[Duplicate]:
    """Find near-identical seeds among ``run_ids`` (default: all) and record them; the others' flags clear."""
    found = find_duplicates(db, run_ids)
    with write(db):
        ids = run_ids if run_ids is not None else [r[0] for r in db.execute("SELECT id FROM runs")]
        db.conn.executemany("UPDATE runs SET duplicate_of = NULL WHERE id = ?", [[i] for i in ids])
        db.conn.executemany("UPDATE runs SET duplicate_of = ? WHERE id = ?", [[d.of, d.run_id] for d in found])
    return found
