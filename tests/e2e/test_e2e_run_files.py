"""A run never continues another run, end to end: the real CLI, scheduler and workers, MuJoCo, SQLite files.

Each test is a way one run used to continue another, or to leave files behind: stores in one
folder shared ``offpoc-runs/<id>/``, and a worker resumed whatever ``checkpoint.pt`` it found there.
About a minute in all.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from store.schema import DATA_TABLES
from tests.support.processes import export, offpoc, run_row, wait_for
from tests.support.storefill import as_schema_2

pytestmark = pytest.mark.process

CHECKPOINTS = ["--set", "start_steps=500", "--eval-freq", "1000", "--set", "checkpoint_every=1000"]
"""The issue's settings: an evaluation and a checkpoint every 1,000 steps."""
FAST = ["--set", "hidden=64,64", "--set", "eval_episodes=3"]


def evaluated(db: Path) -> list[int]:
    return [int(r["step"]) for r in export(db, "evaluations")]


def identity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        (value,) = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
    conn.close()
    return str(value)


def checkpoint(path: Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=False)


def records(db: Path, run_id: int) -> dict[str, list[Any]]:
    """Every observation a run has stored, table by table."""
    with sqlite3.connect(db) as conn:
        tables = {
            t: conn.execute(
                f"SELECT * FROM {t} WHERE run_id = ? ORDER BY {'tag' if t == 'tags' else 'id'}", [run_id]
            ).fetchall()
            for t in DATA_TABLES
        }
    conn.close()
    return tables


def one_line(text: str) -> str:
    return " ".join(text.split())  # rich wraps long lines at the terminal's width


@pytest.fixture
def stop_all() -> Iterator[list[Path]]:
    """Stores whose runs must not outlive the test, whatever it asserted."""
    stores: list[Path] = []
    yield stores
    for db in stores:
        if db.exists():
            offpoc(db, "stop", "--all", check=False)


def test_two_stores_in_one_folder_each_keep_their_own_run_1(tmp_path: Path) -> None:
    """The issue's commands: b.db's run 1 used to continue a.db's run 1 from step 2000."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    offpoc(a, "run", "td3", "Hopper-v4", "--steps", "2000", *CHECKPOINTS, *FAST, "--follow")
    offpoc(b, "run", "td3", "Hopper-v4", "--steps", "3000", *CHECKPOINTS, *FAST, "--follow")
    assert evaluated(a) == [0, 1000, 2000]
    assert evaluated(b) == [0, 1000, 2000, 3000]
    for db, steps in ((a, 2000), (b, 3000)):
        shown = json.loads(offpoc(db, "show", "1", "--json").stdout)
        assert shown["status"] == "finished" and shown["steps"] == steps and shown["config"]["total_steps"] == steps
        state = checkpoint(tmp_path / f"{db.name}-runs" / "1" / "checkpoint.pt")
        assert state["owner"] == {"store_id": identity(db), "run_id": 1}
        assert state["config"]["total_steps"] == steps and state["counters"]["step"] == steps
    assert identity(a) != identity(b)


def test_a_store_recreated_beside_old_run_files_starts_afresh(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    offpoc(db, "run", "td3", "Hopper-v4", "--steps", "2000", *CHECKPOINTS, *FAST, "--follow")
    old_checkpoint = (tmp_path / "x.db-runs" / "1" / "checkpoint.pt").read_bytes()
    for path in tmp_path.glob("x.db*"):
        if path.is_file():  # the store and its WAL; its run files stay behind
            path.unlink()

    result = offpoc(db, "run", "td3", "Hopper-v4", "--steps", "3000", "--seed", "1", *CHECKPOINTS, *FAST, "--follow")
    assert evaluated(db) == [0, 1000, 2000, 3000]
    (stale,) = tmp_path.glob("x.db-runs.stale-*")
    assert f"set aside as {stale.name}" in one_line(result.stdout)
    assert (stale / "1" / "checkpoint.pt").read_bytes() == old_checkpoint  # kept, untouched
    old_id = json.loads((stale / "store.json").read_text())["store_id"]
    assert stale.name == f"x.db-runs.stale-{old_id[:8]}"
    state = checkpoint(tmp_path / "x.db-runs" / "1" / "checkpoint.pt")
    assert state["owner"]["store_id"] == identity(db) != old_id and state["config"]["seed"] == 1


def test_resume_refuses_a_foreign_or_mismatched_checkpoint_and_keeps_the_records(
    tmp_path: Path, stop_all: list[Path]
) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    stop_all.append(a)
    offpoc(a, "run", "td3", "Hopper-v4", "--seeds", "0-1", "--jobs", "2", "--steps", "100000", *CHECKPOINTS, *FAST)
    offpoc(b, "run", "ddpg", "Pendulum-v1", "--steps", "1000", *CHECKPOINTS, "--set", "hidden=32,32", "--follow")
    wait_for(lambda: all(run_row(a, i)["checkpoint_step"] for i in (1, 2)), what="a.db's first checkpoints")
    offpoc(a, "stop", "1", "2")
    assert [run_row(a, i)["status"] for i in (1, 2)] == ["stopped", "stopped"]

    folder = tmp_path / "a.db-runs"
    run_1 = (folder / "1" / "checkpoint.pt").read_bytes()
    shutil.copy(tmp_path / "b.db-runs" / "1" / "checkpoint.pt", folder / "1" / "checkpoint.pt")  # another store's
    (folder / "2" / "checkpoint.pt").write_bytes(run_1)  # the same store's, another run's
    for run_id, reason in ((1, "belongs to another store"), (2, "is run 1's, not run 2's")):
        before = records(a, run_id)
        result = offpoc(a, "resume", str(run_id))
        assert "the worker checks it is this run's" in one_line(result.stdout)
        wait_for(lambda run_id=run_id: run_row(a, run_id)["status"] == "failed", timeout=60, what="failed")
        shown = json.loads(offpoc(a, "show", str(run_id), "--json").stdout)
        assert reason in shown["error"] and "\n" not in shown["error"] and shown["error"].endswith("not loaded")
        assert not shown["traceback"]
        assert records(a, run_id) == before
    assert (tmp_path / "b.db-runs" / "1" / "checkpoint.pt").exists()  # the foreign file's store is untouched


def test_runs_leave_nothing_in_the_working_folder_but_the_store(tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "stores"
    work.mkdir()
    elsewhere.mkdir()
    cheetah = ["--steps", "600", "--set", "start_steps=500", "--eval-freq", "300", "--set", "eval_episodes=1"]
    result = offpoc(elsewhere / "x.db", "run", "td3", "HalfCheetah-v4", *cheetah, "--set", "hidden=64,64",
                    "--follow", cwd=work)  # fmt: skip
    assert "done: 1 finished" in result.stdout and "settotalmass" not in result.stdout + result.stderr
    assert list(work.iterdir()) == []
    log = (elsewhere / "x.db-runs" / "1" / "worker.log").read_text()
    assert "MujocoWarning: compiler attribute 'settotalmass' is deprecated" in log  # MuJoCo's warning, kept
    offpoc(Path("offpoc.db"), "run", "td3", "Hopper-v4", "--steps", "1000", "--set", "start_steps=500",
           "--eval-freq", "500", *FAST, "--follow", cwd=work)  # fmt: skip
    assert {p.name for p in work.iterdir()} <= {"offpoc.db", "offpoc.db-wal", "offpoc.db-shm", "offpoc.db-runs"}
    assert (work / "offpoc.db").is_file() and (work / "offpoc.db-runs" / "1" / "checkpoint.pt").is_file()


def test_a_store_from_before_run_file_owners_resumes_from_the_shared_folder(
    tmp_path: Path, stop_all: list[Path]
) -> None:
    db = tmp_path / "old.db"
    stop_all.append(db)
    offpoc(db, "run", "td3", "Hopper-v4", "--steps", "100000", *CHECKPOINTS, *FAST)
    wait_for(lambda: (run_row(db, 1)["checkpoint_step"] or 0) >= 1000, what="a checkpoint")
    offpoc(db, "stop", "1")
    step = run_row(db, 1)["checkpoint_step"]
    # As offpoc left it before schema 3: files in offpoc-runs/1/, a checkpoint without owner.
    shared = tmp_path / "offpoc-runs" / "1"
    shared.parent.mkdir()
    os.rename(tmp_path / "old.db-runs" / "1", shared)
    shutil.rmtree(tmp_path / "old.db-runs")
    state = checkpoint(shared / "checkpoint.pt")
    del state["owner"]
    torch.save({**state, "format": 1}, shared / "checkpoint.pt")
    as_schema_2(db)
    evaluations_before = export(db, "evaluations")

    result = offpoc(db, "resume", "1")
    assert f"from its checkpoint at step {step:,}" in one_line(result.stdout)
    wait_for(lambda: run_row(db, 1)["steps"] > step + 1000, what="progress past the old checkpoint")
    offpoc(db, "stop", "1")
    log = (tmp_path / "old.db-runs" / "1" / "worker.log").read_text()
    assert f"from offpoc-runs/1/checkpoint.pt at step {step:,}" in log
    assert not shared.exists() and (tmp_path / "old.db-runs" / "1" / "worker-before-schema-3.log").exists()
    state = checkpoint(tmp_path / "old.db-runs" / "1" / "checkpoint.pt")
    assert state["owner"] == {"store_id": identity(db), "run_id": 1} and state["counters"]["step"] > step
    after = export(db, "evaluations")
    assert after[: len(evaluations_before)] == evaluations_before  # kept as they were
    steps = [int(r["step"]) for r in after]
    assert steps == list(range(0, steps[-1] + 1, 1000))  # every step once, none skipped
