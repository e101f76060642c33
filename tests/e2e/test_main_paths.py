"""End to end with real processes: the offpoc CLI, the detached scheduler, workers on real MuJoCo, SQLite.

About a minute in all; these are the product's main paths, so they run by default.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store import open_store
from store.reader import list_runs
from tests.support.processes import SMALL, export, offpoc, run_row, runs, wait_for


def both_running(db: Path, past_step: int) -> bool:
    if not db.exists():
        return False
    current = runs(db)
    return len(current) == 2 and all(r["status"] == "running" and r["steps"] > past_step for r in current.values())


def sigint_as_on_a_terminal() -> None:
    """Ctrl-C's signal at its default in the child, as in a terminal's foreground. A test suite started as a
    shell's background job (``bash .ci/run &``) has SIGINT ignored, every child inherits that, and Python then
    installs no KeyboardInterrupt: the follow would never hear the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.process
def test_run_follow_writes_evaluations_and_weights(tmp_path: Path) -> None:
    """The issue's command, as written."""
    db = tmp_path / "offpoc.db"
    result = offpoc(db, "run", "td3", "Hopper-v4", "--correction", "acoffpoc", "--steps", "3000",
                    "--set", "start_steps=500", "--eval-freq", "1000", "--follow")  # fmt: skip
    assert "done: 1 finished" in result.stdout
    evaluations = export(db, "evaluations")
    assert [int(r["step"]) for r in evaluations] == [0, 1000, 2000, 3000]
    assert all(r["algo"] == "td3" and r["correction"] == "acoffpoc" and r["divergence"] == "jsd" for r in evaluations)
    every = export(db, "quantities")
    weights = [r for r in every if r["quantity"] == "lambda"]
    assert len(weights) == 2500 and [int(r["step"]) for r in weights] == list(range(501, 3001))
    assert all(0.0 <= float(r["value"]) <= 1.0 for r in weights)
    shares = [r for r in every if r["quantity"] == "at_bound"]  # TD3's actor, every other update from step 501
    assert len(shares) == 1250 and all(0.0 <= float(r["value"]) <= 1.0 for r in shares)
    assert [int(r["step"]) for r in shares] == list(range(502, 3001, 2))  # each at its own step
    evaluated = [r for r in every if r["quantity"] == "eval_at_bound"]  # one per evaluation
    assert [int(r["step"]) for r in evaluated] == [0, 1000, 2000, 3000]
    assert len(every) == len(weights) + len(shares) + len(evaluated)
    run = runs(db)[1]
    assert run["status"] == "finished" and run["steps"] == 3000
    assert (tmp_path / "offpoc.db-runs" / "1" / "checkpoint.pt").exists()
    assert (tmp_path / "offpoc.db-runs" / "1" / "worker.log").exists()


@pytest.mark.process
def test_killed_worker_is_lost_then_resumes_without_duplicate_steps(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    # 6,000 steps: the kill must land while the worker still runs, and each poll below is a
    # subprocess that can take a second or more while small networks train fast.
    offpoc(db, "run", "td3", "Hopper-v4", "--steps", "6000", "--eval-freq", "500", *SMALL,
           "--set", "checkpoint_every=1000")  # fmt: skip
    # Read straight from the store: a poll through `offpoc ps` takes a second or more, long
    # enough for a fast run to finish between seeing step 1700 and the kill.
    wait_for(lambda: run_row(db, 1)["steps"] >= 1700, what="step 1700")  # past the checkpoint at 1000
    row = run_row(db, 1)
    assert row["status"] == "running", row
    os.kill(row["pid"], signal.SIGKILL)
    wait_for(lambda: runs(db)[1]["status"] == "lost", timeout=90, what="lost")
    before = {int(r["step"]): r["return_mean"] for r in export(db, "evaluations")}
    assert max(before) >= 1500
    checkpointed = run_row(db, 1)["checkpoint_step"]
    assert checkpointed >= 1000

    offpoc(db, "resume", "1", "--follow")
    after = export(db, "evaluations")
    steps = [int(r["step"]) for r in after]
    assert steps == list(range(0, 6001, 500))  # every step once
    kept = [r for r in after if int(r["step"]) <= checkpointed]  # past the checkpoint: the resumed run's
    assert kept and all(before[int(r["step"])] == r["return_mean"] for r in kept)
    assert runs(db)[1]["status"] == "finished"
    logged = export(db, "quantities")
    for quantity in {r["quantity"] for r in logged}:  # each quantity's values: every step once, in order
        weight_steps = [int(r["step"]) for r in logged if r["quantity"] == quantity]
        assert weight_steps == sorted(set(weight_steps)), quantity


@pytest.mark.process
def test_sigterm_stops_gracefully_and_a_failing_worker_leaves_others_alone(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    following = subprocess.Popen(
        [sys.executable, "-m", "offpoc_tui.cli", "run", "td3", "Hopper-v4", "--seeds", "0-1", "--jobs", "2",
         "--steps", "100000", *SMALL, "--follow", "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, preexec_fn=sigint_as_on_a_terminal,
    )  # fmt: skip
    wait_for(lambda: both_running(db, 700), what="both running")
    following.send_signal(signal.SIGINT)  # Ctrl-C detaches; the workers keep going
    stdout, _ = following.communicate(timeout=90)
    assert following.returncode == 0 and "detached" in stdout
    steps = {i: r["steps"] for i, r in runs(db).items()}
    wait_for(lambda: all(runs(db)[i]["steps"] > steps[i] for i in steps), timeout=60, what="progress after detaching")

    result = offpoc(db, "stop", "1")
    assert "run 1: stopped" in result.stdout
    checkpoint = tmp_path / "offpoc.db-runs" / "1" / "checkpoint.pt"
    assert checkpoint.exists() and runs(db)[1]["status"] == "stopped"

    checkpoint.write_bytes(b"garbage")  # the resumed worker will raise
    offpoc(db, "resume", "1")
    wait_for(lambda: runs(db)[1]["status"] == "failed", timeout=120, what="failed")
    shown = json.loads(offpoc(db, "show", "1", "--json").stdout)
    assert "cannot read checkpoint" in shown["error"] and not shown["traceback"]  # one line: a damaged file
    assert runs(db)[2]["status"] == "running"  # unaffected

    offpoc(db, "stop", "--all")
    assert runs(db)[2]["status"] == "stopped"
    offpoc(db, "rm", "1", "2", "--yes")
    assert runs(db) == {} and not (tmp_path / "offpoc.db-runs" / "1").exists()


@pytest.mark.process
def test_concurrent_runs_with_a_polling_reader(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    offpoc(db, "run", "ddpg", "Pendulum-v1", "--seeds", "0-3", "--jobs", "4", "--steps", "1500", "--eval-freq", "500",
           "--set", "hidden=32,32", "--set", "start_steps=500", "--set", "eval_episodes=2")  # fmt: skip
    reader = open_store(db)
    polls = 0
    deadline = time.monotonic() + 240
    while not all(r["status"] == "finished" for r in list_runs(reader)):
        assert time.monotonic() < deadline, list_runs(reader)
        assert not any(r["status"] in ("failed", "lost") for r in list_runs(reader))
        reader.execute("SELECT COUNT(*), MAX(step) FROM evaluations").fetchone()
        polls += 1
        time.sleep(0.05)
    assert polls > 10
    per_run = reader.execute("SELECT run_id, COUNT(*) FROM evaluations GROUP BY run_id").fetchall()
    assert per_run == [(1, 4), (2, 4), (3, 4), (4, 4)]
