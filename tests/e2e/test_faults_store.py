"""The store and its files under a user's hands, with real processes: written over, deleted, moved, linked, locked.

Whatever is done to a store's files while it runs, what the store names is on disk, no process writes into
another store's files, and the store stays usable. About two minutes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from store import open_store
from store.curve_imports import Curve, import_curves
from store.files import RunFiles
from store.runs import RunSpec, create_runs, pid_alive
from tests.support.processes import SMALL, Payload, export, offpoc, run_row, wait_for
from tests.support.storefill import fill, spec

PENDULUM = ["td3", "Pendulum-v1", *SMALL]


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def ended(db: Path, run_id: int) -> bool:
    return run_row(db, run_id)["status"] in ("finished", "failed", "stopped", "lost")


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1, result.stderr
    return result.stderr


# ---- outputs never go over the store ---------------------------------------------------------------------
@pytest.mark.parametrize("target", ["s.db", "s.db-wal", "s.db-shm", "s.db-runs/1/out.csv", "link.csv", "hard.csv"])
def test_an_export_or_a_figure_over_the_store_is_refused_and_the_store_kept(tmp_path: Path, target: str) -> None:
    db = tmp_path / "s.db"
    store = open_store(db, create=True)
    (run_id,) = create_runs(store, [spec()])
    store.close()
    fill(db, run_id, 3000)
    held = sqlite3.connect(db)  # keeps the -wal and -shm there, as a running worker would
    held.execute("SELECT COUNT(*) FROM runs").fetchone()
    (tmp_path / "s.db-runs" / "1").mkdir(parents=True)
    (tmp_path / "link.csv").symlink_to(db)
    os.link(db, tmp_path / "hard.csv")
    before = export(db, "evaluations")
    out = tmp_path / target
    for command in (["export", "--table", "runs", "-o", str(out)], ["plot", "-o", str(out.with_suffix(".png"))]):
        if command[0] == "plot" and not target.startswith("s.db-runs"):
            continue  # a figure's name ends in .png: only the run files can hold one
        result = offpoc(db, *command, check=False)
        assert result.returncode == 2 and "write the output elsewhere" in one_line(result), result.stderr
    held.close()
    assert export(db, "evaluations") == before
    assert not (tmp_path / "s.db-runs" / "1" / "out.csv").exists()


def test_outputs_go_through_files_of_their_own_never_a_store_named_like_one(tmp_path: Path) -> None:
    """An output is written to a fresh temporary file beside it, then renamed: a store called ``out.csv.tmp``
    (or ``fig.png.tmp``) is neither written over nor removed; a run-files folder that is a link to where the
    files are is still the store's."""
    db = tmp_path / "out.csv.tmp"
    store = open_store(db, create=True)
    (run_id,) = create_runs(store, [spec()])
    RunFiles.of(store, db).ensure()
    store.close()
    fill(db, run_id, 3000)
    before = export(db, "evaluations")
    offpoc(db, "export", "--table", "runs", "-o", str(tmp_path / "out.csv"))
    offpoc(db, "plot", "-o", str(tmp_path / "out.csv.tmp.png"))
    assert export(db, "evaluations") == before and (tmp_path / "out.csv").read_text().startswith("run_id,")
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary files went
    mask = os.umask(0)
    os.umask(mask)
    for made in ("out.csv", "out.csv.tmp.png"):  # with the mode a file written in place would have
        assert stat.S_IMODE((tmp_path / made).stat().st_mode) == 0o666 & ~mask, made

    (tmp_path / "elsewhere").mkdir()
    os.replace(tmp_path / "out.csv.tmp-runs", tmp_path / "elsewhere" / "runs")
    (tmp_path / "out.csv.tmp-runs").symlink_to(tmp_path / "elsewhere" / "runs", target_is_directory=True)
    target = tmp_path / "out.csv.tmp-runs" / "store.json"
    result = offpoc(db, "export", "--table", "runs", "-o", str(target), check=False)
    assert result.returncode == 2 and "in the store's run files" in one_line(result)
    assert json.loads(target.read_text())["store_id"]


def test_the_scheduler_of_a_store_gone_before_it_started_says_so_in_one_line(tmp_path: Path) -> None:
    gone = tmp_path / "gone.db"
    command = [sys.executable, "-m", "offpoc_tui.runtime.scheduler", "--db", str(gone)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and result.stderr == "", result.stderr
    assert len(result.stdout.splitlines()) == 1 and f"scheduler cannot serve {gone}: no offpoc store" in result.stdout


# ---- a store deleted and made again, or moved, under its running scheduler ----------------------------------
@pytest.mark.process
def test_a_store_made_anew_at_the_path_sends_the_old_scheduler_and_worker_away(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    offpoc(db, "run", *PENDULUM, "--steps", "100000", "--seeds", "0-2", "--jobs", "1")
    wait_for(lambda: run_row(db, 1)["status"] == "running" and run_row(db, 1)["steps"] > 0, what="run 1 running")
    scheduler, worker = run_row(db, 1)["launcher_pid"], run_row(db, 1)["pid"]
    for suffix in ("", "-wal", "-shm"):  # rm s.db s.db-wal s.db-shm: its run files stay
        (tmp_path / f"s.db{suffix}").unlink()
    offpoc(db, "run", *PENDULUM, "--steps", "600", "--seed", "7")  # a new store, its own run 1
    wait_for(lambda: not pid_alive(scheduler) and not pid_alive(worker), timeout=90, what="the old processes to go")
    wait_for(lambda: ended(db, 1), what="the new store's run")
    assert run_row(db, 1)["status"] == "finished" and run_row(db, 1)["seed"] == 7
    new_id = open_store(db).execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0]
    assert json.loads((tmp_path / "s.db-runs" / "store.json").read_text())["store_id"] == new_id
    (stale,) = tmp_path.glob("s.db-runs.stale-*")  # the old store's folder, set aside by the new store
    log = (stale / "scheduler.log").read_text()
    assert "scheduler leaves: the store is no longer at" in log
    assert "new" not in stale.name and log.count("worker pid") == 1  # it started no worker after the deletion


@pytest.mark.process
def test_a_store_moved_while_it_trains_names_only_what_its_files_hold(tmp_path: Path) -> None:
    db, elsewhere = tmp_path / "s.db", tmp_path / "elsewhere"
    elsewhere.mkdir()
    offpoc(db, "run", *PENDULUM, "--steps", "100000", "--seeds", "0-1", "--jobs", "1",
           "--set", "checkpoint_every=500")  # fmt: skip
    wait_for(lambda: (run_row(db, 1)["checkpoint_step"] or 0) >= 500, what="a checkpoint")
    scheduler, worker = run_row(db, 1)["launcher_pid"], run_row(db, 1)["pid"]
    for path in sorted(tmp_path.glob("s.db*")):  # mv s.db* elsewhere/, in the shell's order
        os.rename(path, elsewhere / path.name)
    wait_for(lambda: not pid_alive(scheduler) and not pid_alive(worker), timeout=90, what="the old processes to go")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere"]  # nothing made again at the old place

    moved = elsewhere / "s.db"
    store = open_store(moved)
    run_1 = store.execute("SELECT status, error, checkpoint_step FROM runs WHERE id = 1").fetchone()
    run_2 = store.execute("SELECT status, launcher_pid FROM runs WHERE id = 2").fetchone()
    store.close()
    assert run_1[0] == "failed" and "the store is no longer at" in run_1[1], run_1
    saved = torch.load(elsewhere / "s.db-runs" / "1" / "checkpoint.pt", weights_only=True)
    assert saved["counters"]["step"] == run_1[2]  # the step the store names is the file's
    assert run_2 == ("queued", None)  # handed back, not lost: the next command where the store is starts it
    offpoc(moved, "resume", "1")
    wait_for(lambda: run_row(moved, 1)["status"] == "running", what="run 1 resumed where the store is now")
    offpoc(moved, "stop", "--all")
    assert not (tmp_path / "s.db-runs").exists()


# ---- the run files deleted, or linked into another store ----------------------------------------------------
def _flock_held(path: Path) -> bool:
    """Whether some process holds a flock on ``path``, read from /proc/locks: trying the lock ourselves
    would be seen by the scheduler as another holder."""
    try:
        inode = path.stat().st_ino
    except FileNotFoundError:
        return False
    return any(
        line.split()[1] == "FLOCK" and line.split()[5].rsplit(":", 1)[-1] == str(inode)
        for line in Path("/proc/locks").read_text().splitlines()
    )


@pytest.mark.process
def test_run_files_deleted_mid_run_are_made_again_and_one_scheduler_serves_on(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    args = [*PENDULUM, "--set", "checkpoint_every=500", "--eval-freq", "500"]
    offpoc(db, "run", *args, "--steps", "2500", "--seeds", "0-1", "--jobs", "1")
    wait_for(lambda: run_row(db, 1)["status"] == "running" and run_row(db, 1)["steps"] >= 200, what="run 1")
    shutil.rmtree(tmp_path / "s.db-runs")
    wait_for(lambda: _flock_held(tmp_path / "s.db-runs" / "scheduler.lock"), what="the lock taken again")
    offpoc(db, "run", *args, "--steps", "500", "--seed", "2")  # its command starts a scheduler: it must find one
    wait_for(lambda: all(ended(db, i) for i in (1, 2, 3)), what="the runs' end")
    log = (tmp_path / "s.db-runs" / "scheduler.log").read_text()
    assert "scheduler started" not in log  # the first scheduler served on; no second one started
    store_id = open_store(db).execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0]
    assert json.loads((tmp_path / "s.db-runs" / "store.json").read_text())["store_id"] == store_id
    for run_id, steps in ((1, 2500), (2, 2500), (3, 500)):
        row = run_row(db, run_id)
        assert row["status"] == "finished" and row["checkpoint_step"] == steps, (row["error"], log)
        saved = torch.load(tmp_path / "s.db-runs" / str(run_id) / "checkpoint.pt", weights_only=True)
        assert saved["counters"]["step"] == steps


@pytest.mark.process
def test_a_symlink_put_in_the_serving_schedulers_lock_makes_it_leave_not_spin(tmp_path: Path) -> None:
    """The scheduler's lock file swapped for a dangling symlink while it serves: it leaves with a line in its
    log (it used to poll on forever, serving nothing, the folder's vanishing taken for a deletion under way),
    makes nothing where the link points, and the run it started trains on; once the link is gone, the next
    command's scheduler serves the store again."""
    db = tmp_path / "s.db"
    offpoc(db, "run", *PENDULUM, "--steps", "1000000")
    wait_for(lambda: run_row(db, 1)["status"] == "running" and run_row(db, 1)["steps"] >= 200, what="run 1")
    scheduler = run_row(db, 1)["launcher_pid"]
    lock = tmp_path / "s.db-runs" / "scheduler.lock"
    (tmp_path / "s.db-runs" / "link").symlink_to(tmp_path / "away" / "lock")
    os.replace(tmp_path / "s.db-runs" / "link", lock)
    wait_for(lambda: not pid_alive(scheduler), timeout=60, what="the scheduler to leave")
    log = (tmp_path / "s.db-runs" / "scheduler.log").read_text()
    assert "scheduler leaves: s.db-runs/scheduler.lock is a symlink: refused, never written through" in log, log
    assert not (tmp_path / "away").exists()
    assert run_row(db, 1)["status"] == "running"
    lock.unlink()
    offpoc(db, "run", *PENDULUM, "--steps", "300", "--seed", "1")
    wait_for(lambda: ended(db, 2), what="run 2, started by the next scheduler")
    assert run_row(db, 2)["status"] == "finished"
    offpoc(db, "stop", "1")
    assert run_row(db, 1)["status"] == "stopped"


@pytest.mark.process
def test_a_worker_alone_makes_its_deleted_run_files_again_marked(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    offpoc(db, "run", *PENDULUM, "--steps", "2000", "--set", "checkpoint_every=500", "--eval-freq", "500")
    wait_for(lambda: run_row(db, 1)["status"] == "running" and run_row(db, 1)["steps"] >= 200, what="run 1")
    os.kill(run_row(db, 1)["launcher_pid"], signal.SIGKILL)  # no scheduler to make the folder again
    shutil.rmtree(tmp_path / "s.db-runs")
    wait_for(lambda: ended(db, 1), what="the run's end")
    row = run_row(db, 1)
    assert row["status"] == "finished" and row["checkpoint_step"] == 2000, row
    store_id = open_store(db).execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0]
    assert json.loads((tmp_path / "s.db-runs" / "store.json").read_text())["store_id"] == store_id
    offpoc(db, "run", *PENDULUM, "--steps", "300", "--seed", "5", "--follow")  # the store takes new runs
    assert run_row(db, 2)["status"] == "finished"


@pytest.mark.process
def test_a_run_folder_linked_into_another_store_is_never_written_through(tmp_path: Path) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    args = [*PENDULUM, "--steps", "600", "--eval-freq", "300", "--set", "checkpoint_every=300"]
    offpoc(b, "run", *args, "--follow")
    offpoc(a, "run", *args, "--seeds", "0-3", "--jobs", "1")
    theirs = tmp_path / "b.db-runs" / "1"
    before = {name: md5(theirs / name) for name in ("checkpoint.pt", "worker.log")}
    (tmp_path / "a.db-runs" / "3").symlink_to(theirs, target_is_directory=True)  # before runs 3 and 4 start
    (tmp_path / "a.db-runs" / "4").mkdir()
    (tmp_path / "a.db-runs" / "4" / "worker.log").symlink_to(theirs / "worker.log")
    wait_for(lambda: all(ended(a, i) for i in (1, 2, 3, 4)), what="a.db's runs")
    assert [run_row(a, i)["status"] for i in (1, 2, 3, 4)] == ["finished", "finished", "failed", "failed"]
    assert "is not a folder of this store (a symlink" in run_row(a, 3)["error"]
    assert "worker.log is a symlink: refused" in run_row(a, 4)["error"]

    store = open_store(a)
    store.execute("UPDATE runs SET status = 'stopped' WHERE id = 2")
    store.conn.commit()
    store.close()
    os.replace(tmp_path / "a.db-runs" / "2", tmp_path / "a.db-runs" / "2-away")
    (tmp_path / "a.db-runs" / "2").symlink_to(theirs, target_is_directory=True)
    result = offpoc(a, "resume", "2", check=False)
    assert result.returncode == 2 and "is not a folder of this store (a symlink" in one_line(result)
    analysed = offpoc(a, "analyze", "weights", "1", "2", check=False)
    assert analysed.returncode == 1 and "is not a folder of this store (a symlink" in one_line(analysed)
    offpoc(a, "rm", "2", "3", "4", "-y")  # the links go, never what they point to
    assert {name: md5(theirs / name) for name in before} == before
    assert run_row(b, 1)["status"] == "finished"


@pytest.mark.process
def test_analyze_loads_only_a_runs_own_checkpoint_and_says_why_in_one_line(tmp_path: Path) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    args = [*PENDULUM, "--correction", "acoffpoc", "--steps", "800", "--eval-freq", "400"]
    offpoc(a, "run", *args, "--seeds", "0-1", "--follow")
    offpoc(b, "run", *args, "--follow")
    assert offpoc(a, "analyze", "weights", "1", "2").stdout.startswith("position,")
    mine = tmp_path / "a.db-runs" / "2" / "checkpoint.pt"
    original = mine.read_bytes()
    marker = tmp_path / "pwned"
    pickled = tmp_path / "pickled.pt"
    torch.save({"format": 3, "owner": None, "config": {}, "x": Payload(marker)}, pickled)
    hollow = tmp_path / "hollow.pt"
    torch.save({"format": 3}, hollow)

    def edited(change: Callable[[dict[str, Any]], None]) -> bytes:
        """The run's own checkpoint with one thing changed."""
        state = torch.load(io.BytesIO(original), weights_only=True)
        change(state)
        buffer = io.BytesIO()
        torch.save(state, buffer)
        return buffer.getvalue()

    def reshape(state: dict[str, Any]) -> None:
        weights = state["modules"]["actor"]
        name = next(iter(weights))
        weights[name] = torch.zeros(3, 3)

    cases = [
        ("belongs to another store", (tmp_path / "b.db-runs" / "1" / "checkpoint.pt").read_bytes()),
        ("cannot read checkpoint", original[: len(original) // 2]),
        ("cannot read checkpoint", b""),
        ("cannot read checkpoint", Path("/etc/passwd").read_bytes()),  # torch raised IndexError on it
        ("is not a whole offpoc checkpoint", hollow.read_bytes()),
        ("holds more than plain data (unsupported GLOBAL posix.system)", pickled.read_bytes()),
        ("size mismatch for", edited(reshape)),  # the reason, not torch's first line alone
        ("its step is -5, not a count", edited(lambda state: state["counters"].update(step=-5))),
        ("no environment RNG state", edited(lambda state: state["rng"].update(env="PCG64"))),
        (
            "RNG 'os.system' is not one of NumPy's",
            edited(lambda state: state["rng"]["env"].update(bit_generator="os.system")),
        ),
    ]
    for reason, content in cases:
        mine.write_bytes(content)
        result = offpoc(a, "analyze", "weights", "1", "2", check=False)
        assert result.returncode == 1 and reason in one_line(result), result.stderr
        assert "weights_only" not in result.stderr  # torch's advice to unpickle anyway is never repeated
    assert not marker.exists()


# ---- a store kept busy by another process -------------------------------------------------------------------
@pytest.mark.process
def test_a_worker_waits_out_a_store_locked_past_the_busy_timeout(tmp_path: Path) -> None:
    """Another process (a long import) holds the write lock four times SQLite's busy timeout: the worker tries
    again within its heartbeat instead of failing the run, and nothing it measured meanwhile is lost."""
    db = tmp_path / "s.db"
    offpoc(db, "run", *PENDULUM, "--steps", "2000", "--eval-freq", "250", env={"OFFPOC_BUSY_TIMEOUT_S": "1"})
    wait_for(lambda: run_row(db, 1)["status"] == "running" and run_row(db, 1)["steps"] >= 300, what="training")
    lock = sqlite3.connect(db, timeout=60)
    lock.execute("BEGIN IMMEDIATE")
    try:
        time.sleep(4.0)
    finally:
        lock.rollback()
        lock.close()
    wait_for(lambda: ended(db, 1), what="the run's end")
    assert run_row(db, 1)["status"] == "finished", run_row(db, 1)["error"]
    assert [int(r["step"]) for r in export(db, "evaluations")] == list(range(0, 2001, 250))


def test_a_command_that_meets_a_locked_store_says_so_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    open_store(db, create=True).close()
    lock = sqlite3.connect(db)
    lock.execute("BEGIN IMMEDIATE")
    try:
        result = offpoc(db, "jobs", "2", check=False, env={"OFFPOC_BUSY_TIMEOUT_S": "0.5"})
    finally:
        lock.rollback()
        lock.close()
    assert result.returncode == 1 and "the store could not be used: database is locked" in one_line(result)
    assert offpoc(db, "jobs", "2").returncode == 0


def test_an_import_commits_in_chunks_that_leave_other_writers_room(tmp_path: Path) -> None:
    db = open_store(tmp_path / "s.db", create=True)
    commits: list[str] = []
    db.conn.set_trace_callback(lambda sql: commits.append(sql) if sql.strip().upper() == "COMMIT" else None)
    config = {"imported": "test", "seed": 0}
    curves = [
        Curve(RunSpec("big", "td3", "Hopper-v4", "none", None, seed, 40_000_000, config), f"test:{seed}", "x",
              np.arange(40_000, dtype=np.int64) * 1000, np.zeros(40_000))
        for seed in range(3)
    ]  # fmt: skip
    report = import_curves(db, curves)
    assert report.imported == 3 and len(commits) == 3  # 40,000 evaluations each: one file per transaction
    assert db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == 120_000
    db.close()


# ---- an empty file is not a store -------------------------------------------------------------------------
def test_an_empty_file_given_as_the_store_is_refused_by_every_command_that_would_write(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    db.touch()
    sweep = tmp_path / "grid.toml"
    sweep.write_text('name = "g"\nalgos = ["td3"]\nenvs = ["Pendulum-v1"]\nseeds = "0"\nsteps = 600\n'
                     '[[methods]]\ncorrection = "none"\n')  # fmt: skip
    npz = tmp_path / "evaluations.npz"
    np.savez(npz, timesteps=np.array([1000, 2000]), results=np.ones((2, 3)), ep_lengths=np.ones((2, 3)))
    for command in (["run", *PENDULUM], ["jobs", "2"], ["import", "zoo", str(npz), "--algo", "td3", "--env", "X-v1"],
                    ["sweep", str(sweep)], ["resume", "1"], ["ps"]):  # fmt: skip
        result = offpoc(db, *command, check=False)
        assert result.returncode == 2 and "is an empty file, not an offpoc store" in one_line(result), command
    assert db.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "evaluations.npz",
                                                                                       "grid.toml"]  # fmt: skip
