"""The training worker: one run in its own process, its records written into the store.

    python -m offpoc_tui.runtime.worker --db offpoc.db --run 7      # started by the scheduler

It claims the run (queued → running, with an owner token every later write checks), and
:func:`offpoc_tui.runtime.lifecycle.live` trains it (from its own checkpoint when the store records
one: :mod:`offpoc_tui.runtime.checkpoints`) and ends it ``finished``, ``stopped`` (SIGTERM, SIGINT or
the store's stop request: checkpoint first) or ``failed`` (the exception and its traceback
stored; a checkpoint that is not the run's, a non-finite record, a store that moved: one line).
Checkpoints and the log live in the store's run files, ``<store>-runs/<id>/`` (:mod:`store.files`),
and are written only while the store file is still at the path the worker opened.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from offpoc_tui.runtime.lifecycle import StoreBinding, live
from store import open_store
from store.db import StoreError, StoreFile
from store.files import RunFiles
from store.links import LocalLink, retrying
from store.runs import NOT_OWNER_EXIT, claim, get_run
from store.writer import RunWriter

EXIT = {"finished": 0, "stopped": 0, "failed": 1, "not-owner": NOT_OWNER_EXIT}
"""The worker's exit status for each :class:`~offpoc_tui.runtime.lifecycle.Outcome` (the scheduler reads it)."""


def run_worker(db_path: Path, run_id: int) -> int:
    """Train run ``run_id`` to its end; the process exit status."""
    db = open_store(db_path)
    where = StoreFile.of(db_path)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    owner = retrying(lambda: claim(db, run_id, os.getpid()))  # a store another process keeps locked: wait
    if owner is None:
        print(f"run {run_id} is not queued any more; nothing to do", flush=True)
        return 0
    link = LocalLink(db, owner, where)
    run = get_run(db, run_id)
    assert run is not None
    if run.get("env_path"):  # `module:Env-v0` imported from the folder it was queued in: this worker runs elsewhere
        sys.path.append(str(run["env_path"]))  # last: a file there never shadows a module offpoc imports later
    outcome = live(run, StoreBinding(RunWriter(link, run_id), stop), link, RunFiles.of(db, db_path))
    if outcome.status in ("finished", "stopped"):
        print(outcome.line, flush=True)
    return EXIT[outcome.status]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offpoc_tui.runtime.worker", description="Train one queued run.")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--run", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        return run_worker(args.db, args.run)
    except StoreError as error:  # the store went before the run was claimed: nothing of it is ours
        print(error, file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
