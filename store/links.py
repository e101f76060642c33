"""What a run's writer commits, and the links that carry it to the store.

A writer belongs to the worker that claimed its run: its :class:`Link` carries the claim's
owner token, and every write (records and progress, a rewind, the run's end) checks in its own
transaction that the run is still that worker's (:func:`store.runs.check_owner`), raising
:class:`~store.runs.NotOwner` and writing nothing otherwise.

:func:`rewind` deletes what a resumed run recorded past the step it resumes from and bumps the
run's ``revision`` (readers that cache records by step read them again).

:class:`LocalLink` writes the SQLite file itself; a worker on another machine ships the same plain
rows to the one process that holds the file (:mod:`offpoc_tui.runtime.ray_backend`), which calls the same
functions. A store locked by another process for longer than SQLite's busy timeout (a long import)
is retried for up to :data:`BUSY_RETRY_S`, within the heartbeat that keeps the run from being
declared lost.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

import sqlite_utils

from store.db import StoreFile, busy_timeout, write
from store.runs import LOST_AFTER_S, check_owner, finish

T = TypeVar("T")
BUSY_RETRY_S = LOST_AFTER_S * 0.8
"""How long a write waits on a store another process keeps locked (each try waits SQLite's busy timeout):
less than the heartbeat age at which readers declare a run lost."""
RETRY_PAUSE_S = 0.1
MEAN_LAMBDA_QUANTITY = "lambda"
"""The logged quantity whose latest block's mean is the run's ``mean_lambda`` (:data:`store.writer.LAMBDA`)."""

INSERTS = {
    "evaluations": "INSERT OR IGNORE INTO evaluations (run_id, step, wall_time, return_mean, return_std, length_mean,"
    " returns, lengths) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "episodes": "INSERT OR IGNORE INTO episodes (run_id, step, episode, return, length) VALUES (?, ?, ?, ?, ?)",
    "train": "INSERT OR IGNORE INTO train (run_id, step, updates, critic_loss, actor_loss, q_mean, alpha, sps)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "quantities": "INSERT OR IGNORE INTO quantities (run_id, name, label, low, high) VALUES (?, ?, ?, ?, ?)",
    "quantity_blocks": "INSERT OR IGNORE INTO quantity_blocks (run_id, quantity, first_update, first_step, count,"
    " columns, mean, data, stride) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "histograms": "INSERT OR IGNORE INTO histograms (run_id, quantity, step, counts) VALUES (?, ?, ?, ?)",
}
LAST_STEP_SQL = {
    "evaluations": "SELECT '', MAX(step) FROM evaluations WHERE run_id = ?",
    "episodes": "SELECT '', MAX(step) FROM episodes WHERE run_id = ?",
    "train": "SELECT '', MAX(step) FROM train WHERE run_id = ?",
    "quantity_blocks": "SELECT quantity, MAX(first_step + (count - 1) * stride) FROM quantity_blocks WHERE run_id = ?"
    " GROUP BY quantity",
    "histograms": "SELECT quantity, MAX(step) FROM histograms WHERE run_id = ? GROUP BY quantity",
}


Rows = dict[str, list[Sequence[Any]]]
"""Pending rows per table, plain values (what :func:`commit` inserts)."""


class Opened(NamedTuple):
    """What a writer needs of the store when it opens: what is already stored for the run."""

    last_step: dict[tuple[str, str], int]
    """(table, quantity or '') → the last step stored; missing: none."""
    best_return: float | None


def opened(db: sqlite_utils.Database, run_id: int) -> Opened:
    last_step: dict[tuple[str, str], int] = {}
    for table, sql in LAST_STEP_SQL.items():
        for quantity, step in db.execute(sql, [run_id]).fetchall():
            if step is not None:
                last_step[table, quantity] = int(step)
    row = db.execute("SELECT best_return FROM runs WHERE id = ?", [run_id]).fetchone()
    return Opened(last_step, row[0] if row else None)


class StoreBusy(sqlite3.OperationalError):
    """The store stayed locked by another process for :data:`BUSY_RETRY_S`; the message says so in one line."""


def retrying(attempt: Callable[[], T]) -> T:
    """``attempt()``, tried again while another process holds the store's write lock, up to :data:`BUSY_RETRY_S`."""
    started = time.monotonic()
    while True:
        try:
            return attempt()
        except sqlite3.OperationalError as error:
            text = str(error)
            if "locked" not in text and "busy" not in text:
                raise
            waited = time.monotonic() - started
            if waited + busy_timeout() > BUSY_RETRY_S:  # another try could outlast the heartbeat
                raise StoreBusy(f"the store stayed locked by another process for {waited:.0f} s ({text})") from None
            time.sleep(RETRY_PAUSE_S)  # SQLite may answer busy at once (a lock it cannot wait on): never spin


def commit(
    db: sqlite_utils.Database, run_id: int, rows: Rows, progress: dict[str, Any], owner: str | None = None
) -> bool:
    """Insert ``rows`` and set ``progress`` on the run in one transaction; whether a stop was requested.

    With ``owner`` (the worker's claim token), raises :class:`~store.runs.NotOwner` and writes nothing
    when the run is no longer that worker's.
    """
    assignments = ", ".join(f"{key} = ?" for key in progress)

    def attempt() -> bool:
        with write(db):
            check_owner(db, run_id, owner)
            for table, pending in rows.items():
                if pending:
                    db.conn.executemany(INSERTS[table], pending)
            db.execute(f"UPDATE runs SET {assignments} WHERE id = ?", [*progress.values(), run_id])
            row = db.execute("SELECT stop_requested FROM runs WHERE id = ?", [run_id]).fetchone()
        return bool(row and row[0])

    return retrying(attempt)


_PAST = {
    "evaluations": "step", "episodes": "step", "train": "step", "quantity_blocks": "first_step", "histograms": "step",
}  # fmt: skip


def rewind(
    db: sqlite_utils.Database,
    run_id: int,
    step: int,
    owner: str | None = None,
    checkpoint: int | None = None,
    updates: int = 0,
) -> Opened:
    """Delete the run's records past ``step`` (a resumed run's trajectory from its checkpoint replaces them)
    and set its progress back to ``step`` and ``updates``; where its writer starts from then.

    ``checkpoint``: the step of the checkpoint the run resumes from, None when it starts over (its
    recorded checkpoint, if any, was not found): the store names no step its files do not hold. When
    anything was deleted the run's ``revision`` goes up, in the same transaction, so that a reader
    caching its records by step (the dashboard) reads them again. With ``owner``, as :func:`commit`.
    """

    def attempt() -> None:
        with write(db):
            check_owner(db, run_id, owner)
            deleted = 0
            for table, column in _PAST.items():
                cursor = db.execute(f"DELETE FROM {table} WHERE run_id = ? AND {column} > ?", [run_id, step])
                deleted += max(cursor.rowcount, 0)
            last_eval = "FROM evaluations WHERE run_id = :run ORDER BY step DESC LIMIT 1"
            db.execute(
                "UPDATE runs SET steps = :step, updates = :updates, checkpoint_step = :checkpoint,"
                " revision = revision + :bump,"
                f" last_return = (SELECT return_mean {last_eval}), wall_time = (SELECT wall_time {last_eval}),"
                " best_return = (SELECT MAX(return_mean) FROM evaluations WHERE run_id = :run),"
                " mean_lambda = (SELECT mean FROM quantity_blocks WHERE run_id = :run AND quantity = :lambda"
                " ORDER BY first_step DESC LIMIT 1) WHERE id = :run",
                {"step": step, "updates": updates, "checkpoint": checkpoint, "bump": 1 if deleted else 0,
                 "run": run_id, "lambda": MEAN_LAMBDA_QUANTITY},
            )  # fmt: skip

    retrying(attempt)
    return opened(db, run_id)


def place_checkpoint(
    db: sqlite_utils.Database, run_id: int, step: int, place: Callable[[], None], owner: str | None = None
) -> None:
    """``place()`` the run's checkpoint file (a rename of a file already written and synced) and record its
    step, in one transaction that first checks ``owner`` (as :func:`commit`): a claim needs the write lock,
    so a worker that lost its run can never put its file where the new owner's is."""

    def attempt() -> None:
        with write(db):
            check_owner(db, run_id, owner)
            place()
            db.execute("UPDATE runs SET checkpoint_step = ? WHERE id = ?", [step, run_id])

    retrying(attempt)


def end(
    db: sqlite_utils.Database,
    run_id: int,
    status: str,
    owner: str | None,
    error: str | None = None,
    traceback: str | None = None,
) -> bool:
    """Record the run's end (``finished``, ``stopped``, ``failed``) if it is still ``owner``'s; whether it was."""
    return retrying(lambda: finish(db, run_id, status, error=error, traceback=traceback, owner=owner))


class Link(Protocol):
    """How a writer reaches the store, on behalf of the worker that claimed the run (its owner token):
    directly, or through the process that holds the file. Every call raises
    :class:`~store.runs.NotOwner`, writing nothing, once the run is no longer that worker's."""

    def open(self, run_id: int) -> Opened: ...
    def commit(self, run_id: int, rows: Rows, progress: dict[str, Any]) -> bool: ...
    def rewind(self, run_id: int, step: int, checkpoint: int | None, updates: int) -> Opened: ...
    def place_checkpoint(self, run_id: int, step: int, tmp: Path, path: Path) -> None: ...
    def guard(self) -> None: ...
    def end(self, run_id: int, status: str, error: str | None = None, traceback: str | None = None) -> bool: ...


class LocalLink:
    """The store file itself, on this machine; with ``owner``, every write checks the worker still owns the run.

    With ``where`` (the store file as opened), records and progress are written only while the file is still
    at its path (:class:`~store.db.StoreMoved` otherwise): the run's files are kept beside that path, and a
    store moved or replaced under a running worker must not name a checkpoint it does not hold. The run's
    end is still recorded, in the file the worker opened, wherever it is now.
    """

    def __init__(self, db: sqlite_utils.Database, owner: str | None = None, where: StoreFile | None = None) -> None:
        self.db = db
        self.owner = owner
        self.where = where

    def open(self, run_id: int) -> Opened:
        return opened(self.db, run_id)

    def guard(self) -> None:
        """Raise :class:`~store.db.StoreMoved` unless the store file is still at the path it was opened at."""
        if self.where is not None:
            self.where.check()

    def commit(self, run_id: int, rows: Rows, progress: dict[str, Any]) -> bool:
        self.guard()
        return commit(self.db, run_id, rows, progress, self.owner)

    def rewind(self, run_id: int, step: int, checkpoint: int | None = None, updates: int = 0) -> Opened:
        self.guard()
        return rewind(self.db, run_id, step, self.owner, checkpoint, updates)

    def place_checkpoint(self, run_id: int, step: int, tmp: Path, path: Path) -> None:
        """Rename the written checkpoint ``tmp`` to ``path`` and record ``step``, as :func:`place_checkpoint`."""

        def place() -> None:
            self.guard()  # under the write lock: the file goes where the store is, or nowhere
            if tmp.exists() or not path.exists():  # else renamed by a try whose commit failed: in place already
                os.replace(tmp, path)

        place_checkpoint(self.db, run_id, step, place, self.owner)

    def end(self, run_id: int, status: str, error: str | None = None, traceback: str | None = None) -> bool:
        return end(self.db, run_id, status, self.owner, error, traceback)
