"""The paper's weight analysis (agents.weight_analysis, offpoc analyze weights) on real short runs."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from agents import TrainConfig, Trainer
from agents.replay import ReplayBuffer
from agents.weight_analysis import collection_order, window_weights
from tests.support.processes import offpoc, run_row, wait_for


def test_collection_order_runs_oldest_first_across_wrap_around() -> None:
    buffer = ReplayBuffer(10, 1, 1)
    for t in range(23):  # an episode ends every 5 steps: its final observation takes a slot
        buffer.add(np.full(1, t, np.float32), np.zeros(1), float(t), np.full(1, t, np.float32), False, (t + 1) % 5 == 0)
    order = collection_order(buffer)
    rewards = buffer.reward[order, 0]
    assert list(rewards) == sorted(rewards) and rewards[-1] == 22 and len(order) == len(buffer)


def test_a_trained_runs_windows_cover_its_buffer_with_weights_in_range() -> None:
    config = TrainConfig(algo="td3", env_id="Pendulum-v1", correction="acoffpoc", hidden=(32, 32), total_steps=1200,
                         start_steps=300, batch_size=64, buffer_size=700, eval_freq=1200, eval_episodes=1)  # fmt: skip
    trainer = Trainer(config)
    trainer.run()
    positions, values = window_weights(trainer)
    assert len(positions) == len(trainer.buffer) // 64 and np.all(np.diff(positions) > 0)
    assert 0 < positions[0] < positions[-1] < 1 and np.all((values > 0) & (values <= 1))


@pytest.mark.process
def test_offpoc_analyze_weights_table_figure_and_bad_input(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    small = ["--steps", "1500", "--eval-freq", "1500", "--set", "start_steps=500", "--set", "correction_start=1000",
             "--set", "hidden=32,32", "--set", "eval_episodes=1", "--set", "batch_size=64"]  # fmt: skip
    offpoc(db, "run", "sac", "Pendulum-v1", "--correction", "acoffpoc", "--seeds", "0-1", "--jobs", "2", *small)
    offpoc(db, "run", "sac", "Pendulum-v1", "--correction", "acoffpoc", "--seed", "2", "--jobs", "1", *small,
           "--set", "checkpoint_buffer=false")  # fmt: skip
    wait_for(lambda: all(run_row(db, i)["status"] == "finished" for i in (1, 2, 3)), timeout=240, what="the runs")

    figure = tmp_path / "w.png"
    result = offpoc(db, "analyze", "weights", "1", "2", "-o", str(figure), "--bins", "5")
    table = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [int(row["n_runs"]) for row in table] == [2] * 5
    assert all(0 < float(row["mean"]) <= 1 for row in table)  # SAC's λ_i, averaged per window
    assert figure.read_bytes()[:4] == b"\x89PNG" and "2 runs, 5 bins" in result.stderr

    for args, message in [(["1"], "give two runs or more"), (["1", "9"], "no run 9 "),
                          (["1", "3"], "run 3 has no checkpoint with its replay buffer")]:  # fmt: skip
        bad = offpoc(db, "analyze", "weights", *args, check=False)
        assert bad.returncode == 2 and message in bad.stderr and len(bad.stderr.splitlines()) == 1, bad.stderr


def test_offpoc_analyze_weights_bad_input_is_one_line_and_exit_2(filled_store: Path) -> None:
    """Refusals on a store filled without training (the scenario above adds a run whose checkpoint holds no
    replay buffer): fewer than two runs, a run that is not there, runs of two methods."""
    for args, message in [(["1"], "give two runs or more"), (["1", "9"], "no run 9 "),
                          (["1", "2"], "the runs are of 2 methods")]:  # fmt: skip
        bad = offpoc(filled_store, "analyze", "weights", *args, check=False)
        assert bad.returncode == 2 and message in bad.stderr and len(bad.stderr.splitlines()) == 1, bad.stderr
