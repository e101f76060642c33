"""``offpoc merge``: another store's finished runs, whole, once; the other file never written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from store import open_store
from store.runs import create_runs
from tests.support.processes import offpoc
from tests.support.storefill import fill, spec

TABLES = ("evaluations", "episodes", "train", "quantity_blocks", "histograms", "quantities")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def records(db: Path, run_id: int) -> dict[str, list[tuple[object, ...]]]:
    """Everything a run recorded, without the store's own ids."""
    store = open_store(db)
    found = {}
    for table in TABLES:
        columns = [row[1] for row in store.execute(f"PRAGMA table_info({table})") if row[1] not in ("id", "run_id")]
        found[table] = store.execute(
            f"SELECT {', '.join(columns)} FROM {table} WHERE run_id = ? ORDER BY {columns[0]}, {columns[1]}", [run_id]
        ).fetchall()
    store.close()
    return found


def test_merge_copies_finished_runs_once_and_never_writes_the_other(filled_store: Path, tmp_path: Path) -> None:
    a = filled_store  # three finished runs
    offpoc(a, "tag", "2", "+from-a")
    offpoc(a, "note", "2", "trained on machine A")
    b = tmp_path / "b" / "b.db"
    b.parent.mkdir()
    store = open_store(b, create=True)
    own, waiting = create_runs(store, [spec(seed=7), spec(seed=8)])
    store.close()
    fill(b, own)
    store = open_store(b)
    store.execute("UPDATE runs SET status = 'finished' WHERE id = ?", [own])
    store.execute("UPDATE runs SET status = 'stopped' WHERE id = ?", [waiting])
    store.conn.commit()
    store.close()
    before = {p.name: digest(p) for p in a.parent.iterdir() if p.is_file()}

    merged = offpoc(b, "merge", str(a))
    assert merged.stdout == f"merged 3 of 3 runs from {a}; ids 3 4 5 here\n"
    assert {p.name: digest(p) for p in a.parent.iterdir() if p.is_file()} == before  # only read
    for here, there in ((3, 1), (4, 2), (5, 3)):
        assert records(b, here) == records(a, there) and records(b, here)["evaluations"]
    shown = offpoc(b, "show", "4").stdout
    assert "from-a" in shown and "trained on machine A" in shown
    assert "merged from" in shown and "checkpoint none yet" in " ".join(shown.split())  # its checkpoint stayed there
    detail = json.loads(offpoc(b, "show", "4", "--json").stdout)
    assert detail["source"] == str(a.resolve()) and detail["checkpoint_step"] is None
    log = offpoc(b, "logs", "4", check=False)
    assert log.returncode == 1 and "its worker log stayed with that store" in log.stderr
    trained = offpoc(b, "export", "--table", "runs", "--source", "offpoc", "--format", "json").stdout
    assert trained.count('"run_id"') == 5  # merged runs are trained runs, not imported curves

    again = offpoc(b, "merge", str(a))
    assert again.stdout == f"merged 0 of 3 runs from {a}; 3 already here (the same runs), not added again\n"
    back = offpoc(a, "merge", str(b))  # b's own finished run comes over; a's own runs are recognised
    assert back.stdout == (
        f"merged 1 of 5 runs from {b}; ids 4 here; 3 already here (the same runs), not added again;"
        " not finished there, left out: 1 stopped (merge again once they finish)\n"
    )
    assert records(a, 4) == records(b, own)

    store = open_store(a)  # run 1 stopped here, finished in b: said, never written over
    store.execute("UPDATE runs SET status = 'stopped' WHERE id = 1")
    store.conn.commit()
    store.close()
    held = offpoc(a, "merge", str(b))
    assert "finished there but not here, so not merged over: run 1 (stopped)" in held.stdout


def test_merge_refuses_what_is_not_another_store(filled_store: Path, tmp_path: Path) -> None:
    import sqlite3

    text = tmp_path / "notes.db"
    text.write_text("not a database at all, but long enough to be read as one " * 100)
    empty = tmp_path / "empty.db"
    empty.touch()
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    for args, code, message in [
        ([str(text)], 1, "cannot read"),
        ([str(empty)], 1, f"{empty} is not an offpoc store"),
        ([str(foreign)], 1, f"{foreign} is not an offpoc store"),
        ([str(tmp_path / "missing.db")], 2, "no store at"),
        ([str(filled_store)], 2, "is this store"),
    ]:
        result = offpoc(filled_store, "merge", *args, check=False)
        assert result.returncode == code and message in result.stderr and len(result.stderr.strip().splitlines()) <= 2
        if message == "is this store":
            continue
        fresh = tmp_path / "fresh" / "new.db"
        fresh.parent.mkdir(exist_ok=True)
        assert offpoc(fresh, "merge", *args, check=False).returncode == code
        assert not fresh.exists()  # a refused merge makes no store
    store = open_store(filled_store)
    assert store.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 3
    store.close()
