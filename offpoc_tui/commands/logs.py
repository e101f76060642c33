"""``offpoc logs``: a run's worker log, whole, its last lines, or followed as the run writes it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from offpoc_tui.console import DEFAULT_DB, DbOption, fail, open_db, out, resolve_one, visible
from store.files import WORKER_LOG, RunFiles
from store.runs import get_run, reap_lost

LIVE = ("queued", "running")
POLL_S = 0.25
"""How often ``--follow`` looks for new lines, and at the run's status."""


def logs(
    run: Annotated[str, typer.Argument(help="Run id (or a name that matches one run).")],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing as the run writes, until it ends (Ctrl-C stops).")
    ] = False,
    tail: Annotated[int | None, typer.Option("--tail", "-n", min=0, help="Only the last N lines.")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """A run's worker log: what its worker printed, a failed run's traceback included."""
    store = open_db(db)
    reap_lost(store)
    run_id = resolve_one(store, run)
    row = get_run(store, run_id)
    assert row is not None
    if str(row.get("origin") or "").startswith("merged:"):
        fail(f"run {run_id} was merged from {row['source']}: its worker log stayed with that store", code=1)
    if row.get("source"):
        fail(f"run {run_id} was imported from {row['source']}: it has no worker log", code=1)
    if row.get("backend") == "ray":
        where = row.get("host") or "its Ray cluster"
        fail(f"run {run_id} trains on {where}: its output is in Ray's own logs there", code=1)
    path = RunFiles.of(store, db).run_dir(run_id) / WORKER_LOG
    if not path.exists() and not (follow and row["status"] in LIVE):
        said = "it has not started yet" if row["status"] == "queued" else f"it is {row['status']}"
        fail(f"run {run_id} has no worker log at {path}: {said}", code=1)
    position = _print_from(path, 0, tail)
    if not follow:
        return
    try:
        while True:
            time.sleep(POLL_S)
            status = (get_run(store, run_id) or {"status": "deleted"})["status"]
            position = _print_from(path, position)
            if status not in LIVE:
                time.sleep(POLL_S)  # what the worker prints after recording its end
                _print_from(path, position)
                out.print(f"run {run_id} ended: {status}", style="dim", markup=False, highlight=False)
                return
    except KeyboardInterrupt:
        return


def _print_from(path: Path, position: int, tail: int | None = None) -> int:
    """Print the log's whole lines from byte ``position`` (the last ``tail`` of them); the position after them."""
    try:
        with path.open("rb") as file:
            file.seek(position)
            data = file.read()
    except FileNotFoundError:
        return position
    complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits for its end
    lines = complete.decode(errors="replace").splitlines()
    for line in lines[-tail:] if tail else ([] if tail == 0 else lines):
        out.print(visible(line), markup=False, highlight=False, soft_wrap=True)
    return position + len(complete)
