"""One scheduler per store, with real processes: concurrent commands share one limit; its death, resumed.

About 40 s in all.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import SMALL, immutable, offpoc, run_row, runs, wait_for


def workers_of(db: Path) -> int:
    """Live worker processes of this store, from the process table (not from what the store says). A worker's
    child between its fork and its exec (a library running a command) carries the worker's command line: it is
    the same worker, not another one, and is not counted."""
    found: dict[int, int] = {}  # pid → parent pid
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if b"offpoc_tui.runtime.worker" in argv and str(db).encode() in argv and fields[0] not in ("Z", "X"):
            found[int(entry.name)] = int(fields[1])
    return sum(1 for parent in found.values() if parent not in found)


@pytest.mark.process
def test_two_concurrent_run_commands_never_exceed_the_store_limit(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    offpoc(db, "jobs", "2")
    command = [sys.executable, "-m", "offpoc_tui.cli", "run", "td3", "Hopper-v4", "--seeds", "0-1",
               "--steps", "1200", "--eval-freq", "600", *SMALL, "--db", str(db)]  # fmt: skip
    both = [subprocess.Popen([*command, "--jobs", "2"], cwd=tmp_path, stdout=subprocess.PIPE) for _ in range(2)]
    assert [p.wait(timeout=120) for p in both] == [0, 0]
    most, deadline = 0, time.monotonic() + 240
    while time.monotonic() < deadline:
        most = max(most, workers_of(db))
        current = runs(db) if most and not workers_of(db) else None
        if current is not None and len(current) == 4 and all(r["status"] == "finished" for r in current.values()):
            break
        time.sleep(0.05)
    assert len(runs(db)) == 4 and all(r["status"] == "finished" for r in runs(db).values()), runs(db)
    assert most == 2  # both slots used, never three or four workers at once


def test_the_limit_changes_for_the_queue_and_bad_values_are_one_line(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    assert "at most 3 runs at a time" in offpoc(db, "jobs", "3").stdout
    assert "at most 3 runs at a time" in offpoc(db, "jobs").stdout
    bad = offpoc(db, "jobs", "0", check=False)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: jobs must be from 1 to 4,096, got 0"
    bad = offpoc(db, "run", "td3", "Hopper-v4", "--jobs", "0", check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "at most 3 runs at a time" in offpoc(db, "jobs").stdout  # nothing changed


@pytest.mark.process
def test_killed_scheduler_leaves_its_queue_lost_and_resumable(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    offpoc(db, "run", "td3", "Hopper-v4", "--seeds", "0-2", "--steps", "3000", "--eval-freq", "1000", *SMALL,
           "--jobs", "1")  # fmt: skip
    wait_for(lambda: run_row(db, 1)["status"] == "running" and run_row(db, 3)["launcher_pid"], what="run 1 running")
    scheduler = run_row(db, 3)["launcher_pid"]
    os.kill(scheduler, signal.SIGKILL)
    wait_for(lambda: runs(db)[3]["status"] == "lost", timeout=90, what="queued runs lost")
    current = runs(db)
    assert current[2]["status"] == "lost" and current[1]["status"] in ("running", "finished")  # its worker goes on
    wait_for(lambda: run_row(db, 1)["status"] == "finished", what="run 1 finished by its own worker")
    offpoc(db, "resume", "2")
    offpoc(db, "resume", "3", "--follow")
    wait_for(lambda: all(r["status"] == "finished" for r in runs(db).values()), what="all finished")
    assert {i: r["steps"] for i, r in runs(db).items()} == {1: 3000, 2: 3000, 3: 3000}


def test_a_bad_backend_choice_and_a_missing_ray_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    bad = offpoc(db, "run", "td3", "Hopper-v4", "--backend", "slurm", check=False)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --backend must be one of local, ray, got 'slurm'"
    bad = offpoc(db, "run", "td3", "Hopper-v4", "--address", "auto", check=False)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --address is for --backend ray"
    without_ray = "import sys; sys.modules['ray'] = None; from offpoc_tui.cli import main; main()"  # as if absent
    for command in (["run", "td3", "Hopper-v4"], ["sweep", str(tmp_path / "any.toml")]):
        result = subprocess.run(
            [sys.executable, "-c", without_ray, *command, "--backend", "ray", "--db", str(db)],
            capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        missing = "error: --backend ray needs Ray, which is not installed: pip install 'offpoc[ray]'"
        assert result.stderr.strip() == missing
    assert not db.exists()


def test_a_run_queued_after_the_scheduler_adopted_waits_for_the_next_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run another command queues between the scheduler's adopt and its start is not started unstamped: the
    next poll would read it as requeued under a live worker and give it a second one (three workers under a
    limit of two, seen under load). It starts at the next poll, stamped."""
    from offpoc_tui.runtime import scheduler
    from store import open_store
    from store.db import StoreFile
    from store.files import RunFiles
    from store.runs import create_runs
    from tests.support.storefill import spec

    db_path = tmp_path / "s.db"
    db = open_store(db_path, create=True)
    (run_id,) = create_runs(db, [spec(env="Pendulum-v1")])  # queued, no scheduler has adopted it
    local = scheduler.LocalWorkers(db_path, db, RunFiles.of(db, db_path), StoreFile.of(db_path))
    monkeypatch.setattr(scheduler, "adopt", lambda *_: None)  # it arrives just after this poll's adopt
    scheduler._serve_once(db, local, None, os.getpid())
    try:
        assert local.active == {} and run_row(db_path, run_id)["status"] == "queued"
    finally:
        for process in local.active.values():
            process.kill()
            process.wait()


def test_a_workers_unrecorded_failure_is_read_from_its_own_line() -> None:
    """A worker that could not record a failure exits 1; the scheduler records it from the log's end: a solo
    run's last line, and for each lane of a group its own ``run N: failed: ...`` line, not the last lane's."""
    from offpoc_tui.runtime.scheduler import _reason

    solo = "training\nthe store did not take the failure (disk full); ...\nRuntimeError: simulator exploded"
    assert _reason(3, solo) == "RuntimeError: simulator exploded"
    group = "lane group of runs 4, 5\nrun 4: failed: RuntimeError: nan at step 400\nrun 5: finished: finished at 600"
    assert _reason(4, group) == "RuntimeError: nan at step 400"
    assert _reason(5, group) == ["finished", "finished at 600"][1]
    assert _reason(6, "") == ""


# ---- the scheduler's lock: a folder made again while its deletion is under way, a symlink in its place ------
def _serving(tmp_path: Path) -> tuple[Any, Any, Any]:
    """A real store with nothing queued, the scheduler's lock taken in this process, and its workers."""
    from offpoc_tui.runtime import scheduler
    from store import open_store
    from store.db import StoreFile
    from store.files import RunFiles

    db_path = tmp_path / "s.db"
    db = open_store(db_path, create=True)
    files, where = RunFiles.of(db, db_path), StoreFile.of(db_path)
    lock = scheduler.Lock(files, where)
    assert lock.take()
    return db, scheduler.LocalWorkers(db_path, db, files, where), lock


def _vanishing(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """Make the run-files folder vanish right after each of its next ``times`` makings (a deletion still under way
    when the scheduler makes it again); the makings counted. Past 200 the test fails: the scheduler waits on."""
    from store.files import RunFiles

    ensure, made = RunFiles.ensure, [0]

    def ensure_then_vanish(files: RunFiles) -> Any:
        made[0] += 1
        assert made[0] <= 200, "the scheduler kept waiting for a folder that keeps vanishing"
        found = ensure(files)
        if made[0] <= times:
            shutil.rmtree(files.root)
        return found

    monkeypatch.setattr(RunFiles, "ensure", ensure_then_vanish)
    return made


def test_a_run_files_folder_vanishing_as_it_is_made_again_is_waited_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder deleted while the scheduler makes it again (rmtree still under way): its lock file cannot be
    opened once (FileNotFoundError). The scheduler looks again at the next poll and serves on, the lock its own;
    it does not leave as it would on a full disk (no scheduler then held the lock, or a second one started)."""
    from offpoc_tui.runtime import scheduler

    db, local, lock = _serving(tmp_path)
    monkeypatch.setattr(scheduler, "POLL_S", 0.01)
    shutil.rmtree(lock.files.root)  # the deletion: the next poll finds the lock's file gone
    made = _vanishing(monkeypatch, times=1)
    try:
        scheduler._serve(db, local, None, lock)  # nothing queued: returns once it holds the lock again
        assert made[0] == 2
        assert lock.handle is not None and os.fstat(lock.handle.fileno()).st_ino == lock.path.stat().st_ino
    finally:
        lock.release()


def test_a_run_files_folder_that_keeps_vanishing_makes_the_scheduler_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder that vanishes every time it is made is waited for :data:`VANISHED_S`, then the scheduler leaves
    with a line (its queued runs handed back): never a scheduler polling on forever without serving."""
    from offpoc_tui.runtime import scheduler

    db, local, lock = _serving(tmp_path)
    monkeypatch.setattr(scheduler, "POLL_S", 0.01)
    monkeypatch.setattr(scheduler, "VANISHED_S", 0.2)
    shutil.rmtree(lock.files.root)
    made = _vanishing(monkeypatch, times=10_000)
    with pytest.raises(scheduler.Leave, match=r"scheduler\.lock: its folder kept vanishing for 0 s"):
        scheduler._serve(db, local, None, lock)
    assert 2 <= made[0] < 200


HOSTILE_LOCKS = {
    "a link into a missing folder": "is a symlink: refused, never written through",
    "a link to a file elsewhere": "is a symlink: refused, never written through",
    "a folder": "is not a regular file: refused",
    "a FIFO": "is not a regular file: refused",
}


@pytest.mark.parametrize("hostile", sorted(HOSTILE_LOCKS))
def test_what_is_not_a_lock_file_of_its_own_is_refused_in_a_line(tmp_path: Path, hostile: str) -> None:
    """The lock file is the store's own, as its logs are: a symlink in its place (dangling into a missing folder,
    or to a file elsewhere), a folder or a FIFO is a StoreError naming it; nothing is made or opened where a link
    points; and a command that would start a scheduler says so in one line (exit 2), its run kept queued, rather
    than a traceback (a folder) or a scheduler that leaves at once and runs left waiting without a word."""
    from store.db import StoreError

    db, _, lock = _serving(tmp_path)
    lock.release()
    lock.path.unlink()
    if hostile.startswith("a link"):
        lock.path.symlink_to(tmp_path / ("missing/folder/lock" if "missing" in hostile else "elsewhere.lock"))
    elif hostile == "a folder":
        lock.path.mkdir()
    else:
        os.mkfifo(lock.path)
    said = f"s.db-runs/scheduler.lock {HOSTILE_LOCKS[hostile]}"
    with pytest.raises(StoreError, match=said):
        lock.take()
    with pytest.raises(StoreError, match=said):
        lock.still_held()
    db.close()
    result = offpoc(tmp_path / "s.db", "run", "td3", "Pendulum-v1", *SMALL, "--steps", "600", check=False)
    assert (result.returncode, result.stderr) == (2, f"error: {said}\n")
    assert run_row(tmp_path / "s.db", 1)["status"] == "queued"  # kept: it starts once the lock's place is clear
    listed = offpoc(tmp_path / "s.db", "ps", check=False)  # a queued run with no scheduler: `ps` would start one
    assert (listed.returncode, listed.stderr) == (2, result.stderr)
    assert not (tmp_path / "missing").exists() and not (tmp_path / "elsewhere.lock").exists()


def test_a_run_files_folder_nothing_can_be_made_in_is_the_commands_line_not_a_silent_wait(tmp_path: Path) -> None:
    """Where the scheduler's lock cannot be made (a folder not this user's to write; here an immutable one, which
    stops root too), `run` says so in one line (exit 2) with its run kept queued, and so does `ps`, which would
    start a scheduler for it: never a run left queued with no scheduler and no word."""
    db, _, lock = _serving(tmp_path)
    lock.release()
    lock.path.unlink()
    db.close()
    said = f"error: cannot start the store's scheduler: Operation not permitted ({lock.path})\n"
    with immutable(lock.files.root):
        result = offpoc(tmp_path / "s.db", "run", "td3", "Pendulum-v1", *SMALL, "--steps", "600", check=False)
        assert (result.returncode, result.stderr) == (2, said)
        listed = offpoc(tmp_path / "s.db", "ps", check=False)
        assert (listed.returncode, listed.stderr) == (2, said)
    assert run_row(tmp_path / "s.db", 1)["status"] == "queued"


def test_a_held_lock_file_this_user_cannot_write_still_tells_that_a_scheduler_serves(tmp_path: Path) -> None:
    """The lock file not this user's to write (another user's scheduler's; here an immutable file): it is looked at
    read-only, and a scheduler holding it serves the queued run, so `ps` lists the runs and starts none."""
    from store.runs import create_runs
    from tests.support.storefill import spec

    db, _, lock = _serving(tmp_path)
    create_runs(db, [spec(env="Pendulum-v1")])
    try:
        with immutable(lock.path):
            listed = offpoc(tmp_path / "s.db", "ps", check=False)
    finally:
        lock.release()
    assert (listed.returncode, listed.stderr) == (0, "")
    assert "queued" in listed.stdout


def test_a_link_put_in_place_of_the_held_lock_to_the_same_file_is_not_held(tmp_path: Path) -> None:
    """The lock file renamed and a link to it put in its place: the link reaches the file the scheduler holds,
    but a symlink is never its lock (the next scheduler would refuse it): the scheduler leaves, not serves on."""
    from store.db import StoreError

    _, _, lock = _serving(tmp_path)
    try:
        assert lock.still_held()
        lock.path.rename(lock.path.with_name("real.lock"))
        lock.path.symlink_to("real.lock")
        with pytest.raises(StoreError, match=r"scheduler\.lock is a symlink: refused"):
            lock.still_held()
    finally:
        lock.release()


def test_an_empty_run_files_folder_made_beforehand_is_claimed_not_refused(tmp_path: Path) -> None:
    """An empty `s.db-runs/` made by hand, and a run queued with no scheduler: `ps` made the scheduler's lock in
    the unmarked folder, which was then "not offpoc's run-files folder" to every later command. The folder is
    claimed (marked) by the scheduler `ps` starts, and nothing is made in it before."""
    from store import open_store
    from store.runs import create_runs
    from tests.support.storefill import spec

    db = tmp_path / "s.db"
    store = open_store(db, create=True)
    create_runs(store, [spec(env="Pendulum-v1")])
    store.close()
    (tmp_path / "s.db-runs").mkdir()
    try:
        listed = offpoc(db, "ps", check=False)
        assert listed.returncode == 0 and "started the store's scheduler" in listed.stderr, listed.stderr
        assert (tmp_path / "s.db-runs" / "store.json").is_file()
        assert offpoc(db, "ps", check=False).returncode == 0
    finally:
        offpoc(db, "stop", "1", check=False)
