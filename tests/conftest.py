"""Shared fixtures: a store filled through the real writer, without training."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import open_store
from store.runs import create_runs
from tests.storefill import fill, spec


@pytest.fixture
def filled_store(tmp_path: Path) -> Path:
    """Two finished TD3 runs (baseline and AC-Off-POC) and one SAC run with records."""
    path = tmp_path / "offpoc.db"
    db = open_store(path, create=True)
    ids = create_runs(db, [spec(correction="none"), spec(), spec(algo="sac", seed=1)])
    db.close()
    for run_id in ids:
        fill(path, run_id, per_transition=run_id == 3, offset=run_id)
    db = open_store(path)
    db.execute("UPDATE runs SET status = 'finished'")
    db.conn.commit()
    db.close()
    return path
