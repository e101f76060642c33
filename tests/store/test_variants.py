"""Runs of one correction trained with different settings are different methods: never pooled."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from offpoc_tui.cli import app
from offpoc_tui.dashboard.groups import compare, group_runs
from store import RunSpec, open_store
from store.reader import configs, list_runs
from store.runs import create_runs
from store.summary import summary_rows
from store.variants import label_variants, variants
from tests.support.storefill import fill_learning


def run(run_id: int, correction: str = "none", env: str = "Hopper-v4") -> dict[str, object]:
    return {"id": run_id, "algo": "td3", "env": env, "correction": correction, "divergence": None, "sampler": "uniform"}


def test_a_variant_names_what_varies_within_a_method_and_nothing_else() -> None:
    runs = [run(1), run(2), run(3), run(4, "acoffpoc"), run(5, env="Walker2d-v4")]
    found = {
        1: {"batch_size": 64, "total_steps": 1000, "seed": 0, "hidden": [64, 64]},
        2: {"batch_size": 256, "total_steps": 5000, "seed": 1, "hidden": [64, 64]},
        3: {"batch_size": 64, "total_steps": 1000, "seed": 2, "hidden": [64, 64], "eval_freq": 10},
        4: {"batch_size": 512},  # the only run of its method: nothing varies
        5: {"batch_size": 32},  # another task
    }
    assert variants(runs, found) == {1: "batch_size=64", 2: "batch_size=256", 3: "batch_size=64", 4: "", 5: ""}
    found[2] = {"batch_size": 256, "hidden": [32, 32]}
    labels = variants(runs, found)
    assert labels[2] == "batch_size=256, hidden=32,32" and labels[1] == "batch_size=64, hidden=64,64"
    del found[2]["batch_size"]  # stored before the setting existed: apart from those that hold it
    labels = variants(runs, found)
    assert labels[2] == "hidden=32,32" and labels[1] == "batch_size=64, hidden=64,64"
    found = {1: {"pg_form": "lr", "ris_beta": 0.2}, 2: {"pg_form": "lr", "ris_beta": 0.5}}  # old: every option
    assert variants(runs[:2], found) == {1: "ris_beta=0.2", 2: "ris_beta=0.5"}
    assert variants(runs[:2], found, owners={"ris_beta": ["ris-off-pac"]}) == {1: "", 2: ""}  # not none's option
    # An algorithm's own option: a SAC run stored when every run held TD3's policy_delay, beside one stored since.
    sac = [{**run(1), "algo": "sac"}, {**run(2), "algo": "sac"}]
    found = {1: {"policy_delay": 2, "batch_size": 256}, 2: {"batch_size": 256}}
    assert variants(sac, found, owners={"policy_delay": ["td3"]}) == {1: "", 2: ""}
    assert variants(runs[:2], found, owners={"policy_delay": ["td3"]}) == {1: "policy_delay=2", 2: ""}  # td3's own
    # a setting away from its default is named even where no other run of the method differs
    found = {1: {"batch_size": 64}, 2: {"batch_size": 64}, 4: {"batch_size": 256}}
    defaults = {"algorithms": {"td3": {"batch_size": 256}}, "options": {}}
    assert variants(runs[:2] + runs[3:4], found, defaults=defaults) == {1: "batch_size=64", 2: "batch_size=64", 4: ""}


def test_summary_and_compare_keep_each_setting_apart_and_pair_it_with_its_baseline(tmp_path: Path) -> None:
    db = tmp_path / "v.db"
    store = open_store(db, create=True)
    specs = [
        RunSpec("bs", "td3", "Hopper-v4", correction, "jsd" if correction != "none" else None, seed, 6000,
                {"algo": "td3", "env_id": "Hopper-v4", "correction": correction, "seed": seed, "sampler": "uniform",
                 "batch_size": batch, "total_steps": 6000})
        for batch in (64, 256) for correction in ("none", "acoffpoc") for seed in (0, 1)
    ]  # fmt: skip
    ids = create_runs(store, specs)
    store.close()
    for run_id, s in zip(ids, specs, strict=True):
        fill_learning(db, run_id, 6000, gain=1.0 if s.config["batch_size"] == 256 else 0.5)
    store = open_store(db)

    rows = summary_rows(store)
    assert sorted((r.correction, r.variant, r.n_seeds) for r in rows) == [
        ("acoffpoc", "batch_size=256", 2), ("acoffpoc", "batch_size=64", 2),
        ("none", "batch_size=256", 2), ("none", "batch_size=64", 2),
    ]  # fmt: skip
    small, large = (
        next(r for r in rows if r.correction == "none" and r.variant == f"batch_size={b}") for b in (64, 256)
    )
    assert small.mean < 0.7 * large.mean  # each row holds its own seeds, not a pool of both settings

    runs = label_variants(store, list_runs(store))
    groups = group_runs(runs)
    level = {("none", 64): 1.0, ("acoffpoc", 64): 2.0, ("none", 256): 10.0, ("acoffpoc", 256): 20.0}
    batch = {run_id: s.config["batch_size"] for run_id, s in zip(ids, specs, strict=True)}
    curves = {r["id"]: (np.arange(7) * 1000, np.full(7, level[(r["correction"], batch[r["id"]])])) for r in runs}
    table, *_ = compare(groups, curves, configs(store, [r["id"] for r in runs]))
    assert sorted(row.key[6] for row in table) == ["batch_size=256", "batch_size=256", "batch_size=64", "batch_size=64"]
    for row in table:
        if row.key[2] == "acoffpoc":  # beside the baseline trained with its batch size: +100%, not -80% or +1,900%
            assert row.diff_pct == 100.0 and row.config_diff == ""

    exported = CliRunner().invoke(app, ["export", "--table", "summary", "--format", "json", "--db", str(db)])
    assert {r["variant"] for r in json.loads(exported.stdout)} == {"batch_size=64", "batch_size=256"}
    md = CliRunner().invoke(app, ["export", "--table", "summary", "--format", "md", "--db", str(db)]).stdout
    assert "TD3 + AC-Off-POC {batch_size=64}" in md and "TD3 {batch_size=256}" in md


def test_a_correction_only_setting_never_parts_a_method_from_its_baseline() -> None:
    """sweeps/quick.toml's SAC: AC-Off-POC starts at 2,000 steps, the baseline keeps SAC's 5 × start_steps
    (which it never reads). The baseline's variant leaves it out, and the method finds its baseline."""
    runs = [{**run(1), "algo": "sac"}, {**run(2, "acoffpoc"), "algo": "sac"}]
    found = {1: {"correction_start": 5000, "start_steps": 1000}, 2: {"correction_start": 2000, "start_steps": 1000}}
    defaults = {"algorithms": {"sac": {"correction_start": None, "start_steps": None}}}
    labels = variants(runs, found, defaults=defaults)
    assert labels == {1: "start_steps=1000", 2: "correction_start=2000, start_steps=1000"}
    for r in runs:
        r["variant"], r["seed"], r["status"] = labels[int(r["id"])], 0, "finished"  # type: ignore[call-overload]
    curves = {1: (np.arange(4) * 1000, np.full(4, 10.0)), 2: (np.arange(4) * 1000, np.full(4, 15.0))}
    table, *_ = compare(group_runs(runs), curves, found)  # type: ignore[arg-type]
    corrected = next(row for row in table if row.key[2] == "acoffpoc")
    assert corrected.diff_pct == 50.0 and corrected.config_diff == "correction_start=2000"


def test_a_method_with_settings_of_its_own_meets_the_tasks_only_baseline_and_says_how_they_differ() -> None:
    """A sweep's `acoffpoc` with `start_steps = 2500` beside the one baseline at 500: compared, the difference
    named in the config column (before, no baseline matched and the row had no difference or p)."""
    runs = [{**run(i), "seed": i, "status": "finished"} for i in (1, 2)]
    runs += [{**run(i, "acoffpoc"), "seed": i, "status": "finished"} for i in (3, 4)]
    found = {i: {"start_steps": 500 if i < 3 else 2500} for i in (1, 2, 3, 4)}
    for r in runs:
        r["variant"] = f"start_steps={found[int(r['id'])]['start_steps']}"  # type: ignore[call-overload]
    curves = {i: (np.arange(4) * 1000, np.full(4, 10.0 if i < 3 else 20.0) + i) for i in (1, 2, 3, 4)}
    table, *_ = compare(group_runs(runs), curves, found)  # type: ignore[arg-type]
    corrected = next(row for row in table if row.key[2] == "acoffpoc")
    assert corrected.diff_pct is not None and corrected.p_value is not None
    assert corrected.config_diff == "start_steps=2500"


def test_compares_config_column_reads_the_run_kept_when_a_groups_first_run_is_a_repeat(tmp_path: Path) -> None:
    """The repeat left out (run 1, seed 0 at 3,000 steps) is its group's first: the config column must still
    read the settings of the runs kept, not fall back to nothing and say "same"."""
    from offpoc_tui.dashboard.caches import EvalCache
    from offpoc_tui.dashboard.data.compare import compare_rows
    from store.runs import finish

    db = tmp_path / "r.db"
    store = open_store(db, create=True)

    def spec(correction: str, seed: int, batch: int, steps: int) -> RunSpec:
        config = {"algo": "td3", "env_id": "Hopper-v4", "correction": correction, "seed": seed, "batch_size": batch,
                  "sampler": "uniform", "total_steps": steps}  # fmt: skip
        divergence = "jsd" if correction != "none" else None
        return RunSpec("r", "td3", "Hopper-v4", correction, divergence, seed, steps, config)

    ids = create_runs(store, [spec("acoffpoc", 0, 64, 3000), spec("acoffpoc", 0, 64, 6000), spec("none", 0, 256, 6000)])
    store.close()
    for run_id, steps in zip(ids, (3000, 6000, 6000), strict=True):
        fill_learning(db, run_id, steps, gain=1.0)
        finish(open_store(db), run_id, "finished", only_from=("queued",))
    store = open_store(db)
    runs = label_variants(store, list_runs(store))
    rows, _, _, repeats = compare_rows(store, runs, EvalCache().update(store, ids), None)
    corrected = next(row for row in rows if row.key[2] == "acoffpoc")
    assert [a["id"] for a, _ in repeats] == [ids[0]] and corrected.n_seeds == 1
    assert "batch_size=64" in corrected.config_diff


def test_runs_at_every_default_carry_no_variant(tmp_path: Path) -> None:
    """What a submission records as the defaults is what a run that sets nothing stores: AC-Off-POC's
    ``ref_std`` (None = the exploration std) is recorded resolved, so default runs are plain methods."""
    from offpoc_tui.specs import RunRequest, build_specs, record_plugins
    from store.db import write
    from store.runs import insert_runs

    for algo in ("td3", "sac"):
        request = RunRequest(algo, "Pendulum-v1", "acoffpoc", [0, 1], {"total_steps": 60_000}, {}, True, None)
        store = open_store(tmp_path / f"{algo}.db", create=True)
        with write(store):
            record_plugins(store)
            insert_runs(store, build_specs(request))
        runs = label_variants(store, list_runs(store))
        assert [(r["correction"], r["variant"]) for r in runs] == [("none", ""), ("acoffpoc", "")] * 2
