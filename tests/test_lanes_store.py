"""Lane groups through the real CLI, scheduler and worker: one process, and each lane a run of its own."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from store.runs import TERMINAL
from tests.processes import SMALL, export, offpoc, run_row, runs, wait_for

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


def test_a_stopped_lane_leaves_the_group_and_resumes_alone(tmp_path: Path) -> None:
    """``offpoc stop`` of one lane: it checkpoints and stops, its group trains on; resumed, it trains alone
    from its checkpoint to the end, and no step of its records is doubled or missing."""
    db = tmp_path / "offpoc.db"
    offpoc(db, "run", *PENDULUM, "--seeds", "0-2", "--steps", "6000", "--lanes", "3")
    wait_for(lambda: run_row(db, 2)["steps"] >= 1000, what="the group's first updates")
    offpoc(db, "stop", "2")
    wait_for(lambda: _ended(db, 2), what="the lane's stop")
    stopped = run_row(db, 2)
    assert stopped["status"] == "stopped" and stopped["checkpoint_step"] == stopped["steps"] > 0
    offpoc(db, "resume", "2")
    wait_for(lambda: _ended(db, 1, 2, 3), what="every run's end")
    rows = runs(db)
    assert [r["status"] for r in rows.values()] == ["finished"] * 3
    assert rows[2]["pid"] != rows[1]["pid"] == rows[3]["pid"]
    for run_id in (1, 3):  # trained on past the step the lane stopped at, in the group's process
        later = [r for r in export(db, "train") if r["run_id"] == str(run_id) and int(r["step"]) > stopped["steps"]]
        assert later
    steps = [int(r["step"]) for r in export(db, "evaluations") if r["run_id"] == "2"]
    assert steps == list(range(0, 6001, 500))


def test_a_lane_whose_values_turn_non_finite_fails_alone(tmp_path: Path) -> None:
    """NaN rewards in one lane's environment fail that lane with the reason; its group's other lanes finish."""
    (tmp_path / "nanlane.py").write_text(NAN_FOR_SEED_1)
    db = tmp_path / "offpoc.db"
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    args = ["td3", "nanlane:NanForSeed1-v0", *SMALL, "--eval-freq", "500", "--steps", "1500"]
    offpoc(db, "run", *args, "--seeds", "0-1", "--lanes", "2", env=env)
    wait_for(lambda: _ended(db, 1, 2), what="both lanes' ends")
    first, poisoned = run_row(db, 1), run_row(db, 2)
    assert poisoned["status"] == "failed" and "nan" in poisoned["error"], poisoned["error"]
    assert first["status"] == "finished" and first["steps"] == 1500
    assert first["pid"] == poisoned["pid"]


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
        (["--lanes", "2", "--correction", "ris-off-pac"], "error: --lanes: lanes take the corrections none and"),
        (["--lanes", "2", "--set", "sampler=per"], "error: --lanes: lanes sample uniformly, not with per"),
        (["--lanes", "2", "--set", "layer_norm=true"], "error: --lanes: lanes need the fast backend"),
    ],
)
def test_what_cannot_be_a_lane_is_refused_at_submission(tmp_path: Path, args: list[str], message: str) -> None:
    db = tmp_path / "offpoc.db"
    result = offpoc(db, "run", *PENDULUM, "--seeds", "0-1", *args, check=False)
    assert result.returncode == 2 and result.stderr.startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not db.exists()
