"""Opening a store: WAL, a busy timeout, schema versions and migrations, clear errors.

A store is an SQLite file whose ``meta`` table says ``app = offpoc`` and holds
``store_id``, a random identity given once, when the store (or its upgrade to
schema 3) is created: run files and checkpoints carry it (see :mod:`store.files`).
Its schema version lives in ``PRAGMA user_version``; :data:`MIGRATIONS` brings an
older file up to :data:`SCHEMA_VERSION` in one transaction. Every problem with the
file (not SQLite, someone else's database, a newer offpoc) is a
:class:`StoreError` whose message is one line.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import sqlite_utils

APP = "offpoc"
SCHEMA_VERSION = 7
BUSY_TIMEOUT_S = 60.0
"""How long a writer waits for another one before giving up (workers write for milliseconds)."""

_SQLITE_MAGIC = b"SQLite format 3\x00"

_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    algo TEXT NOT NULL,
    env TEXT NOT NULL,
    correction TEXT NOT NULL,
    divergence TEXT,
    seed INTEGER NOT NULL,
    config TEXT NOT NULL,
    status TEXT NOT NULL,
    total_steps INTEGER NOT NULL,
    steps INTEGER NOT NULL DEFAULT 0,
    updates INTEGER NOT NULL DEFAULT 0,
    sps REAL,
    last_return REAL,
    best_return REAL,
    mean_lambda REAL,
    pid INTEGER,
    launcher_pid INTEGER,
    host TEXT,
    source TEXT,
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    heartbeat REAL,
    wall_time REAL,
    checkpoint_step INTEGER,
    error TEXT,
    traceback TEXT
);
CREATE INDEX runs_status ON runs (status);
CREATE TABLE evaluations (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    step INTEGER NOT NULL,
    wall_time REAL NOT NULL,
    return_mean REAL NOT NULL,
    return_std REAL NOT NULL,
    length_mean REAL NOT NULL,
    returns TEXT NOT NULL,
    lengths TEXT NOT NULL,
    UNIQUE (run_id, step)
);
CREATE TABLE episodes (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    step INTEGER NOT NULL,
    episode INTEGER NOT NULL,
    return REAL NOT NULL,
    length INTEGER NOT NULL,
    UNIQUE (run_id, step)
);
CREATE TABLE train (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    step INTEGER NOT NULL,
    updates INTEGER NOT NULL,
    critic_loss REAL,
    actor_loss REAL,
    q_mean REAL,
    alpha REAL,
    sps REAL NOT NULL,
    UNIQUE (run_id, step)
);
CREATE TABLE weights (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    first_update INTEGER NOT NULL,
    first_step INTEGER NOT NULL,
    count INTEGER NOT NULL,
    columns TEXT NOT NULL,
    mean REAL NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (run_id, first_step)
);
CREATE TABLE histograms (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    step INTEGER NOT NULL,
    counts TEXT NOT NULL,
    UNIQUE (run_id, step)
);
"""

# Imported runs: ``origin`` names what a run was imported as (unique, so importing twice adds
# nothing; NULL for trained runs), and evaluations may lack what a published curve does not
# record (wall time, spread across episodes, episode length): those columns become nullable,
# which SQLite only allows by rebuilding the table.
_V2 = """
ALTER TABLE runs ADD COLUMN origin TEXT;
CREATE UNIQUE INDEX runs_origin ON runs (origin);
CREATE TABLE evaluations_v2 (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    step INTEGER NOT NULL,
    wall_time REAL,
    return_mean REAL NOT NULL,
    return_std REAL,
    length_mean REAL,
    returns TEXT NOT NULL,
    lengths TEXT NOT NULL,
    UNIQUE (run_id, step)
);
INSERT INTO evaluations_v2 SELECT id, run_id, step, wall_time, return_mean, return_std, length_mean, returns, lengths
    FROM evaluations;
DROP TABLE evaluations;
ALTER TABLE evaluations_v2 RENAME TO evaluations
"""

# The store's identity, which its run files and checkpoints carry: a copy of the file shares it,
# a store deleted and recreated under the same name does not.
_V3 = """
INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))))
"""

# Logged quantities besides λ (a correction declares its own): weights and histograms gain the
# quantity's name (existing rows are λ's) and histograms its range; ``quantities`` keeps each
# run's labels. The unique keys grow by the name, which SQLite only allows by rebuilding.
_V4 = """
CREATE TABLE quantities (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    label TEXT NOT NULL,
    low REAL NOT NULL,
    high REAL NOT NULL,
    UNIQUE (run_id, name)
);
INSERT OR IGNORE INTO quantities (run_id, name, label, low, high)
    SELECT run_id, 'lambda', 'λ', 0.0, 1.0 FROM (SELECT run_id FROM weights UNION SELECT run_id FROM histograms);
CREATE TABLE weights_v4 (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    quantity TEXT NOT NULL,
    first_update INTEGER NOT NULL,
    first_step INTEGER NOT NULL,
    count INTEGER NOT NULL,
    columns TEXT NOT NULL,
    mean REAL NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (run_id, quantity, first_step)
);
INSERT INTO weights_v4 SELECT id, run_id, 'lambda', first_update, first_step, count, columns, mean, data FROM weights;
DROP TABLE weights;
ALTER TABLE weights_v4 RENAME TO weights;
CREATE TABLE histograms_v4 (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    quantity TEXT NOT NULL,
    step INTEGER NOT NULL,
    counts TEXT NOT NULL,
    UNIQUE (run_id, quantity, step)
);
INSERT INTO histograms_v4 SELECT id, run_id, 'lambda', step, counts FROM histograms;
DROP TABLE histograms;
ALTER TABLE histograms_v4 RENAME TO histograms
"""

# Seeds found to be the same run plus noise (store.duplicates): the run they copy.
_V5 = """
ALTER TABLE runs ADD COLUMN duplicate_of INTEGER
"""

# Where a run runs: ``backend`` NULL on this machine (the store's scheduler starts a worker
# process), 'ray' as a task on a Ray cluster; ``stop_requested`` is how ``stop`` reaches a worker
# it cannot signal (a Ray task on another node): the writer answers its next batch with it.
_V6 = """
ALTER TABLE runs ADD COLUMN backend TEXT;
ALTER TABLE runs ADD COLUMN stop_requested INTEGER NOT NULL DEFAULT 0
"""

# A run's owner: a token its worker draws when it claims the run; every write of the worker checks it,
# so a worker that lost its run (declared lost and resumed, deleted) stops without writing.
_V7 = """
ALTER TABLE runs ADD COLUMN owner TEXT
"""

MIGRATIONS: dict[int, str] = {1: _V1, 2: _V2, 3: _V3, 4: _V4, 5: _V5, 6: _V6, 7: _V7}
"""Version → the SQL that brings version − 1 to it (0 = an empty file)."""

DATA_TABLES = ("evaluations", "episodes", "train", "weights", "histograms", "quantities")
"""Tables holding a run's observations, keyed by run_id."""


LEGACY_RUN_FILES = "legacy_run_files"
"""``meta`` key of a store from before schema 3, naming the folder beside it where its runs' files were kept."""
LEGACY_DIR = "offpoc-runs"
OWNED_RUN_FILES_SCHEMA = 3
"""The schema since which each store has its own run-files folder."""


class StoreError(Exception):
    """The store cannot be used; the message (one line) says why and where."""


def _check_file(path: Path) -> None:
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not an offpoc store")
    with contextlib.suppress(FileNotFoundError), path.open("rb") as f:
        head = f.read(len(_SQLITE_MAGIC))
        if head and head != _SQLITE_MAGIC:
            raise StoreError(f"{path} is not an SQLite database (corrupt, or some other file)")


def _connect(path: Path) -> sqlite_utils.Database:
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    db = sqlite_utils.Database(conn, execute_plugins=False)
    db.enable_wal()
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot write, also where the folder is read-only (no ``-shm`` can be made):
    ``mode=ro`` first, then ``immutable=1`` (no locking: right for a file nobody may write)."""
    uri = path.resolve().as_uri()
    for flags in ("mode=ro", "mode=ro&immutable=1"):
        conn = sqlite3.connect(f"{uri}?{flags}", uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
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
        raise StoreError(f"cannot use the store {path}: {error}") from None
    if version == 0 and tables:
        raise StoreError(f"{path} is an SQLite database but not an offpoc store (it has tables {sorted(tables)[:3]})")
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

    Nothing is written to a file before it is known to be an offpoc store this version reads (or, with
    ``create``, a new or empty one). A store this process may not write (read-only media, another
    user's file) opens read-only (:func:`read_only` says so): reading works, writing raises.

    Raises :class:`StoreError` when the file is missing or empty (and ``create`` is false), not
    SQLite, another application's database, from a newer offpoc, or read-only and in need of an upgrade.
    """
    path = Path(path)
    _check_file(path)
    exists = path.exists()
    if not create:
        if not exists:
            raise StoreError(f"no offpoc store at {path} (start a run with `offpoc run`, or pass --db)")
        if path.stat().st_size == 0:
            raise StoreError(f"{path} is an empty file, not an offpoc store (`offpoc run` creates one)")
    if not exists:
        _check_creatable(path)
    version = _inspect(path) if exists and path.stat().st_size > 0 else 0
    if exists and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        if version != SCHEMA_VERSION:
            raise StoreError(f"the store {path} is read-only and has schema {version}: it needs an upgrade first")
        db = sqlite_utils.Database(_connect_read_only(path), execute_plugins=False)
        return db
    try:
        db = _connect(path)
        _migrate(db, path)
    except sqlite3.DatabaseError as error:
        raise StoreError(f"cannot use the store {path}: {error}") from None
    return db


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
        if path.stat().st_size > 0:
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
