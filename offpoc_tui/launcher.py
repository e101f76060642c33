"""The launcher: a detached process that keeps at most ``--jobs`` workers running.

    python -m offpoc_tui.launcher --db offpoc.db --jobs 2 3 4 5      # started by `offpoc run`

It starts in its own session (closing the terminal leaves it and its workers
running), starts a worker per queued run as slots free up, skips runs that were
stopped or deleted meanwhile, and settles a worker that died without saying how
it ended: killed by a signal → ``lost`` (resumable), a non-zero exit → ``failed``
with the tail of its log.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import sqlite_utils

from store import open_store
from store.files import WORKER_LOG, RunFiles
from store.runs import finish, get_run, set_launcher

POLL_S = 0.2


def start_launcher(db_path: Path, run_ids: list[int], jobs: int) -> int:
    """Start the detached launcher for ``run_ids``; its pid (recorded with the runs)."""
    db_path = db_path.resolve()
    db = open_store(db_path)
    files = RunFiles.of(db, db_path)
    files.ensure()
    with files.launcher_log.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "offpoc_tui.launcher", "--db", str(db_path), "--jobs", str(jobs)]
            + [str(i) for i in run_ids],
            cwd=files.root,  # whatever a library writes into its working folder stays with the store's files
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    set_launcher(db, run_ids, process.pid)
    db.close()
    return process.pid


def _start_worker(db_path: Path, files: RunFiles, run_id: int) -> subprocess.Popen[bytes]:
    directory = files.prepare(run_id)
    with (directory / WORKER_LOG).open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "offpoc_tui.worker", "--db", str(db_path), "--run", str(run_id)],
            cwd=directory,  # whatever a library writes into its working folder lands here, not in the user's
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _log_tail(files: RunFiles, run_id: int, lines: int = 20) -> str:
    path = files.run_dir(run_id) / WORKER_LOG
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _settle(db: sqlite_utils.Database, files: RunFiles, run_id: int, code: int) -> None:
    """A worker exited; make sure its run does not stay running or queued."""
    if code < 0:
        finish(db, run_id, "lost", error=f"worker killed by signal {-code}", only_from=("running", "queued"))
    elif code != 0:
        tail = _log_tail(files, run_id)
        last = tail.splitlines()[-1] if tail else f"exit status {code}"
        finish(db, run_id, "failed", error=last, traceback=tail, only_from=("running", "queued"))


def launch(db_path: Path, run_ids: list[int], jobs: int) -> None:
    db = open_store(db_path)
    files = RunFiles.of(db, db_path)
    pending = list(run_ids)
    active: dict[int, subprocess.Popen[bytes]] = {}
    while pending or active:
        for run_id, process in list(active.items()):
            code = process.poll()
            if code is not None:
                del active[run_id]
                _settle(db, files, run_id, code)
        while pending and len(active) < jobs:
            run_id = pending.pop(0)
            run = get_run(db, run_id)
            if run is None or run["status"] != "queued":
                continue
            active[run_id] = _start_worker(db_path, files, run_id)
            print(f"{time.strftime('%H:%M:%S')} run {run_id}: worker pid {active[run_id].pid}", flush=True)
        time.sleep(POLL_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offpoc_tui.launcher", description="Run queued runs.")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("runs", type=int, nargs="+")
    args = parser.parse_args(argv)
    launch(args.db.resolve(), args.runs, max(1, args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
