"""The training worker: one run in its own process (or a lane group's runs), its records written into the store.

    python -m offpoc_tui.runtime.worker --db offpoc.db --run 7      # started by the scheduler
    python -m offpoc_tui.runtime.worker --db offpoc.db --run 7 --run 8 --run 9    # a lane group (agents.lanes)

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
import functools
import os
import signal
import sys
import threading
from pathlib import Path

from agents.signals import signal_setter
from offpoc_tui.runtime.lifecycle import StoreBinding, live, live_group
from store import open_store
from store.db import StoreError, StoreFile
from store.files import RunFiles
from store.links import Link, LocalLink, retrying
from store.runs import NOT_OWNER_EXIT, RunRow, claim, get_run
from store.writer import RunWriter

EXIT = {"finished": 0, "stopped": 0, "failed": 1, "not-owner": NOT_OWNER_EXIT}
"""The worker's exit status for each :class:`~offpoc_tui.runtime.lifecycle.Outcome` (the scheduler reads it)."""


def stop_on_signals() -> threading.Event:
    """An event that SIGTERM and SIGINT set: the worker's runs checkpoint and stop at their next step."""
    stop = threading.Event()
    handler = signal_setter(stop)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)
    return stop


def run_worker(db_path: Path, run_id: int) -> int:
    """Train run ``run_id`` to its end; the process exit status."""
    db = open_store(db_path)
    where = StoreFile.of(db_path)
    stop = stop_on_signals()
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


def run_group(db_path: Path, run_ids: list[int]) -> int:
    """Train runs ``run_ids`` as one lane group (:func:`~offpoc_tui.runtime.lifecycle.live_group`); each is
    claimed and recorded as a run of its own. The exit status: 1 if a lane failed, else 0."""
    db = open_store(db_path)
    where = StoreFile.of(db_path)
    stop = stop_on_signals()
    files = RunFiles.of(db, db_path)
    lanes: list[tuple[RunRow, StoreBinding, Link]] = []
    for run_id in run_ids:
        owner = retrying(functools.partial(claim, db, run_id, os.getpid()))
        if owner is None:
            print(f"run {run_id} is not queued any more; not in this group", flush=True)
            continue
        link = LocalLink(db, owner, where)
        run = get_run(db, run_id)
        assert run is not None
        if run.get("env_path") and str(run["env_path"]) not in sys.path:
            sys.path.append(str(run["env_path"]))
        lanes.append((run, StoreBinding(RunWriter(link, run_id), stop), link))
    if not lanes:
        return 0
    print(f"lane group of runs {', '.join(str(run['id']) for run, _, _ in lanes)}", flush=True)
    outcomes = live_group(lanes, files)
    for (run, _, _), outcome in zip(lanes, outcomes, strict=True):
        print(f"run {run['id']}: {outcome.status}: {outcome.line}", flush=True)
    statuses = {outcome.status for outcome in outcomes}
    if "failed" in statuses:
        return EXIT["failed"]
    return EXIT["not-owner"] if statuses == {"not-owner"} else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m offpoc_tui.runtime.worker", description="Train one queued run, or several as a lane group."
    )
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--run", type=int, required=True, action="append", help="repeated: one lane group")
    args = parser.parse_args(argv)
    try:
        if len(args.run) > 1:
            return run_group(args.db, args.run)
        return run_worker(args.db, args.run[0])
    except StoreError as error:  # the store went before the run was claimed: nothing of it is ours
        print(error, file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
