"""``offpoc logs``: a real worker's log, whole, its tail, followed to the run's end, and a failure's traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import open_store
from store.files import RunFiles
from tests.support.processes import offpoc

FAST = ["--steps", "1500", "--set", "start_steps=500", "--set", "hidden=32,32", "--eval-freq", "500"]
FAILING_ENV = """
import gymnasium as gym
from gymnasium.envs.classic_control.pendulum import PendulumEnv


class Failing(PendulumEnv):
    steps = 0

    def step(self, action):
        Failing.steps += 1
        if Failing.steps > 700:
            raise RuntimeError("the simulator broke at its 701st step")
        return super().step(action)


gym.register(id="Failing-v0", entry_point=Failing, max_episode_steps=200)
"""


@pytest.mark.process
def test_logs_prints_follows_to_the_end_and_shows_a_failure(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    offpoc(db, "run", "td3", "Pendulum-v1", *FAST)
    followed = offpoc(db, "logs", "1", "-f")  # returns when the run ends
    lines = followed.stdout.splitlines()
    assert lines[0].startswith("run 1: td3 Pendulum-v1 none seed 0") and "finished at step 1500" in followed.stdout
    assert lines[-1] == "run 1 ended: finished"
    assert offpoc(db, "logs", "1", "--tail", "1").stdout.splitlines() == [lines[-2]]

    store = open_store(db)
    log = RunFiles.of(store, db).run_dir(1) / "worker.log"
    store.close()
    with log.open("a") as file:  # what a library printed: an escape shows, it never acts on the terminal
        file.write("\x1b[2Jcleared?\n")
    assert "\\x1b[2Jcleared?" in offpoc(db, "logs", "1").stdout

    (tmp_path / "failing_envs.py").write_text(FAILING_ENV)
    offpoc(db, "run", "td3", "failing_envs:Failing-v0", *FAST, env={"PYTHONPATH": str(tmp_path)})
    followed = offpoc(db, "logs", "2", "--follow")
    assert "RuntimeError: the simulator broke at its 701st step" in followed.stdout
    assert "Traceback (most recent call last)" in followed.stdout and followed.stdout.endswith("run 2 ended: failed\n")

    missing = offpoc(db, "logs", "7", check=False)
    assert missing.returncode == 2 and missing.stderr.startswith("error: no run 7") and missing.stdout == ""
