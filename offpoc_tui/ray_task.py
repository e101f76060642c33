"""The Ray task that trains one run (see :mod:`offpoc_tui.ray_backend`), and how it reaches the store.

Imported by Ray workers and by the driver that submits the task; never by the writer actor,
which must stay free of torch.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

import ray

from agents import TrainResult
from offpoc_tui.lifecycle import StoreBinding, live
from store.files import CHECKPOINT, RunFiles
from store.links import Opened, Rows
from store.writer import RunWriter


class ShippingBinding(StoreBinding):
    """A local worker's binding that also ships each new checkpoint to the head, at the next step."""

    def __init__(self, writer: RunWriter, link: ActorLink, path: Path, ships: bool) -> None:
        super().__init__(writer, threading.Event())
        self.link, self.path, self.ships = link, path, ships
        self.shipped = -1
        """The step of the last checkpoint on the head (−1: none)."""

    def ship(self) -> None:
        trainer = self.trainer
        if self.ships and trainer is not None and trainer.checkpoint_step != self.shipped:
            self.link.put_checkpoint(self.writer.run_id, self.path.read_bytes())
            self.shipped = trainer.checkpoint_step

    def build(self, run: Any, config: Any, files: RunFiles) -> Any:
        trainer = super().build(run, config, files)
        self.shipped = trainer.checkpoint_step  # what it starts from is on the head already
        return trainer

    def should_stop(self) -> bool:
        self.ship()
        return super().should_stop()

    def before_end(self, result: TrainResult) -> None:
        self.ship()


class ActorLink:
    """A :class:`store.links.Link` through the writer actor, for the task that claimed the run as ``owner``:
    each call waits for its reply (the actor's errors, :class:`~store.runs.NotOwner` among them, raise here)."""

    def __init__(self, writer: Any, owner: str) -> None:
        self.writer = writer
        self.owner = owner

    def open(self, run_id: int) -> Opened:
        last_step, best = ray.get(self.writer.open.remote(run_id))
        return Opened(dict(last_step), best)

    def commit(self, run_id: int, rows: Rows, progress: dict[str, Any]) -> bool:
        return bool(ray.get(self.writer.commit.remote(run_id, self.owner, rows, progress)))

    def rewind(self, run_id: int, step: int) -> Opened:
        last_step, best = ray.get(self.writer.rewind.remote(run_id, self.owner, step))
        return Opened(dict(last_step), best)

    def end(self, run_id: int, status: str, error: str | None = None, traceback: str | None = None) -> bool:
        return bool(ray.get(self.writer.end.remote(run_id, self.owner, status, error, traceback)))

    def put_checkpoint(self, run_id: int, data: bytes) -> None:
        ray.get(self.writer.put_checkpoint.remote(run_id, self.owner, data))


def train(run_id: int, writer: Any, checkpoint_dir: str | None) -> str:
    """A Ray task: train one run to its end; its status (the writer has stored it)."""
    node = ray.get_runtime_context().get_node_id()
    where = f"ray:{socket.gethostname()}/{node[:8]}"
    start = ray.get(writer.start.remote(run_id, os.getpid(), where))
    if start is None:
        return "skipped"
    link = ActorLink(writer, start["owner"])
    if "refused" in start:
        link.end(run_id, "failed", start["refused"])
        return "failed"
    # The run's files on this node: the same layout as the store's (a store-named folder), so the
    # checkpoint rules of a local worker apply unchanged; under --checkpoint-dir they are shared.
    base = Path(checkpoint_dir) / start["store_id"] if checkpoint_dir else Path(tempfile.mkdtemp(prefix="offpoc-"))
    files = RunFiles(base / start["store_name"], start["store_id"], None)
    try:
        path = files.prepare(run_id) / CHECKPOINT
        if start["checkpoint"] is not None:
            path.write_bytes(start["checkpoint"])
        binding = ShippingBinding(RunWriter(link, run_id), link, path, checkpoint_dir is None)
        outcome = live(start["run"], binding, link, files)
        print(f"run {run_id} on {where}: {outcome.line}", flush=True)
        return outcome.status
    finally:
        if checkpoint_dir is None:
            shutil.rmtree(base, ignore_errors=True)
