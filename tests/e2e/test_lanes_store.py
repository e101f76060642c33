"""Lane groups through the real CLI, scheduler and worker: one process, and each lane a run of its own."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.runs import TERMINAL
from tests.support.processes import SMALL, export, offpoc, run_row, runs, wait_for

PENDULUM = ["td3", "Pendulum-v1", *SMALL, "--eval-freq", "500"]

NAN_FOR_SEED_1 = """
import gymnasium as gym
from gymnasium.envs.classic_control.pendulum import PendulumEnv


class NanForSeed1(PendulumEnv):
    \"\"\"Pendulum whose rewards turn NaN after 700 steps of the training env seeded 1 (evaluation envs are not).\"\"\"

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.poisoned, self.steps = seed == 1, 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps = getattr(self, "steps", 0) + 1
        nan = getattr(self, "poisoned", False) and self.steps > 700
        return obs, float("nan") if nan else reward, terminated, truncated, info


gym.register("NanForSeed1-v0", entry_point=NanForSeed1, max_episode_steps=200)
"""


def _ended(db: Path, *run_ids: int) -> bool:
    return all(run_row(db, run_id)["status"] in TERMINAL for run_id in run_ids)


@contextlib.contextmanager
def stopped_after(db: Path) -> Iterator[None]:
    """Every run of the store stopped when the block ends, failed assertion or not: a test of 1M-step runs
    never leaves one training behind."""
    try:
        yield
    finally:
        offpoc(db, "stop", "--all", check=False)
        if db.exists():
            wait_for(lambda: all(r["status"] in TERMINAL for r in runs(db).values()), what="every run's stop")


@pytest.mark.process
def test_a_lane_group_is_one_worker_and_each_lane_a_run(tmp_path: Path) -> None:
    """``--compare --seeds 0-1 --lanes 4``: the paper's comparison in one process; each lane writes its own
    evaluations, statistics, λ and checkpoint as a solo run does, and says which group it trained in."""
    db, solo = tmp_path / "lanes.db", tmp_path / "solo.db"
    args = [*PENDULUM, "--correction", "acoffpoc", "--compare", "--seeds", "0-1", "--steps", "1500", "--follow"]
    offpoc(db, "run", *args, "--lanes", "4")
    offpoc(solo, "run", *args)
    grouped, alone = runs(db), runs(solo)
    assert [r["status"] for r in grouped.values()] == ["finished"] * 4
    assert len({r["pid"] for r in grouped.values()}) == 1  # one worker process
    assert len({r["pid"] for r in alone.values()}) > 1
    assert [r["lane_group"] for r in grouped.values()] == [1] * 4
    assert [r["lane_group"] for r in alone.values()] == [None] * 4
    for table in ("evaluations", "train"):
        assert [(r["run_id"], r["step"]) for r in export(db, table)] == [
            (r["run_id"], r["step"]) for r in export(solo, table)
        ]
    lambdas = {r["run_id"] for r in export(db, "quantities") if r["quantity"] == "lambda"}
    assert lambdas == {"2", "4"}  # the AC-Off-POC lanes
    for run_id in grouped:
        assert (tmp_path / "lanes.db-runs" / str(run_id) / "checkpoint.pt").is_file()
        assert run_row(db, run_id)["checkpoint_step"] == 1500
    assert "lane group" in offpoc(db, "show", "3").stdout
    assert [r["lane_group"] for r in export(db, "runs")] == ["1"] * 4
    log = offpoc(db, "logs", "3").stdout  # the group's log, from the lane's own folder
    assert "lane group of runs 1, 2, 3, 4" in log and "run 3: finished" in log
    offpoc(db, "rm", "1", "--yes")
    assert "run 3: finished" in offpoc(db, "logs", "3").stdout


@pytest.mark.process
def test_a_stopped_lane_leaves_the_group_and_resumes_alone(tmp_path: Path) -> None:
    """``offpoc stop`` of one lane: it checkpoints and reads stopped while its group trains on; resumed, it
    trains alone from its checkpoint, and no step of its records is doubled or missing."""
    db = tmp_path / "offpoc.db"
    with stopped_after(db):
        offpoc(db, "run", *PENDULUM, "--seeds", "0-2", "--steps", "1M", "--lanes", "3")
        wait_for(lambda: run_row(db, 2)["steps"] >= 1000, what="the group's first updates")
        offpoc(db, "stop", "2")
        wait_for(lambda: _ended(db, 2), timeout=60, what="the lane's stop, recorded while its group trains")
        stopped = run_row(db, 2)
        assert stopped["status"] == "stopped" and stopped["checkpoint_step"] == stopped["steps"] > 0
        assert run_row(db, 1)["status"] == run_row(db, 3)["status"] == "running"
        offpoc(db, "resume", "2")
        wait_for(lambda: run_row(db, 2)["steps"] >= stopped["steps"] + 1000, what="the resumed lane's training")
        assert run_row(db, 1)["status"] == "running"
        offpoc(db, "stop", "--all")
        wait_for(lambda: _ended(db, 1, 2, 3), what="every run's stop")
        rows = runs(db)
        assert [r["status"] for r in rows.values()] == ["stopped"] * 3
        assert rows[2]["pid"] != rows[1]["pid"] == rows[3]["pid"]
        steps = [int(r["step"]) for r in export(db, "evaluations") if r["run_id"] == "2"]
        assert steps == list(range(0, steps[-1] + 1, 500)) and steps[-1] > stopped["steps"]


@pytest.mark.process
def test_a_lane_whose_values_turn_non_finite_fails_alone(tmp_path: Path) -> None:
    """NaN rewards in one lane's environment fail that lane with the reason; its group's other lanes finish."""
    (tmp_path / "nanlane.py").write_text(NAN_FOR_SEED_1)
    db = tmp_path / "offpoc.db"
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    args = ["td3", "nanlane:NanForSeed1-v0", *SMALL, "--eval-freq", "500", "--steps", "1M"]
    with stopped_after(db):
        offpoc(db, "run", *args, "--seeds", "0-1", "--lanes", "2", env=env)
        wait_for(lambda: _ended(db, 2), timeout=120, what="the poisoned lane's end, recorded while the other trains")
        poisoned = run_row(db, 2)
        assert poisoned["status"] == "failed" and "nan" in poisoned["error"], poisoned["error"]
        assert run_row(db, 1)["status"] == "running"
        wait_for(lambda: run_row(db, 1)["steps"] >= poisoned["steps"] + 500, what="the other lane's training")
        offpoc(db, "stop", "1")
        wait_for(lambda: _ended(db, 1), what="the other lane's stop")
        first = run_row(db, 1)
        assert first["status"] == "stopped" and first["pid"] == poisoned["pid"]


@pytest.mark.process
def test_a_stopped_group_resumes_as_one_worker(tmp_path: Path) -> None:
    """The issue's command, ``run ddpg Pendulum-v1 --correction geoff-pac --sampler per --compare --seeds 0-1
    --lanes 4``, trains one worker; ``offpoc stop --all`` stops every lane at one step (one signal to it);
    ``offpoc resume`` of its lanes re-forms one worker from their checkpoints, which trains each to its end with
    no record doubled or missing; ``offpoc jobs`` counts the group as one job."""
    db = tmp_path / "offpoc.db"
    lanes = (1, 2, 3, 4)
    with stopped_after(db):
        offpoc(db, "run", "ddpg", "Pendulum-v1", *SMALL, "--eval-freq", "500", "--correction", "geoff-pac",
               "--sampler", "per", "--compare", "--seeds", "0-1", "--steps", "3000", "--lanes", "4")  # fmt: skip
        wait_for(lambda: run_row(db, 1)["steps"] >= 800, what="the group's first updates")
        assert len({run_row(db, i)["pid"] for i in lanes}) == 1  # one worker
        offpoc(db, "stop", "--all")
        first = {i: run_row(db, i) for i in lanes}
        assert [r["status"] for r in first.values()] == ["stopped"] * 4
        assert len({r["checkpoint_step"] for r in first.values()}) == 1 and first[1]["checkpoint_step"] > 0
        said = offpoc(db, "resume", "1-4").stdout
        assert said.count("from its checkpoint at step") == 4, said
        wait_for(lambda: all(run_row(db, i)["status"] == "running" for i in lanes), what="the resumed group")
        pids = {run_row(db, i)["pid"] for i in lanes}
        assert len(pids) == 1 and first[1]["pid"] not in pids  # one new worker for all four
        assert "4 running (4 of them as lanes" in offpoc(db, "jobs").stdout
        wait_for(lambda: _ended(db, *lanes), what="the resumed group's end")
    for run_id in lanes:
        assert run_row(db, run_id)["status"] == "finished"
        steps = [int(r["step"]) for r in export(db, "evaluations") if r["run_id"] == str(run_id)]
        assert steps == list(range(0, 3001, 500))
    log, at = offpoc(db, "logs", "1").stdout, f"{first[1]['checkpoint_step']:,}"
    assert log.count("lane group of runs 1, 2, 3, 4\n") == 2, log  # the group, and the group again
    assert all(f"from offpoc.db-runs/{i}/checkpoint.pt at step {at}" in log for i in lanes), log


@pytest.mark.process
def test_a_killed_group_leaves_its_lanes_lost_and_resumable(tmp_path: Path) -> None:
    """kill -9 of a group's worker: every lane reads lost; resumed, each trains to its end (from its checkpoint
    where it has one), and none is counted twice."""
    db = tmp_path / "offpoc.db"
    offpoc(db, "run", *PENDULUM, "--seeds", "0-1", "--steps", "3000", "--lanes", "2", "--set", "checkpoint_every=1000")
    wait_for(lambda: run_row(db, 1)["checkpoint_step"] is not None, what="the group's first checkpoint")
    os.kill(run_row(db, 1)["pid"], signal.SIGKILL)
    wait_for(lambda: _ended(db, 1, 2), what="the lanes found lost")
    assert {run_row(db, i)["status"] for i in (1, 2)} == {"lost"}
    offpoc(db, "resume", "1")
    offpoc(db, "resume", "2")
    wait_for(lambda: _ended(db, 1, 2), what="the resumed lanes' ends")
    for run_id in (1, 2):
        assert run_row(db, run_id)["status"] == "finished"
        steps = [int(r["step"]) for r in export(db, "evaluations") if r["run_id"] == str(run_id)]
        assert steps == list(range(0, 3001, 500))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lanes", "0"], "error: --lanes must be at least 1"),
        (["--lanes", "2", "--set", "layer_norm=true"], "error: --lanes: td3: a lane group stacks Linear, ReLU"),
        (["--lanes", "2", "--correction", "acoffpoc", "--compare", "--decide"], "error: --lanes trains lane groups"),
    ],
)
def test_what_cannot_be_a_lane_is_refused_at_submission(tmp_path: Path, args: list[str], message: str) -> None:
    db = tmp_path / "offpoc.db"
    result = offpoc(db, "run", *PENDULUM, "--seeds", "0-1", *args, check=False)
    assert result.returncode == 2 and result.stderr.startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not db.exists()


@pytest.mark.process
def test_a_group_is_one_job_and_a_lone_remainder_is_no_lane(tmp_path: Path) -> None:
    """``offpoc jobs 2``: a running group of two lanes is one job, so a run queued after it takes the second;
    a third waits. The remainder of ``--seeds 0-2 --lanes 2`` is a run alone (no lane group)."""
    db = tmp_path / "offpoc.db"
    offpoc(db, "jobs", "2")
    with stopped_after(db):
        offpoc(db, "run", *PENDULUM, "--seeds", "0-1", "--steps", "1M", "--lanes", "2")
        wait_for(lambda: run_row(db, 2)["steps"] > 0, what="the group's training")
        offpoc(db, "run", *PENDULUM, "--seed", "2", "--steps", "1M")
        wait_for(lambda: run_row(db, 3)["steps"] > 0, timeout=60, what="the run beside the group")
        offpoc(db, "run", *PENDULUM, "--seed", "3", "--steps", "1M")
        time.sleep(2)  # the scheduler polls every 0.2 s: long enough to start it, were a job free
        assert [run_row(db, i)["status"] for i in (1, 2, 3, 4)] == ["running", "running", "running", "queued"]
        assert "3 running (2 of them as lanes: a lane group is one job), 1 queued" in offpoc(db, "jobs").stdout
        offpoc(db, "stop", "--all")
        wait_for(lambda: _ended(db, 1, 2, 3, 4), what="every run's stop")
    lone = tmp_path / "lone.db"
    offpoc(lone, "run", *PENDULUM, "--seeds", "0-2", "--steps", "600", "--lanes", "2", "--follow")
    assert [run_row(lone, i)["lane_group"] for i in (1, 2, 3)] == [1, 1, None]


@pytest.mark.process
def test_a_sweep_groups_what_can_be_a_lane_and_merges_keep_the_groups(tmp_path: Path) -> None:
    """``sweep --lanes 4``: TD3's none and acoffpoc runs share a group; ACE's likelihood-ratio form (its own actor
    loss, so the autograd engine: a setting the others do not share) a group of its own. Merged into
    another store in two passes, the lanes merged later join the group the first pass made there."""
    sweep = tmp_path / "s.toml"
    sweep.write_text(
        'name = "s"\nalgos = ["td3"]\nenvs = ["Pendulum-v1"]\nseeds = "0-1"\nsteps = 600\n'
        '[[methods]]\ncorrection = "none"\n[[methods]]\ncorrection = "acoffpoc"\n'
        '[[methods]]\ncorrection = "ace"\npg_form = "lr"\n'
        "[set]\nstart_steps = 300\neval_freq = 300\neval_episodes = 1\nhidden = [32, 32]\n"
    )
    db = tmp_path / "a.db"
    offpoc(db, "sweep", str(sweep), "--lanes", "4", "--follow")
    rows = runs(db)
    groups = {(r["correction"], r["seed"]): r["lane_group"] for r in rows.values()}
    first = min(i for i, r in rows.items() if r["correction"] != "ace")
    assert {k: v for k, v in groups.items() if k[0] != "ace"} == {
        (c, s): first for c in ("none", "acoffpoc") for s in (0, 1)
    }
    ace = [v for k, v in groups.items() if k[0] == "ace"]
    assert len(ace) == 2 and ace[0] == ace[1] not in (None, first)
    assert [r["status"] for r in rows.values()] == ["finished"] * 6
    lanes = sorted(i for i, r in rows.items() if r["lane_group"] is not None)
    store = sqlite3.connect(db)
    with store:
        store.execute("UPDATE runs SET status = 'stopped' WHERE id = ?", [lanes[-1]])
    merged = tmp_path / "b.db"
    offpoc(merged, "merge", str(db))
    with store:
        store.execute("UPDATE runs SET status = 'finished' WHERE id = ?", [lanes[-1]])
    store.close()
    offpoc(merged, "merge", str(db))
    here = [r["lane_group"] for r in runs(merged).values() if r["correction"] != "ace"]
    assert len(here) == 4 and len(set(here)) == 1 and here[0] is not None
