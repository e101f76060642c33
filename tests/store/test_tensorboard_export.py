"""``offpoc export --format tensorboard``: event files read back with TensorBoard's own reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from store import open_store
from tests.support.processes import offpoc


def read(folder: Path) -> EventAccumulator:
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "histograms": 0})
    events.Reload()
    return events


def test_every_record_reads_back_in_tensorboard(filled_store: Path, tmp_path: Path) -> None:
    db = filled_store
    out = tmp_path / "tb"
    result = offpoc(db, "export", "--format", "tensorboard", "-o", str(out))
    assert "of 3 runs to" in result.stderr
    folders = sorted(str(p.relative_to(out)) for p in out.glob("*/*/*/*"))
    assert folders == ["sac/Hopper-v4/acoffpoc-jsd/seed1", "td3/Hopper-v4/acoffpoc-jsd/seed0",
                       "td3/Hopper-v4/none/seed0"]  # fmt: skip

    store = open_store(db)
    for run_id, folder in ((1, "td3/Hopper-v4/none/seed0"), (3, "sac/Hopper-v4/acoffpoc-jsd/seed1")):
        events = read(out / folder)
        tags = events.Tags()
        stored = store.execute("SELECT step, return_mean FROM evaluations WHERE run_id = ? ORDER BY step", [run_id])
        returns = [(e.step, e.value) for e in events.Scalars("eval/return_mean")]
        assert returns == [(step, pytest.approx(value)) for step, value in stored]
        train = store.execute("SELECT step, critic_loss FROM train WHERE run_id = ? ORDER BY step", [run_id])
        assert [(e.step, e.value) for e in events.Scalars("train/critic_loss")] == [
            (step, pytest.approx(value)) for step, value in train
        ]
        assert ("train/alpha" in tags["scalars"]) == (run_id == 3)  # TD3 has no α: left out, not zeros
        means = store.execute(
            "SELECT mean FROM quantity_blocks WHERE run_id = ? ORDER BY first_step", [run_id]
        ).fetchall()
        quantity = (
            "lambda"
            if run_id == 1
            else next(iter(store.execute("SELECT quantity FROM quantity_blocks WHERE run_id = 3")))[0]
        )
        block = [e.value for e in events.Scalars(f"{quantity}/block_mean")]
        assert block == [pytest.approx(m) for (m,) in means]
        (histogram,) = events.Histograms(f"{quantity}/histogram")
        assert histogram.step == 3000 and histogram.histogram_value.num == np.arange(50).sum()
        assert histogram.histogram_value.bucket == list(range(50))
        times = [e.wall_time for e in events.Scalars("eval/return_mean")]
        assert times == sorted(times) and times[-1] - times[0] == pytest.approx(30.0)  # 3,000 steps at wall = step/100
    store.close()


def test_only_the_runs_asked_and_never_over_a_folder(filled_store: Path, tmp_path: Path) -> None:
    db = filled_store
    offpoc(db, "tag", "2", "+keep")
    out = tmp_path / "tb"
    offpoc(db, "export", "--format", "tensorboard", "--tag", "keep", "-o", str(out))
    assert [str(p.relative_to(out)) for p in out.glob("*/*/*/*")] == ["td3/Hopper-v4/acoffpoc-jsd/seed0"]
    again = offpoc(db, "export", "--format", "tensorboard", "-o", str(out), check=False)
    assert again.returncode == 2 and "it exists and is not an empty folder" in again.stderr
    assert len(list(out.glob("*/*/*/*"))) == 1  # untouched
    missing = offpoc(db, "export", "--format", "tensorboard", check=False)
    assert missing.returncode == 2 and "name it with -o DIR" in missing.stderr
    for args, message in ((["--source", "bogus"], "unknown source 'bogus'"), (["--last", "3"], "drop --last"),
                          (["--table", "runs"], "drop --table")):  # fmt: skip
        refused = offpoc(db, "export", "--format", "tensorboard", "-o", str(tmp_path / "tb2"), *args, check=False)
        assert refused.returncode == 2 and message in refused.stderr and not (tmp_path / "tb2").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tb.")]  # no work folder left behind
