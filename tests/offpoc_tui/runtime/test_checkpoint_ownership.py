"""Which checkpoint a worker loads: its own run's only (offpoc_tui.runtime.checkpoints), on real trainers and files."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from agents import TrainConfig, Trainer
from agents.checkpoint import CheckpointMismatch
from offpoc_tui.runtime.checkpoints import LEGACY_LOG, open_trainer
from store import RunSpec, open_store
from store.files import CHECKPOINT, WORKER_LOG, RunFiles
from store.runs import create_runs
from tests.support.storefill import as_schema_2

CONFIG = TrainConfig(
    algo="td3",
    env_id="Pendulum-v1",
    total_steps=1000,
    start_steps=100,
    batch_size=16,
    buffer_size=2000,
    hidden=(16, 16),
    eval_freq=100,
    eval_episodes=1,
    checkpoint_every=0,
).resolved()
STEP = 150
"""Where the checkpoints below stand."""


def new_store(path: Path, configs: list[TrainConfig]) -> RunFiles:
    db = open_store(path, create=True)
    specs = [RunSpec("r", c.algo, c.env_id, c.correction, None, c.seed, c.total_steps, c.to_dict()) for c in configs]
    create_runs(db, specs)
    files = RunFiles.of(db, path)
    db.close()
    files.ensure()
    return files


def write_checkpoint(path: Path, config: TrainConfig, owner: dict[str, Any] | None) -> Path:
    """A real checkpoint at :data:`STEP` of a trainer given ``owner`` (None: as offpoc wrote them before owners)."""
    trainer = Trainer(config, owner=owner, should_stop=lambda: trainer.step >= STEP)
    assert trainer.run().status == "stopped"
    trainer.save_checkpoint(path)
    if owner is None:  # format 1 had no owner field at all
        state = torch.load(path, weights_only=False)
        del state["owner"]
        state["format"] = 1
        torch.save(state, path)
    return path


def run(run_id: int, checkpoint_step: int | None, steps: int | None = None) -> dict[str, Any]:
    """A run row: its recorded checkpoint, and the steps its records reach (default: the checkpoint's)."""
    return {
        "id": run_id,
        "checkpoint_step": checkpoint_step,
        "steps": steps if steps is not None else checkpoint_step or 0,
    }


def start(files: RunFiles, row: dict[str, Any], config: TrainConfig = CONFIG) -> tuple[Trainer, str]:
    started = open_trainer(row, config, files, None, None)
    return started.trainer, started.line


@pytest.fixture
def files(tmp_path: Path) -> RunFiles:
    """A store with runs 1 (seed 0) and 2 (seed 1)."""
    return new_store(tmp_path / "a.db", [CONFIG, dataclasses.replace(CONFIG, seed=1)])


def checkpoint_of(files: RunFiles, run_id: int) -> Path:
    return files.prepare(run_id) / CHECKPOINT


def test_its_own_checkpoint_is_loaded_and_stays_its_own(files: RunFiles) -> None:
    path = write_checkpoint(checkpoint_of(files, 1), CONFIG, files.owner(1))
    trainer, line = start(files, run(1, STEP))
    assert trainer.step == STEP and line == f"from a.db-runs/1/checkpoint.pt at step {STEP}"
    assert trainer.checkpoint_path == path and trainer.owner == files.owner(1)


def test_a_run_without_a_recorded_checkpoint_starts_fresh_whatever_lies_in_its_folder(files: RunFiles) -> None:
    path = write_checkpoint(checkpoint_of(files, 1), CONFIG, files.owner(1))
    before = path.read_bytes()
    trainer, line = start(files, run(1, None))
    assert trainer.step == 0 and line == "from the start" and trainer.owner == files.owner(1)
    assert path.read_bytes() == before


def test_a_recorded_checkpoint_whose_file_is_gone_starts_over(files: RunFiles) -> None:
    files.prepare(1)
    trainer, line = start(files, run(1, STEP))
    assert (
        trainer.step == 0
        and line == "from the start: no checkpoint in a.db-runs/1 (the store recorded one at step 150)"
    )


def test_another_stores_checkpoint_is_refused(files: RunFiles, tmp_path: Path) -> None:
    other = new_store(tmp_path / "b.db", [CONFIG])
    write_checkpoint(checkpoint_of(files, 1), CONFIG, other.owner(1))  # same run id, same settings
    with pytest.raises(CheckpointMismatch, match=r"a.db-runs/1/checkpoint.pt belongs to another store \(id "):
        start(files, run(1, STEP))


def test_another_runs_checkpoint_is_refused(files: RunFiles) -> None:
    write_checkpoint(checkpoint_of(files, 1), dataclasses.replace(CONFIG, seed=1), files.owner(2))
    with pytest.raises(CheckpointMismatch, match="is run 2's, not run 1's"):
        start(files, run(1, STEP))


def test_its_own_checkpoint_with_other_settings_is_refused(files: RunFiles) -> None:
    write_checkpoint(checkpoint_of(files, 1), dataclasses.replace(CONFIG, seed=3, gamma=0.9), files.owner(1))
    with pytest.raises(CheckpointMismatch, match=r"other settings \(seed 3, expected 0; gamma 0.9, expected 0.99\)"):
        start(files, run(1, STEP))


def test_a_checkpoint_past_the_stores_records_is_refused(files: RunFiles) -> None:
    """A store restored from an older copy: loading would skip the records in between."""
    write_checkpoint(checkpoint_of(files, 1), CONFIG, files.owner(1))
    with pytest.raises(CheckpointMismatch, match="is at step 150, past what the store recorded of the run"):
        start(files, run(1, 100))
    trainer, _ = start(files, run(1, 200))  # behind what the store recorded: steps are repeated, never skipped
    assert trainer.step == STEP


def test_a_checkpoint_whose_step_the_store_missed_is_its_own(files: RunFiles) -> None:
    """Killed between the file's rename and the store's note of its step: the records reached it, so it loads."""
    write_checkpoint(checkpoint_of(files, 1), CONFIG, files.owner(1))
    trainer, _ = start(files, run(1, 100, steps=STEP))
    assert trainer.step == STEP


def test_a_checkpoint_without_owner_is_refused_in_a_store_that_always_had_owners(files: RunFiles) -> None:
    write_checkpoint(checkpoint_of(files, 1), CONFIG, None)
    with pytest.raises(CheckpointMismatch, match="names no store or run"):
        start(files, run(1, STEP))


def test_every_refusal_is_one_line(files: RunFiles, tmp_path: Path) -> None:
    write_checkpoint(checkpoint_of(files, 1), dataclasses.replace(CONFIG, seed=5), files.owner(1))
    with pytest.raises(CheckpointMismatch) as raised:
        start(files, run(1, STEP))
    assert "\n" not in str(raised.value) and str(raised.value).endswith("not loaded")


# ---- stores from before run files had owners ----------------------------------------------------
@pytest.fixture
def old_store(tmp_path: Path) -> RunFiles:
    """A store from schema 2 with runs 1 and 2, whose files were in the folder's shared offpoc-runs/."""
    path = tmp_path / "old.db"
    new_store(path, [CONFIG, dataclasses.replace(CONFIG, seed=1)])
    os.rename(tmp_path / "old.db-runs", tmp_path / "unused")  # schema 2 had no folder of its own
    as_schema_2(path)
    db = open_store(path)
    files = RunFiles.of(db, path)
    db.close()
    return files


def legacy_checkpoint(files: RunFiles, run_id: int, config: TrainConfig) -> Path:
    directory = files.legacy_run_dir(run_id)
    assert directory is not None
    directory.mkdir(parents=True)
    (directory / WORKER_LOG).write_text("the old worker's log\n")
    return write_checkpoint(directory / CHECKPOINT, config, None)


def test_an_older_stores_checkpoint_is_found_checked_and_moved_into_its_own_folder(old_store: RunFiles) -> None:
    legacy = legacy_checkpoint(old_store, 1, CONFIG)
    files = old_store
    files.ensure()
    trainer, line = start(files, run(1, STEP))
    assert trainer.step == STEP and line == f"from offpoc-runs/1/checkpoint.pt at step {STEP}"
    moved = files.run_dir(1) / CHECKPOINT
    assert moved.exists() and not legacy.exists() and not legacy.parent.exists()
    assert (files.run_dir(1) / LEGACY_LOG).read_text() == "the old worker's log\n"
    trainer.save_checkpoint()  # from now on the file proves whose it is
    assert torch.load(moved, weights_only=False)["owner"] == files.owner(1)
    again, line = start(files, run(1, STEP))
    assert again.step == STEP and line.startswith("from old.db-runs/1/checkpoint.pt")


def test_an_older_stores_moved_checkpoint_still_loads_before_it_is_rewritten(old_store: RunFiles) -> None:
    legacy_checkpoint(old_store, 1, CONFIG)
    old_store.ensure()
    start(old_store, run(1, STEP))  # moved; the worker then died before its next checkpoint
    trainer, _ = start(old_store, run(1, STEP))
    assert trainer.step == STEP


@pytest.mark.parametrize(
    ("config", "recorded", "reason"),
    [
        (dataclasses.replace(CONFIG, seed=1), STEP, "other settings"),  # run 2's settings: another store's run 1
        (CONFIG, 3000, re.escape("is at step 150, not at run 1's last checkpoint (3,000): another store's")),
    ],
    ids=["other settings", "other step"],
)
def test_an_older_stores_shared_checkpoint_that_is_not_the_runs_is_refused_and_left(
    old_store: RunFiles, config: TrainConfig, recorded: int, reason: str
) -> None:
    legacy = legacy_checkpoint(old_store, 1, config)
    before = legacy.read_bytes()
    old_store.ensure()
    with pytest.raises(CheckpointMismatch, match=reason):
        start(old_store, run(1, recorded))
    assert legacy.read_bytes() == before and not (old_store.run_dir(1) / CHECKPOINT).exists()
