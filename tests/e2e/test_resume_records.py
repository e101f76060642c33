"""What a resumed run stores: its own trajectory from the checkpoint on, and nothing from a worker it replaced.

Checkpoints here fall mid-episode (Pendulum's episodes are 200 steps; a checkpoint every 1,700), where a
resumed run starts a fresh episode and so differs from the trajectory it abandoned. Each test keeps a
second store, a copy of the first holding nothing past the run's checkpoint, and resumes the run in
both from the same checkpoint file: the records must come out identical. About a minute in all.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from store import open_store
from store.files import RunFiles
from tests.support.processes import SMALL, offpoc, run_row, wait_for

pytestmark = pytest.mark.process

RUN = ["td3", "Pendulum-v1", "--correction", "acoffpoc", *SMALL, "--steps", "5000", "--eval-freq", "250",
       "--set", "checkpoint_every=1700"]  # fmt: skip
PAST = {
    "evaluations": "step",
    "episodes": "step",
    "train": "step",
    "quantity_blocks": "first_step",
    "histograms": "step",
}


def trajectory(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Run 1's records, every column that the trajectory decides (not wall times or speeds)."""
    queries = {
        "evaluations": "SELECT step, return_mean, return_std, returns, lengths FROM evaluations",
        "episodes": "SELECT step, episode, return, length FROM episodes",
        "train": "SELECT step, updates, critic_loss, actor_loss, q_mean, alpha FROM train",
        "quantity_blocks": "SELECT quantity, first_update, first_step, count, mean, data FROM quantity_blocks",
        "histograms": "SELECT quantity, step, counts FROM histograms",
    }
    conn = sqlite3.connect(db)
    try:
        return {
            table: conn.execute(f"{sql} WHERE run_id = 1 ORDER BY 1, 2, 3").fetchall() for table, sql in queries.items()
        }
    finally:
        conn.close()


def past_a_checkpoint(db: Path, by: int) -> bool:
    row = run_row(db, 1)
    return (
        row["status"] == "running"
        and row["checkpoint_step"] is not None
        and row["steps"] >= row["checkpoint_step"] + by
    )


def abandoned(db: Path, step: int) -> int:
    """How many records run 1 holds past ``step``."""
    conn = sqlite3.connect(db)
    try:
        return sum(
            conn.execute(f"SELECT COUNT(*) FROM {table} WHERE run_id = 1 AND {column} > ?", [step]).fetchone()[0]
            for table, column in PAST.items()
        )
    finally:
        conn.close()


def clean_copy(db: Path, clean: Path) -> int:
    """``clean``: a copy of ``db`` (SQLite's backup, never a copy of the file) that holds nothing of run 1 past its
    checkpoint, with the checkpoint file in its own run files; the checkpoint's step."""
    source, target = sqlite3.connect(db), sqlite3.connect(clean)
    source.backup(target)
    source.close()
    step = int(target.execute("SELECT checkpoint_step FROM runs WHERE id = 1").fetchone()[0])
    for table, column in PAST.items():
        target.execute(f"DELETE FROM {table} WHERE run_id = 1 AND {column} > ?", [step])
    target.execute("UPDATE runs SET steps = ? WHERE id = 1", [step])
    target.commit()
    target.close()
    store = open_store(clean)
    directory = RunFiles.of(store, clean).prepare(1)
    store.close()
    shutil.copy(db.with_name(db.name + "-runs") / "1" / "checkpoint.pt", directory / "checkpoint.pt")
    return step


def finished(db: Path) -> bool:
    return run_row(db, 1)["status"] == "finished"


def test_a_run_resumed_mid_episode_replaces_what_it_recorded_past_its_checkpoint(tmp_path: Path) -> None:
    db, clean = tmp_path / "offpoc.db", tmp_path / "clean.db"
    offpoc(db, "run", *RUN)
    wait_for(lambda: past_a_checkpoint(db, 300), what="300 steps past a checkpoint")
    os.kill(run_row(db, 1)["pid"], signal.SIGKILL)
    wait_for(lambda: run_row(db, 1)["status"] == "lost", timeout=90, what="lost")  # the scheduler settles it
    step = clean_copy(db, clean)
    assert abandoned(db, step) > 0  # the killed worker's trajectory past the checkpoint
    before = trajectory(db)

    offpoc(db, "resume", "1")
    offpoc(clean, "resume", "1")
    wait_for(lambda: finished(db) and finished(clean), what="both runs' end")
    after = trajectory(db)
    assert after == trajectory(clean)
    for table in ("evaluations", "episodes", "train"):  # up to the checkpoint the records are kept as they were
        assert [r for r in before[table] if r[0] <= step] == [r for r in after[table] if r[0] <= step]
    assert [r[0] for r in after["evaluations"]] == list(range(0, 5001, 250))
    assert run_row(db, 1)["revision"] == 1 and run_row(clean, 1)["revision"] == 0


def stop_outside_a_write(db: Path, pid: int) -> None:
    """SIGSTOP ``pid`` at a moment it holds no write transaction (else everyone would wait on it)."""
    for _ in range(50):
        os.kill(pid, signal.SIGSTOP)
        conn = sqlite3.connect(db, timeout=0.5)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.rollback()
            return
        except sqlite3.OperationalError:
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.05)
        finally:
            conn.close()
    raise AssertionError("the worker held the write lock at every try")


def test_a_stale_worker_woken_after_its_run_was_resumed_adds_no_record(tmp_path: Path) -> None:
    """The old worker, frozen past a checkpoint, declared lost and replaced, wakes once the new one has
    rewound the run: it is ahead of the new worker, so whatever it wrote would be stored in place of the
    new worker's records (a step is stored once). None of it may be."""
    db, clean = tmp_path / "offpoc.db", tmp_path / "clean.db"
    offpoc(db, "run", *RUN)
    wait_for(lambda: past_a_checkpoint(db, 250), what="250 steps past a checkpoint")
    stale = run_row(db, 1)["pid"]
    stop_outside_a_write(db, stale)
    try:
        store = open_store(db)  # its heartbeat is old: the next reader declares it lost
        store.execute("UPDATE runs SET heartbeat = heartbeat - 3600 WHERE id = 1")
        store.conn.commit()
        store.close()
        offpoc(db, "ps")
        assert run_row(db, 1)["status"] == "lost"
        step = clean_copy(db, clean)
        assert abandoned(db, step) > 0
        offpoc(db, "resume", "1")
        wait_for(lambda: run_row(db, 1)["revision"] == 1, what="the new worker's claim and rewind")
        fresh = run_row(db, 1)["pid"]
        assert fresh != stale
    finally:
        os.kill(stale, signal.SIGCONT)
    offpoc(clean, "resume", "1")
    wait_for(lambda: finished(db) and finished(clean), what="both runs' end")
    assert trajectory(db) == trajectory(clean)
    row = run_row(db, 1)  # the stale worker's end is not the run's
    assert (row["pid"], row["steps"], row["checkpoint_step"], row["error"]) == (fresh, 5000, 5000, None), row
    log = (tmp_path / "offpoc.db-runs" / "1" / "worker.log").read_text()
    assert "is no longer this worker's" in log
