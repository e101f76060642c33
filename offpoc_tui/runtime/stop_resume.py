"""Stopping and resuming runs: what ``offpoc stop/resume`` and the dashboard's keys both do.

A worker on this machine is stopped by SIGTERM; one on a Ray cluster (no pid to signal) by a flag
in the store that the writer hands it with the reply to its next batch. Either checkpoints first.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from store.db import StoreError
from store.files import RunFiles
from store.queue import request_stop
from store.runs import RESUMABLE, finish, get_run, hostname, reap_lost, requeue


class ControlError(Exception):
    """A run that cannot be stopped or resumed; the message is one line for the user."""


def stop_run(store: Any, run_id: int) -> str | None:
    """Stop one run: a queued one at once, a running one by SIGTERM or the store's flag (it checkpoints, then stops).

    Returns a line for the user, or None when a signal was sent and the worker is now stopping.
    """
    run = get_run(store, run_id)
    if run is None:
        raise ControlError(f"no run {run_id}")
    if run["status"] == "queued":
        finish(store, run_id, "stopped", only_from=("queued",))
        return f"run {run_id}: stopped before it started"
    if run["status"] != "running":
        return f"run {run_id}: already {run['status']}"
    if run["backend"] == "ray":  # no pid to signal: the store tells the worker at its next write (about a second)
        request_stop(store, run_id)
        return None
    if run["host"] != hostname():
        raise ControlError(f"run {run_id} runs on host {run['host']}: stop it there")
    if run["pid"] is None:  # claimed a moment ago, its pid not yet recorded: the store tells it
        request_stop(store, run_id)
        return None
    if run.get("lane_group") is not None:  # its worker trains other lanes too: a signal would stop them all
        request_stop(store, run_id)
        return None
    try:
        os.kill(run["pid"], signal.SIGTERM)
    except ProcessLookupError:  # it ended between the check and the signal
        reap_lost(store)
        return f"run {run_id}: already ended"
    except PermissionError:
        raise ControlError(f"run {run_id}'s worker (pid {run['pid']}) belongs to another user") from None
    return None


_KEEP = "keep"


def resume(db_path: Path, store: Any, run_id: int, backend: str | None = _KEEP) -> str:
    """Requeue a stopped, lost or failed run (on ``backend``: None local, 'ray'; by default where it ran) and
    make sure the store's scheduler runs; returns a line for the user."""
    from offpoc_tui.runtime.scheduler import start_scheduler

    reap_lost(store)
    row = get_run(store, run_id)
    if row is None:
        raise ControlError(f"no run {run_id}")
    if row["status"] not in RESUMABLE:
        raise ControlError(f"run {run_id} is {row['status']}; only stopped, lost or failed runs resume")
    if row["source"]:
        raise ControlError(f"run {run_id} was imported; there is nothing to resume")
    files = RunFiles.of(store, db_path)
    try:
        files.ensure()  # before the run is requeued: a folder that is not offpoc's stops it here
        found = files.find_checkpoint(run_id)  # and a run folder that is a symlink
    except StoreError as error:
        raise ControlError(str(error)) from None
    step = row["checkpoint_step"]
    if not requeue(store, run_id, row["backend"] if backend == _KEEP else backend):
        now = get_run(store, run_id)
        raise ControlError(
            f"run {run_id} is {now['status'] if now else 'deleted'} now (resumed meanwhile?): left as it is"
        )
    start_scheduler(db_path)
    if step is None:
        return (
            f"resuming run {run_id} from the start (no checkpoint yet: what it recorded is replaced by the new run's)"
        )
    if found is None:
        return (
            f"resuming run {run_id} from the start: its checkpoint (step {step:,}) is not in"
            f" {files.display(files.run_dir(run_id))} (what it recorded is replaced by the new run's)"
        )
    return (
        f"resuming run {run_id} from its checkpoint at step {step:,} (the worker checks it is this run's;"
        " what the run recorded past it is replaced)"
    )
