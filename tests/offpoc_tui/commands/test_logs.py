"""``offpoc logs``: a real worker's log, whole, its tail, followed to the run's end, and a failure's traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import open_store
from store.files import RunFiles
from tests.support.processes import gated_env, offpoc, read_until

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
    import subprocess
    import sys

    db = tmp_path / "l.db"
    env_id, gate = gated_env(tmp_path, after=700)  # the run waits, 700 env steps in, for the gate
    offpoc(db, "run", "td3", env_id, *FAST, env={"PYTHONPATH": str(tmp_path)})
    following = subprocess.Popen(
        [sys.executable, "-m", "offpoc_tui.cli", "logs", "1", "-f", "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
    )  # fmt: skip
    hint = "(the worker log holds a run's start, warnings, errors and end; its progress: offpoc follow 1)"
    seen = read_until(following, hint)  # said while the run is live (it is held)...
    gate.touch()
    rest, _ = following.communicate(timeout=120)  # ...and it returns when the run ends
    followed = seen + rest.decode()
    assert followed.count(hint) == 1  # a live run's log is a few lines: where its progress is, said once
    lines = [line for line in followed.splitlines() if line != hint]
    assert lines[0].startswith(f"run 1: td3 {env_id} none seed 0") and "finished at step 1500" in followed
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


def _run_folder(db: Path, run_id: int) -> Path:
    store = open_store(db)
    folder = RunFiles.of(store, db).run_dir(run_id)
    store.close()
    return folder


@pytest.mark.process
def test_a_hostile_log_is_refused_in_a_line_and_a_huge_one_read_in_bounded_memory(filled_store: Path) -> None:
    """Issue 69, item 9, with real processes: a FIFO as a run's log (it hung ``logs 1`` and ``logs 1 -f``), a link
    to ``/dev/zero`` (a MemoryError traceback), a link to another file and a symlinked run folder (it read
    through them) are each refused in one line, exit 1, at once; ``logs -n 5`` of a 200 MB log prints its last
    five lines in bounded memory (it read it all: 962 MB resident for 268 MB)."""
    import os
    import subprocess
    import sys

    db = filled_store
    folder = _run_folder(db, 1)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "worker.log"
    secret = db.parent / "secret.txt"
    secret.write_text("not a log of this store\n")
    for make, said in (
        (lambda: os.mkfifo(log), "worker.log is not a regular file: refused"),
        (lambda: log.symlink_to("/dev/zero"), "worker.log is a symlink: refused"),
        (lambda: log.symlink_to(secret), "worker.log is a symlink: refused"),
    ):
        make()
        for follow in ([], ["-f"]):
            refused = offpoc(db, "logs", "1", *follow, check=False)
            assert refused.returncode == 1 and said in refused.stderr, (said, follow, refused.stderr)
            assert len(refused.stderr.strip().splitlines()) == 1 and "not a log" not in refused.stdout
        log.unlink()
    other = _run_folder(db, 2)
    other.mkdir(parents=True, exist_ok=True)
    (other / "worker.log").write_text("run 2's log, in another folder\n")
    folder.rmdir()
    folder.symlink_to(other)
    linked = offpoc(db, "logs", "1", check=False)
    assert linked.returncode == 1 and "is not a folder of this store" in linked.stderr and not linked.stdout
    folder.unlink()
    folder.mkdir()

    with log.open("wb") as file:  # 200 MB of lines, then five known ones and a line still being written
        block = b"x" * 99 + b"\n"
        for _ in range(200):
            file.write(block * 10_000)
        file.write(b"".join(f"last {k}\n".encode() for k in range(5)) + b"being writ")
    code = (
        "import resource, subprocess, sys;"
        "r = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, repr(r.stdout))"
    )
    argv = [sys.executable, "-m", "offpoc_tui.cli", "logs", "1", "-n", "5", "--db", str(db)]
    measured = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120)
    status, peak_kib, printed = measured.stdout.split(" ", 2)
    assert status == "0" and eval(printed).splitlines() == [f"last {k}" for k in range(5)], measured
    assert int(peak_kib) < 200 * 1024, f"{int(peak_kib) / 1024:.0f} MiB resident for a 200 MB log"


def test_a_failures_view_says_where_it_was_raised_before_offpocs_own_frames(filled_store: Path) -> None:
    """Issue 69, item 7: a failed run's traceback opens with offpoc's own frames (lifecycle.py's ``conclude``),
    the environment's frame ~40 lines down. ``show`` and Detail say, under the error, the frame that raised it,
    and the paths leave out offpoc's folder and a library's path up to site-packages, so they fit a narrow
    pane."""
    from typer.testing import CliRunner

    from offpoc_tui.cli import app as cli
    from offpoc_tui.views import PROJECT

    site = "/usr/lib/python3/site-packages"
    traceback = "\n".join([
        "Traceback (most recent call last):",
        f'  File "{PROJECT}offpoc_tui/runtime/lifecycle.py", line 208, in conclude',
        "    raise end",
        f'  File "{site}/gymnasium/wrappers/common.py", line 125, in step',
        "    observation, reward, terminated, truncated, info = self.env.step(action)",
        '  File "/home/me/study/failing_envs.py", line 9, in step',
        '    raise RuntimeError("the simulator broke at its 701st step")',
        "RuntimeError: the simulator broke at its 701st step",
    ])  # fmt: skip
    store = open_store(filled_store)
    store.execute(
        "UPDATE runs SET status = 'failed', error = 'RuntimeError: the simulator broke at its 701st step',"
        " traceback = ? WHERE id = 1",
        [traceback],
    )
    store.conn.commit()
    store.close()
    shown = CliRunner().invoke(cli, ["show", "1", "--db", str(filled_store)], terminal_width=200).output
    lines = [line.strip(" │") for line in shown.splitlines()]
    at = lines.index("RuntimeError: the simulator broke at its 701st step")
    assert lines[at + 1] == "raised at /home/me/study/failing_envs.py:9, in step"
    assert 'File "offpoc_tui/runtime/lifecycle.py", line 208, in conclude' in shown and PROJECT not in shown
    assert 'File "…/site-packages/gymnasium/wrappers/common.py", line 125' in shown
    # What the run is, in rows: a panel's title is cut without a mark in a narrow pane (Detail at 80 columns).
    assert "trains               td3 on Hopper-v4, none, seed 0" in shown and "╭─ run 1 ─" in shown


def test_raised_at_is_the_last_exceptions_own_frame() -> None:
    """A chained traceback's earlier frames are not where the error shown was raised; a path may hold a quote;
    a last exception without frames has no "raised at"."""
    from offpoc_tui.views import innermost_frame

    chained = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in first',
        "KeyError: 'x'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/home/me/it\'s "here"/envs.py", line 9, in step',
        "RuntimeError: boom",
    ]
    assert innermost_frame(chained) == '/home/me/it\'s "here"/envs.py:9, in step'
    frameless = [*chained[:3], "", "During handling…", "", "Traceback (most recent call last):", "RuntimeError: b"]
    assert innermost_frame(frameless) is None
