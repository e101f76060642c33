"""The links a run's writer writes through, local and Ray's: one owner per run, rewinds, a store that moved.

In-process and fast; ``tests/e2e/test_resume_records.py`` stages the same with real workers.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from offpoc_tui.runtime.ray_backend import StoreWriter
from store import open_store
from store.db import StoreFile, StoreMoved
from store.links import LocalLink
from store.runs import NotOwner, claim, create_runs, requeue
from store.writer import RunWriter
from tests.support.storefill import spec

ROWS = {"evaluations": [(1, 500, 5.0, 1.0, 0.0, 1.0, "[1.0]", "[1]")]}
"""One evaluation of run 1 at step 500, as a writer ships it."""


def evaluations(db: object, run_id: int = 1) -> list[tuple[int, float]]:
    return db.execute(  # type: ignore[attr-defined, no-any-return]
        "SELECT step, return_mean FROM evaluations WHERE run_id = ? ORDER BY step", [run_id]
    ).fetchall()


def test_a_local_link_writes_only_while_its_worker_owns_the_run(tmp_path: Path) -> None:
    db = open_store(tmp_path / "s.db", create=True)
    (run_id,) = create_runs(db, [spec()])
    old = LocalLink(db, claim(db, run_id, os.getpid()))
    assert old.commit(run_id, ROWS, {"steps": 500}) is False
    db.execute("UPDATE runs SET status = 'lost' WHERE id = ?", [run_id])  # declared lost, then resumed
    db.conn.commit()
    requeue(db, run_id)
    new = LocalLink(db, claim(db, run_id, os.getpid() + 1))
    for write in (lambda: old.commit(run_id, {"evaluations": []}, {"steps": 900}), lambda: old.rewind(run_id, 0)):
        with pytest.raises(NotOwner):
            write()
    assert old.end(run_id, "finished") is False
    written = tmp_path / "old.tmp"  # the old worker's checkpoint, written and synced: it is never put in place
    written.write_bytes(b"the old worker's")
    with pytest.raises(NotOwner):
        old.place_checkpoint(run_id, 900, written, tmp_path / "checkpoint.pt")
    assert written.exists() and not (tmp_path / "checkpoint.pt").exists()
    assert evaluations(db) == [(500, 1.0)]
    assert db.execute("SELECT steps, status, checkpoint_step FROM runs").fetchone() == (500, "running", None)

    db.execute("UPDATE runs SET checkpoint_step = 300 WHERE id = ?", [run_id])  # its file went missing:
    db.conn.commit()
    new.rewind(run_id, 0)  # the new worker starts over
    assert evaluations(db) == [] and db.execute("SELECT revision, checkpoint_step FROM runs").fetchone() == (1, None)
    new.place_checkpoint(run_id, 100, written, tmp_path / "checkpoint.pt")
    assert (tmp_path / "checkpoint.pt").read_bytes() == b"the old worker's" and not written.exists()
    assert db.execute("SELECT checkpoint_step FROM runs").fetchone() == (100,)
    new.place_checkpoint(run_id, 100, written, tmp_path / "checkpoint.pt")  # a try again after a failed commit
    assert (tmp_path / "checkpoint.pt").read_bytes() == b"the old worker's"
    assert new.end(run_id, "finished") is True
    db.close()


def test_the_ray_writer_takes_the_run_from_a_task_ray_ran_again(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = open_store(path, create=True)
    (run_id,) = create_runs(db, [spec()], backend="ray")
    writer = StoreWriter(str(path))
    first = writer.start(run_id, 100, "ray:node/a")
    assert first is not None
    writer.commit(run_id, first["owner"], ROWS, {"steps": 500})
    retried = writer.start(run_id, 101, "ray:node/b")  # the worker died; Ray runs the task again
    assert retried is not None and retried["owner"] != first["owner"]
    with pytest.raises(NotOwner):
        writer.commit(run_id, first["owner"], {"evaluations": []}, {"steps": 900})
    with pytest.raises(NotOwner):
        writer.rewind(run_id, first["owner"], 0, None, 0)
    with pytest.raises(NotOwner):
        writer.put_checkpoint(run_id, first["owner"], 500, b"not the run's")
    assert writer.end(run_id, first["owner"], "finished") is False
    checkpoint = tmp_path / "s.db-runs" / str(run_id) / "checkpoint.pt"
    assert not checkpoint.exists()

    opened = writer.rewind(run_id, retried["owner"], 0, None, 0)  # the retried task replaces what was recorded
    assert opened.last_step == {} and evaluations(db) == []
    writer.put_checkpoint(run_id, retried["owner"], 700, b"the run's")
    assert checkpoint.read_bytes() == b"the run's"
    assert db.execute("SELECT checkpoint_step FROM runs").fetchone() == (700,)
    assert writer.end(run_id, retried["owner"], "finished") is True
    db.close()


def test_a_link_stops_writing_once_the_store_is_not_at_its_path(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = open_store(path, create=True)
    (run_id,) = create_runs(db, [spec()])
    link = LocalLink(db, claim(db, run_id, os.getpid()), StoreFile.of(path))
    writer = RunWriter(link, run_id)
    writer.add_eval(0, 0.0, 1.0, 0.0, [1.0], [1])
    writer.flush(0, 0)
    for suffix in ("", "-wal", "-shm"):  # mv s.db* moved.db*
        os.rename(tmp_path / f"s.db{suffix}", tmp_path / f"moved.db{suffix}")
    writer.add_eval(500, 1.0, 2.0, 0.0, [2.0], [1])
    with pytest.raises(StoreMoved):
        writer.flush(500, 500)
    assert link.end(run_id, "failed", "the store moved") is True  # its end is still recorded, where the store is
    moved = open_store(tmp_path / "moved.db")
    assert evaluations(moved) == [(0, 1.0)] and moved.execute("SELECT status FROM runs").fetchone() == ("failed",)
    moved.close()
