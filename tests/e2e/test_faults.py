"""Faults, races and hostile files, with real processes: nothing executed, nothing lost, nothing doubled.

Each test stages one fault the way it happens (a crafted file, a signal, a full disk, a killed command)
and checks what the store says afterwards. About three minutes in all on two cores.
"""

from __future__ import annotations

import hashlib
import os
import random
import resource
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from offpoc_tui import sweep as sweep_module
from offpoc_tui.sweep import load_sweep, queue_missing
from store import open_store
from store.files import RunFiles
from store.runs import TERMINAL, create_runs
from tests.support.processes import SMALL, Payload, export, offpoc, read_until, run_row, wait_for
from tests.support.storefill import spec

PENDULUM = ["td3", "Pendulum-v1", *SMALL]


def ended(db: Path, run_id: int) -> bool:
    return run_row(db, run_id)["status"] in TERMINAL


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


# ---- a checkpoint is data, never code -------------------------------------------------------
def test_a_checkpoint_that_would_run_code_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    offpoc(db, "run", *PENDULUM, "--steps", "600", "--set", "checkpoint_every=200", "--eval-freq", "200")
    wait_for(lambda: ended(db, 1), what="the run's end")
    store = open_store(db)
    store.execute("UPDATE runs SET status = 'stopped', checkpoint_step = 400, steps = 400 WHERE id = 1")
    store.conn.commit()
    marker = tmp_path / "pwned"
    checkpoint = RunFiles.of(store, db).run_dir(1) / "checkpoint.pt"
    torch.save({"format": 3, "owner": None, "config": {}, "x": Payload(marker)}, checkpoint)
    offpoc(db, "resume", "1")
    wait_for(lambda: ended(db, 1), what="the resumed run's end")
    row = run_row(db, 1)
    assert not marker.exists()
    assert row["status"] == "failed" and "holds more than plain data" in row["error"] and row["traceback"] is None
    assert [int(r["step"]) for r in export(db, "evaluations")] == [0, 200, 400, 600]  # records untouched


# ---- non-finite values end the run, saying so ---------------------------------------------------
NAN_ENV = """
import gymnasium as gym
from gymnasium.envs.classic_control.pendulum import PendulumEnv


class NanPendulum(PendulumEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, float("nan"), terminated, truncated, info


gym.register("NanPendulum-v0", entry_point=NanPendulum, max_episode_steps=200)
"""


@pytest.mark.process
def test_nan_rewards_fail_the_run_with_the_reason_and_nothing_vanishes(tmp_path: Path) -> None:
    (tmp_path / "nanenv.py").write_text(NAN_ENV)
    db = tmp_path / "offpoc.db"
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    offpoc(db, "run", "td3", "nanenv:NanPendulum-v0", *SMALL, "--steps", "1000", env=env)
    wait_for(lambda: ended(db, 1), what="the run's end")
    row = run_row(db, 1)
    assert row["status"] == "failed", row
    assert row["error"] == (
        "the evaluation return is nan at step 0: the environment returned a non-finite reward,"
        " or the policy a non-finite action"
    )
    assert "the evaluation return is nan" in offpoc(db, "show", "1").stdout
    assert export(db, "evaluations") == []  # no row half-written; the reason says why there is none


# ---- one owner per run (a stale worker: tests/e2e/test_resume_records.py) --------------------------------
@pytest.mark.process
def test_rm_refuses_a_run_that_started_while_it_asked(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    offpoc(db, "run", *PENDULUM, "--steps", "100000", "--jobs", "1")
    wait_for(lambda: run_row(db, 1)["status"] == "running", what="run 1 to start")
    offpoc(db, "run", *PENDULUM, "--steps", "100000", "--seed", "1")  # queued behind run 1: one job at a time
    asking = subprocess.Popen(
        [sys.executable, "-m", "offpoc_tui.cli", "rm", "2", "--db", str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
    )  # fmt: skip
    assert "delete run 2?" in read_until(asking, "[y/N]")  # it asks while run 2 is queued...
    offpoc(db, "stop", "1")  # ...and run 2 starts in the one job's place before the answer comes
    wait_for(lambda: run_row(db, 2)["status"] != "queued", what="run 2 to start")
    _, raw = asking.communicate(b"y\n", timeout=60)
    err = raw.decode()
    assert asking.returncode == 1 and "nothing deleted" in err and len(err.splitlines()) == 1, err
    assert run_row(db, 2)["status"] == "running"  # untouched: its worker trains on
    offpoc(db, "stop", "2")
    assert run_row(db, 2)["status"] == "stopped" and export(db, "evaluations", "--run", "2")


def test_two_sweeps_of_one_file_at_once_queue_the_grid_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "grid.toml"
    path.write_text('name = "grid"\nalgos = ["td3"]\nenvs = ["Pendulum-v1"]\nseeds = "0-2"\nsteps = 30000\n'
                    '[[methods]]\ncorrection = ["none", "acoffpoc"]\n')  # fmt: skip
    grid = load_sweep(path)
    db = tmp_path / "offpoc.db"
    open_store(db, create=True).close()
    slow = sweep_module.missing

    def missing_on_a_loaded_machine(*args: object) -> object:
        found = slow(*args)  # type: ignore[arg-type]
        time.sleep(0.5)  # between the check and the insert
        return found

    monkeypatch.setattr(sweep_module, "missing", missing_on_a_loaded_machine)
    queued: list[list[int]] = []

    def submit() -> None:
        store = open_store(db)
        queued.append(queue_missing(store, grid, None))
        store.close()

    threads = [threading.Thread(target=submit) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(len(ids) for ids in queued) == [0, 6]
    assert open_store(db).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 6


# ---- a full disk, a failed run, a sweep to finish -------------------------------------------------
def _file_size_limit(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.process
def test_a_full_disk_fails_the_run_with_the_reason_and_the_scheduler_serves_on(tmp_path: Path) -> None:
    """No file may grow past 1 MB (``RLIMIT_FSIZE``, as a full disk: writes fail with EFBIG): the
    checkpoint of 256-unit networks (about 3 MB) cannot be written; the store, small, still can."""
    db = tmp_path / "offpoc.db"
    offpoc(db, "run", *PENDULUM, "--steps", "600", "--eval-freq", "200", "--jobs", "1")  # the store exists
    wait_for(lambda: ended(db, 1), what="the first run's end")
    command = [sys.executable, "-m", "offpoc_tui.cli", "run", "td3", "Pendulum-v1", "--steps", "600", "--eval-freq",
               "200", "--seeds", "1-2", "--set", "checkpoint_every=200", "--set", "hidden=256,256", "--set",
               "start_steps=500", "--set", "eval_episodes=3", "--db", str(db)]  # fmt: skip
    subprocess.run(command, check=True, cwd=tmp_path, preexec_fn=lambda: _file_size_limit(1_000_000), timeout=120)
    wait_for(lambda: ended(db, 2) and ended(db, 3), what="both runs' end")
    for run_id in (2, 3):  # the scheduler survived the first failure and served the second run
        row = run_row(db, run_id)
        assert row["status"] == "failed", row
        assert "file size limit" in row["error"] or "no space left" in row["error"], row["error"]
        assert row["checkpoint_step"] is None  # never names a step its file does not hold
    assert not list((tmp_path / "offpoc.db-runs").glob("*/*.tmp"))

    log = tmp_path / "offpoc.db-runs" / "scheduler.log"  # the limited scheduler must not take the resumed run
    wait_for(lambda: log.read_text().count("scheduler done") == 2, timeout=90, what="the scheduler to leave")
    offpoc(db, "resume", "2")  # a failure from outside: resume carries on
    wait_for(lambda: ended(db, 2), what="the resumed run's end")
    assert run_row(db, 2)["status"] == "finished"
    assert [int(r["step"]) for r in export(db, "evaluations", "--run", "2")] == [0, 200, 400, 600]


@pytest.mark.process
def test_a_sweep_with_failed_runs_says_so_and_retry_finishes_it(tmp_path: Path) -> None:
    path = tmp_path / "grid.toml"
    path.write_text('name = "grid"\nalgos = ["td3"]\nenvs = ["Pendulum-v1"]\nseeds = "0-1"\nsteps = 600\n'
                    '[set]\nhidden = [64, 64]\nstart_steps = 300\neval_episodes = 2\n'
                    '[[methods]]\ncorrection = "none"\n')  # fmt: skip
    db = tmp_path / "offpoc.db"
    offpoc(db, "sweep", str(path))
    wait_for(lambda: ended(db, 1) and ended(db, 2), what="the sweep's end")
    store = open_store(db)
    store.execute("UPDATE runs SET status = 'failed', error = 'disk full' WHERE id = 2")
    store.conn.commit()
    again = offpoc(db, "sweep", str(path)).stdout
    assert "1 of its runs failed, were lost or stopped (id 2)" in again and "--retry" in again
    offpoc(db, "sweep", str(path), "--retry")
    wait_for(lambda: ended(db, 2), what="the retried run's end")
    assert run_row(db, 2)["status"] == "finished"


# ---- a scheduler that never started ------------------------------------------------------------
@pytest.mark.process
def test_runs_queued_by_a_killed_command_start_at_the_next_look(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    store = open_store(db, create=True)
    run = spec("td3", "none", env="Pendulum-v1")
    config = {**run.config, "total_steps": 600, "start_steps": 300, "hidden": [64, 64], "eval_episodes": 2}
    create_runs(store, [run.__class__(**{**run.__dict__, "config": config, "total_steps": 600})])
    store.close()  # the command was killed here, before it started a scheduler
    result = offpoc(db, "ps")
    assert "started the store's scheduler for 1 queued run" in result.stderr
    wait_for(lambda: ended(db, 1), what="the run's end")
    assert run_row(db, 1)["status"] == "finished"


# ---- resume is exact at episode boundaries -------------------------------------------------------
@pytest.mark.process
def test_resume_from_an_episode_boundary_is_the_uninterrupted_run(tmp_path: Path) -> None:
    """Pendulum's episodes are 200 steps, so every checkpoint (each 200 steps) is at a boundary."""
    args = [*PENDULUM, "--steps", "2000", "--eval-freq", "200", "--set", "checkpoint_every=200"]
    whole, broken = tmp_path / "whole.db", tmp_path / "broken.db"
    offpoc(whole, "run", *args)
    offpoc(broken, "run", *args)
    kill_at = random.Random(7).randrange(700, 1500)
    wait_for(lambda: run_row(broken, 1)["steps"] >= kill_at, what=f"step {kill_at}")
    os.kill(run_row(broken, 1)["pid"], signal.SIGKILL)
    wait_for(lambda: ended(broken, 1), timeout=90, what="lost")
    offpoc(broken, "resume", "1")
    wait_for(lambda: ended(whole, 1) and ended(broken, 1), what="both runs' end")
    assert run_row(broken, 1)["status"] == run_row(whole, 1)["status"] == "finished"

    def returns(db: Path) -> list[tuple[str, str]]:
        return [(r["step"], r["return_mean"]) for r in export(db, "evaluations")]

    assert returns(broken) == returns(whole)
    episodes = export(broken, "episodes")
    assert [r["episode"] for r in episodes] == [str(i) for i in range(10)]  # none repeated, none missing
    assert [(r["step"], r["return"]) for r in episodes] == [(r["step"], r["return"]) for r in export(whole, "episodes")]
    final = [
        torch.load(db.with_name(db.name + "-runs") / "1" / "checkpoint.pt", weights_only=True) for db in (whole, broken)
    ]
    for name, module in final[0]["modules"].items():
        for key, tensor in module.items():
            assert torch.equal(tensor, final[1]["modules"][name][key]), f"{name}.{key}"


# ---- files that are not ours ---------------------------------------------------------------------
def _foreign(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    return path


def _newer(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('app', 'offpoc')")
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    return path


@pytest.mark.parametrize("make", [_foreign, _newer, lambda p: (p.touch(), p)[1]], ids=["foreign", "newer", "empty"])
def test_a_file_that_is_not_an_offpoc_store_is_left_untouched(tmp_path: Path, make: object) -> None:
    path = make(tmp_path / "x.db")  # type: ignore[operator]
    before = md5(path)
    for command in (["ps"], ["show", "1"], ["export", "--table", "runs"], ["dashboard", "--once"],
                    ["run", "td3", "Pendulum-v1"] if path.stat().st_size else ["ps", "--all"]):  # fmt: skip
        result = offpoc(path, *command, check=False)
        assert result.returncode == 2 and result.stderr.startswith("error: "), (command, result.stderr)
        assert len(result.stderr.splitlines()) == 1, result.stderr
    assert md5(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]


@pytest.mark.process
def test_a_store_on_read_only_media_is_read(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    offpoc(db, "run", *PENDULUM, "--steps", "600", "--eval-freq", "200")
    wait_for(lambda: ended(db, 1), what="the run's end")
    open_store(db).execute("PRAGMA wal_checkpoint(TRUNCATE)")
    media = tmp_path / "media"
    media.mkdir()
    readonly = media / "offpoc.db"
    readonly.write_bytes(db.read_bytes())
    if os.geteuid() == 0:  # root writes anything it may: make the medium read-only for real
        if subprocess.run(["mount", "--bind", str(media), str(media)], capture_output=True).returncode != 0:
            pytest.skip("running as root where mount is not permitted: no read-only medium to test on")
        subprocess.run(["mount", "-o", "remount,bind,ro", str(media)], check=True)
    else:
        readonly.chmod(0o444)
        media.chmod(0o555)
    try:
        before = md5(readonly)
        assert "finished" in offpoc(readonly, "ps", "--all").stdout
        assert "td3-Pendulum-v1-none" in offpoc(readonly, "show", "1").stdout
        assert len(export(readonly, "evaluations")) == 4
        assert "td3-Pendulum-v1-none" in offpoc(readonly, "dashboard", "--once").stdout
        refused = offpoc(readonly, "run", *PENDULUM, check=False)
        assert refused.returncode == 2 and "not writable" in refused.stderr
        assert md5(readonly) == before
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(media)], check=True)
        else:
            media.chmod(0o755)


# ---- names are shown, never interpreted --------------------------------------------------------
def test_names_are_literal_everywhere_and_control_characters_are_refused(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    for name in ("[/oops]", "[link=http://evil]y"):
        offpoc(db, "run", *PENDULUM, "--steps", "600", "--name", name)
    refused = offpoc(db, "run", *PENDULUM, "--name", "a\x1b]0;pwned\x07", check=False)
    assert refused.returncode == 2 and "control characters: a\\x1b]0;pwned\\x07" in refused.stderr
    store = open_store(db)  # a name from elsewhere (an older offpoc, an import) holding an escape
    store.execute("UPDATE runs SET name = ? WHERE id = 2", ["\x1b[31m[link=http://evil]y"])
    store.conn.commit()
    for command in (["ps", "--all"], ["show", "1"], ["show", "2"], ["dashboard", "--once"]):
        shown = offpoc(db, *command).stdout
        assert "\x1b" not in shown, command
    assert "[/oops]" in offpoc(db, "ps", "--all").stdout
    assert "\\x1b[31m[link=http://evil]y" in offpoc(db, "show", "2").stdout


# ---- bad input: one line, exit 2, nothing written ------------------------------------------------
BAD_INPUT = [
    (["run", "td3", "Pendulum-v1", "--seed", str(2**63)], "out of range"),
    (["run", "td3", "Pendulum-v1", "--seeds", f"0,{2**63}"], "out of range"),
    (["run", "td3", "Pendulum-v1", "--steps", str(10**20)], "--steps"),
    (["run", "td3", "Pendulum-v1", "--set", "total_steps=1e20"], "out of range"),
    (["run", "td3", "Pendulum-v1", "--set", "device=banana"], "not one offpoc trains on"),
    (["run", "td3", "Pendulum-v1", "--name", "a\udcff"], "not valid UTF-8"),
    (["export", "--table", "runs", "-o", "/nonexistent/x.csv"], "cannot write"),
    (["export", "--table", "runs", "-o", "/proc/x.csv"], "cannot write"),
    (["plot", "-o", "/proc/x.png"], "cannot write"),
    (["import", "zoo", "x.npz", "--seed", str(10**20)], "--seed"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUT, ids=[" ".join(a)[:40] for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, request: pytest.FixtureRequest, args: list[str], message: str
) -> None:
    db = tmp_path / "offpoc.db"
    if args[0] in ("export", "plot", "import"):  # a store of finished runs, filled through the real writer
        assert request.getfixturevalue("filled_store") == db and not (tmp_path / "offpoc.db-wal").exists()
    before = sorted(p.name for p in tmp_path.iterdir())
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:surrogateescape"}
    command = [sys.executable, "-m", "offpoc_tui.cli", *args, "--db", str(db)]
    result = subprocess.run(command, capture_output=True, cwd=tmp_path, timeout=120, env=env)
    stderr = result.stderr.decode(errors="replace")
    assert result.returncode == 2, stderr
    assert stderr.startswith("error: ") and message in stderr and len(stderr.splitlines()) == 1, stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_cuda_device_without_a_gpu_is_refused_at_submission(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = offpoc(tmp_path / "offpoc.db", "run", "td3", "Pendulum-v1", "--set", "device=cuda", check=False)
    assert result.returncode == 2 and "no CUDA GPU on this machine" in result.stderr
    assert not (tmp_path / "offpoc.db").exists()


def test_an_imported_file_whose_seed_is_out_of_range_is_skipped_and_the_rest_imported(tmp_path: Path) -> None:
    import numpy as np

    folder = tmp_path / "Learning Curves" / "TD3" / "Hopper-v2"
    folder.mkdir(parents=True)
    np.save(folder / "TD3_Hopper-v2_0.npy", np.linspace(0, 3000, 201))
    np.save(folder / "TD3_Hopper-v2_99999999999999999999.npy", np.linspace(0, 3000, 201))
    result = offpoc(tmp_path / "offpoc.db", "import", "reference", str(tmp_path), check=False)
    assert result.returncode == 1 and "imported 1 run, skipped 1 file" in result.stdout
    assert "seed 99999999999999999999 is out of range" in result.stderr
