"""The store's queue: its concurrency limit, the runs waiting in it, and stop requests.

Every command that queues runs (``run``, ``sweep``, ``resume``, the dashboard) records them
``queued``; one scheduler per store (:mod:`offpoc_tui.runtime.scheduler`) starts them oldest first, at
most :func:`jobs_limit` worker processes on this machine at a time, and stamps its pid on the
runs it waits to start (so its death shows them ``lost``). Runs on a Ray cluster
(``backend = 'ray'``) are started by the same scheduler, as many as the cluster has CPUs.
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlite_utils

from store.db import write
from store.runs import hostname

JOBS = "jobs"
RAY_ADDRESS = "ray_address"
"""``meta`` key: the Ray cluster the store's Ray runs go to (``auto``, an address; absent: Ray's default)."""
CHECKPOINT_DIR = "checkpoint_dir"
"""``meta`` key: shared storage where Ray runs keep their checkpoints (absent: the store's run files)."""


def get_meta(db: sqlite_utils.Database, key: str) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
    return None if row is None else str(row[0])


def set_meta(db: sqlite_utils.Database, key: str, value: str | None) -> None:
    with write(db):
        if value is None:
            db.execute("DELETE FROM meta WHERE key = ?", [key])
        else:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [key, value])


def jobs_limit(db: sqlite_utils.Database) -> int:
    """At most this many workers at once on this machine: the store's setting, else the CPU cores."""
    value = get_meta(db, JOBS)
    return int(value) if value is not None else os.cpu_count() or 1


MAX_JOBS = 4_096
"""The most runs a store's scheduler runs at once on one machine (a worker process each)."""


def jobs_problem(jobs: int, what: str = "jobs") -> str | None:
    """Why ``jobs`` is not a limit a scheduler can keep; None when it is one."""
    if not 1 <= jobs <= MAX_JOBS:
        return f"{what} must be from 1 to {MAX_JOBS:,}, got {jobs:,}"
    return None


def set_jobs(db: sqlite_utils.Database, jobs: int) -> None:
    if (problem := jobs_problem(jobs)) is not None:
        raise ValueError(problem)
    set_meta(db, JOBS, str(jobs))


def waiting(db: sqlite_utils.Database) -> list[tuple[int, str | None]]:
    """Queued runs, oldest first, with their backend (None: a worker process on this machine)."""
    return [(int(i), b) for i, b in db.execute("SELECT id, backend FROM runs WHERE status = 'queued' ORDER BY id")]


def adopted(db: sqlite_utils.Database, pid: int) -> set[int]:
    """The queued runs the scheduler ``pid`` answers for (:func:`adopt`)."""
    rows = db.execute("SELECT id FROM runs WHERE status = 'queued' AND launcher_pid = ?", [pid])
    return {int(run_id) for (run_id,) in rows.fetchall()}


def adopt(db: sqlite_utils.Database, pid: int) -> None:
    """The scheduler ``pid`` answers for the queued runs nobody answers for yet."""
    if db.execute("SELECT 1 FROM runs WHERE status = 'queued' AND launcher_pid IS NULL LIMIT 1").fetchone():
        with write(db):
            db.execute(
                "UPDATE runs SET launcher_pid = ?, host = ? WHERE status = 'queued' AND launcher_pid IS NULL",
                [pid, hostname()],
            )


def release(db: sqlite_utils.Database, pid: int) -> None:
    """The scheduler ``pid`` leaves: the queued runs it answered for wait for the next one (not ``lost``)."""
    with write(db):
        db.execute("UPDATE runs SET launcher_pid = NULL WHERE status = 'queued' AND launcher_pid = ?", [pid])


def running_here(db: sqlite_utils.Database) -> dict[int, int]:
    """Run id → worker pid of the runs whose worker process runs on this machine."""
    rows = db.execute(
        "SELECT id, pid FROM runs WHERE status = 'running' AND backend IS NULL AND host = ?", [hostname()]
    )
    return {int(i): int(p or 0) for i, p in rows}


def request_stop(db: sqlite_utils.Database, run_id: int) -> None:
    """Ask a running run to stop at its next write (how ``stop`` reaches a worker it cannot signal)."""
    with write(db):
        db.execute("UPDATE runs SET stop_requested = 1 WHERE id = ?", [run_id])


def record_backend(
    db: sqlite_utils.Database, backend: str | None, address: str | None, checkpoint_dir: Path | None
) -> None:
    """Remember the Ray cluster and checkpoint folder for the store's scheduler (given ones only)."""
    if backend != "ray":
        return
    if address is not None:
        set_meta(db, RAY_ADDRESS, address)
    if checkpoint_dir is not None:
        set_meta(db, CHECKPOINT_DIR, str(checkpoint_dir.resolve()))
