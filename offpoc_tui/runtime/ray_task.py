"""The Ray task that trains one run or a lane group (see :mod:`offpoc_tui.runtime.ray_backend`), and how it reaches
the store.

Imported by Ray workers and by the driver that submits the task; never by the writer actor,
which must stay free of torch.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

import ray

from offpoc_tui.runtime.lifecycle import StoreBinding, live, live_group
from store.files import CHECKPOINT, RunFiles
from store.links import Opened, Rows
from store.runs import RunRow
from store.writer import RunWriter


class ActorLink:
    """A :class:`store.links.Link` through the writer actor, for the task that claimed the run as ``owner``:
    each call waits for its reply (the actor's errors, :class:`~store.runs.NotOwner` among them, raise here).

    A checkpoint is written on the task's node; ``ships``: its bytes go to the head with its step, where the
    actor puts the file in place and records the step in one owner-checked transaction. Otherwise (under a
    shared ``--checkpoint-dir``) the step alone is recorded, owner-checked, once the file is in place.
    """

    def __init__(self, writer: Any, owner: str, ships: bool) -> None:
        self.writer = writer
        self.owner = owner
        self.ships = ships

    def open(self, run_id: int) -> Opened:
        last_step, best = ray.get(self.writer.open.remote(run_id))
        return Opened(dict(last_step), best)

    def commit(self, run_id: int, rows: Rows, progress: dict[str, Any]) -> bool:
        return bool(ray.get(self.writer.commit.remote(run_id, self.owner, rows, progress)))

    def rewind(self, run_id: int, step: int, checkpoint: int | None = None, updates: int = 0) -> Opened:
        last_step, best = ray.get(self.writer.rewind.remote(run_id, self.owner, step, checkpoint, updates))
        return Opened(dict(last_step), best)

    def guard(self) -> None:
        """Nothing to look at here: the run's files on this node are not beside the store."""

    def place_checkpoint(self, run_id: int, step: int, tmp: Path, path: Path) -> None:
        if self.ships:  # the node's copy is this task's alone; the head's is placed under the owner check
            os.replace(tmp, path)
            ray.get(self.writer.put_checkpoint.remote(run_id, self.owner, step, path.read_bytes()))
            return
        # Shared storage the head may not see at this path: the owner is checked, then the file renamed, then
        # its step recorded (checked again). A task that loses the run in between (a retry while this one was
        # cut off, never a local resume) could still rename: the one gap left, and only on shared storage.
        ray.get(self.writer.check_owner.remote(run_id, self.owner))
        os.replace(tmp, path)
        ray.get(self.writer.put_checkpoint.remote(run_id, self.owner, step, None))

    def end(self, run_id: int, status: str, error: str | None = None, traceback: str | None = None) -> bool:
        return bool(ray.get(self.writer.end.remote(run_id, self.owner, status, error, traceback)))


def train_group(run_ids: list[int], writer: Any, checkpoint_dir: str | None) -> dict[int, str]:
    """A Ray task: train runs ``run_ids``, one run alone or a lane group's (:class:`agents.lanes.LaneGroup`), as a
    local worker does, each claimed with an owner token of its own; each run's status (the writer has stored
    it), ``skipped`` where the run was no longer to run."""
    node = ray.get_runtime_context().get_node_id()
    where = f"ray:{socket.gethostname()}/{node[:8]}"
    statuses: dict[int, str] = {}
    lanes: list[tuple[RunRow, StoreBinding, ActorLink]] = []
    files: RunFiles | None = None
    base: Path | None = None
    try:
        for run_id in run_ids:
            start = ray.get(writer.start.remote(run_id, os.getpid(), where))
            if start is None:
                statuses[run_id] = "skipped"
                continue
            link = ActorLink(writer, start["owner"], ships=checkpoint_dir is None)
            if "refused" in start:
                link.end(run_id, "failed", start["refused"])
                statuses[run_id] = "failed"
                continue
            if files is None:
                # The runs' files on this node: the same layout as the store's (a store-named folder), so the
                # checkpoint rules of a local worker apply unchanged; under --checkpoint-dir they are shared.
                shared = Path(checkpoint_dir) / start["store_id"] if checkpoint_dir else None
                base = shared or Path(tempfile.mkdtemp(prefix="offpoc-"))
                files = RunFiles(base / start["store_name"], start["store_id"], None)
            path = files.prepare(run_id) / CHECKPOINT
            if start["checkpoint"] is not None and (checkpoint_dir is None or not path.exists()):
                tmp = path.with_name(f"{CHECKPOINT}.{uuid.uuid4().hex[:8]}.tmp")  # whole or absent, never half
                tmp.write_bytes(start["checkpoint"])
                os.replace(tmp, path)
            lanes.append((start["run"], StoreBinding(RunWriter(link, run_id), threading.Event()), link))
        if not lanes:
            return statuses
        assert files is not None
        if len(lanes) == 1:
            run, binding, link = lanes[0]
            outcomes = [live(run, binding, link, files)]
        else:
            print(f"lane group of runs {', '.join(str(run['id']) for run, _, _ in lanes)} on {where}", flush=True)
            outcomes = live_group(lanes, files)  # type: ignore[arg-type]  # ActorLink is a Link
        for (run, _, _), outcome in zip(lanes, outcomes, strict=True):
            print(f"run {run['id']} on {where}: {outcome.line}", flush=True)
            statuses[int(run["id"])] = outcome.status
        return statuses
    finally:
        if checkpoint_dir is None and base is not None:
            shutil.rmtree(base, ignore_errors=True)
