"""The store file is SQLite's alone: no lock of ours dropped, no half-made store, no empty file taken for one."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from store import StoreError, open_store
from store.db import StoreFile, StoreMoved, check_writable

WRITE_AND_CLOSE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("INSERT INTO meta (key, value) VALUES ('from_another_process', 'x')")
conn.commit()
conn.close()
"""


@pytest.mark.parametrize("again", [open_store, check_writable], ids=["open_store", "check_writable"])
def test_opening_the_store_again_keeps_this_process_locks_so_no_other_process_deletes_the_wal(
    tmp_path: Path, again: object
) -> None:
    """SQLite's "How To Corrupt", section 2.2: closing any descriptor of the store file in a process drops
    every lock the process holds on it. Another process's last connection then takes itself for the only
    one and deletes the WAL under this process's open connection (committed data in it can be lost)."""
    path = tmp_path / "s.db"
    held = open_store(path, create=True)
    held.execute("SELECT COUNT(*) FROM runs").fetchone()
    assert path.with_name("s.db-wal").exists()
    again(path)  # type: ignore[operator]  # what every command and the dashboard's x and r do
    subprocess.run([sys.executable, "-c", WRITE_AND_CLOSE, str(path)], check=True, timeout=60)
    assert path.with_name("s.db-wal").exists() and path.with_name("s.db-shm").exists()
    found = held.execute("SELECT value FROM meta WHERE key = 'from_another_process'").fetchone()
    assert found == ("x",)
    assert held.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_an_empty_file_is_refused_also_where_a_store_would_be_created(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    for create in (False, True):
        with pytest.raises(StoreError, match="is an empty file, not an offpoc store"):
            open_store(path, create=create)
    with pytest.raises(StoreError, match="is an empty file"):
        check_writable(path)
    assert path.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def test_a_new_store_appears_whole_so_racing_creators_share_one(tmp_path: Path) -> None:
    """A store is built under a hidden name and linked into place: nobody sees an empty file at the path
    (which is refused), and of several processes creating it at once each opens the one store."""
    path = tmp_path / "s.db"
    ids: list[str] = []
    errors: list[BaseException] = []

    def create() -> None:
        try:
            db = open_store(path, create=True)
            ids.append(db.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0])
            db.close()
        except BaseException as error:  # reported below, with the others
            errors.append(error)

    threads = [threading.Thread(target=create) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(set(ids)) == 1 and len(ids) == 6
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("s.db")) == []


def test_the_store_file_knows_when_its_path_names_another_file(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    open_store(path, create=True).close()
    where = StoreFile.of(path)
    assert where.here()
    moved = tmp_path / "elsewhere.db"
    os.rename(path, moved)
    assert not where.here()
    with pytest.raises(StoreMoved, match=r"no longer at .* nothing is there now"):
        where.check()
    open_store(path, create=True).close()  # a namesake
    with pytest.raises(StoreMoved, match="another file is there now"):
        where.check()
    assert StoreFile.of(moved).here()
