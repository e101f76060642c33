"""Runs on a Ray cluster: one task per run or lane group, one writer beside the SQLite file.

The store's scheduler (:mod:`offpoc_tui.runtime.scheduler`) is the Ray driver. It connects to the
store's cluster (``offpoc run --backend ray --address ADDR``: ``auto``, an address; none given:
a running cluster, else a local one started for the runs and shut down with the scheduler),
starts one :class:`StoreWriter` actor pinned to its own node, the only process that writes the
file (SQLite's WAL needs every writer on one host), and submits one :func:`train_group` task per run, or per
lane group (``--lanes K``: its runs that go on from one step train in one task, as in one local worker; one
CPU; a GPU when the runs' ``device`` is CUDA). Each run of a group is still claimed with its own owner token.

A task lives as a local worker does (:func:`offpoc_tui.runtime.lifecycle.live`, the same function), its
:class:`~store.writer.RunWriter` shipping plain rows to the writer at most once a second and
waiting for the reply (one batch in flight); the reply says whether ``offpoc stop`` asked the
run to stop. Every call carries the owner token the task's claim drew, checked as a local
worker's writes are. Checkpoints are written on the task's node and shipped to the head as each
is written (``<store>-runs/<id>/checkpoint.pt``, put in place with its step recorded in one
transaction that checks the owner), or written straight under ``--checkpoint-dir`` on shared
storage. A worker or node lost mid-run makes Ray run the task again (:data:`MAX_RETRIES`): it
claims the run anew (the earlier task, if it lives on, writes nothing more), resumes from the
last checkpoint and replaces what was recorded past it, so every evaluation is stored once,
from one trajectory; once the retries are spent the run is ``lost`` (resumable). A Python
exception is ``failed`` with its traceback, not retried. The writer imports only ``store`` (no
torch): its first call is fast and it stays small.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

import sqlite_utils

from offpoc_tui.runtime.ray_leftovers import forget_cluster, note_cluster
from store import open_store
from store.db import StoreError, StoreFile
from store.files import CHECKPOINT, RunFiles
from store.links import LocalLink, Opened, Rows, opened, place_checkpoint
from store.queue import CHECKPOINT_DIR, RAY_ADDRESS, get_meta
from store.runs import RunRow, check_owner, claim, finish, get_run, hostname

MAX_RETRIES = int(os.environ.get("OFFPOC_RAY_MAX_RETRIES", "3"))
"""Times Ray runs a task again after its worker process or node died."""


class StoreWriter:
    """The one writer of the store, on the node that holds the file (a Ray actor).

    A task's calls carry the owner token its :meth:`start` drew; each write checks it (as a local
    worker's :class:`~store.links.LocalLink` does, which does the writing here), so a task Ray ran
    again takes the run from the earlier one, and the earlier one writes nothing more.
    """

    def __init__(self, db_path: str) -> None:
        self.db = open_store(db_path)
        self.where = StoreFile.of(db_path)
        self.files = RunFiles.of(self.db, db_path)

    def _link(self, owner: str) -> LocalLink:
        return LocalLink(self.db, owner, self.where)

    def start(self, run_id: int, pid: int, where: str) -> dict[str, Any] | None:
        """Claim the run for a task (again, after a retry); what the task needs, or None when it is not to run."""
        owner = claim(self.db, run_id, pid, where, ray_task=True)
        if owner is None:
            return None
        run = get_run(self.db, run_id)
        assert run is not None
        try:
            found = self.files.find_checkpoint(run_id)
        except StoreError as error:  # the run's folder is not this store's (a symlink): the task fails with it
            return {"owner": owner, "refused": str(error)}
        shipped = found.read_bytes() if found is not None and run["checkpoint_step"] is not None else None
        return {
            "owner": owner,
            "run": {key: run[key] for key in ("id", "config", "checkpoint_step", "steps")},
            "store_name": self.files.store_path.name,
            "store_id": self.files.store_id,
            "checkpoint": shipped,
        }

    def open(self, run_id: int) -> Opened:
        return opened(self.db, run_id)

    def commit(self, run_id: int, owner: str, rows: Rows, progress: dict[str, Any]) -> bool:
        return self._link(owner).commit(run_id, rows, progress)

    def rewind(self, run_id: int, owner: str, step: int, checkpoint: int | None, updates: int) -> Opened:
        return self._link(owner).rewind(run_id, step, checkpoint, updates)

    def check_owner(self, run_id: int, owner: str) -> None:
        """Raise :class:`~store.runs.NotOwner` unless the task still owns the run (before it renames a file)."""
        check_owner(self.db, run_id, owner)

    def put_checkpoint(self, run_id: int, owner: str, step: int, data: bytes | None) -> None:
        """A task's checkpoint at ``step``: its bytes (None: the file is already in place on shared storage)
        written beside the store where a local run keeps its own, then renamed into place and its step
        recorded in one transaction that checks the task still owns the run."""
        if data is None:
            place_checkpoint(self.db, run_id, step, lambda: None, owner)
            return
        self.where.check()
        check_owner(self.db, run_id, owner)  # before the bytes are written; checked again as they are placed
        directory = self.files.prepare(run_id)
        tmp = directory / f"{CHECKPOINT}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            with tmp.open("wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            self._link(owner).place_checkpoint(run_id, step, tmp, directory / CHECKPOINT)
        finally:
            tmp.unlink(missing_ok=True)

    def end(self, run_id: int, owner: str, status: str, error: str | None = None, text: str | None = None) -> bool:
        return self._link(owner).end(run_id, status, error, text)


class RayRuns:
    """The scheduler's Ray side: the connection, the writer, and a task per submitted run or lane group."""

    def __init__(
        self, db: sqlite_utils.Database, writer: Any, task: Any, checkpoint_dir: str | None, root: Path
    ) -> None:
        self.db, self.writer, self.task, self.checkpoint_dir = db, writer, task, checkpoint_dir
        self.root = root
        """The store's run-files folder, where a cluster this scheduler started is noted."""
        self.active: dict[int, Any] = {}

    @classmethod
    def connect(cls, db_path: Path, db: sqlite_utils.Database) -> RayRuns:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        address = get_meta(db, RAY_ADDRESS)
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        root = RunFiles.of(db, db_path).root
        note_cluster(root)  # a cluster of its own ends with it, even if it is killed (ray_leftovers)
        here = ray.get_runtime_context().get_node_id()
        actor = ray.remote(StoreWriter).options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)
        )
        writer = actor.remote(str(db_path))
        from offpoc_tui.runtime.ray_task import train_group

        task = ray.remote(train_group)
        print(f"ray: connected to {address or 'the default cluster'}; writer on node {here[:8]} ({hostname()})")
        return cls(db, writer, task, get_meta(db, CHECKPOINT_DIR), root)

    def free(self) -> int:
        """Tasks that may be submitted now: the cluster's CPUs less the tasks in flight (a lane group's is one).

        Ray lends a task's CPU to another while it waits in ``ray.get`` (each run does, on the
        writer's reply once a second), so a queue of submitted tasks would run more at once than
        there are CPUs; offpoc keeps the queue itself and submits only as many as fit.
        """
        import ray

        return int(ray.cluster_resources().get("CPU", 0)) - len(set(self.active.values()))

    def submit(self, run_ids: list[int]) -> None:
        """One task for ``run_ids``: one run, or the runs of one lane group that go on from one step."""
        configs = [json.loads(self._run(run_id)["config"]) for run_id in run_ids]
        gpus = 1 if any(str(config.get("device", "cpu")).startswith("cuda") for config in configs) else 0
        options = {"num_cpus": 1, "num_gpus": gpus, "max_retries": MAX_RETRIES, "retry_exceptions": False}
        ref = self.task.options(**options).remote(run_ids, self.writer, self.checkpoint_dir)
        for run_id in run_ids:
            self.active[run_id] = ref
        said = f"runs {', '.join(map(str, run_ids))} (one lane group)" if len(run_ids) > 1 else f"run {run_ids[0]}"
        print(f"{said}: submitted to Ray", flush=True)

    def _run(self, run_id: int) -> RunRow:
        run = get_run(self.db, run_id)
        assert run is not None
        return run

    def poll(self) -> None:
        """Settle the tasks that ended: a task lost past its retries leaves its runs ``lost``."""
        import ray
        from ray.exceptions import RayError, RayTaskError

        if not self.active:
            return
        refs = list(dict.fromkeys(self.active.values()))
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in ready:
            run_ids = [run_id for run_id, r in self.active.items() if r == ref]
            for run_id in run_ids:
                del self.active[run_id]
            try:
                statuses = ray.get(ref)
            except RayTaskError as error:  # outside the task's own handling: an import, the writer
                text = str(error)
                for run_id in run_ids:
                    finish(self.db, run_id, "failed", error=text.splitlines()[-1], traceback=text, only_from=_LIVE)
            except RayError as error:  # worker or node died and the retries are spent
                line = f"{type(error).__name__}: the Ray task died after {MAX_RETRIES} retries"
                for run_id in run_ids:
                    finish(self.db, run_id, "lost", error=line, traceback=str(error), only_from=_LIVE)
            else:
                for run_id in run_ids:
                    print(f"run {run_id}: {statuses.get(run_id, 'skipped')}", flush=True)

    def close(self) -> None:
        import ray

        ray.shutdown()
        forget_cluster(self.root)


_LIVE = ("running", "queued")
