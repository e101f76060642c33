"""Opening a store: WAL, a busy timeout, schema versions and migrations, clear errors.

A store is an SQLite file whose ``meta`` table says ``app = offpoc`` and holds
``store_id``, a random identity given once, when the store (or its upgrade to
schema 3) is created: run files and checkpoints carry it (see :mod:`store.files`).
Its schema version lives in ``PRAGMA user_version``; :data:`store.schema.MIGRATIONS` brings
an older file up to :data:`~store.schema.SCHEMA_VERSION` in one transaction. Every problem with the
file (not SQLite, someone else's database, a newer offpoc) is a
:class:`StoreError` whose message is one line.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from store.methods import learn
from store.schema import MIGRATIONS, SCHEMA_VERSION

APP = "offpoc"
BUSY_TIMEOUT_S = 60.0
"""How long one write waits for another process's transaction (workers write for milliseconds; a worker then
tries again, :data:`store.links.BUSY_RETRY_S`). ``$OFFPOC_BUSY_TIMEOUT_S`` sets it, in seconds."""


def busy_timeout() -> float:
    """:data:`BUSY_TIMEOUT_S`, or ``$OFFPOC_BUSY_TIMEOUT_S`` where it is set."""
    text = os.environ.get("OFFPOC_BUSY_TIMEOUT_S")
    if text is None:
        return BUSY_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= BUSY_TIMEOUT_S:
        raise StoreError(f"OFFPOC_BUSY_TIMEOUT_S must be a number of seconds above 0 and at most 60, not {text!r}")
    return value


LEGACY_RUN_FILES = "legacy_run_files"
"""``meta`` key of a store from before schema 3, naming the folder beside it where its runs' files were kept."""
LEGACY_DIR = "offpoc-runs"
OWNED_RUN_FILES_SCHEMA = 3
"""The schema since which each store has its own run-files folder."""


class StoreError(Exception):
    """The store cannot be used; the message (one line) says why and where."""


def _check_file(path: Path) -> None:
    """Refuse a folder, a FIFO, device or socket, or an empty file at ``path``, by its metadata alone.

    Never ``open()`` the store file here (nor anywhere in a process that may hold a connection to it):
    closing any descriptor of a file drops every POSIX lock the process holds on it, SQLite's included,
    and another process's last connection then believes it is alone and deletes the WAL (SQLite's "How
    To Corrupt An SQLite Database File", section 2.2). Whether the file is SQLite is asked of SQLite
    (:func:`_inspect`).
    """
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not an offpoc store")
    if path.exists() and not path.is_file():  # SQLite would wait on a FIFO forever
        raise StoreError(f"{path} is not a regular file (a FIFO, device or socket), not an offpoc store")
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_size == 0:
            raise StoreError(f"{path} is an empty file, not an offpoc store (remove it, or pass another --db)")


def _connect(path: Path) -> sqlite_utils.Database:
    conn = sqlite3.connect(str(path), timeout=busy_timeout(), check_same_thread=False)
    db = sqlite_utils.Database(conn, execute_plugins=False)
    db.enable_wal()
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot write, also where the folder is read-only (no ``-shm`` can be made):
    ``mode=ro`` first, then ``immutable=1`` (no locking: right for a file nobody may write)."""
    uri = path.resolve().as_uri()
    for flags in ("mode=ro", "mode=ro&immutable=1"):
        conn = sqlite3.connect(f"{uri}?{flags}", uri=True, timeout=busy_timeout(), check_same_thread=False)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            conn.close()
            continue
        conn.execute("PRAGMA query_only = 1")
        return conn
    raise StoreError(f"cannot open the store {path} (not even read-only)")


def _inspect(path: Path) -> int:
    """The schema version of the existing file at ``path``, read without writing a byte to it.

    Raises :class:`StoreError` for someone else's database, a newer offpoc's store, or a broken file.
    """
    try:
        conn = _connect_read_only(path)
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            app = conn.execute("SELECT value FROM meta WHERE key = 'app'").fetchone() if "meta" in tables else None
        finally:
            conn.close()
    except sqlite3.DatabaseError as error:
        if "not a database" in str(error):
            raise StoreError(f"{path} is not an SQLite database (corrupt, or some other file)") from None
        raise StoreError(f"cannot use the store {path}: {error}") from None
    if version == 0 and tables:
        raise StoreError(f"{path} is an SQLite database but not an offpoc store (it has tables {sorted(tables)[:3]})")
    if version < 0:  # no offpoc writes one: edited by hand, or another program's
        raise StoreError(f"{path} has store schema {version}, which no offpoc writes: not an offpoc store")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has store schema {version}, newer than this offpoc ({SCHEMA_VERSION}): upgrade offpoc"
        )
    if version and (app is None or app[0] != APP):
        raise StoreError(f"{path} is an SQLite database but not an offpoc store")
    return version


def _migrate(db: sqlite_utils.Database, path: Path) -> None:
    if db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return
    with write(db):
        # Re-read under the write lock: another process may have migrated meanwhile.
        version = db.execute("PRAGMA user_version").fetchone()[0]
        for target in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[target].split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {target}")
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('app', ?)", [APP])
        if 0 < version < OWNED_RUN_FILES_SCHEMA:  # its runs' files are in the folder every store there shared
            db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", [LEGACY_RUN_FILES, LEGACY_DIR])


def open_store(path: str | os.PathLike[str], create: bool = False) -> sqlite_utils.Database:
    """Open (and with ``create``, create) the store at ``path``, migrated to the current schema.

    Nothing is written to a file before it is known to be an offpoc store this version reads. A new
    store appears at ``path`` whole (:func:`_create`), so an empty file there is never a store being
    made: it is refused. A store this process may not write (read-only media, another user's file)
    opens read-only (:func:`read_only` says so): reading works, writing raises.

    Raises :class:`StoreError` when the file is missing (and ``create`` is false) or empty, not
    SQLite, another application's database, from a newer offpoc, or read-only and in need of an upgrade.
    """
    path = Path(path)
    _check_file(path)
    if not path.exists():
        if not create:
            raise StoreError(f"no offpoc store at {path} (start a run with `offpoc run`, or pass --db)")
        _check_creatable(path)
        _create(path)
    version = _inspect(path)
    if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        if version != SCHEMA_VERSION:
            raise StoreError(f"the store {path} is read-only and has schema {version}: it needs an upgrade first")
        db = sqlite_utils.Database(_connect_read_only(path), execute_plugins=False)
    else:
        try:
            db = _connect(path)
            _migrate(db, path)
        except sqlite3.DatabaseError as error:
            raise StoreError(f"cannot use the store {path}: {error}") from None
    learn(db)  # what its corrections are called
    return db


def _create(path: Path) -> None:
    """Make a new store at ``path`` in one step: built under a hidden name beside it, then linked into place.

    ``os.link`` fails where a file exists, so of two processes creating one store the second opens the
    first's, and nobody ever sees a half-made file at ``path``. Where the filesystem has no hard links,
    a rename that checks first (a race only between two creators) does instead.
    """
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.creating")
    try:
        db = _connect(tmp)
        try:
            _migrate(db, tmp)
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            db.close()  # the only connection to it: SQLite folds its WAL in and removes it
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: that one is used
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                raise StoreError(f"cannot create the store {path}: {error.strerror or error}") from None
            if not path.exists():
                os.rename(tmp, path)
    except sqlite3.DatabaseError as error:
        raise StoreError(f"cannot create the store {path}: {error}") from None
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            leftover.unlink(missing_ok=True)


class StoreMoved(StoreError):
    """The store file a process opened is no longer at its path (moved, replaced or deleted meanwhile)."""


@dataclass(frozen=True)
class StoreFile:
    """The store file a process opened, as the filesystem knows it: its path and the file there then.

    A process that keeps files beside a store (a worker's checkpoints, the scheduler's workers) asks
    :meth:`check` before it uses the path again: its connection follows the file it opened wherever
    it goes, the path may name another store by then, or nothing. One ``stat``, no ``open``.
    """

    path: Path
    device: int
    inode: int

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> StoreFile:
        """The file at ``path`` now (call it right after :func:`open_store`)."""
        path = Path(path).resolve()
        found = path.stat()
        return cls(path, found.st_dev, found.st_ino)

    def here(self) -> bool:
        """Whether the file at the path is still the one opened."""
        try:
            found = self.path.stat()
        except OSError:
            return False
        return (found.st_dev, found.st_ino) == (self.device, self.inode)

    def check(self) -> None:
        """Raise :class:`StoreMoved` unless :meth:`here`."""
        if not self.here():
            what = "another file" if self.path.exists() else "nothing"
            raise StoreMoved(
                f"the store is no longer at {self.path} (moved, replaced or deleted: {what} is there now);"
                " nothing more is written beside it"
            )


def read_store_id(path: str | os.PathLike[str], tries: int = 5) -> str | None:
    """The identity of the store now at ``path``, read through SQLite; None when there is none.

    A read-only connection that takes part in locking (never ``immutable``, which could read a page
    another process is writing); tried again a few times, as opening one can fail for a moment while
    another process's last connection closes and removes the WAL.
    """
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    for attempt in range(tries):
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout(), check_same_thread=False)
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
            finally:
                conn.close()
        except sqlite3.Error:
            if attempt + 1 < tries:
                time.sleep(0.05 * (attempt + 1))
            continue
        return None if row is None else str(row[0])
    return None


def read_only(db: sqlite_utils.Database) -> bool:
    """Whether ``db`` was opened read-only (:func:`open_store` on a file this process may not write)."""
    return bool(db.execute("PRAGMA query_only").fetchone()[0])


def check_writable(path: str | os.PathLike[str]) -> None:
    """Raise :class:`StoreError` unless a store at ``path`` exists and is usable, or could be created.

    Writes nothing: the CLI validates before it records anything.
    """
    path = Path(path)
    _check_file(path)
    if path.exists():
        if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
            raise StoreError(f"the store {path} is not writable")
        _inspect(path)
    else:
        _check_creatable(path)


def _check_creatable(path: Path) -> None:
    parent = path.parent
    if not parent.is_dir():
        raise StoreError(f"cannot create the store {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise StoreError(f"cannot create the store {path}: directory {parent} is not writable")


def store_id(db: sqlite_utils.Database) -> str:
    """The store's identity (32 hex digits), shared only by copies of the file."""
    return str(db.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0])


def legacy_run_files(db: sqlite_utils.Database) -> str | None:
    """For a store from before schema 3, the shared folder beside it that held its runs' files."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", [LEGACY_RUN_FILES]).fetchone()
    return None if row is None else str(row[0])


@contextlib.contextmanager
def write(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """One write transaction, taking the write lock up front (``BEGIN IMMEDIATE``).

    Taking it up front means a concurrent writer waits on the busy timeout
    instead of failing on a read-to-write upgrade.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.rollback()
        raise
    else:
        db.execute("COMMIT")
