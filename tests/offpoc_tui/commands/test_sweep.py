"""``offpoc sweep FILE``: expansion, validation before anything is written, idempotence, the shipped files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from offpoc_tui.cli import app
from offpoc_tui.specs import UsageError
from offpoc_tui.sweep import load_sweep
from tests.support import ROOT
from tests.support.processes import offpoc, run_row, wait_for

runner = CliRunner()
SWEEPS = ROOT / "sweeps"

GRID = """
name = "grid"
algos = ["td3", "sac"]
envs = ["Pendulum-v1", "Hopper-v4"]
seeds = "0-2"
steps = 2000
[[methods]]
correction = "none"
[[methods]]
correction = "acoffpoc"
divergence = ["jsd", "kl"]
[set]
start_steps = 500
correction_start = 1000
[[override]]
match = { envs = ["Hopper-v4"], algos = ["sac"] }
set = { batch_size = 64 }
"""


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_grid_expands_seed_major_with_lists_and_overrides(tmp_path: Path) -> None:
    sweep = load_sweep(write(tmp_path, GRID))
    assert sweep.name == "grid" and len(sweep.specs) == 2 * 2 * 3 * 3  # algos × envs × methods × seeds
    assert [s.seed for s in sweep.specs] == [0] * 12 + [1] * 12 + [2] * 12
    first = sweep.specs[:12]
    assert [(s.algo, s.env, s.correction, s.divergence) for s in first[:3]] == [
        ("td3", "Pendulum-v1", "none", None), ("td3", "Pendulum-v1", "acoffpoc", "jsd"),
        ("td3", "Pendulum-v1", "acoffpoc", "kl"),
    ]  # fmt: skip
    assert all(s.name == "grid" and s.total_steps == 2000 and s.config["start_steps"] == 500 for s in sweep.specs)
    batch = {(s.algo, s.env): s.config["batch_size"] for s in sweep.specs}
    assert batch == {("td3", "Pendulum-v1"): 256, ("td3", "Hopper-v4"): 256, ("sac", "Pendulum-v1"): 256,
                     ("sac", "Hopper-v4"): 64}  # fmt: skip


def test_an_algorithms_own_option_in_set_reaches_that_algorithms_runs_only(tmp_path: Path) -> None:
    """TD3's policy_delay in [set] of a TD3 and SAC sweep: the TD3 runs take it, the SAC runs neither take nor
    store it (it is TD3's option, as ris_beta is RIS-Off-PAC's)."""
    sweep = load_sweep(write(tmp_path, GRID.replace("[set]", "[set]\npolicy_delay = 3")))
    assert {s.config["policy_delay"] for s in sweep.specs if s.algo == "td3"} == {3}
    assert not any("policy_delay" in s.config or "exploration_std" in s.config for s in sweep.specs if s.algo == "sac")


def test_lanes_group_only_runs_of_equal_algorithm_settings(tmp_path: Path) -> None:
    """TD3 with policy_delay 2 and 5 in one sweep, --lanes 4: two groups, each trained with its own delay
    (the stacked update reads the group's first lane's)."""
    from offpoc_tui.specs import assign_lanes

    text = (
        'name = "delays"\nalgos = ["td3"]\nenvs = ["Pendulum-v1"]\nseeds = "0-1"\nsteps = 2000\n'
        '[[methods]]\ncorrection = "none"\n[[methods]]\ncorrection = "none"\npolicy_delay = 5\n'
        "[set]\nstart_steps = 500\n"
    )
    grouped = assign_lanes(load_sweep(write(tmp_path, text)).specs, 4)
    groups = {(s.lane_group, s.config["policy_delay"]) for s in grouped}
    assert len({g for g, _ in groups}) == 2 and len(groups) == 2, groups


def test_an_override_gives_its_cells_their_own_seeds(tmp_path: Path) -> None:
    """SAC on fewer seeds than TD3 in one file: the matched cells run the override's seeds, seed-major still."""
    sweep = load_sweep(write(tmp_path, GRID + '[[override]]\nmatch = { algos = ["sac"] }\nseeds = "0"\n'))
    seeds = {(s.algo, s.env, s.correction, s.divergence): [] for s in sweep.specs}
    for s in sweep.specs:
        seeds[(s.algo, s.env, s.correction, s.divergence)].append(s.seed)
    assert all(v == ([0] if k[0] == "sac" else [0, 1, 2]) for k, v in seeds.items()) and len(seeds) == 12
    assert [s.seed for s in sweep.specs] == [0] * 12 + [1] * 6 + [2] * 6 and sweep.seeds == [0, 1, 2]
    batch = {s.config["batch_size"] for s in sweep.specs if (s.algo, s.env) == ("sac", "Hopper-v4")}
    assert batch == {64}  # the earlier override's settings still reach the cells
    bad = write(tmp_path, GRID + '[[override]]\nmatch = { algos = ["sac"] }\nseeds = "3-1"\n', "bad.toml")
    with pytest.raises(UsageError, match="seeds range '3-1' runs backwards"):
        load_sweep(bad)
    empty = write(tmp_path, GRID + '[[override]]\nmatch = { algos = ["sac"] }\n', "empty.toml")
    with pytest.raises(UsageError, match=re.escape("takes match = {...} and set = {...} or seeds")):
        load_sweep(empty)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('correction = "none"', 'correction = "nope"'), "cell td3 × Pendulum-v1 × nope: unknown correction 'nope'"),
        (("start_steps = 500", "start_steps = -5"), "start_steps must be at least 0"),
        (('envs = ["Pendulum-v1", "Hopper-v4"]', 'envs = ["Pendulum-v1", "Nowhere-v0"]'), "× Nowhere-v0 × none"),
        (('seeds = "0-2"', 'seeds = "2-0"'), "error: seeds range '2-0' runs backwards"),
        (('name = "grid"', 'name = "12"'), "would read as run ids"),
        (("[set]", "[sett]"), "unknown key 'sett'"),
        (('match = { envs = ["Hopper-v4"], algos = ["sac"] }', 'match = { env = ["Hopper-v4"] }'), "matches on"),
        (
            ("correction_start = 1000", "correction_start = 2000"),
            "cell td3 × Pendulum-v1 × acoffpoc, divergence=jsd: acoffpoc would start at step 2,000",
        ),
    ],
)
def test_a_bad_cell_is_one_line_naming_it_exit_2_and_nothing_written(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    path = write(tmp_path, GRID.replace(*change))
    db = tmp_path / "s.db"
    result = runner.invoke(app, ["sweep", str(path), "--db", str(db)])
    assert result.exit_code == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1
    assert not db.exists()
    with pytest.raises(UsageError):
        load_sweep(path)
    broken = runner.invoke(app, ["sweep", str(write(tmp_path, "name = [", "bad.toml")), "--db", str(db)])
    assert broken.exit_code == 2 and "is not valid TOML" in broken.stderr


def test_the_dry_run_counts_runs_and_cpu_hours_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    result = runner.invoke(app, ["sweep", str(SWEEPS / "paper-comparison.toml"), "--dry-run", "--db", str(db)])
    assert result.exit_code == 0 and "1,440 runs, 1,440 not yet in" in result.stdout and "CPU-hours" in result.stdout
    assert not db.exists()
    for path in sorted(SWEEPS.glob("*.toml")):  # every shipped sweep file is valid
        assert len(load_sweep(path).specs) > 0, path


@pytest.mark.process
def test_submitting_again_adds_only_what_is_missing(tmp_path: Path) -> None:
    tiny = """
name = "tiny"
algos = ["td3"]
envs = ["Pendulum-v1"]
seeds = "0"
steps = 300
[[methods]]
correction = "none"
[set]
start_steps = 100
eval_freq = 300
eval_episodes = 1
hidden = [32, 32]
"""
    path = write(tmp_path, tiny)
    db = tmp_path / "s.db"
    first = offpoc(db, "sweep", str(path), "--jobs", "1")
    assert "1 run, 1 not yet in" in first.stdout
    wait_for(lambda: run_row(db, 1)["status"] == "finished", timeout=120, what="the first run")
    again = offpoc(db, "sweep", str(path), "--jobs", "1")
    assert "1 run, 0 not yet in" in again.stdout and "queued" not in again.stdout
    more = offpoc(db, "sweep", str(write(tmp_path, tiny.replace('seeds = "0"', 'seeds = "0-1"'))), "--jobs", "1")
    assert "2 runs, 1 not yet in" in more.stdout and "queued 1 run (id 2)" in more.stdout
    wait_for(lambda: run_row(db, 2)["status"] == "finished", timeout=120, what="the added seed")
    assert run_row(db, 2)["seed"] == 1 and run_row(db, 2)["name"] == "tiny"
