"""Merging another store's runs into this one: results from two machines in one file.

The other file is never written: it is copied (SQLite's online backup, a consistent snapshot even of a
store in use) into a temporary folder, the copy brought to the current schema, and read from there.

Only finished runs come over, each with every record it holds (evaluations, training episodes and
statistics, logged quantities and their histograms, tags and note), in one transaction: a merge
cut short adds nothing. A run keeps its identity across stores by its ``origin``: an imported curve
has its own already (``reference:…``, ``zoo:…``), and a run trained there gets ``merged:<fingerprint>``,
a hash of what it was created as (name, method, seed, resolved config, creation time). A run already
here under that identity, whether merged before or trained here in the first place (a store merged
back into the one it came from), is recognised and not added twice; one here that has not finished
is said, never written over. Sequential studies, checkpoints and worker logs stay with the other store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import sqlite_utils

from store.db import StoreError, open_store, write
from store.methods import read_methods, record_methods

RECORD_TABLES = ("evaluations", "episodes", "train", "quantity_blocks", "histograms", "quantities", "tags")
RESET = {"id": None, "duplicate_of": None, "study_id": None, "interim": None, "arm": None, "stop_requested": 0}
"""``runs`` columns not carried over: ids of the other store's (its run ids, its studies) and stop requests; the
checkpoint step goes too (the file stays with the other store), and ``source`` names the file merged from."""


@dataclass
class MergeReport:
    added: list[int] = field(default_factory=list)
    """The new runs' ids here."""
    present: int = 0
    """Runs of the other store already here (the same identity)."""
    unfinished: dict[str, int] = field(default_factory=dict)
    """Runs of the other store left there, by status (not finished)."""
    studies: int = 0
    """Sequential studies in the other store (never merged)."""
    unfinished_here: list[tuple[int, str]] = field(default_factory=list)
    """(id, status) of runs here that the other store holds finished: the finished copy is not merged over them."""


def fingerprint(row: dict[str, object]) -> str:
    """A run's identity from what it was created as: the same in every store it is copied into."""
    created = json.dumps([row["name"], row["algo"], row["env"], row["correction"], row["divergence"], row["seed"],
                          json.loads(str(row["config"])), repr(row["created"])], sort_keys=True)  # fmt: skip
    return "merged:" + hashlib.sha256(created.encode()).hexdigest()[:32]


@contextlib.contextmanager
def snapshot(other: Path) -> Iterator[Path]:
    """A migrated copy of the store ``other``, in a temporary folder removed after; :class:`StoreError`, naming
    ``other``, for a file that is not an offpoc store this version reads (checked before anything is written
    anywhere else)."""
    with tempfile.TemporaryDirectory(prefix="offpoc-merge-") as folder:
        copy = Path(folder) / "other.db"
        _snapshot(other, copy)
        try:
            with contextlib.closing(sqlite3.connect(copy)) as conn:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:  # an empty file, or an SQLite database offpoc never made
                raise StoreError(f"{other} is not an offpoc store")
            open_store(copy).close()  # another application's database, a newer offpoc's store; an older one migrated
        except StoreError as error:
            raise StoreError(str(error).replace(str(copy), str(other))) from None
        except sqlite3.DatabaseError as error:
            raise StoreError(f"cannot read {other}: {error}") from None
        yield copy


def _snapshot(source: Path, target: Path) -> None:
    if not source.is_file():
        raise StoreError(f"no store at {source}")
    # A store in use has its -wal and -shm: a read-only reader joins them. One at rest has none, and a reader
    # would leave them behind, empty: read it as immutable (no locks, no files) instead.
    in_use = Path(f"{source}-wal").exists()
    try:
        reader = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro{'' if in_use else '&immutable=1'}", uri=True)
        try:
            writer = sqlite3.connect(target)
            reader.backup(writer)
            writer.close()
        finally:
            reader.close()
    except sqlite3.DatabaseError as error:
        raise StoreError(f"cannot read {source}: {error}") from None


def merge_from(
    db: sqlite_utils.Database, copy: Path, origin_file: str, advance: Callable[[], None] = lambda: None
) -> tuple[MergeReport, int]:
    """Merge the finished runs of ``copy`` (made by :func:`snapshot`) into ``db``, each recorded as merged from
    ``origin_file``; the report and how many runs ``copy`` holds. ``advance`` is called once per run considered."""
    report = MergeReport()
    source = sqlite3.connect(copy)
    source.row_factory = sqlite3.Row
    try:
        rows = [dict(row) for row in source.execute("SELECT * FROM runs ORDER BY id")]
        report.studies = source.execute("SELECT COUNT(*) FROM studies").fetchone()[0]
        columns = {table: _columns(source, table) for table in RECORD_TABLES}
        run_columns = [c for c in _columns(source, "runs") if c != "id"]
        with write(db):
            record_methods(db, read_methods(source), replace=False)  # what its corrections are called
            here: dict[str, tuple[int, str]] = {}  # identity → (id, status) of the run here
            groups: dict[int, int] = {}  # the other store's lane group → the id of its first lane merged here
            for mine in _rows(db, "SELECT * FROM runs"):
                identity = str(mine["origin"]) if mine["origin"] else fingerprint(mine)
                here[identity] = (int(str(mine["id"])), str(mine["status"]))
            for row in rows:  # a group part-merged before: its later lanes join the group its first lanes made here
                known = here.get(row["origin"] or fingerprint(row))
                if row.get("lane_group") is not None and row["lane_group"] not in groups and known is not None:
                    found = db.execute("SELECT lane_group FROM runs WHERE id = ?", [known[0]]).fetchone()
                    if found is not None and found[0] is not None:
                        groups[row["lane_group"]] = found[0]
            for row in rows:
                advance()
                if row["status"] != "finished":
                    report.unfinished[row["status"]] = report.unfinished.get(row["status"], 0) + 1
                    continue
                identity = row["origin"] or fingerprint(row)
                if identity in here:
                    run_id, status = here[identity]
                    if status == "finished":
                        report.present += 1
                    else:
                        report.unfinished_here.append((run_id, status))
                    continue
                values = {**{c: row[c] for c in run_columns}, **RESET, "origin": identity}
                values.update(source=row["source"] or origin_file, checkpoint_step=None)
                values.pop("id")
                cursor = db.execute(
                    f"INSERT INTO runs ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
                    list(values.values()),
                )
                run_id = int(cursor.lastrowid)  # type: ignore[arg-type]
                if row.get("lane_group") is not None:  # the other store's run id: its first lane merged here
                    group = groups.setdefault(row["lane_group"], run_id)
                    db.execute("UPDATE runs SET lane_group = ? WHERE id = ?", [group, run_id])
                for table, names in columns.items():
                    kept = [n for n in names if n not in ("id", "run_id")]
                    records = source.execute(f"SELECT {', '.join(kept)} FROM {table} WHERE run_id = ?", [row["id"]])
                    db.conn.executemany(
                        f"INSERT INTO {table} (run_id, {', '.join(kept)}) VALUES (?, {', '.join('?' for _ in kept)})",
                        ([run_id, *record] for record in records),
                    )
                here[identity] = (run_id, "finished")
                report.added.append(run_id)
    finally:
        source.close()
    return report, len(rows)


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def _rows(db: sqlite_utils.Database, sql: str) -> list[dict[str, object]]:
    cursor = db.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]
