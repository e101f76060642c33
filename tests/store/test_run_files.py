"""Run files owned by their store: its identity, its marked folder, stale and foreign folders, older stores."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import stat
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from offpoc_tui.cli import app
from store import StoreError, open_store
from store.db import LEGACY_DIR, legacy_run_files, store_id
from store.files import MARK, RunFiles, check_usable, runs_root
from store.runs import create_runs, delete_runs, finish
from tests.support.processes import limit_memory
from tests.support.storefill import as_schema_2, fill, spec


def files_of(path: Path) -> RunFiles:
    db = open_store(path, create=True)
    try:
        return RunFiles.of(db, path)
    finally:
        db.close()


# ---- the store's identity ------------------------------------------------------------------------
def test_each_new_store_has_its_own_identity_and_a_copy_shares_it(tmp_path: Path) -> None:
    a, b = files_of(tmp_path / "a.db"), files_of(tmp_path / "b.db")
    assert len(a.store_id) == 32 and set(a.store_id) <= set("0123456789abcdef")
    assert a.store_id != b.store_id
    shutil.copy(tmp_path / "a.db", tmp_path / "copy.db")
    copy = files_of(tmp_path / "copy.db")
    assert copy.store_id == a.store_id and copy.root != a.root  # its own folder all the same
    assert a.legacy_dir is None and a.legacy_run_dir(1) is None


def test_a_store_from_schema_2_gets_an_identity_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = open_store(path, create=True)
    (run_id,) = create_runs(db, [spec()])
    db.close()
    fill(path, run_id)
    before = open_store(path).execute("SELECT * FROM evaluations").fetchall()
    as_schema_2(path)
    db = open_store(path)
    assert len(store_id(db)) == 32 and legacy_run_files(db) == LEGACY_DIR
    assert db.execute("SELECT * FROM evaluations").fetchall() == before
    files = RunFiles.of(db, path)
    assert files.legacy_run_dir(run_id) == tmp_path / "offpoc-runs" / str(run_id)
    assert files.run_dir(run_id) == tmp_path / "old.db-runs" / str(run_id)


# ---- the folder and its mark ---------------------------------------------------------------------
def test_the_folder_is_named_after_the_store_and_marked_with_its_identity(tmp_path: Path) -> None:
    files = files_of(tmp_path / "exp1.db")
    assert files.root == tmp_path / "exp1.db-runs" == runs_root(tmp_path / "exp1.db")
    assert not files.owned()
    assert files.ensure() is None
    assert files.owned() and files.mark() == files.store_id
    assert files.prepare(7) == tmp_path / "exp1.db-runs" / "7" and (files.root / "7").is_dir()
    assert files.ensure() is None and files.owned()  # again: nothing changes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp1.db", "exp1.db-runs"]


def test_another_stores_folder_is_set_aside_untouched(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    old = files_of(path)
    (old.prepare(1) / "checkpoint.pt").write_bytes(b"the old store's")
    path.unlink()  # deleted and recreated under the same name
    new = files_of(path)
    assert new.store_id != old.store_id and not new.owned()
    stale = new.ensure()
    assert stale == tmp_path / f"x.db-runs.stale-{old.store_id[:8]}"
    assert (stale / "1" / "checkpoint.pt").read_bytes() == b"the old store's"
    assert new.owned() and not (new.root / "1").exists()
    # A third store of that name: the second one's folder goes aside too, beside the first.
    path.unlink()
    third = files_of(path)
    assert third.ensure() == tmp_path / f"x.db-runs.stale-{new.store_id[:8]}"
    assert third.owned() and stale.is_dir()


def test_a_deleted_stores_process_never_sets_the_new_stores_folder_aside(tmp_path: Path) -> None:
    """A worker or scheduler of a store deleted and made again at its path still knows the old identity:
    the folder there, marked by the new store, is not another store's leftover to it but the new one's."""
    path = tmp_path / "x.db"
    old = files_of(path)
    old.ensure()
    path.unlink()
    new = files_of(path)
    new.ensure()  # sets the old store's folder aside and makes its own
    with pytest.raises(StoreError, match="is not this store any more") as raised:
        old.prepare(1)
    assert "\n" not in str(raised.value)
    assert new.owned() and not (new.root / "1").exists()
    assert [p.name for p in tmp_path.glob("x.db-runs.stale-*")] == [f"x.db-runs.stale-{old.store_id[:8]}"]


def test_a_log_is_appended_to_only_as_a_regular_file_of_its_own(tmp_path: Path) -> None:
    """A symlink is never written through; a FIFO would block the scheduler that opens it: both refused at once."""
    files = files_of(tmp_path / "x.db")
    directory = files.prepare(1)
    with files.append_to(directory / "worker.log") as log:
        log.write(b"line\n")
    assert (directory / "worker.log").read_bytes() == b"line\n"
    elsewhere = tmp_path / "elsewhere.log"
    elsewhere.write_bytes(b"not the store's")
    (directory / "linked.log").symlink_to(elsewhere)
    os.mkfifo(directory / "pipe.log")
    for name, why in (("linked.log", "is a symlink"), ("pipe.log", "is not a regular file")):
        with pytest.raises(StoreError, match=why):
            files.append_to(directory / name)
    assert elsewhere.read_bytes() == b"not the store's"


READERS = {
    "the run-files mark": ("print(RunFiles.of(store, db).mark())", "None"),
    "the Ray note": ("print(reap_leftovers(RunFiles.of(store, db).root))", "0"),
    "a failed worker's log": ("print(repr(LocalWorkers(db, store, RunFiles.of(store, db), where)._log_tail(1)))", "''"),
}
"""Each reader of a small file of the store's own, as a line of Python, and what it prints where that file is
not one it can read (as where there is none)."""
PRELUDE = """
import sys
from pathlib import Path
from offpoc_tui.runtime.ray_leftovers import reap_leftovers
from offpoc_tui.runtime.scheduler import LocalWorkers
from store import open_store
from store.db import StoreFile
from store.files import RunFiles
db = Path(sys.argv[1])
store, where = open_store(db), StoreFile.of(db)
"""


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize(
    "hostile", ["a FIFO", "a FIFO holding data", "a device", "a link to /dev/zero", "a link to a file elsewhere"]
)
def test_a_small_file_of_the_stores_is_never_read_as_a_fifo_a_device_or_through_a_link(
    tmp_path: Path, reader: str, hostile: str
) -> None:
    """The scheduler reads its run-files mark as it claims the folder (a worker's start, its lock taken again)
    and a failed worker's log's end; `ps` and every command that wakes a scheduler, the Ray note. One swapped
    for a FIFO (opening it to read waits for a writer) or a link to /dev/zero (it never ends) hung them, and
    with them the scheduler's runs or every `ps`; a FIFO holding data, a device, read as if they were files.
    Each is read as no file, at once, and a link is not read through. In a process of its own (2 GiB of
    memory), so a hang fails the test, not the run."""
    import subprocess
    import sys

    from offpoc_tui.runtime.ray_leftovers import NOTE
    from store.files import WORKER_LOG

    db = tmp_path / "s.db"
    files = files_of(db)
    files.ensure()
    places = {"the run-files mark": files.root / MARK, "the Ray note": files.root / NOTE}
    target = places.get(reader) or files.prepare(1) / WORKER_LOG
    target.unlink(missing_ok=True)
    elsewhere = tmp_path / "elsewhere.json"  # what each reader would take for its own file, read through a link
    dead = 2**22 + 1  # above Linux's largest pid_max: no process has it; a note naming it would be acted on
    elsewhere.write_text(f'{{"store_id": "{files.store_id}", "scheduler": {dead}, "session": {dead}}}\n')
    held = None
    if hostile.startswith("a FIFO"):
        os.mkfifo(target)
        if hostile == "a FIFO holding data":  # what a reader would take for its file, if it read a FIFO
            held = os.open(target, os.O_RDWR)  # Linux opens a FIFO read-write at once, with nobody at either end
            os.write(held, elsewhere.read_bytes())
    elif hostile == "a device":
        try:
            os.mknod(target, 0o644 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's own numbers
        except PermissionError:
            pytest.skip("making a device node needs CAP_MKNOD")
    else:
        target.symlink_to("/dev/zero" if "zero" in hostile else elsewhere)
    code, unreadable = READERS[reader]
    try:
        done = subprocess.run(
            [sys.executable, "-c", PRELUDE + code, str(db)], capture_output=True, text=True, timeout=30,
            preexec_fn=limit_memory,
        )  # fmt: skip
    finally:
        if held is not None:
            os.close(held)
    assert (done.returncode, done.stdout.strip()) == (0, unreadable), done.stderr[-2000:]
    assert target.is_symlink() == hostile.startswith("a link")  # left as it was (an acted-on note is removed)


NO_TERMINAL = """
import os, sys
from pathlib import Path
from store.files import read_own
try:
    read_own(Path(sys.argv[1]), 64)
except OSError:
    pass
try:
    os.close(os.open("/dev/tty", os.O_RDWR))
    print("a controlling terminal")
except OSError:
    print("none")
"""


def test_a_terminal_in_a_files_place_never_becomes_the_readers_controlling_terminal() -> None:
    """The scheduler leads its session, with no controlling terminal; a session leader that opens a terminal to
    read, without O_NOCTTY, makes it its own (a hangup there would then end the scheduler). A terminal put in the
    place of a file the store's processes read is refused, and the reader, a session leader, still has no
    controlling terminal. (Linux gives none on a write-only open: ``append_to`` needs no flag for it.)"""
    import subprocess
    import sys

    master, replica = os.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-c", NO_TERMINAL, os.ttyname(replica)],
            capture_output=True, text=True, timeout=60, start_new_session=True,
        )  # fmt: skip
    finally:
        os.close(master)
        os.close(replica)
    assert (done.returncode, done.stdout.strip()) == (0, "none"), done.stderr[-2000:]


@pytest.mark.parametrize("content", ["a file", "a folder of the user's"])
def test_a_folder_that_is_not_offpocs_is_refused_and_left_alone(tmp_path: Path, content: str) -> None:
    root = tmp_path / "x.db-runs"
    if content == "a file":
        root.write_text("mine")
    else:
        root.mkdir()
        (root / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="is not offpoc's run-files folder") as raised:
        check_usable(tmp_path / "x.db")
    assert "\n" not in str(raised.value)
    files = files_of(tmp_path / "x.db")
    with pytest.raises(StoreError, match="move it away"):
        files.ensure()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db", "x.db-runs"]  # nothing moved


def test_an_empty_unmarked_folder_is_taken(tmp_path: Path) -> None:
    (tmp_path / "x.db-runs").mkdir()
    check_usable(tmp_path / "x.db")
    files = files_of(tmp_path / "x.db")
    assert files.ensure() is None and files.owned()


def _ensure(path: str) -> None:
    files_of(Path(path)).ensure()


def test_processes_claiming_the_folder_at_once_end_with_one_marked_folder(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    stale = files_of(path)
    stale.ensure()
    path.unlink()  # the folder is now another store's: each process below would set it aside
    files = files_of(path)
    context = mp.get_context("spawn")
    processes = [context.Process(target=_ensure, args=(str(path),)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert [p.exitcode for p in processes] == [0] * 4
    assert files.owned()
    # SQLite may leave its -wal and -shm files when connections of several processes close at once: its own.
    ours = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm")))
    assert ours == ["x.db", "x.db-runs", f"x.db-runs.stale-{stale.store_id[:8]}"]
    assert (files.root / MARK).is_file()


def test_a_claim_slow_to_set_aside_never_sets_aside_the_folder_another_claim_just_made(tmp_path: Path) -> None:
    """Two claims read the same stale mark; the first is slow to set the folder aside. The second must not set
    aside the stale folder and make its own meanwhile, only for the first to set aside that new, marked one."""
    path = tmp_path / "x.db"
    stale = files_of(path)
    stale.ensure()
    path.unlink()
    plain = files_of(path)

    class SlowToSetAside(RunFiles):
        def _set_aside(self, mark: str) -> Path | None:
            time.sleep(0.5)
            return super()._set_aside(mark)

    slow = SlowToSetAside(plain.store_path, plain.store_id, plain.legacy_dir)
    first = threading.Thread(target=slow.ensure)
    first.start()
    time.sleep(0.1)  # the first has read the stale mark and sleeps before its rename
    plain.ensure()
    first.join(10)
    assert plain.owned()
    folders = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert folders == ["x.db-runs", f"x.db-runs.stale-{stale.store_id[:8]}"]


def test_a_folder_deleted_between_its_claim_and_the_runs_folder_is_made_again(tmp_path: Path) -> None:
    class DeletedOnce(RunFiles):
        claims = 0

        def ensure(self) -> Path | None:
            aside = super().ensure()
            DeletedOnce.claims += 1
            if DeletedOnce.claims == 1:
                shutil.rmtree(self.root)  # a user deleting the run files just then
            return aside

    plain = files_of(tmp_path / "s.db")
    files = DeletedOnce(plain.store_path, plain.store_id, plain.legacy_dir)
    assert files.prepare(1).is_dir() and files.owned() and DeletedOnce.claims == 2


def test_rm_deletes_a_runs_folder_only_in_the_stores_own_folder(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    db = open_store(path, create=True)
    a, b = create_runs(db, [spec(seed=0), spec(seed=1)])
    files = RunFiles.of(db, path)
    files.prepare(a)
    files.prepare(b)
    delete_runs(db, path, [a])
    assert not files.run_dir(a).exists() and files.run_dir(b).is_dir()
    (files.root / MARK).write_text('{"store_id": "another"}')  # the folder is no longer this store's
    delete_runs(db, path, [b])
    assert files.run_dir(b).is_dir()
    db.close()


def test_a_run_files_folder_that_is_a_link_to_an_empty_folder_is_refused_in_a_line(tmp_path: Path) -> None:
    """A symlink in the folder's place, to an empty folder: taken (StoreError: one line), never rmdir'ed as the
    empty folder it looks like (NotADirectoryError, exit 1), nothing made through it."""
    from store.db import StoreError

    path = tmp_path / "x.db"
    db = open_store(path, create=True)
    (tmp_path / "target").mkdir()
    (tmp_path / "x.db-runs").symlink_to("target")
    with pytest.raises(StoreError, match="is not offpoc's run-files folder"):
        RunFiles.of(db, path).ensure()
    assert (tmp_path / "x.db-runs").is_symlink() and not any((tmp_path / "target").iterdir())
    db.close()


def test_rm_that_cannot_remove_a_runs_files_says_so_not_deleted_alone(tmp_path: Path) -> None:
    """A run folder holding a file that cannot be removed (immutable here; another user's, say): `rm` removes the
    records and whatever files can go, then says what was left, exit 1; it said "deleted 1 run" and exit 0."""
    from tests.support.processes import immutable

    path = tmp_path / "x.db"
    db = open_store(path, create=True)
    a, b = create_runs(db, [spec(seed=0), spec(seed=1)])
    for run_id in (a, b):
        finish(db, run_id, "stopped", only_from=("queued",))
    files = RunFiles.of(db, path)
    folder = files.prepare(a) or files.run_dir(a)
    (folder / "worker.log").write_text("log")
    (folder / "keep").mkdir()
    (folder / "keep" / "stuck").write_text("x")
    db.close()
    with immutable(folder / "keep"):
        result = CliRunner().invoke(app, ["rm", str(a), "--yes", "--db", str(path)])
        assert result.exit_code == 1 and "deleted 1 run" in result.stdout, result.output
        assert result.stderr.strip() == (
            f"error: run {a}'s files could not all be removed: Operation not permitted ({folder / 'keep' / 'stuck'})"
        )
        assert not (folder / "worker.log").exists() and (folder / "keep" / "stuck").exists()  # all that could go
    assert [r[0] for r in open_store(path).execute("SELECT id FROM runs")] == [b]


def test_rm_in_a_store_from_schema_2_leaves_the_shared_folder_alone(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = open_store(path, create=True)
    (run_id,) = create_runs(db, [spec()])
    db.close()
    as_schema_2(path)
    shared = tmp_path / "offpoc-runs" / str(run_id)
    shared.mkdir(parents=True)
    (shared / "checkpoint.pt").write_bytes(b"whose? another store of this folder may own it")
    db = open_store(path)
    delete_runs(db, path, [run_id])
    assert (shared / "checkpoint.pt").exists()
    db.close()


@pytest.mark.parametrize("mark", ["none", "empty", "damaged"])
@pytest.mark.parametrize("command", ["run", "resume"])
def test_run_and_resume_refuse_a_folder_that_is_not_offpocs_with_one_line(
    tmp_path: Path, command: str, mark: str
) -> None:
    """A folder with no mark, or with an empty or damaged ``store.json`` (which `run` took for a mark, then queued
    its run and failed to start a scheduler, leaving every later `ps` failing): refused before anything is written."""
    path = tmp_path / "x.db"
    db = open_store(path, create=True)
    (run_id,) = create_runs(db, [spec()])
    finish(db, run_id, "stopped", only_from=("queued",))
    db.close()
    (tmp_path / "x.db-runs").mkdir()
    (tmp_path / "x.db-runs" / "notes.txt").write_text("the user's")
    if mark != "none":
        (tmp_path / "x.db-runs" / MARK).write_text("" if mark == "empty" else '{"store_id": 7')
    args = ["run", "td3", "Hopper-v4"] if command == "run" else ["resume", str(run_id)]
    result = CliRunner().invoke(app, [*args, "--db", str(path)])
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "is not offpoc's run-files folder" in lines[0]
    db = open_store(path)
    assert [(r[0], r[1]) for r in db.execute("SELECT id, status FROM runs")] == [(run_id, "stopped")]  # nothing written
    db.close()
    kept = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm")))  # SQLite's
    assert kept == ["x.db", "x.db-runs"] and (tmp_path / "x.db-runs" / "notes.txt").exists()
