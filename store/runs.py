"""Runs and their lifecycle: create, claim, finish, detect lost workers, requeue, delete.

Status moves along::

    queued → running → finished | failed | stopped | lost
    stopped | lost | failed → queued (resume)          queued → stopped (stopped before it started)

A ``running`` run whose worker process is gone (same host, pid dead) or whose
heartbeat is older than :data:`LOST_AFTER_S` is ``lost``; so is a ``queued`` run
whose scheduler died, and a run on a Ray cluster whose scheduler (the Ray driver)
died. Lost runs keep everything they wrote and can be resumed; the resumed run then replaces what
was recorded past the step it resumes from (:func:`store.links.rewind`).

A worker's claim draws an owner token (:func:`claim`); every later write of that worker checks it
in its own transaction (:func:`check_owner`), so a run has one writer at a time.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

import sqlite_utils

from store.db import read_only, write
from store.files import RunFiles
from store.schema import DATA_TABLES
from store.tags import add_tags

STATUSES = ("queued", "running", "finished", "failed", "stopped", "lost", "cancelled")
TERMINAL = frozenset({"finished", "failed", "stopped", "lost", "cancelled"})
"""Statuses in which no process works on the run."""
RESUMABLE = frozenset({"stopped", "lost", "failed", "cancelled"})
"""A failed run resumes too: from its own checkpoint when the failure came from outside (a full disk, a
lock held too long); a failure in its own code simply fails again, with its traceback."""
LOST_AFTER_S = 300.0
"""A heartbeat older than this marks a running run lost even when its pid looks alive (pid reuse)."""


class RunRow(TypedDict, total=False):
    """A run as read from the store: the ``runs`` table's columns (:func:`get_run` has them all,
    :func:`store.reader.list_runs` all but ``config`` and ``traceback``) and what readers add."""

    id: int
    name: str
    algo: str
    env: str
    correction: str
    divergence: str | None
    seed: int
    config: Any
    """The resolved config: its JSON text as stored, or parsed (:func:`store.reader.run_detail`)."""
    status: str
    total_steps: int
    steps: int
    updates: int
    sps: float | None
    last_return: float | None
    best_return: float | None
    mean_lambda: float | None
    pid: int | None
    launcher_pid: int | None
    host: str | None
    source: str | None
    origin: str | None
    created: float
    started: float | None
    finished: float | None
    heartbeat: float | None
    wall_time: float | None
    checkpoint_step: int | None
    error: str | None
    traceback: str | None
    duplicate_of: int | None
    backend: str | None
    variant: str
    """What sets the run apart from other runs of its method in the set read (:mod:`store.variants`)."""
    stop_requested: int
    owner: str | None
    revision: int
    """Bumped each time records the run stored were replaced (a resume rewinding past its checkpoint)."""
    sampler: str
    """The config's replay sampler (list_runs)."""
    counts: dict[str, int]
    """Rows recorded per table; for ``quantities``, the values every logged quantity stored (run_detail)."""
    logged: dict[str, int]
    """Values stored per logged quantity, λ first (run_detail)."""
    evaluated_steps: list[int | None]
    """The first and last evaluated step (run_detail)."""
    files: str
    """Where the run's files are, for display (show)."""
    note: str | None
    """What the user wrote of the run (``offpoc note``)."""
    env_path: str | None
    """The folder the run's environment module was imported from where it was queued."""
    lane_group: int | None
    """The lane group it trained in (the id of the group's first run); None for a run trained alone."""
    tags: list[str]
    """The run's tags, sorted (list_runs, run_detail)."""


@dataclass(frozen=True)
class RunSpec:
    """What a new run is: its metadata columns and its resolved config (JSON-ready)."""

    name: str
    algo: str
    env: str
    correction: str
    divergence: str | None
    seed: int
    total_steps: int
    config: dict[str, Any]
    tags: tuple[str, ...] = ()
    env_path: str | None = None
    """The folder the environment's module was imported from where the run was queued (not installed)."""
    lane_group: int | None = None
    """Within one :func:`create_runs` call, runs with the same number train as one lane group (the group is
    recorded as its first run's id); None: alone."""


def hostname() -> str:
    return socket.gethostname()


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid runs here (zombies count as dead)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def create_runs(db: sqlite_utils.Database, specs: list[RunSpec], backend: str | None = None) -> list[int]:
    """Record runs as ``queued`` in one transaction; their ids in order.

    ``backend``: None for a worker process on this machine, ``'ray'`` for a task on a Ray cluster.
    """
    with write(db):
        return insert_runs(db, specs, backend)


def insert_runs(db: sqlite_utils.Database, specs: list[RunSpec], backend: str | None = None) -> list[int]:
    """:func:`create_runs` inside the caller's write transaction (what to insert decided in it too)."""
    now = time.time()
    ids = []
    groups: dict[int, int] = {}  # the specs' lane group → its first run's id
    for spec in specs:
        cursor = db.execute(
            "INSERT INTO runs (name, algo, env, correction, divergence, seed, config, status, total_steps, created,"
            " backend, env_path) VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)",
            [
                spec.name,
                spec.algo,
                spec.env,
                spec.correction,
                spec.divergence,
                spec.seed,
                json.dumps(spec.config),
                spec.total_steps,
                now,
                backend,
                spec.env_path,
            ],
        )
        ids.append(int(cursor.lastrowid))  # type: ignore[arg-type]
        add_tags(db, ids[-1:], spec.tags)
        if spec.lane_group is not None:
            group = groups.setdefault(spec.lane_group, ids[-1])
            db.execute("UPDATE runs SET lane_group = ? WHERE id = ?", [group, ids[-1]])
    return ids


def get_run(db: sqlite_utils.Database, run_id: int) -> RunRow | None:
    cursor = db.execute("SELECT * FROM runs WHERE id = ?", [run_id])
    row = cursor.fetchone()
    return None if row is None else cast(RunRow, dict(zip([d[0] for d in cursor.description], row)))


def resolve(db: sqlite_utils.Database, refs: Sequence[int | tuple[int, int] | str]) -> list[int]:
    """Run ids for refs that are ids, id ranges ``(low, high)`` (every id in it must be a run) or names
    (a name may match several runs).

    A range is checked against the ids the store holds before anything is expanded, so its cost is bounded
    by the store, not by the range. Raises ``LookupError`` naming the first ref that matches nothing.
    """
    ids: list[int] = []
    seen: set[int] = set()
    for ref in refs:
        if isinstance(ref, str) and ref.isascii() and ref.isdigit():  # an id as text (names are never numbers)
            ref = int(ref)
        if isinstance(ref, tuple):
            found = _range(db, *ref)
        elif isinstance(ref, int):
            found = _range(db, ref, ref)
        else:
            found = [r[0] for r in db.execute("SELECT id FROM runs WHERE name = ? ORDER BY id", [ref])]
            if not found:
                raise LookupError(f"no run {ref!r} in this store (see `offpoc ps --all`)")
        ids.extend(i for i in found if i not in seen)
        seen.update(found)
    return ids


def _range(db: sqlite_utils.Database, low: int, high: int) -> list[int]:
    """The ids ``low`` to ``high``, all of which the store must hold (LookupError names the first it lacks)."""
    top = min(high, 2**63 - 1)  # SQLite's integers; a larger id is none
    sql = "SELECT id FROM runs WHERE id BETWEEN ? AND ? ORDER BY id"
    found = [r[0] for r in db.execute(sql, [low, top])] if low <= top else []
    if low > top or len(found) != high - low + 1:
        missing = next((low + k for k, run_id in enumerate(found) if run_id != low + k), low + len(found))
        where = "" if low == high else f" (range {low}-{high}: {len(found):,} of its ids are runs)"
        raise LookupError(f"no run {missing} in this store{where} (see `offpoc ps --all`)")
    return found


class NotOwner(RuntimeError):
    """The run is no longer this worker's: resumed by another, or deleted. The worker stops without writing."""


NOT_OWNER_EXIT = 3
"""A worker's exit status when it stopped because its run is no longer its own (the scheduler then settles nothing)."""


def claim(
    db: sqlite_utils.Database, run_id: int, pid: int, host: str | None = None, *, ray_task: bool = False
) -> str | None:
    """queued → running for this process (on ``host``, default this machine): the owner token its writes
    must show (:func:`check_owner`); None when the run is not to run.

    ``ray_task``: a Ray task claims a Ray run, also again after Ray retried it (still ``running``),
    unless ``stop`` asked it to stop meanwhile.
    """
    now = time.time()
    token = secrets.token_hex(8)
    which = "status = 'queued'"
    if ray_task:
        which = "backend = 'ray' AND status IN ('queued', 'running') AND stop_requested = 0"
    with write(db):
        cursor = db.execute(
            "UPDATE runs SET status = 'running', pid = ?, host = ?, started = COALESCE(started, ?), heartbeat = ?,"
            f" finished = NULL, error = NULL, traceback = NULL, owner = ? WHERE id = ? AND {which}",
            [pid, host or hostname(), now, now, token, run_id],
        )
    return token if cursor.rowcount == 1 else None


def check_owner(db: sqlite_utils.Database, run_id: int, owner: str | None) -> None:
    """Raise :class:`NotOwner` unless ``owner`` (a :func:`claim` token; None: no check) still owns the run.

    Call it inside the write transaction that writes for the run, so nobody takes the run in between.
    """
    if owner is None:
        return
    row = db.execute("SELECT owner, status FROM runs WHERE id = ?", [run_id]).fetchone()
    if row is None:
        raise NotOwner(f"run {run_id} was deleted: this worker stops without writing")
    if row[0] != owner or row[1] != "running":
        raise NotOwner(f"run {run_id} is no longer this worker's (status {row[1]}): it stops without writing")


def finish(
    db: sqlite_utils.Database,
    run_id: int,
    status: str,
    *,
    error: str | None = None,
    traceback: str | None = None,
    only_from: tuple[str, ...] = ("running",),
    owner: str | None = None,
    worker_pid: int | None = None,
) -> bool:
    """Set a terminal status (with the error for ``failed``), if the run is in ``only_from`` (and, with
    ``owner`` or ``worker_pid``, still that worker's)."""
    marks = ", ".join("?" for _ in only_from)
    checks = {"owner": owner, "pid": worker_pid}
    mine = "".join(f" AND {column} = ?" for column, value in checks.items() if value is not None)
    values = [value for value in checks.values() if value is not None]
    with write(db):
        cursor = db.execute(
            f"UPDATE runs SET status = ?, finished = ?, error = COALESCE(?, error), traceback = COALESCE(?, traceback)"
            f" WHERE id = ? AND status IN ({marks}){mine}",
            [status, time.time(), error, traceback, run_id, *only_from, *values],
        )
    return cursor.rowcount == 1


def reap_lost(db: sqlite_utils.Database) -> list[int]:
    """Mark as lost: running runs without a live worker, queued runs without a live scheduler, and
    Ray runs whose scheduler (the Ray driver, on the store's machine) died, taking its tasks with it."""
    if read_only(db):  # nobody may record it; readers still see the runs as they were left
        return []
    here, now = hostname(), time.time()
    lost = []
    for run_id, status, pid, launcher_pid, host, heartbeat, backend in db.execute(
        "SELECT id, status, pid, launcher_pid, host, heartbeat, backend FROM runs WHERE status IN ('running', 'queued')"
    ):
        stale = heartbeat is not None and now - heartbeat > LOST_AFTER_S
        if status == "running" and backend == "ray":
            gone = stale or (launcher_pid is not None and not pid_alive(launcher_pid))
        elif status == "running":
            gone = (host == here and not pid_alive(pid)) or stale
        else:
            gone = launcher_pid is not None and host == here and not pid_alive(launcher_pid)
        if gone:
            lost.append(run_id)
    for run_id in lost:
        finish(db, run_id, "lost", only_from=("running", "queued"))
    return lost


def requeue(db: sqlite_utils.Database, run_id: int, backend: str | None = None) -> bool:
    """A stopped, lost or failed run back to ``queued`` (resume), on ``backend`` (None: this machine); whether it
    was one. The status is checked in the transaction that requeues: a run that started meanwhile (another
    resume won) keeps its worker."""
    return not requeue_all(db, {run_id: backend})


class _NotResumable(Exception):
    def __init__(self, run_id: int) -> None:
        self.run_id = run_id


def requeue_all(db: sqlite_utils.Database, targets: dict[int, str | None]) -> list[int]:
    """:func:`requeue` of several runs (run id → backend) in one transaction, all or none: the ids that were
    not resumable by then (empty when every one was requeued; when one was not, none is)."""
    marks = ", ".join("?" for _ in RESUMABLE)
    try:
        with write(db):
            for run_id, backend in targets.items():
                cursor = db.execute(
                    "UPDATE runs SET status = 'queued', pid = NULL, launcher_pid = NULL, finished = NULL,"
                    f" backend = ?, stop_requested = 0, owner = NULL WHERE id = ? AND status IN ({marks})",
                    [backend, run_id, *sorted(RESUMABLE)],
                )
                if cursor.rowcount != 1:
                    raise _NotResumable(run_id)  # the transaction is rolled back: none is requeued
    except _NotResumable as missed:
        return [missed.run_id]
    return []


class RunBusy(RuntimeError):
    """A run to delete is running (it may have started since it was listed): nothing was deleted."""


def delete_runs(
    db: sqlite_utils.Database,
    db_path: str | os.PathLike[str],
    run_ids: list[int],
    left: dict[int, str] | None = None,
) -> list[int]:
    """Delete runs, their observations (one transaction) and then their files (see :mod:`store.files`); ``left``,
    if given, gets each run whose files could not all be removed, and why.

    The status is checked in the deleting transaction: a run that is running by then raises
    :class:`RunBusy` and nothing is deleted. A worker that claims a run after it was deleted finds no run.
    A sequential study still running whose runs are deleted is ``abandoned`` in the same transaction, and its
    queued runs are ``cancelled`` (resumable, as a stopped run is): the ids cancelled.
    """
    files = RunFiles.of(db, db_path)
    cancelled: list[int] = []
    with write(db):
        marks = ", ".join("?" for _ in run_ids)
        busy = db.execute(f"SELECT id FROM runs WHERE status = 'running' AND id IN ({marks})", run_ids).fetchone()
        if busy is not None:
            raise RunBusy(f"run {busy[0]} is running (it started meanwhile): nothing deleted; stop it first")
        if db["studies"].exists():  # a study's seeds deleted: it cannot go on (it would queue them again)
            now = time.time()
            abandoned = [
                row[0]
                for row in db.execute(
                    f"SELECT id FROM studies WHERE status = 'running' AND id IN"
                    f" (SELECT study_id FROM runs WHERE id IN ({marks}))",
                    run_ids,
                )
            ]
            for study_id in abandoned:
                db.execute("UPDATE studies SET status = 'abandoned', finished = ? WHERE id = ?", [now, study_id])
                queued = db.execute(
                    f"SELECT id FROM runs WHERE study_id = ? AND status = 'queued' AND id NOT IN ({marks})",
                    [study_id, *run_ids],
                ).fetchall()
                for (run_id,) in queued:  # the scheduler claims only queued runs: none of these starts now
                    db.execute("UPDATE runs SET status = 'cancelled', finished = ? WHERE id = ?", [now, run_id])
                    cancelled.append(run_id)
        for run_id in run_ids:
            for table in DATA_TABLES:
                db.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
            db.execute("DELETE FROM runs WHERE id = ?", [run_id])
    for run_id in run_ids:
        why = files.remove(run_id)
        if why is not None and left is not None:
            left[run_id] = why
    return cancelled
