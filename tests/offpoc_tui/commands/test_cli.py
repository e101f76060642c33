"""The offpoc CLI in-process (Typer's CliRunner): every command, and the bad-input matrix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from offpoc_tui.cli import app
from store import open_store
from store.runs import claim, finish
from tests.support.processes import offpoc, run_row

runner = CliRunner()


def invoke(*args: str, input: str | None = None) -> Result:
    return runner.invoke(app, list(args), input=input)


def one_line_error(result: Result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    return lines[0]


# ---- bad input: exit 2, one line, nothing written ----------------------------------------------
BAD_RUNS = [
    (["run", "foo", "Hopper-v4"], "unknown algorithm"),
    (["run", "td3", "NoSuchEnv-v0"], "unknown environment"),
    (["run", "td3", "Hopper-v4", "--correction", "bogus"], "unknown correction"),
    (["run", "td3", "CartPole-v1"], "Discrete action space"),
    (["run", "td3", "Hopper-v4", "--steps", "0"], "total_steps must be at least 1"),
    (["run", "td3", "Hopper-v4", "--steps", "-5"], "total_steps must be at least 1"),
    (["run", "td3", "Hopper-v4", "--steps", "many"], "Invalid value for '--steps'"),
    (["run", "td3", "Hopper-v4", "--seeds", "a-b"], "--seeds takes ranges"),
    (["run", "td3", "Hopper-v4", "--seeds", "4-1"], "runs backwards"),
    (["run", "td3", "Hopper-v4", "--seed", "1", "--seeds", "0-2"], "not both"),
    (["run", "td3", "Hopper-v4", "--set", "batch_size"], "--set takes KEY=VALUE"),
    (["run", "td3", "Hopper-v4", "--set", "nokey=1"], "unknown config field 'nokey'"),
    (["run", "td3", "Hopper-v4", "--set", "batch_size=abc"], "batch_size expects int"),
    (["run", "td3", "Hopper-v4", "--set", "gamma=2"], "gamma must be in [0, 1]"),
    (
        ["run", "td3", "Hopper-v4", "--correction", "acoffpoc", "--divergence", "hellinger"],
        "error: divergence must be one of jsd, symkl, kl, got 'hellinger'",  # its flat name, as --set spells it
    ),
    (
        ["run", "td3", "Hopper-v4", "--divergence", "kl"],
        "divergence is an option of acoffpoc: this run is td3 with correction none",
    ),
    (["run", "td3", "Hopper-v4", "--compare"], "--compare launches the baseline"),
    (["run", "td3", "Hopper-v4", "--jobs", "0"], "--jobs must be from 1 to 4,096, got 0"),
    (["run", "td3", "Hopper-v4", "--jobs", "99999999999999"], "--jobs must be from 1 to 4,096"),
    (["jobs", "99999999999999999999"], "jobs must be from 1 to 4,096"),
    (["run", "td3", "Hopper-v4", "--steps", "10", "--set", "total_steps=20"], "given both as a flag and with --set"),
    (["run", "td3"], "Missing argument 'ENV'"),
    (["run", "td3", "Hopper-v4", "--bogus-flag"], "No such option"),
    (["run", "td3", "Hopper-v4", "--correction", "ris-off-pac", "--set", "ris_beta=2"], "ris_beta must be in (0, 1)"),
    (["run", "sac", "Hopper-v4", "--correction", "ipg", "--set", "ipg_nu=0.5"], "only ν = 1"),
    (
        ["run", "td3", "Hopper-v4", "--correction", "ace", "--set", "pg_form=lr", "--set", "backend=fast"],
        "writes its own actor loss",
    ),
    (
        ["run", "sac", "Hopper-v4", "--correction", "acoffpoc", "--steps", "3000", "--set", "start_steps=1000"],
        "acoffpoc would start at step 5,000, after the run's last step (3,000)",
    ),
    (["run", "td3", "Hopper-v4", "--correction", "ace", "--divergence", "kl"], "divergence is an option of acoffpoc"),
    (
        ["run", "td3", "Hopper-v4", "--correction", "ris-off-pac", "--ref-std", "0.2"],
        "ref_std is an option of acoffpoc: this run is td3 with correction ris-off-pac",
    ),
    (["run", "td3", "Hopper-v4", "--correction", "ris-off-pac", "--set", "ref_std=0.2"], "ref_std is an option of"),
    (["run", "sac", "Hopper-v4", "--set", "policy_delay=2"], "policy_delay is an option of td3: this run is sac"),
]


@pytest.mark.parametrize(("args", "message"), BAD_RUNS, ids=[" ".join(a[1:]) for a, _ in BAD_RUNS])
def test_bad_run_input_exits_2_with_one_line_and_writes_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    db = tmp_path / "offpoc.db"
    result = invoke(*args, "--db", str(db))
    assert result.exit_code == 2, result.output
    assert message in one_line_error(result)
    assert list(tmp_path.iterdir()) == []  # no store, no run files


def test_bad_input_leaves_an_existing_store_unchanged(filled_store: Path) -> None:
    before = filled_store.read_bytes()
    result = invoke("run", "td3", "Hopper-v4", "--set", "nope=1", "--db", str(filled_store))
    assert result.exit_code == 2
    assert filled_store.read_bytes() == before


def test_corrupt_store_is_a_one_line_error(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    db.write_bytes(b"not sqlite" * 100)
    for args in (["run", "td3", "Hopper-v4"], ["ps"], ["show", "1"], ["export"]):
        result = invoke(*args, "--db", str(db))
        assert result.exit_code == 2, (args, result.output)
        assert "not an SQLite database" in one_line_error(result)
    assert db.read_bytes() == b"not sqlite" * 100


def test_unwritable_store_directory(tmp_path: Path) -> None:
    result = invoke("run", "td3", "Hopper-v4", "--db", str(tmp_path / "missing" / "offpoc.db"))
    assert result.exit_code == 2 and "does not exist" in one_line_error(result)
    if os.geteuid() == 0:
        return  # root writes anywhere: the permission case cannot be exercised
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    result = invoke("run", "td3", "Hopper-v4", "--db", str(locked / "offpoc.db"))
    assert result.exit_code == 2 and "not writable" in one_line_error(result)


# ---- ps / show -------------------------------------------------------------------------------
def test_ps_json_lists_runs_with_the_contract_keys(filled_store: Path) -> None:
    result = invoke("ps", "--json", "--all", "--db", str(filled_store))
    assert result.exit_code == 0
    runs = json.loads(result.stdout)
    keys = {"id", "name", "algo", "env", "correction", "divergence", "seed", "status", "steps", "total_steps", "sps"}
    assert [r["id"] for r in runs] == [1, 2, 3]
    assert keys | {"last_return", "pid"} <= set(runs[0])
    assert runs[1]["last_return"] == pytest.approx(302.0) and runs[1]["status"] == "finished"
    assert json.loads(invoke("ps", "--json", "--db", str(filled_store)).stdout) == []  # none active


def test_ps_table_and_hint(filled_store: Path) -> None:
    result = invoke("ps", "--db", str(filled_store))
    assert result.exit_code == 0 and "not shown: 3 finished (offpoc ps --all)" in result.stdout
    table = invoke("ps", "--all", "--db", str(filled_store)).stdout
    assert "finished" in table and "acoffpoc" in table and "Hopper-v4" in table
    db = open_store(filled_store)  # a stopped run can resume: ps shows it, and says what it leaves out
    db.execute("UPDATE runs SET status = 'stopped' WHERE id = 2")
    db.conn.commit()
    db.close()
    shown = invoke("ps", "--db", str(filled_store)).stdout
    assert "stopped" in shown and "not shown: 2 finished (offpoc ps --all)" in shown


def test_ps_without_a_store(tmp_path: Path) -> None:
    result = invoke("ps", "--json", "--db", str(tmp_path / "none.db"))
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    assert not (tmp_path / "none.db").exists()


def test_show_prints_config_and_summary(filled_store: Path) -> None:
    result = invoke("show", "2", "--db", str(filled_store))
    assert result.exit_code == 0
    assert "total_steps" in result.stdout and "finished" in result.stdout and "4 (steps 0–3,000)" in result.stdout
    detail = json.loads(invoke("show", "3", "--json", "--db", str(filled_store)).stdout)
    assert detail["config"]["algo"] == "sac" and detail["counts"]["quantities"] == 2500
    assert detail["files"] == str(filled_store.resolve().parent / "offpoc.db-runs" / "3")  # its checkpoint and log
    store = open_store(filled_store)
    store.execute("UPDATE runs SET wall_time = 4.2, sps = 695.0 WHERE id = 2")  # a run shorter than the rate's window
    store.conn.commit()
    store.close()
    assert "695 steps/s over all its 4 s of training" in invoke("show", "2", "--db", str(filled_store)).stdout


def test_show_failed_run_has_its_traceback(filled_store: Path) -> None:
    db = open_store(filled_store)
    db.execute("UPDATE runs SET status = 'running' WHERE id = 1")
    db.conn.commit()
    finish(db, 1, "failed", error="RuntimeError: boom", traceback="Traceback (most recent call last):\n  boom")
    result = invoke("show", "1", "--db", str(filled_store))
    assert "RuntimeError: boom" in result.stdout and "most recent call last" in result.stdout
    assert "─ failed ─" in result.stdout
    db.execute("UPDATE runs SET status = 'running' WHERE id = 2")
    db.conn.commit()
    finish(db, 2, "lost", error="worker killed by signal 9")  # as the scheduler settles a killed worker
    shown = invoke("show", "2", "--db", str(filled_store)).stdout
    assert "─ lost ─" in shown and "─ failed ─" not in shown  # the panel says how the run ended, not "failed"


@pytest.mark.parametrize("args", [["show", "42"], ["show", "td3-Hopper-v4-none-x"], ["rm", "42", "--yes"]])
def test_unknown_runs_are_usage_errors(filled_store: Path, args: list[str]) -> None:
    result = invoke(*args, "--db", str(filled_store))
    assert result.exit_code == 2 and "no run" in one_line_error(result)


# ---- export ----------------------------------------------------------------------------------
def test_export_csv_to_stdout_and_file(filled_store: Path, tmp_path: Path) -> None:
    result = invoke("export", "--correction", "acoffpoc", "--db", str(filled_store))
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and lines[0].startswith("run_id,name,algo,env,correction,divergence,sampler,seed,step")
    assert len(lines) == 1 + 2 * 4 and all(line.split(",")[4] == "acoffpoc" for line in lines[1:])
    target = tmp_path / "quantities.json"
    result = invoke("export", "--table", "quantities", "--format", "json", "--run", "2", "-o", str(target),
                    "--db", str(filled_store))  # fmt: skip
    assert result.exit_code == 0 and "wrote 2,500 rows" in result.stderr
    data = json.loads(target.read_text())
    assert len(data) == 2500 and {"quantity", "update", "step", "value"} <= set(data[0])
    assert data[0]["quantity"] == "lambda"
    alias = invoke("export", "--table", "weights", "--format", "json", "--run", "2", "--db", str(filled_store))
    assert alias.exit_code == 0 and json.loads(alias.stdout) == data  # the table's name before: still read


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--table", "nope"], "unknown table"), (["--format", "xml"], "unknown format"), (["--run", "9"], "no run")],
)
def test_export_bad_input(filled_store: Path, args: list[str], message: str) -> None:
    result = invoke("export", *args, "--db", str(filled_store))
    assert result.exit_code == 2 and message in one_line_error(result)


# ---- stop / resume / rm ----------------------------------------------------------------------
def test_stop_a_queued_run_and_usage(filled_store: Path) -> None:
    db = open_store(filled_store)
    db.execute("UPDATE runs SET status = 'queued' WHERE id = 1")
    db.conn.commit()
    result = invoke("stop", "1", "--db", str(filled_store))
    assert result.exit_code == 0 and "stopped before it started" in result.stdout
    assert invoke("ps", "--json", "--all", "--db", str(filled_store)).stdout.count('"stopped"') == 1
    assert invoke("stop", "--db", str(filled_store)).exit_code == 2
    assert "already finished" in invoke("stop", "2", "--db", str(filled_store)).stdout


def test_resume_refuses_finished_runs(filled_store: Path) -> None:
    result = invoke("resume", "2", "--db", str(filled_store))
    assert result.exit_code == 2 and "only stopped, lost or failed runs resume" in one_line_error(result)


def test_rm_asks_then_deletes(filled_store: Path) -> None:
    result = invoke("rm", "1", "--db", str(filled_store), input="n\n")
    assert result.exit_code == 1 and "nothing deleted" in result.stdout
    result = invoke("rm", "1", "td3-Hopper-v4-acoffpoc", "--db", str(filled_store), input="y\n")
    assert result.exit_code == 0 and "deleted 2 runs" in result.stdout
    remaining = json.loads(invoke("ps", "--json", "--all", "--db", str(filled_store)).stdout)
    assert [r["id"] for r in remaining] == [3]


def test_rm_refuses_a_running_run(filled_store: Path) -> None:
    db = open_store(filled_store)
    db.execute("UPDATE runs SET status = 'queued' WHERE id = 3")
    db.conn.commit()
    assert claim(db, 3, os.getpid())  # this test process plays the live worker
    result = invoke("rm", "3", "--yes", "--db", str(filled_store))
    assert result.exit_code == 2 and "stop it first" in one_line_error(result)


@pytest.mark.parametrize(
    "command",
    [["dashboard", "--once"], ["export", "--table", "runs", "--format", "csv"]],
    ids=["dashboard-once", "export-runs"],
)
def test_a_run_whose_worker_died_is_shown_lost_not_training(filled_store: Path, command: list[str]) -> None:
    """Every reader that shows a run's status says a dead worker's run is lost, as `ps` does: `dashboard --once`
    and `export --table runs` showed it "running" with the dead worker's pid, a crashed study read as training."""
    import socket

    store = open_store(filled_store)
    store.execute(
        "UPDATE runs SET status = 'running', pid = ?, host = ? WHERE id = 1", [_dead_pid(), socket.gethostname()]
    )
    store.conn.commit()
    store.close()
    shown = offpoc(filled_store, *command).stdout
    assert "running" not in shown and "lost" in shown
    assert run_row(filled_store, 1)["status"] == "lost"


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_an_export_that_matches_no_run_says_so(filled_store: Path) -> None:
    """`--algo bogus` printed a header alone, exit 0, as a table of runs with no data would: a note says why."""
    result = offpoc(filled_store, "export", "--algo", "bogus")
    assert result.stdout.count("\n") == 1 and "no runs match these filters" in result.stderr
    assert "no runs match" not in offpoc(filled_store, "export", "--algo", "td3").stderr


def test_a_filter_no_run_passes_is_not_called_an_empty_store(filled_store: Path) -> None:
    """`dashboard --once --tag nosuch` said "no runs in this store yet" of a store with runs."""
    shown = offpoc(filled_store, "dashboard", "--once", "--tag", "nosuch").stdout
    assert "no runs match --tag nosuch" in shown and "no runs in this store yet" not in shown
