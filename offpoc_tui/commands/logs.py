"""``offpoc logs``: a run's worker log, whole, its last lines, or followed as the run writes it."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import IO, Annotated

import typer

from offpoc_tui.console import DEFAULT_DB, DbOption, fail, open_db, out, resolve_one, visible
from store import StoreError
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
    files = RunFiles.of(store, db)
    try:
        path = files.check_run_dir(run_id) / WORKER_LOG  # a symlinked run folder: never read through
    except StoreError as error:
        fail(str(error), code=1)
    if not path.exists() and not path.is_symlink() and not (follow and row["status"] in LIVE):
        said = "it has not started yet" if row["status"] == "queued" else f"it is {row['status']}"
        fail(f"run {run_id} has no worker log at {path}: {said}", code=1)
    _check_plain(path, files)
    position = _print_from(path, 0, tail)
    if not follow:
        return
    if row["status"] in LIVE:  # a healthy worker prints its start, warnings and its end: say where progress is
        out.print(
            f"(the worker log holds a run's start, warnings, errors and end; its progress: offpoc follow {run_id})",
            style="dim", markup=False, highlight=False,
        )  # fmt: skip
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


CHUNK = 1 << 20
"""Bytes read at a time: a log of any size is printed (or its tail found) in this much memory."""


def _check_plain(path: Path, files: RunFiles) -> None:
    """Read only a regular file of this store: a symlink (to another store's log, to ``/etc/shadow``), a FIFO
    (it would hang the reader) or a device (``/dev/zero`` never ends) is refused in one line."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return  # not there yet: followed until it is
    if stat.S_ISLNK(mode) or not stat.S_ISREG(mode):
        kind = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
        fail(f"{files.display(path)} is {kind}: refused, never read through", code=1)


def _open(path: Path) -> IO[bytes] | None:
    """The log opened for reading without following a link or blocking on a FIFO (one put in place since the
    check); None when it is not there (yet)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as error:  # ELOOP: a symlink now
        fail(f"{path} cannot be read: {error.strerror}", code=1)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        fail(f"{path} is not a regular file: refused, never read through", code=1)
    return os.fdopen(fd, "rb")


def _tail_start(file: IO[bytes], position: int, lines: int) -> int:
    """Where the last ``lines`` whole lines after byte ``position`` begin (0 lines: where the whole lines end),
    reading back from the end a chunk at a time."""
    end = at = file.seek(0, os.SEEK_END)
    while at > position:  # the end of the last whole line: after its newline (what follows is still being written)
        start = max(position, at - CHUNK)
        file.seek(start)
        found = file.read(at - start).rfind(b"\n")
        if found >= 0:
            end = start + found + 1
            break
        at = end = start
    if lines <= 0:
        return end
    count, at = 0, end - 1  # before the last line's own newline
    while at > position:
        start = max(position, at - CHUNK)
        file.seek(start)
        block = file.read(at - start)
        for index in range(len(block) - 1, -1, -1):
            if block[index] == 10:  # a newline: the line after it is one more of the last ones
                count += 1
                if count == lines:
                    return start + index + 1
        at = start
    return position


def _print_from(path: Path, position: int, tail: int | None = None) -> int:
    """Print the log's whole lines from byte ``position`` (the last ``tail`` of them), a chunk at a time; the
    position after them."""
    file = _open(path)
    if file is None:
        return position
    with file:
        if tail == 0:
            return _tail_start(file, position, 0)
        start = _tail_start(file, position, tail) if tail else position
        file.seek(start)
        pending = b""
        while chunk := file.read(CHUNK):
            data = pending + chunk
            complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits for its end
            pending = data[len(complete) :]
            for line in complete.decode(errors="replace").splitlines():
                out.print(visible(line), markup=False, highlight=False, soft_wrap=True)
            start += len(complete)
        return start
