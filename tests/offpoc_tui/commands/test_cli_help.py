"""A command line that explains itself: help, defaults, the config fields, values people type, runnable hints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agents.config import TrainConfig, field_names
from agents.config_text import field_docs, parse_count
from offpoc_tui.cli import app
from offpoc_tui.params import reads_as_ids, run_refs
from store import open_store
from tests.conftest import REFERENCE_CURVES, needs_reference
from tests.support.processes import offpoc

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), prog_name="offpoc")
    return result.exit_code, result.stdout, result.stderr


def test_bare_offpoc_and_h_print_help_and_version_prints_the_version() -> None:
    bare = subprocess.run([sys.executable, "-m", "offpoc_tui.cli"], capture_output=True, text=True)
    assert bare.returncode == 0 and "Usage: offpoc" in bare.stdout and "error" not in bare.stderr
    code, stdout, _ = invoke("-h")
    assert code == 0 and "Usage: offpoc" in stdout and "config" in stdout
    code, stdout, _ = invoke("run", "-h")
    assert code == 0 and "[default: 1,000,000]" in stdout and "--set KEY=VALUE" in stdout
    code, stdout, _ = invoke("--version")
    assert code == 0 and stdout.startswith("offpoc ")


def test_the_run_help_states_the_configs_own_defaults() -> None:
    """The defaults written in --help are TrainConfig's (the help is read without importing torch)."""
    _, stdout, _ = invoke("run", "-h")
    text = " ".join(stdout.split())
    defaults = TrainConfig()
    for flag, field in (("--steps", "total_steps"), ("--eval-freq", "eval_freq"), ("--eval-episodes", "eval_episodes"),
                        ("--batch-size", "batch_size"), ("--buffer-size", "buffer_size")):  # fmt: skip
        after = text[text.index(flag + " ") :]
        assert f"[default: {getattr(defaults, field):,}]" in after[: after.index("--", 3)], flag
    assert "module:Env-v0, a module in this folder" in text  # issue 69, item 14: custom envs are said


def test_offpoc_config_lists_every_field_with_its_default_type_and_meaning() -> None:
    assert set(field_names()) <= set(field_docs())  # every field has its one-line meaning
    code, stdout, _ = invoke("config", "--json")
    fields = {f["field"]: f for f in json.loads(stdout)}
    assert code == 0 and set(fields) == set(field_names()) - {"algo", "env_id", "correction"}
    assert fields["total_steps"] == {"field": "total_steps", "default": 1_000_000, "type": "int",
                                     "meaning": "Environment steps to train for.",
                                     "applies_to": "every run"}  # fmt: skip
    assert fields["pg_form"]["applies_to"] == "ace, geoff-pac" and fields["ris_beta"]["default"] == 0.2
    assert fields["start_steps"]["default"] is None  # the algorithm's
    _, stdout, _ = invoke("config", "--json", "td3")
    assert {f["field"]: f["default"] for f in json.loads(stdout)}["start_steps"] == 25_000
    code, stdout, _ = invoke("config", "sac")
    assert code == 0 and "start_steps" in stdout and "10000" in stdout
    # the plug-ins, with their options, from the registry
    listing = {line.split()[0]: line for line in stdout.splitlines() if line.strip()}
    assert (
        "ris_beta, ris_apply_to, ris_ratio, ris_weighting" in listing["ris-off-pac"] and "per_alpha" in listing["per"]
    )
    code, _, stderr = invoke("config", "ppo")
    assert code == 2 and stderr.strip() == "error: unknown algorithm 'ppo': choose one of ddpg, td3, sac"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1000000", 1_000_000),
        ("1_000_000", 1_000_000),
        ("1e6", 1_000_000),
        ("1M", 1_000_000),
        ("250k", 250_000),
        ("1.5M", 1_500_000),
        ("0", 0),
    ],
)
def test_counts_are_written_as_people_write_them(text: str, value: int) -> None:
    assert parse_count(text) == value


@pytest.mark.parametrize(
    "text", ["1.5", "1e20", "ten", "1.5k3", "", "10**20", "1e99999999999", "1e-99999999999", "-1e99999999999M"]
)
def test_a_count_that_is_not_a_whole_number_in_range_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_count(text)


def test_run_lists_and_ranges() -> None:
    assert run_refs(["1,2", "5-7", "exp", "3"]) == [1, 2, (5, 7), "exp", 3]
    assert run_refs(["my-run", "²", "²-3", "１"]) == ["my-run", "²", "²-3", "１"]  # only ASCII digits are ids
    with pytest.raises(ValueError, match="runs backwards"):
        run_refs(["7-5"])
    assert all(reads_as_ids(name) for name in ("3", "1-3", "a,b", "007"))
    assert not any(reads_as_ids(name) for name in ("my-run", "3a", "1-3-5", "²", "v1.2"))


def test_set_finds_the_field_meant_and_takes_brackets(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    code, _, stderr = invoke("run", "td3", "Hopper-v4", "--set", "start_step=100", "--db", str(db))
    assert code == 2 and "unknown config field 'start_step' (did you mean start_steps?)" in stderr
    assert "`offpoc config` lists every field" in stderr and not db.exists()
    args = ["--set", "start_steps=500", "--steps", "3e3", "--db", str(db)]
    for hidden in ("[64,64]", "64,64", "(64, 64)"):
        code, _, stderr = invoke("run", "td3", "Hopper-v4", "--set", f"hidden={hidden}", *args)
        assert code == 0, stderr
    runs = json.loads(invoke("ps", "--json", "--all", "--db", str(db))[1])
    assert {r["total_steps"] for r in runs} == {3000}
    store = open_store(db)
    assert {json.loads(c)["hidden"] == [64, 64] for (c,) in store.execute("SELECT config FROM runs")} == {True}
    store.close()
    invoke("stop", "--all", "--db", str(db))


def test_a_run_that_would_only_play_randomly_is_said(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    code, stdout, _ = invoke("run", "td3", "Hopper-v4", "--steps", "2000", "--set", "start_steps=5000", "--db", str(db))
    assert code == 0 and "note: start_steps 5,000 is not below the run's 2,000 steps: it would only play" in stdout
    code, stdout, _ = invoke("run", "td3", "Hopper-v4", "--steps", "2000", "--db", str(db))  # TD3's default: 25k
    assert code == 0 and "note: td3's default start_steps 25,000 is not below the run's 2,000 steps" in stdout
    code, stdout, _ = invoke("run", "td3", "Hopper-v4", "--steps", "30000", "--db", str(db))
    assert code == 0 and "note:" not in stdout
    invoke("stop", "--all", "--db", str(db))


def test_the_printed_hints_run_as_printed(tmp_path: Path) -> None:
    db = tmp_path / "exp.db"
    code, stdout, _ = invoke("run", "td3", "Hopper-v4", "--seeds", "0-3", "--steps", "3000", "--set",
                             "start_steps=500", "--db", str(db))  # fmt: skip
    hint = next(line for line in stdout.splitlines() if line.startswith("watch: "))
    assert f"offpoc follow 1-4 --db {db}" in hint and f"offpoc show 1 --db {db}" in hint
    invoke("stop", "--all", "--db", str(db))
    follow = hint.split("  ·  ")[0].removeprefix("watch: ").split()[1:]
    code, stdout, _ = invoke(*follow)  # as printed: the ids as a range, the store named
    assert code == 0 and "done: 4 stopped" in stdout
    assert invoke("follow", "1,2", "3-4", "--db", str(db))[0] == 0


def test_a_name_of_many_runs_says_how_many_and_how_to_pick(filled_store: Path) -> None:
    code, _, stderr = invoke("show", "td3-Hopper-v4-acoffpoc", "--db", str(filled_store))
    assert code == 0 or "names" not in stderr
    store = open_store(filled_store)
    store.execute("UPDATE runs SET name = 'study'")
    store.conn.commit()
    store.close()
    code, _, stderr = invoke("show", "study", "--db", str(filled_store))
    assert code == 2 and stderr.strip() == (
        "error: 'study' names 3 runs (ids 1 2 3): pass one id, e.g. 1 (offpoc ps --all lists all)"
    )


@needs_reference
def test_import_reference_takes_one_file(tmp_path: Path) -> None:
    file = REFERENCE_CURVES / "Learning Curves" / "TD3" / "Hopper-v2" / "TD3_Hopper-v2_3.npy"
    db = tmp_path / "one.db"
    code, stdout, _ = invoke("import", "reference", str(file), "--db", str(db))
    assert code == 0 and "imported 1 run" in stdout
    runs = json.loads(invoke("ps", "--json", "--all", "--db", str(db))[1])
    assert [(r["algo"], r["env"], r["correction"], r["seed"]) for r in runs] == [("td3", "Hopper-v2", "none", 3)]


def test_export_writes_a_runs_config_as_an_object(filled_store: Path) -> None:
    code, stdout, _ = invoke("export", "--table", "runs", "--format", "json", "--db", str(filled_store))
    rows = json.loads(stdout)
    assert code == 0 and isinstance(rows[0]["config"], dict) and rows[0]["config"]["correction"] == "none"


def test_a_users_own_environment_module_trains(tmp_path: Path) -> None:
    """gymnasium's ``module:Env-v0``: the module is imported (it registers the id) in the CLI and the worker."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "my_envs.py").write_text(
        "import gymnasium as gym\n"
        "gym.register(id='ShortPendulum-v0', entry_point='gymnasium.envs.classic_control.pendulum:PendulumEnv',"
        " max_episode_steps=50)\n"
    )
    db = tmp_path / "u.db"
    env = {"PYTHONPATH": str(tmp_path / "mine")}
    offpoc(db, "run", "td3", "my_envs:ShortPendulum-v0", "--steps", "600", "--eval-freq", "300", "--set",
           "start_steps=200", "--set", "eval_episodes=1", "--set", "hidden=32,32", "--follow", env=env)  # fmt: skip
    store = open_store(db)
    assert store.execute("SELECT status, env FROM runs").fetchone() == ("finished", "my_envs:ShortPendulum-v0")
    store.close()
    code, _, stderr = invoke("run", "td3", "no_such_module:X-v0", "--db", str(db))
    assert code == 2 and "cannot import 'no_such_module' for environment 'X-v0'" in stderr
    (tmp_path / "mine" / "exits.py").write_text("import sys\nsys.exit(3)\n")  # a module that exits: said, exit 2
    result = offpoc(db, "run", "td3", "exits:X-v0", check=False, env=env)
    assert (result.returncode, result.stderr) == (
        2,
        "error: cannot import 'exits' for environment 'X-v0': it called sys.exit(3)\n",
    )


def test_an_environment_module_in_the_current_folder_trains(tmp_path: Path) -> None:
    """``offpoc run td3 here_envs:X-v0`` from the folder holding ``here_envs.py``, as ``python -m`` would find it,
    and with ``PYTHONPATH=.``: the worker, which runs in the run's own folder, imports it from that folder."""
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "here_envs.py").write_text(
        "import gymnasium as gym\n"
        "gym.register(id='HerePendulum-v0', entry_point='gymnasium.envs.classic_control.pendulum:PendulumEnv',"
        " max_episode_steps=50)\n"
    )
    db = tmp_path / "stores" / "u.db"
    db.parent.mkdir()
    args = ["--steps", "400", "--eval-freq", "200", "--set", "start_steps=200", "--set", "eval_episodes=1",
            "--set", "hidden=32,32"]  # fmt: skip
    env = {"PYTHONPATH": ""}
    offpoc(db, "run", "td3", "here_envs:HerePendulum-v0", *args, "--follow", cwd=tmp_path / "project", env=env)
    offpoc(db, "run", "td3", "here_envs:HerePendulum-v0", *args, "--seed", "1", "--follow", cwd=tmp_path / "project",
           env={"PYTHONPATH": "."})  # fmt: skip
    store = open_store(db)
    rows = store.execute("SELECT status, env_path FROM runs ORDER BY id").fetchall()
    store.close()
    assert rows == [("finished", str((tmp_path / "project").resolve()))] * 2
    elsewhere = offpoc(db, "run", "td3", "here_envs:HerePendulum-v0", *args, check=False, env=env)
    assert elsewhere.returncode == 2 and "cannot import 'here_envs'" in elsewhere.stderr


@pytest.mark.process
def test_follow_piped_prints_a_line_per_run(tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    result = offpoc(db, "run", "td3", "Pendulum-v1", "--steps", "1500", "--set", "start_steps=500", "--set",
                    "hidden=32,32", "--eval-freq", "500", "--follow")  # fmt: skip
    lines = [line for line in result.stdout.splitlines() if line.startswith("#1 td3 Pendulum-v1 none s0: ")]
    assert lines and lines[-1].startswith("#1 td3 Pendulum-v1 none s0: finished 1,500/1,500 steps")
    assert "done: 1 finished" in result.stdout


@needs_reference
def test_source_filters_exports_and_the_printed_dashboard(reference_store: Path, tmp_path: Path) -> None:
    import shutil

    from store.runs import create_runs
    from tests.support.storefill import fill_learning, spec

    db = tmp_path / "mixed.db"
    shutil.copy(reference_store, db)
    store = open_store(db)
    (own,) = create_runs(store, [spec(correction="none", env="Hopper-v4")])
    store.close()
    fill_learning(db, own, 5_000, gain=1.0)
    code, stdout, _ = invoke("export", "--table", "runs", "--format", "json", "--source", "offpoc", "--db", str(db))
    assert code == 0 and [r["run_id"] for r in json.loads(stdout)] == [own]
    code, stdout, _ = invoke("export", "--table", "summary", "--format", "json", "--source", "published", "--algo",
                             "td3", "--env", "Hopper", "--db", str(db))  # fmt: skip
    assert code == 0 and {r["source"] for r in json.loads(stdout)} == {"published"}
    code, stdout, _ = invoke("dashboard", "--once", "--source", "offpoc", "--db", str(db))
    assert code == 0 and "1 runs" in stdout and "published" not in stdout
    code, stdout, _ = invoke("export", "--table", "improvement", "--format", "md", "--algo", "td3", "--env", "Hopper",
                             "--bootstrap", "100", "--source", "published", "--db", str(db))  # fmt: skip
    row = next(line for line in stdout.splitlines() if line.startswith("| td3 | acoffpoc |"))
    assert row.count("[") == 1 and ", " in row.split("[")[1]  # 0.78 [0.55, 0.95]
    assert invoke("export", "--source", "pub", "--db", str(db))[0] == 2
