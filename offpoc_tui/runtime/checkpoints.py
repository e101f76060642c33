"""Which checkpoint a worker may load: its own run's, and no other.

A run loads a checkpoint only when the store records one for it
(``runs.checkpoint_step``): a fresh run, or one stopped before its first
checkpoint, starts at step 0 whatever lies in its folder. The file must then
prove it is the run's own: written for this store (its identity) and this run
id, with the run's resolved config, and not past the steps the store recorded (a
store restored from an older copy would otherwise skip the records in between).
A checkpoint's records reach the store before its file is written, and its step
after the file is in place, so a file one checkpoint ahead of the recorded step
(a worker killed in between) is still the run's.
Anything else raises :class:`~agents.checkpoint.CheckpointMismatch`, one line;
the worker ends the run ``failed`` with it, before writing any record.

Stores from before schema 3 wrote checkpoints without an owner, into a folder
shared by every store beside them (``offpoc-runs/<id>/``). For such a store only,
a file without an owner is taken when its config is the run's and its step is
the one the store recorded; it then moves into the run's own folder, and the
run's next checkpoint carries the owner.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from agents import TrainConfig, Trainer
from agents.checkpoint import CheckpointInfo, CheckpointMismatch, check_config
from store.files import CHECKPOINT, WORKER_LOG, RunFiles
from store.runs import RunRow

LEGACY_LOG = "worker-before-schema-3.log"
"""The worker log of a store from before schema 3, moved beside the run's own log with its checkpoint."""


class Started(NamedTuple):
    """A run's trainer as :func:`open_trainer` made it."""

    trainer: Trainer
    line: str
    """Where it starts, for the worker's log."""
    checkpoint: int | None
    """The step of the checkpoint it was restored from; None when it starts from the beginning."""


def open_trainer(run: RunRow, config: TrainConfig, files: RunFiles, sink: Any, should_stop: Any) -> Started:
    """The run's trainer, fresh or restored from its own checkpoint, and a line saying which."""
    run_id = run["id"]
    path = files.check_run_dir(run_id) / CHECKPOINT  # a symlink there is refused: never read or written through
    for stale in path.parent.glob(f"{CHECKPOINT}*.tmp"):  # a save cut short (a kill, a full disk): never read
        stale.unlink(missing_ok=True)
    owner = files.owner(run_id)
    recorded = run["checkpoint_step"]
    if recorded is None:
        trainer = Trainer(config, sink, checkpoint_path=path, should_stop=should_stop, owner=owner)
        return Started(trainer, "from the start", None)
    source = files.find_checkpoint(run_id)
    if source is None:
        trainer = Trainer(config, sink, checkpoint_path=path, should_stop=should_stop, owner=owner)
        missing = f"no checkpoint in {files.display(path.parent)} (the store recorded one at step {recorded:,})"
        return Started(trainer, f"from the start: {missing}", None)
    check = own_checkpoint(run, config, files)
    trainer = Trainer.resume(
        source, sink, should_stop, total_steps=config.total_steps, check=check, owner=owner, checkpoint_path=path
    )
    if source != path:
        files.prepare(run_id)
        _adopt(source, path)
    return Started(trainer, f"from {files.display(source)} at step {trainer.step:,}", trainer.step)


def own_checkpoint(run: RunRow, config: TrainConfig, files: RunFiles) -> Callable[[CheckpointInfo], None]:
    """The check a file must pass to be loaded as ``run``'s checkpoint (``Trainer.resume``'s ``check``): it
    raises :class:`~agents.checkpoint.CheckpointMismatch` for a file that is not the run's own."""
    recorded = run["checkpoint_step"]
    return functools.partial(
        _check_own,
        files=files,
        run_id=run["id"],
        config=config,
        recorded=recorded if recorded is not None else run["steps"],
        reached=run["steps"],
    )


def _check_own(
    info: CheckpointInfo, files: RunFiles, run_id: int, config: TrainConfig, recorded: int, reached: int
) -> None:
    name = f"checkpoint {files.display(info.path)}"
    owner = info.owner
    if owner is None:
        if files.legacy_dir is None:
            raise CheckpointMismatch(f"{name} names no store or run (not written by this store's runs): not loaded")
        if info.step != recorded:
            raise CheckpointMismatch(
                f"{name} (written before run files had owners) is at step {info.step:,}, not at run {run_id}'s"
                f" last checkpoint ({recorded:,}): another store's, not loaded"
            )
    elif owner.get("store_id") != files.store_id:
        raise CheckpointMismatch(
            f"{name} belongs to another store (id {str(owner.get('store_id'))[:8]}, this store is"
            f" {files.store_id[:8]}): not loaded"
        )
    elif owner.get("run_id") != run_id:
        raise CheckpointMismatch(f"{name} is run {owner.get('run_id')}'s, not run {run_id}'s: not loaded")
    check_config(info, config, name=name)
    if info.step > max(recorded, reached):
        # Past the records: the store lacks steps the file has trained. (Past the recorded checkpoint but
        # within the records is the worker stopped between the file's rename and the store's note of it.)
        raise CheckpointMismatch(
            f"{name} is at step {info.step:,}, past what the store recorded of the run ({max(recorded, reached):,}):"
            " was the store restored from an older copy? not loaded"
        )


def _adopt(legacy: Path, path: Path) -> None:
    """Move a checkpoint (and its log) out of the shared pre-schema-3 folder into the run's own."""
    os.replace(legacy, path)
    log = legacy.with_name(WORKER_LOG)
    if log.exists():
        os.replace(log, path.with_name(LEGACY_LOG))
    with contextlib.suppress(OSError):  # not empty: whatever else is in it stays
        legacy.parent.rmdir()
