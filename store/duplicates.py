"""Seeds that are the same run plus noise: near-identical curves within one method on one task.

Two seeds' curves are near-identical when, over the steps both evaluated, they correlate at
:data:`MIN_CORRELATION` or more and their difference is white noise (lag-1 autocorrelation within
±:data:`MAX_AUTOCORRELATION`, or 3/√n for a curve of n < 900 points): independent seeds differ
by a smooth, drifting gap, a run copied with noise added by an uncorrelated one. On the published
curves this flags 52 pairs, every one with a difference of standard deviation 1.3 to 1.5 (e.g.
``SAC_Hopper-v2`` seeds 0 and 1), and nothing else. A flagged run records the lowest seed of its
cluster as ``duplicate_of``; statistics leave flagged runs out with ``--dedupe``.

Comparing every pair is quadratic: 1,250 seeds of one method are 780,000 pairs. Only candidates are
compared. Seeds evaluated at the same steps (every published curve of a task) are z-scored and
projected onto the first few cosine (DCT-II) basis vectors, which are orthonormal, so the projection
cannot stretch a distance; a correlation of r means a z-scored distance of √(2n(1 − r)), so a pair at
:data:`MIN_CORRELATION` lies within √(2(1 − 0.99)) ≈ 0.14 (per √n) in every projection. Seeds are
hashed into grid cells of that size on three of the projections; pairs in neighbouring cells get
their exact correlation by matrix products, and only those at the bound are checked in full. The
same pairs are flagged as a full comparison would flag (a test holds them equal), in time
near-linear in the seeds where they spread over cells (independent seeds differ by a slow drift,
which is what the low-frequency projections measure) and, where they do not, in fast matrix
products rather than a Python loop per pair. Seeds evaluated at different steps go through the same
filter on the steps their two grids share.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
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
_GRID = 3
"""Cosine projections seeds are hashed on (3^3 neighbouring cells per seed)."""


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


def find_duplicates(
    db: sqlite_utils.Database, run_ids: list[int] | None = None, advance: Callable[[int], None] | None = None
) -> list[Duplicate]:
    """Near-identical seeds within each (algo, env, correction, divergence, sampler, source) among ``run_ids``
    (default: every run), compared on the steps both evaluated; ``advance(n)`` as each group's n runs are done."""
    groups: dict[tuple[Any, ...], list[RunRow]] = {}
    for run in list_runs(db, run_ids=run_ids):
        key = (run["algo"], run["env"], run["correction"], run["divergence"], run.get("sampler"), source_of(run))
        groups.setdefault(key, []).append(run)
    found = []
    for key, runs in groups.items():
        if len(runs) < 2:
            if advance is not None:
                advance(len(runs))
            continue
        curves = {r["id"]: _curve(db, r["id"]) for r in sorted(runs, key=lambda r: (r["seed"], r["id"]))}
        seeds = {r["id"]: r["seed"] for r in runs}
        root = {run_id: run_id for run_id in curves}
        for a, b in _candidates(curves):  # in the order a full comparison visits them: the same clusters
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
        if advance is not None:
            advance(len(runs))
    return found


def _candidates(curves: dict[int, tuple[np.ndarray, np.ndarray]]) -> list[tuple[int, int]]:
    """The pairs (in ``curves``' order) that may be near-identical: seeds evaluated at the same steps close in
    the cosine projections and correlated at the bound (module docstring); seeds on two different grids the
    same way, on the steps both grids have (which are the steps the full check compares them on)."""
    order = {run_id: i for i, run_id in enumerate(curves)}
    by_steps: dict[bytes, list[int]] = {}
    for run_id, (steps, _) in curves.items():
        by_steps.setdefault(steps.tobytes(), []).append(run_id)
    pairs = [p for members in by_steps.values() for p in _close_pairs(members, curves)]
    grids = list(by_steps.values())
    for i, j in itertools.combinations(range(len(grids)), 2):  # seeds on two grids: on the steps both have
        first, second = grids[i], grids[j]
        shared, _, _ = np.intersect1d(curves[first[0]][0], curves[second[0]][0], return_indices=True)
        on_shared = {}
        for run_id in first + second:
            steps, values = curves[run_id]
            on_shared[run_id] = (shared, values[np.searchsorted(steps, shared)])
        members = sorted(first + second, key=order.__getitem__)
        across = set(first)
        pairs.extend(p for p in _close_pairs(members, on_shared) if (p[0] in across) != (p[1] in across))
    return sorted(pairs, key=lambda pair: (order[pair[0]], order[pair[1]]))


def _close_pairs(members: list[int], curves: dict[int, tuple[np.ndarray, np.ndarray]]) -> list[tuple[int, int]]:
    """Pairs among ``members`` (one step grid, in order) that correlate at the bound: seeds in neighbouring
    grid cells, their correlation computed exactly (see the module docstring)."""
    values = np.stack([curves[m][1] for m in members])
    n = values.shape[1]
    if len(members) < 2 or n < MIN_POINTS:
        return []
    spread = values.std(axis=1)
    keep = spread > 0  # a flat curve is nobody's copy (near_identical says no)
    ids = [m for m, k in zip(members, keep) if k]
    z = (values[keep] - values[keep].mean(axis=1, keepdims=True)) / spread[keep, None]
    k = np.arange(1, min(_GRID, n - 1) + 1)
    basis = np.cos(np.pi * (np.arange(n)[None, :] + 0.5) * k[:, None] / n) * np.sqrt(2 / n)  # orthonormal rows
    features = z @ basis.T / np.sqrt(n)
    radius = np.sqrt(2 * (1 - MIN_CORRELATION)) * (1 + 1e-6)  # the slack covers rounding
    cells: dict[tuple[int, ...], list[int]] = {}
    for index, cell in enumerate(np.floor(features[:, :_GRID] / radius).astype(np.int64)):
        cells.setdefault(tuple(cell.tolist()), []).append(index)
    pairs: list[tuple[int, int]] = []
    offsets = [o for o in itertools.product((-1, 0, 1), repeat=min(_GRID, features.shape[1])) if o >= (0,) * len(o)]
    for cell, here in cells.items():
        for offset in offsets:
            there = cells.get(tuple(c + o for c, o in zip(cell, offset)))
            if there is not None:
                pairs.extend(
                    (ids[min(a, b)], ids[max(a, b)]) for a, b in _correlated(z, here, there) if any(offset) or a < b
                )
    return pairs


def _correlated(z: np.ndarray, here: list[int], there: list[int], block: int = 256) -> Iterator[tuple[int, int]]:
    """Pairs (one of ``here``, one of ``there``) whose z-scored curves correlate at :data:`MIN_CORRELATION` or
    more, less a rounding slack (the full check decides); by matrix products in blocks of rows."""
    others = z[there]
    for start in range(0, len(here), block):
        rows = here[start : start + block]
        r = z[rows] @ others.T / z.shape[1]
        for i, j in zip(*np.nonzero(r >= MIN_CORRELATION - 1e-9)):
            yield rows[i], there[j]


def _curve(db: sqlite_utils.Database, run_id: int) -> tuple[np.ndarray, np.ndarray]:
    rows = db.execute("SELECT step, return_mean FROM evaluations WHERE run_id = ? ORDER BY step", [run_id]).fetchall()
    return np.asarray([r[0] for r in rows], dtype=np.int64), np.asarray([r[1] for r in rows], dtype=np.float64)


def flag_duplicates(
    db: sqlite_utils.Database, run_ids: list[int] | None = None, advance: Callable[[int], None] | None = None
) -> list[Duplicate]:
    """Find near-identical seeds among ``run_ids`` (default: all) and record them; the others' flags clear."""
    found = find_duplicates(db, run_ids, advance)
    with write(db):
        ids = run_ids if run_ids is not None else [r[0] for r in db.execute("SELECT id FROM runs")]
        db.conn.executemany("UPDATE runs SET duplicate_of = NULL WHERE id = ?", [[i] for i in ids])
        db.conn.executemany("UPDATE runs SET duplicate_of = ? WHERE id = ?", [[d.of, d.run_id] for d in found])
    return found
