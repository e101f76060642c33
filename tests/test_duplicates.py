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
from tests.storefill import spec

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
