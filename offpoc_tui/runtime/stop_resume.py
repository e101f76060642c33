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
from store.runs import RESUMABLE, finish, get_run, hostname, reap_lost, requeue_all


class ControlError(Exception):
    """A run that cannot be stopped or resumed; the message is one line for the user."""


def whole_groups(store: Any, run_ids: list[int]) -> set[int]:
    """The runs among ``run_ids`` whose worker's every lane is among them: one signal stops that worker, so every
    lane checkpoints at one step and the group can resume as one."""
    rows = store.execute(
        "SELECT id, host, pid FROM runs WHERE status = 'running' AND lane_group IS NOT NULL AND pid IS NOT NULL"
        " AND backend IS NULL"
    )
    members: dict[tuple[str, int], set[int]] = {}  # by worker: a lane resumed alone is a worker of its own
    for found, host, pid in rows.fetchall():
        members.setdefault((host, pid), set()).add(found)
    asked = set(run_ids)
    return {found for lanes in members.values() if lanes <= asked for found in lanes}


def stop_run(store: Any, run_id: int, whole_group: bool = False) -> str | None:
    """Stop one run: a queued one at once, a running one by SIGTERM or the store's flag (it checkpoints, then stops).
    A lane is stopped by the flag, so the rest of its group trains on, unless ``whole_group`` (every lane of its
    group is being stopped, :func:`whole_groups`): then by the signal, which stops every lane at one step.

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
    if run.get("lane_group") is not None and not whole_group:  # its worker trains other lanes: a signal stops all
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


KEEP_BACKEND = "keep"
"""``backend`` of :func:`resume`: each run where it ran before."""


def resume(db_path: Path, store: Any, run_id: int, backend: str | None = KEEP_BACKEND) -> str:
    """Requeue a stopped, lost or failed run (on ``backend``: None local, 'ray'; by default where it ran) and
    make sure the store's scheduler runs; returns a line for the user."""
    return resume_all(db_path, store, [run_id], backend)[0]


def resume_all(db_path: Path, store: Any, run_ids: list[int], backend: str | None = KEEP_BACKEND) -> list[str]:
    """:func:`resume` of several runs, checked first and requeued in one transaction, so the scheduler sees them
    queued together: lanes of one group checkpointed at one step train as one group again
    (:func:`offpoc_tui.runtime.scheduler.lane_groups`). A line for the user per run; nothing is requeued when
    one of them cannot be (:class:`ControlError`)."""
    from offpoc_tui.runtime.scheduler import start_scheduler

    reap_lost(store)
    files = RunFiles.of(store, db_path)
    found: dict[int, tuple[Any, Path | None]] = {}
    for run_id in run_ids:
        row = get_run(store, run_id)
        if row is None:
            raise ControlError(f"no run {run_id}")
        if row["status"] not in RESUMABLE:
            raise ControlError(f"run {run_id} is {row['status']}; only stopped, lost or failed runs resume")
        if row["source"]:
            raise ControlError(f"run {run_id} was imported; there is nothing to resume")
        try:
            files.ensure()  # before the run is requeued: a folder that is not offpoc's stops it here
            found[run_id] = (row, files.find_checkpoint(run_id))  # and a run folder that is a symlink
        except StoreError as error:
            raise ControlError(str(error)) from None
    targets = {run_id: row["backend"] if backend == KEEP_BACKEND else backend for run_id, (row, _) in found.items()}
    missed = requeue_all(store, targets)
    if missed:
        now = get_run(store, missed[0])
        raise ControlError(
            f"run {missed[0]} is {now['status'] if now else 'deleted'} now (resumed meanwhile?): nothing resumed"
        )
    start_scheduler(db_path)
    return [_resumed(files, run_id, row["checkpoint_step"], file) for run_id, (row, file) in found.items()]


def _resumed(files: RunFiles, run_id: int, step: int | None, file: Path | None) -> str:
    if step is None:
        return (
            f"resuming run {run_id} from the start (no checkpoint yet: what it recorded is replaced by the new run's)"
        )
    if file is None:
        return (
            f"resuming run {run_id} from the start: its checkpoint (step {step:,}) is not in"
            f" {files.display(files.run_dir(run_id))} (what it recorded is replaced by the new run's)"
        )
    return (
        f"resuming run {run_id} from its checkpoint at step {step:,} (the worker checks it is this run's;"
        " what the run recorded past it is replaced)"
    )
