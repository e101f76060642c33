"""A really full disk: the store on a small tmpfs, filled up (root only, where mounting is permitted;
``tests/e2e/test_faults.py`` covers the same path everywhere with a file size limit)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.runs import TERMINAL
from tests.support.processes import SMALL, export, offpoc, run_row, wait_for

pytestmark = pytest.mark.process


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small filesystem needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"mount is not permitted here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """A file that leaves ``leave`` bytes free on ``disk``."""
    filler = disk / "filler"
    free = shutil.disk_usage(disk).free
    with filler.open("wb") as file:
        file.write(b"\0" * max(free - leave, 0))
    return filler


def test_a_full_disk_fails_the_run_saying_so_and_nothing_else_is_lost(small_disk: Path) -> None:
    db = small_disk / "offpoc.db"
    offpoc(db, "run", "td3", "Pendulum-v1", *SMALL, "--steps", "600", "--eval-freq", "200", "--jobs", "1")
    wait_for(lambda: run_row(db, 1)["status"] in TERMINAL, what="the first run's end")
    before = export(db, "evaluations", "--run", "1")
    filler = fill(small_disk, 1_500_000)  # the store's writes fit; a 256-unit checkpoint (about 3 MB) does not
    command = [sys.executable, "-m", "offpoc_tui.cli", "run", "td3", "Pendulum-v1", "--steps", "600", "--seeds", "1-2",
               "--set", "hidden=256,256", "--set", "start_steps=500", "--set", "eval_episodes=2",
               "--set", "checkpoint_every=200", "--eval-freq", "200", "--db", str(db)]  # fmt: skip
    subprocess.run(command, check=True, cwd=small_disk.parent, timeout=120)
    wait_for(lambda: all(run_row(db, i)["status"] in TERMINAL for i in (2, 3)), what="both runs' end")
    for run_id in (2, 3):  # the scheduler served both: the first failure did not end it
        row = run_row(db, run_id)
        assert row["status"] == "failed" and "no space left" in row["error"], row
        assert row["checkpoint_step"] is None
    log = (small_disk / "offpoc.db-runs" / "scheduler.log").read_text()
    assert "Traceback" not in log
    assert export(db, "evaluations", "--run", "1") == before  # what was stored stays
    assert not list((small_disk / "offpoc.db-runs").glob("*/*.tmp"))

    filler.unlink()
    offpoc(db, "resume", "2")
    wait_for(lambda: run_row(db, 2)["status"] in TERMINAL, what="the resumed run's end")
    assert run_row(db, 2)["status"] == "finished"
