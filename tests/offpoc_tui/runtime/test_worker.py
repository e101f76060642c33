"""The worker's binding of a Trainer to the store, in-process on a real env."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest
import sqlite_utils

from agents import CheckpointRecord, TrainConfig
from offpoc_tui.runtime.lifecycle import StoreBinding, conclude
from store import RunSpec, open_store
from store.files import RunFiles
from store.links import LocalLink
from store.runs import claim, create_runs, get_run
from store.writer import RunWriter


def test_everything_before_a_checkpoint_is_in_the_store_when_it_is_written(tmp_path: Path) -> None:
    """A worker killed right after a checkpoint must not leave a gap: the resumed run starts there."""
    config = TrainConfig(
        algo="td3", env_id="Pendulum-v1", correction="acoffpoc", total_steps=1200, start_steps=200,
        eval_freq=200, eval_episodes=1, checkpoint_every=600, hidden=(32, 32), weights_block=1000,
    ).resolved()  # fmt: skip
    path = tmp_path / "s.db"
    db = open_store(path, create=True)
    spec = RunSpec("t", "td3", "Pendulum-v1", "acoffpoc", "jsd", 0, 1200, config.to_dict())
    (run_id,) = create_runs(db, [spec])
    binding = StoreBinding(RunWriter(db, run_id, flush_interval=3600), threading.Event())  # no timed flushes
    saved: list[tuple[int, int]] = []
    trainer = binding.build(get_run(db, run_id) or {}, config, RunFiles.of(db, path))
    original = binding.sink.on_checkpoint

    def spy(record: CheckpointRecord) -> None:  # what the store held when each checkpoint was announced
        original(record)
        saved.append(db.execute("SELECT (SELECT MAX(step) FROM evaluations), steps FROM runs").fetchone())

    binding.sink.on_checkpoint = spy  # type: ignore[method-assign]
    trainer.run()
    # No final flush: as if the worker died right after its last checkpoint. The run's progress
    # went with each checkpoint: with no timed flush, nothing else would have written it.
    assert saved == [(600, 600), (1200, 1200)]
    weights = db.execute("SELECT MAX(first_step + (count - 1) * stride) FROM quantity_blocks").fetchone()[0]
    assert weights == 1200  # the partial weight block was stored with the checkpoint
    run = db.execute("SELECT checkpoint_step FROM runs").fetchone()[0]
    assert run == 1200


def test_a_failure_the_store_cannot_take_ends_the_log_with_its_reason(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 69, item 14: when the store refuses the failure's own record (a full disk; here, a store opened
    read-only), the worker exits 1 and its starter records the failure from the log's last line
    (``Scheduler._settle``). That line is the failure's reason, and the line before says where it goes,
    never "could not record the failure" standing as the run's error."""
    path = tmp_path / "s.db"
    db = open_store(path, create=True)
    (run_id,) = create_runs(db, [RunSpec("t", "td3", "Pendulum-v1", "none", None, 0, 600, {})])
    owner = claim(db, run_id, os.getpid())
    refusing = sqlite_utils.Database(sqlite3.connect(f"file:{path}?mode=ro", uri=True))
    binding = StoreBinding(RunWriter(db, run_id, flush_interval=3600), threading.Event())
    outcome = conclude(run_id, binding, LocalLink(refusing, owner), RuntimeError("simulator exploded at step 400"))
    log = capfd.readouterr().err.strip().splitlines()
    assert outcome.status == "failed" and get_run(db, run_id)["status"] == "running"  # not recorded, truly
    assert log[-1] == "RuntimeError: simulator exploded at step 400"
    assert log[-2].startswith("the store did not take the failure (attempt to write a readonly database)")
    refusing.close()
    db.close()
