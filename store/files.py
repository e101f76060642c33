"""Where a store keeps its runs' files, marked so that no other store ever uses them.

A store ``exp1.db`` keeps each run's checkpoint (``checkpoint.pt``) and worker log
(``worker.log``) in ``exp1.db-runs/<id>/``, and its scheduler's log in
``exp1.db-runs/scheduler.log``. The folder is named after the store file, as SQLite
names ``exp1.db-wal``: two stores in one folder never share one, and
``mv exp1.db* elsewhere/`` moves a store with everything it owns.

The folder holds ``store.json``, the identity of the store it belongs to
(:func:`store.db.store_id`). Before a store writes there, :meth:`RunFiles.ensure`
reads that mark: a folder marked by another store (this one's namesake, deleted
and recreated, or a store file overwritten by a copy of another) is set aside as
``exp1.db-runs.stale-<its id>``, never used and never deleted, but only by the store
that is at the path now (a process of the deleted namesake refuses instead); an
unmarked folder with files in it is not offpoc's, and the store refuses to touch it.
A folder deleted while runs train is made again, marked, at the next checkpoint.
Each run's folder is a real folder of this store: a symlink there is refused, never
followed into another store's files.

A store from before schema 3 kept its runs' files in ``offpoc-runs/<id>/``, a folder
every store in the directory shared: :meth:`RunFiles.legacy_run_dir` names it for
such a store only. Nothing here can tell whose a file there is, so the worker checks
a checkpoint found there against the run before taking it over
(:mod:`offpoc_tui.runtime.checkpoints`), and ``offpoc rm`` leaves that folder alone.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import stat
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import sqlite_utils

from store.db import StoreError, legacy_run_files, read_store_id, store_id

CHECKPOINT = "checkpoint.pt"
WORKER_LOG = "worker.log"
SCHEDULER_LOG = "scheduler.log"
MARK = "store.json"
MARK_BYTES = 4096
"""The most of a mark that is read: offpoc's is under 200 bytes; a longer one is no mark of its."""
SUFFIX = "-runs"
_CLAIM_TRIES = 10
"""Rounds of :meth:`RunFiles.ensure` against other processes creating or moving the folder at once."""


def runs_root(db_path: str | os.PathLike[str]) -> Path:
    """The run-files folder of the store at ``db_path``: ``<store file>-runs/`` beside it."""
    path = Path(db_path).resolve()
    return path.with_name(path.name + SUFFIX)


STORE_PARTS = {"": "the store", "-wal": "the store's write-ahead log", "-shm": "the store's shared-memory index",
               "-journal": "the store's journal"}  # fmt: skip
"""The files SQLite keeps a store in, by the suffix on the store's name."""


def part_of_store(path: str | os.PathLike[str], db_path: str | os.PathLike[str]) -> str | None:
    """What of the store at ``db_path`` the file ``path`` is (the store, its WAL, a file in its run files,
    through a symlink or a hard link too); None when it is none of it. Looks at names and ``stat`` only."""
    store = Path(db_path).resolve()
    target = Path(path).resolve()
    for suffix, what in STORE_PARTS.items():
        part = store.with_name(store.name + suffix)
        if target == part or _same_file(target, part):
            return what
    root = runs_root(store)
    for folder in {root, root.resolve()}:  # the folder may itself be a link to where the files are
        if target == folder or folder in target.parents:
            return f"in the store's run files ({root.name})"
    return None


def read_own(path: Path, limit: int, tail: bool = False) -> bytes:
    """At most ``limit`` bytes of a small file of the store's own (its run-files mark, a note, a log's end): the
    first, or with ``tail`` the last. Never through a symlink, never a FIFO (opening one to read blocks until a
    writer comes) or a device (``/dev/zero`` never ends): :class:`OSError` for those, as for a missing file. A
    terminal there never becomes the reader's controlling one (O_NOCTTY: the scheduler leads its session)."""
    handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    with os.fdopen(handle, "rb") as file:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if tail and info.st_size > limit:
            file.seek(info.st_size - limit)
        return file.read(limit)


def write_new(path: Path, text: str) -> None:
    """``text`` as a new file at ``path``: whatever is there (a symlink: the link) is removed first, and the file
    is created, never opened through a link (O_EXCL, O_NOFOLLOW); :class:`OSError` where it cannot be."""
    path.unlink(missing_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "w") as file:
        file.write(text)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_usable(db_path: str | os.PathLike[str]) -> None:
    """Raise :class:`StoreError` when the store's run-files folder is taken by something not offpoc's.

    Writes nothing: the CLI checks before it records anything.
    """
    root = runs_root(db_path)
    if read_mark(root) is not None or not (root.exists() or root.is_symlink()):  # an empty or damaged mark: taken
        return
    if not root.is_dir() or any(root.iterdir()):
        raise _taken(root, Path(db_path))


def read_mark(root: Path) -> str | None:
    """The store identity the run-files folder ``root`` is marked with; None when it has no readable mark."""
    try:
        data = json.loads(read_own(root / MARK, MARK_BYTES))
    except (OSError, ValueError):
        return None
    value = data.get("store_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _taken(root: Path, store_path: Path) -> StoreError:
    return StoreError(
        f"{root} exists and is not offpoc's run-files folder (no {MARK} file of offpoc's in it):"
        f" move it away, or keep the store {store_path.name} elsewhere"
    )


@contextlib.contextmanager
def _claims_in(folder: Path) -> Iterator[None]:
    """Hold the claim lock of the stores in ``folder``: a flock on the folder itself, so no lock file is left
    beside the stores, and a process killed while holding it lets it go."""
    try:
        handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except PermissionError:  # a folder we may write in but not list: claims there go unserialised, as before
        yield
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # closing the last descriptor releases the flock


@dataclass(frozen=True)
class RunFiles:
    """One store's run files: the folder beside it, and (older stores) the shared one they used to be in."""

    store_path: Path
    """The store file, resolved."""
    store_id: str
    legacy_dir: Path | None
    """``offpoc-runs/`` beside a store from before schema 3; None for every other store."""

    @classmethod
    def of(cls, db: sqlite_utils.Database, db_path: str | os.PathLike[str]) -> RunFiles:
        path = Path(db_path).resolve()
        legacy = legacy_run_files(db)
        return cls(path, store_id(db), path.parent / legacy if legacy else None)

    @property
    def root(self) -> Path:
        """``<store file>-runs/`` beside the store."""
        return runs_root(self.store_path)

    @property
    def scheduler_log(self) -> Path:
        return self.root / SCHEDULER_LOG

    def run_dir(self, run_id: int) -> Path:
        return self.root / str(run_id)

    def legacy_run_dir(self, run_id: int) -> Path | None:
        """Where a store from before schema 3 kept this run's files; None for newer stores."""
        return None if self.legacy_dir is None else self.legacy_dir / str(run_id)

    def find_checkpoint(self, run_id: int) -> Path | None:
        """The run's checkpoint file: in its own folder, else (older stores) in the shared one; None if neither.

        Raises :class:`StoreError` where the run's folder is a symlink (:meth:`check_run_dir`)."""
        for directory in (self.check_run_dir(run_id), self.legacy_run_dir(run_id)):
            if directory is not None and (directory / CHECKPOINT).exists():
                return directory / CHECKPOINT
        return None

    def owner(self, run_id: int) -> dict[str, Any]:
        """What a run's checkpoints carry to prove whose they are."""
        return {"store_id": self.store_id, "run_id": run_id}

    def display(self, path: Path) -> str:
        """``path`` as the user finds it: relative to the store's folder when it is inside it."""
        try:
            return str(path.relative_to(self.store_path.parent))
        except ValueError:
            return str(path)

    # ---- the mark --------------------------------------------------------------------
    def mark(self) -> str | None:
        """The store identity the folder is marked with; None when it has no readable mark."""
        return read_mark(self.root)

    def owned(self) -> bool:
        """Whether the folder exists and is this store's."""
        return self.mark() == self.store_id

    def ensure(self) -> Path | None:
        """Make the folder exist as this store's; where a stale folder was set aside, if one was.

        Raises :class:`StoreError` when the path is taken by something that is not offpoc's.
        """
        if self.mark() == self.store_id:
            return None
        with _claims_in(self.store_path.parent):
            return self._claim()

    def _claim(self) -> Path | None:
        """:meth:`ensure`'s work, done by one process of the folder's at a time: a mark read here is still the
        folder's mark when the folder is set aside (without the lock, two processes reading a stale mark at once
        set aside the stale folder and then the one the first had just made, marked, in its place)."""
        set_aside = None
        for _ in range(_CLAIM_TRIES):
            mark = self.mark()
            if mark == self.store_id:
                return set_aside
            if mark is not None:
                self._check_at_path(mark)
                set_aside = self._set_aside(mark) or set_aside
            elif self.root.is_dir() and not self.root.is_symlink() and not any(self.root.iterdir()):
                self.root.rmdir()  # empty: recreated below, marked
            elif self.root.exists() or self.root.is_symlink():
                raise _taken(self.root, self.store_path)
            else:
                self._create()
        raise StoreError(f"could not claim {self.root} for the store (other processes kept changing it)")

    def _check_at_path(self, mark: str) -> None:
        """Before setting aside a folder marked ``mark``: this store must be the one at the path now, else the
        folder is the new store's (this process's store was deleted, and another made in its place)."""
        here = read_store_id(self.store_path)
        if here != self.store_id:
            raise StoreError(
                f"{self.store_path} is not this store any more (store {self.store_id[:8]}; the file there is"
                f" {'store ' + here[:8] if here else 'not a store'}): its folder {self.root.name} is left alone"
            )

    def _create(self) -> None:
        """The folder and its mark at once: a folder without a mark is never seen half made."""
        tmp = self.root.with_name(f".{self.root.name}.{uuid.uuid4().hex[:12]}")
        tmp.mkdir()
        mark = {"store_id": self.store_id, "store": self.store_path.name}
        (tmp / MARK).write_text(json.dumps(mark) + "\n")
        try:
            os.rename(tmp, self.root)
        except OSError:  # another process made it first; ensure() reads its mark next
            shutil.rmtree(tmp, ignore_errors=True)

    def _set_aside(self, mark: str) -> Path | None:
        """Rename another store's folder out of the way; None when someone else already did."""
        n = 1
        while True:
            suffix = f".stale-{mark[:8]}" + (f"-{n}" if n > 1 else "")
            target = self.root.with_name(self.root.name + suffix)
            n += 1
            if target.exists():
                continue
            try:
                os.rename(self.root, target)
            except FileNotFoundError:
                return None
            except OSError:  # the target appeared meanwhile
                continue
            return target

    # ---- per run ---------------------------------------------------------------------
    def check_run_dir(self, run_id: int) -> Path:
        """The run's folder, where nothing but a real folder (or nothing yet) may be; :class:`StoreError` if
        a symlink or a file is there: a run never writes through it into another store's files."""
        directory = self.run_dir(run_id)
        if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
            raise StoreError(
                f"{self.display(directory)} is not a folder of this store (a symlink, or a file): move it away,"
                f" then resume run {run_id}"
            )
        return directory

    def prepare(self, run_id: int) -> Path:
        """The run's folder, created in this store's own folder (which is made again, marked, if it went)."""
        for _ in range(_CLAIM_TRIES):
            self.ensure()
            directory = self.check_run_dir(run_id)
            try:
                directory.mkdir(exist_ok=True)
            except FileNotFoundError:  # the store's folder went after ensure() (deleted by hand): made again
                continue
            return directory
        raise StoreError(f"could not make {self.display(self.run_dir(run_id))} (its folder kept going away)")

    def append_to(self, path: Path) -> IO[bytes]:
        """A log file of this store's (``scheduler.log``, a run's ``worker.log``) opened to append, never through a
        symlink: :class:`StoreError` if one is there."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK  # a FIFO must not block us
        try:
            handle = os.open(path, flags, 0o644)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise StoreError(f"{self.display(path)} is a symlink: refused, never written through") from None
            if error.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO nobody reads, a folder
                raise StoreError(f"{self.display(path)} is not a regular file: refused") from None
            raise
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            os.close(handle)
            raise StoreError(f"{self.display(path)} is not a regular file: refused")
        os.set_blocking(handle, True)
        return os.fdopen(handle, "ab")

    def remove(self, run_id: int) -> str | None:
        """Delete a run's folder, if the folder it is in is this store's (a symlink there: the link only); why
        something of it is left (an immutable or foreign file, say), None when nothing is."""
        if not self.owned():
            return None
        directory = self.run_dir(run_id)
        failed: list[tuple[BaseException, str]] = []

        def note(_function: Any, path: str, raised: Any) -> None:  # noted, and the removal goes on
            failed.append((raised[1] if isinstance(raised, tuple) else raised, path))  # onerror's (type, value, tb)

        try:
            if directory.is_symlink() or directory.is_file():
                directory.unlink(missing_ok=True)
            elif directory.exists() and sys.version_info >= (3, 12):
                shutil.rmtree(directory, onexc=note)  # all that can go goes
            elif directory.exists():
                shutil.rmtree(directory, onerror=note)  # onerror: deprecated from 3.12
        except OSError as error:
            failed.append((error, str(directory)))
        if not failed:
            return None
        first, where = failed[0]
        return f"{getattr(first, 'strerror', None) or first} ({where})"
