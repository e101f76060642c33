"""``offpoc merge OTHER.db``: another store's finished runs, with all they recorded, into this one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from offpoc_tui.commands.imports import _progress
from offpoc_tui.console import DEFAULT_DB, DbOption, fail, id_list, open_db, out
from store import StoreError
from store.db import check_writable
from store.files import part_of_store


def merge(
    other: Annotated[Path, typer.Argument(help="The other store (an offpoc SQLite file); it is only read.")],
    db: DbOption = DEFAULT_DB,
) -> None:
    """Copy another store's finished runs here (results from two machines in one file); a run already here,
    merged before or trained here, is recognised and not added twice. Nothing is written to OTHER."""
    from store.merge import merge_from, snapshot

    if not other.is_file():
        fail(f"no store at {other}")
    if part_of_store(other, db) is not None or (other.exists() and db.exists() and other.samefile(db)):
        fail(f"{other} is this store ({db}): name another")
    try:
        check_writable(db)
    except StoreError as error:
        fail(str(error))
    try:
        with snapshot(other) as copy:  # checked before this store is made or written
            store = open_db(db, create=True)
            with _progress(f"merging {other}", _count(copy), "runs") as advance:
                report, total = merge_from(store, copy, str(other.resolve()), advance=lambda: advance(1))
    except StoreError as error:
        fail(str(error), code=1)
    parts = [f"merged {len(report.added):,} of {total:,} runs from {other}"]
    if report.added:
        parts.append(f"ids {id_list(report.added)} here")
    if report.present:
        parts.append(f"{report.present:,} already here (the same runs), not added again")
    if report.unfinished_here:
        held = ", ".join(f"run {i} ({status})" for i, status in report.unfinished_here)
        parts.append(f"finished there but not here, so not merged over: {held} (rm here, then merge again)")
    if report.unfinished:
        waiting = ", ".join(f"{n:,} {status}" for status, n in sorted(report.unfinished.items()))
        parts.append(f"not finished there, left out: {waiting} (merge again once they finish)")
    out.print("; ".join(parts), markup=False, highlight=False)
    if report.studies:
        out.print(f"note: its {report.studies} sequential studies are not merged (their runs are)", markup=False)


def _count(copy: Path) -> int:
    """The runs of the other store's copy, for the progress bar."""
    import sqlite3

    conn = sqlite3.connect(copy)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
    finally:
        conn.close()
