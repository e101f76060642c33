"""The Ray task that trains one run (see :mod:`offpoc_tui.ray_backend`), and how it reaches the store.

Imported by Ray workers and by the driver that submits the task; never by the writer actor,
which must stay free of torch.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

import ray

from agents import TrainConfig
from agents.checkpoint import CheckpointMismatch
from offpoc_tui.checkpoints import open_trainer
from offpoc_tui.worker import StoreBinding
from store.files import CHECKPOINT, RunFiles
from store.writer import Opened, Rows, RunWriter


class ShippingBinding(StoreBinding):
    """A local worker's binding that also ships each new checkpoint to the head, at the next step."""

    def __init__(self, writer: RunWriter, actor: Any, run_id: int, path: Path, ships: bool) -> None:
        super().__init__(writer, threading.Event())
        self.actor, self.run_id, self.path, self.ships = actor, run_id, path, ships
        self.shipped = -1
        """The step of the last checkpoint on the head (−1: none)."""

    def ship(self) -> None:
        trainer = self.trainer
        if self.ships and trainer is not None and trainer.checkpoint_step != self.shipped:
            ray.get(self.actor.put_checkpoint.remote(self.run_id, self.path.read_bytes()))
            self.shipped = trainer.checkpoint_step

    def should_stop(self) -> bool:
        self.ship()
        return super().should_stop()


class ActorLink:
    """A :class:`store.writer.Link` through the writer actor: each commit waits for its reply."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer

    def open(self, run_id: int) -> Opened:
        last_step, best = ray.get(self.writer.open.remote(run_id))
        return Opened(dict(last_step), best)

    def commit(self, run_id: int, rows: Rows, progress: dict[str, Any]) -> bool:
        return bool(ray.get(self.writer.commit.remote(run_id, rows, progress)))


def train(run_id: int, writer: Any, checkpoint_dir: str | None) -> str:
    """A Ray task: train one run to its end; its status (the writer has stored it)."""
    node = ray.get_runtime_context().get_node_id()
    where = f"ray:{socket.gethostname()}/{node[:8]}"
    start = ray.get(writer.start.remote(run_id, os.getpid(), where))
    if start is None:
        return "skipped"
    # The run's files on this node: the same layout as the store's (a store-named folder), so the
    # checkpoint rules of a local worker apply unchanged; under --checkpoint-dir they are shared.
    base = Path(checkpoint_dir) / start["store_id"] if checkpoint_dir else Path(tempfile.mkdtemp(prefix="offpoc-"))
    files = RunFiles(base / start["store_name"], start["store_id"], None)
    path = files.prepare(run_id) / CHECKPOINT
    if start["checkpoint"] is not None:
        path.write_bytes(start["checkpoint"])
    binding = ShippingBinding(RunWriter(ActorLink(writer), run_id), writer, run_id, path, checkpoint_dir is None)
    try:
        config = TrainConfig.from_dict(json.loads(start["run"]["config"]))
        trainer, line = open_trainer(start["run"], config, files, binding.sink, binding.should_stop)
        binding.trainer, binding.shipped = trainer, trainer.checkpoint_step  # what it starts from is on the head
        print(f"run {run_id} on {where}: {line}", flush=True)
        result = trainer.run()
        binding.ship()
        binding.writer.flush(result.step, result.updates)
        ray.get(writer.end.remote(run_id, result.status))
        return result.status
    except CheckpointMismatch as error:
        return _failed(writer, binding, run_id, str(error), None)
    except Exception as error:
        return _failed(writer, binding, run_id, f"{type(error).__name__}: {error}", traceback.format_exc())
    finally:
        if checkpoint_dir is None:
            shutil.rmtree(base, ignore_errors=True)


def _failed(writer: Any, binding: Any, run_id: int, error: str, text: str | None) -> str:
    print(text or error, file=sys.stderr, flush=True)
    trainer = binding.trainer
    if trainer is not None:
        binding.writer.flush(trainer.step, trainer.agent.updates)
    ray.get(writer.end.remote(run_id, "failed", error.splitlines()[0] if error else "failed", text))
    return "failed"
