"""The worker's binding of a Trainer to the store, in-process on a real env."""

from __future__ import annotations

import threading
from pathlib import Path

from agents import CheckpointRecord, TrainConfig
from offpoc_tui.worker import StoreBinding
from store import RunSpec, open_store
from store.runs import create_runs
from store.writer import RunWriter


def test_everything_before_a_checkpoint_is_in_the_store_when_it_is_written(tmp_path: Path) -> None:
    """A worker killed right after a checkpoint must not leave a gap: the resumed run starts there."""
    config = TrainConfig(
        algo="td3", env_id="Pendulum-v1", correction="acoffpoc", total_steps=1200, start_steps=200,
        eval_freq=200, eval_episodes=1, checkpoint_every=600, hidden=(32, 32), weights_block=1000,
    ).resolved()  # fmt: skip
    db = open_store(tmp_path / "s.db", create=True)
    spec = RunSpec("t", "td3", "Pendulum-v1", "acoffpoc", "jsd", 0, 1200, config.to_dict())
    (run_id,) = create_runs(db, [spec])
    binding = StoreBinding(RunWriter(db, run_id, flush_interval=3600), threading.Event())  # no timed flushes
    saved: list[int] = []
    trainer = binding.build(config, tmp_path / "ck.pt")
    original = binding.sink.on_checkpoint

    def spy(record: CheckpointRecord) -> None:  # what the store held when each checkpoint was announced
        original(record)
        saved.append(db.execute("SELECT MAX(step) FROM evaluations").fetchone()[0])

    binding.sink.on_checkpoint = spy  # type: ignore[method-assign]
    trainer.run()
    # No final flush: as if the worker died right after its last checkpoint.
    assert saved == [600, 1200]
    weights = db.execute("SELECT MAX(first_step + count - 1) FROM weights").fetchone()[0]
    assert weights == 1200  # the partial weight block was stored with the checkpoint
    run = db.execute("SELECT checkpoint_step FROM runs").fetchone()[0]
    assert run == 1200
