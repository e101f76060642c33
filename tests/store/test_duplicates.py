"""Seeds that are the same run plus noise (store.duplicates): found in the published curves, never in noise."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from offpoc_tui.cli import app
from store import open_store
from store.duplicates import find_duplicates, flag_duplicates, near_identical
from store.runs import create_runs
from store.writer import RunWriter
from tests.conftest import needs_reference
from tests.support.storefill import spec

runner = CliRunner()


def test_noise_copies_are_near_identical_and_independent_seeds_are_not() -> None:
    rng = np.random.default_rng(0)
    false_alarms = 0
    for _ in range(500):  # independent learning curves: a shared trend, their own drift and noise
        trend = 3000 * (1 - np.exp(-np.arange(1001) / 200))
        a = trend + np.cumsum(rng.normal(0, 20, 1001)) + rng.normal(0, 50, 1001)
        b = trend + np.cumsum(rng.normal(0, 20, 1001)) + rng.normal(0, 50, 1001)
        false_alarms += near_identical(a, b)
        assert near_identical(a, a + rng.normal(0, 1, 1001))  # one run plus noise
    for _ in range(500):  # short curves (60 evaluations) too
        trend = 3000 * (1 - np.exp(-np.arange(60) / 12))
        a = trend + np.cumsum(rng.normal(0, 80, 60)) + rng.normal(0, 50, 60)
        b = trend + np.cumsum(rng.normal(0, 80, 60)) + rng.normal(0, 50, 60)
        false_alarms += near_identical(a, b)
    assert false_alarms == 0
    assert not near_identical(np.ones(50), np.ones(50))  # flat curves tell nothing
    assert not near_identical(np.arange(5.0), np.arange(5.0))  # too few points


@needs_reference
def test_the_published_curves_hold_52_copied_seeds_among_them_sac_hopper_0_and_1(
    reference_store: Path, tmp_path: Path
) -> None:
    db_path = tmp_path / "ref.db"
    shutil.copy(reference_store, db_path)
    db = open_store(db_path)
    found = flag_duplicates(db)
    assert len(found) == 52
    assert "sac Hopper-v2 none [published]: seed 1 = seed 0" in {d.label for d in found}
    flagged = db.execute("SELECT COUNT(*) FROM runs WHERE duplicate_of IS NOT NULL").fetchone()[0]
    assert flagged == 52
    db.close()
    args = ["export", "--table", "aggregate", "--format", "json", "--bootstrap", "100", "--db", str(db_path)]
    whole, deduped = runner.invoke(app, args), runner.invoke(app, [*args, "--dedupe"])
    runs = sum(r["n_runs"] for r in json.loads(whole.stdout) if r["metric"] == "mean")
    fewer = sum(r["n_runs"] for r in json.loads(deduped.stdout) if r["metric"] == "mean")
    assert (runs, runs - fewer) == (1440, 52)
    summary = runner.invoke(app, ["export", "--table", "summary", "--format", "json", "--dedupe", "--algo", "sac",
                                  "--env", "Hopper", "--correction", "none", "--db", str(db_path)])  # fmt: skip
    assert json.loads(summary.stdout)[0]["n_seeds"] == 9


def test_own_runs_are_checked_too_and_flags_clear_when_the_cause_goes(tmp_path: Path) -> None:
    db_path = tmp_path / "own.db"
    db = open_store(db_path, create=True)
    ids = create_runs(db, [spec(correction="none", seed=s) for s in range(3)])
    rng = np.random.default_rng(1)
    base = np.cumsum(rng.normal(5, 20, 60))
    curves = {ids[0]: base, ids[1]: base + rng.normal(0, 1, 60), ids[2]: np.cumsum(rng.normal(5, 20, 60))}
    for run_id, curve in curves.items():
        writer = RunWriter(db, run_id)
        for i, value in enumerate(curve):
            writer.add_eval(i * 1000, float(i), float(value), 1.0, [float(value)], [100])
        writer.flush(59_000, 58_000)
    db.close()
    result = runner.invoke(app, ["duplicates", "--db", str(db_path)])
    assert result.exit_code == 0 and "checked 3 runs: 1 flagged as copies" in result.stdout
    assert "td3 Hopper-v4 none [offpoc]: seed 1 = seed 0" in result.stderr
    db = open_store(db_path)
    assert [d.run_id for d in find_duplicates(db)] == [ids[1]]
    db.execute("DELETE FROM evaluations WHERE run_id = ?", [ids[1]])
    db.conn.commit()
    assert flag_duplicates(db) == [] and db.execute("SELECT MAX(duplicate_of) FROM runs").fetchone()[0] is None


def test_candidate_pairs_flag_exactly_what_every_pair_flags_in_a_fraction_of_the_comparisons(tmp_path: Path) -> None:
    """The near-linear check (store.duplicates._candidates) against the full comparison on one group of 300
    seeds: copies among them (some cut short, on grids of their own), a flat curve, and seeds on another step
    grid."""
    import itertools

    from store import duplicates
    from store.curve_imports import Curve, import_curves
    from store.runs import RunSpec

    rng = np.random.default_rng(5)
    curves, values = [], []
    for seed in range(300):
        points = 201 if seed % 30 else 121  # one seed in 30 evaluated at other steps
        steps = np.arange(points, dtype=np.int64) * (1000 if points == 201 else 1500)
        if seed % 25 == 24:  # a copy plus white noise, of a seed on the same grid: correlated at 0.994 to 1
            same = [v for v in values if len(v) == points]
            original = same[rng.integers(len(same))]
            curve = original + rng.normal(0, rng.uniform(0.01, 0.11) * original.std(), points)
        elif seed % 40 == 39:  # a copy cut short (a run stopped early): its own grid, the original's first steps
            longer = [v for v in values if len(v) == 201]
            original = longer[rng.integers(len(longer))][: 150 + seed % 7]
            steps = steps[: len(original)]
            curve = original + rng.normal(0, rng.uniform(0.01, 0.11) * original.std(), len(original))
        elif seed == 100:
            curve = np.full(points, 7.0)
        else:
            rise = rng.uniform(500, 4000) * (1 - np.exp(-np.linspace(0, 1, points) / rng.uniform(0.05, 0.5)))
            drift = np.cumsum(rng.normal(0, 1, points))
            curve = rise + drift * 0.5 * rise.std() / drift.std() + rng.normal(0, 60, points)
        values.append(curve)
        run = RunSpec("synthetic", "td3", "Hopper-v2", "none", None, seed, int(steps[-1]), {})
        curves.append(Curve(run, f"synthetic:{seed}", f"synthetic/{seed}", steps, curve))
    db = open_store(tmp_path / "dup.db", create=True)
    import_curves(db, curves)
    fast = find_duplicates(db)
    loaded = {r[0]: duplicates._curve(db, r[0]) for r in db.execute("SELECT id FROM runs ORDER BY seed")}
    candidates = duplicates._candidates(loaded)
    every_pair = list(itertools.combinations(loaded, 2))
    original = duplicates._candidates
    duplicates._candidates = lambda curves: every_pair
    try:
        full = find_duplicates(db)
    finally:
        duplicates._candidates = original
    assert fast == full and len(full) >= 10  # the same seeds flagged, as the same copies
    cut_short = [d for d in full if int(d.label.split("seed ")[1].split()[0]) % 40 == 39]
    assert len(cut_short) >= 5  # copies found across step grids too
    assert len(candidates) < 0.1 * len(every_pair), len(candidates)


def test_every_pair_at_the_correlation_bound_is_a_candidate_across_grid_cells() -> None:
    """Pairs that differ along the hashed projections themselves (so they fall in neighbouring cells) are
    still candidates wherever they correlate at MIN_CORRELATION or more."""
    from store import duplicates

    n = 201
    rng = np.random.default_rng(3)
    a = 3000 * (1 - np.exp(-np.linspace(0, 1, n) / 0.2)) + rng.normal(0, 60, n)
    shifts = [np.cos(np.pi * (np.arange(n) + 0.5) * k / n) for k in (1, 2, 3)]
    curves, expected = {0: (np.arange(n), a)}, set()
    for run_id, scale in enumerate(np.linspace(-0.2, 0.2, 81), start=1):
        b = a + scale * a.std() * shifts[run_id % 3] * np.sqrt(2)
        curves[run_id] = (np.arange(n), b)
        if np.corrcoef(a, b)[0, 1] >= duplicates.MIN_CORRELATION:
            expected.add((0, run_id))
    found = {pair for pair in duplicates._candidates(curves) if pair[0] == 0}
    assert len(expected) > 20 and expected <= found
