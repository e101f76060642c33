"""Aggregate statistics across tasks (store.aggregate): rliable's definitions on data with known answers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from offpoc_tui.cli import app
from store.aggregate import (
    METRICS,
    _resample,
    improvement_interval,
    interval,
    iqm,
    mean,
    median,
    optimality_gap,
    probability_of_improvement,
)
from tests.conftest import REFERENCE_CURVES, needs_reference

runner = CliRunner()

HAND = {"a": np.array([0.0, 1.0, 2.0, 3.0]), "b": np.array([10.0, 20.0]), "c": np.array([0.5, 0.5, 0.5])}
"""Task means 1.5, 15 and 0.5."""


def tasks(scores: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [scores[t] for t in sorted(scores)]


def test_each_metric_on_hand_made_scores() -> None:
    assert float(mean(tasks(HAND))) == pytest.approx((1.5 + 15 + 0.5) / 3)
    assert float(median(tasks(HAND))) == pytest.approx(1.5)
    pooled = [0.0, 1.0, 2.0, 3.0, 10.0, 20.0, 0.5, 0.5, 0.5]  # 9 scores: int(9 / 4) = 2 off each end
    assert float(iqm(tasks(HAND))) == pytest.approx(np.mean(sorted(pooled)[2:7]))
    assert float(iqm(tasks(HAND))) == pytest.approx(stats.trim_mean(pooled, 0.25))
    # Shortfalls below 1: a: mean(1, 0, 0, 0) = 0.25; b: 0; c: 0.5.
    assert float(optimality_gap(tasks(HAND))) == pytest.approx((0.25 + 0 + 0.5) / 3)


def test_iqm_is_scipys_trimmed_mean_of_all_scores_pooled() -> None:
    rng = np.random.default_rng(0)
    for runs in (3, 5, 10):
        scores = {f"t{i}": rng.normal(i, 2.0, runs) for i in range(7)}
        pooled = np.concatenate(tasks(scores))
        assert float(iqm(tasks(scores))) == pytest.approx(stats.trim_mean(pooled, 0.25), rel=1e-12)


def test_probability_of_improvement_counts_pairs_and_ties_half() -> None:
    x = {"a": np.array([1.0, 3.0]), "b": np.array([5.0])}
    y = {"a": np.array([2.0, 3.0]), "b": np.array([5.0]), "only_y": np.array([0.0])}
    # Task a: pairs (1>2 no, 1>3 no, 3>2 yes, 3=3 half) → 1.5/4; task b: a tie → 0.5; only_y is not shared.
    assert probability_of_improvement(x, y) == pytest.approx((1.5 / 4 + 0.5) / 2)
    assert probability_of_improvement(x, x) == pytest.approx(0.5)
    high = {t: v + 100 for t, v in x.items()}
    assert probability_of_improvement(high, x) == 1.0 and probability_of_improvement(x, high) == 0.0
    with pytest.raises(ValueError, match="share no task"):
        probability_of_improvement({"a": np.ones(2)}, {"b": np.ones(2)})


def test_the_bootstrap_reproduces_for_a_seed_and_never_moves_runs_across_tasks() -> None:
    rng = np.random.default_rng(1)
    scores = {"low": rng.uniform(0, 1, 6), "high": rng.uniform(100, 101, 4)}
    for metric in METRICS.values():
        assert interval(metric, scores, 500, seed=3) == interval(metric, scores, 500, seed=3)
    assert interval(mean, scores, 500, seed=3) != interval(mean, scores, 500, seed=4)
    high, low = _resample(tasks(scores), 1000, np.random.default_rng(0))  # tasks in name order: high, low
    assert high.shape == (1000, 4) and low.shape == (1000, 6)  # each task keeps its own run count
    assert np.isin(high, scores["high"]).all() and np.isin(low, scores["low"]).all()
    estimate, lo, hi = interval(mean, scores, 2000, seed=0)
    assert lo <= estimate <= hi
    p, p_lo, p_hi = improvement_interval(scores, scores, 2000, seed=0)
    assert p == 0.5 and p_lo < 0.5 < p_hi


def test_the_interval_covers_the_true_value_at_about_the_nominal_rate() -> None:
    rng = np.random.default_rng(7)
    true_means = np.linspace(0.0, 1.0, 5)
    covered = 0
    experiments = 300
    for seed in range(experiments):
        scores = {f"t{i}": rng.normal(m, 0.5, 10) for i, m in enumerate(true_means)}
        _, low, high = interval(mean, scores, 400, seed=seed)
        covered += low <= true_means.mean() <= high
    # Percentile intervals run a little narrow with 10 runs a task; 95% nominal, binomial spread ±2.5%.
    assert 0.88 <= covered / experiments <= 0.99


# ---- the tables, from a store ------------------------------------------------------------------------
def published(algo: str, prefix: str) -> dict[str, np.ndarray]:
    """Per task, the published runs' final scores (last 10 evaluations), normalised as store.normalise says."""
    from store.normalise import RANDOM, REFERENCE

    root = REFERENCE_CURVES / "Learning Curves" / algo
    scores = {}
    for folder in sorted(root.iterdir()):
        family = folder.name.rsplit("-v", 1)[0]
        finals = [np.load(folder / f"{prefix}{algo}_{folder.name}_{seed}.npy")[-10:].mean() for seed in range(10)]
        scores[folder.name] = (np.asarray(finals) - RANDOM[family]) / (REFERENCE[family] - RANDOM[family])
    return scores


def export_json(db: Path, *args: str) -> list[dict]:
    result = runner.invoke(app, ["export", "--format", "json", "--db", str(db), *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@needs_reference
def test_the_aggregate_table_of_the_published_curves_matches_an_independent_computation(reference_store: Path) -> None:
    rows = export_json(reference_store, "--table", "aggregate", "--algo", "td3")
    assert {r["method"] for r in rows} == {"none", "acoffpoc", "ace", "geoff-pac", "ipg", "ris-off-pac"}
    by = {(r["method"], r["metric"]): r for r in rows}
    for method, prefix in (("none", ""), ("acoffpoc", "AC-Off-POC_")):
        scores = published("TD3", prefix)
        task_means = [v.mean() for v in scores.values()]
        pooled = np.concatenate(list(scores.values()))
        assert by[(method, "mean")]["estimate"] == pytest.approx(np.mean(task_means), rel=1e-9)
        assert by[(method, "median")]["estimate"] == pytest.approx(np.median(task_means), rel=1e-9)
        assert by[(method, "iqm")]["estimate"] == pytest.approx(stats.trim_mean(pooled, 0.25), rel=1e-9)
        gap = np.mean([np.maximum(1 - v, 0).mean() for v in scores.values()])
        assert by[(method, "optimality_gap")]["estimate"] == pytest.approx(gap, rel=1e-9)
        assert by[(method, "mean")]["n_tasks"] == 8 and by[(method, "mean")]["n_runs"] == 80
        for metric in METRICS:
            assert by[(method, metric)]["ci_low"] <= by[(method, metric)]["estimate"] <= by[(method, metric)]["ci_high"]
    # The baseline's normalised mean is 1 by construction of the reference (TD3 as published).
    assert by[("none", "mean")]["estimate"] == pytest.approx(1.0, abs=1e-3)

    improvement = {r["method"]: r for r in export_json(reference_store, "--table", "improvement", "--algo", "td3")}
    x, y = published("TD3", "AC-Off-POC_"), published("TD3", "")
    per_task = [np.mean((x[t][:, None] > y[t][None, :]) + 0.5 * (x[t][:, None] == y[t][None, :])) for t in x]
    assert improvement["acoffpoc"]["probability"] == pytest.approx(np.mean(per_task), rel=1e-12)
    assert improvement["acoffpoc"]["baseline"] == "none" and improvement["acoffpoc"]["n_tasks"] == 8
    again = {r["method"]: r for r in export_json(reference_store, "--table", "improvement", "--algo", "td3")}
    assert again == improvement  # the seeded bootstrap reproduces


@needs_reference
def test_raw_scores_until_a_step_and_latex(reference_store: Path) -> None:
    raw = export_json(reference_store, "--table", "aggregate", "--algo", "sac", "--env", "Hopper", "--normalise",
                      "none", "--until", "100000", "--bootstrap", "200")  # fmt: skip
    folder = REFERENCE_CURVES / "Learning Curves" / "SAC" / "Hopper-v2"
    finals = [np.load(folder / f"SAC_Hopper-v2_{seed}.npy")[91:101].mean() for seed in range(10)]
    mean_row = next(r for r in raw if r["method"] == "none" and r["metric"] == "mean")
    assert mean_row["estimate"] == pytest.approx(np.mean(finals), rel=1e-9) and mean_row["n_tasks"] == 1
    tex = runner.invoke(app, ["export", "--table", "improvement", "--format", "latex", "--algo", "ddpg",
                              "--bootstrap", "100", "--db", str(reference_store)])  # fmt: skip
    assert tex.exit_code == 0 and "\\begin{tabular}{lllllll}" in tex.stdout and "acoffpoc" in tex.stdout
    assert re.search(r"& \d\.\d\d \[\d\.\d\d, \d\.\d\d\] & 8 & 1,000,000", tex.stdout), tex.stdout  # as the md table
    assert raw[0]["budget_min"] == raw[0]["budget_max"] == 100_000  # every format says the step it compares at
    md = runner.invoke(app, ["export", "--table", "aggregate", "--format", "md", "--algo", "sac", "--env", "Hopper",
                             "--until", "100000", "--bootstrap", "100", "--db", str(reference_store)])  # fmt: skip
    assert (
        "Each task's runs at its budget (seeds short of it left out):"
        " sac Hopper published at 100,000 steps (asked for)," in md.stdout
    )


def test_bad_aggregate_options_exit_2_with_one_line(filled_store: Path, tmp_path: Path) -> None:
    for args, message in [
        (["--table", "aggregate", "--normalise", "zscore"], "unknown --normalise 'zscore'"),
        (["--table", "aggregate", "--bootstrap", "0"], "--bootstrap must be from 1 to 100,000 resamples, got 0"),
        (["--table", "weights", "--until", "10"], "--until applies to --table finals, summary, aggregate"),
    ]:
        result = runner.invoke(app, ["export", *args, "--db", str(filled_store)])
        assert result.exit_code == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1
    from store import open_store
    from store.runs import create_runs
    from tests.support.storefill import fill, spec

    db = tmp_path / "p.db"
    store = open_store(db, create=True)
    (run_id,) = create_runs(store, [spec(env="Pendulum-v1")])
    store.close()
    fill(db, run_id)
    result = runner.invoke(app, ["export", "--table", "aggregate", "--db", str(db)])
    assert result.exit_code == 2 and "no random and reference scores for Pendulum-v1" in result.stderr
    assert "--normalise none" in result.stderr
    assert export_json(db, "--table", "aggregate", "--normalise", "none", "--bootstrap", "50")[0]["n_runs"] == 1


def test_the_random_score_table_is_what_the_measuring_script_gives() -> None:
    from agents.random_scores import random_return
    from store.normalise import RANDOM

    assert round(random_return("Hopper-v4", 100), 2) == RANDOM["Hopper"]  # seeded: the same 100 episodes


@needs_reference
@pytest.mark.parametrize("kind", ["aggregate", "profile", "improvement"])
def test_plots_across_tasks(reference_store: Path, tmp_path: Path, kind: str) -> None:
    out = tmp_path / f"{kind}.png"
    args = ["plot", "--kind", kind, "-o", str(out), "--algo", "td3", "--bootstrap", "50", "--db", str(reference_store)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {out}: {kind} of 6 methods from 480 runs" in result.stderr


def test_plot_kinds_refuse_bad_options_in_one_line(filled_store: Path, tmp_path: Path) -> None:
    for args, message in [(["--kind", "violin"], "unknown --kind 'violin'"),
                          (["--kind", "profile", "--normalise", "z"], "unknown --normalise 'z'")]:  # fmt: skip
        result = runner.invoke(app, ["plot", "-o", str(tmp_path / "f.png"), *args, "--db", str(filled_store)])
        assert result.exit_code == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "f.png").exists()


def test_compare_rows_carry_the_probability_of_improvement() -> None:
    from offpoc_tui.dashboard.groups import compare, group_runs

    def run(run_id: int, correction: str) -> dict:
        return {"id": run_id, "algo": "td3", "env": "Hopper-v4", "correction": correction, "seed": run_id,
                "divergence": None, "origin": None, "sampler": "uniform", "status": "finished"}  # fmt: skip

    runs = [run(1, "none"), run(2, "none"), run(3, "acoffpoc"), run(4, "acoffpoc")]
    steps = np.arange(12) * 1000
    finals = {1: 10.0, 2: 30.0, 3: 20.0, 4: 40.0}  # pairs won by the correction: 20 > 10, 40 > 10, 40 > 30
    curves = {i: (steps, np.full(12, value)) for i, value in finals.items()}
    rows, *_ = compare(group_runs(runs), curves, {i: {} for i in finals})
    by = {row.key[2]: row for row in rows}
    assert by["none"].improvement is None and by["acoffpoc"].improvement == pytest.approx(3 / 4)


def test_compare_line_across_tasks_matches_the_aggregate_statistics() -> None:
    from offpoc_tui.dashboard.across import across_tasks
    from store.normalise import RANDOM, REFERENCE
    from store.stats import FinalWindow

    def run(run_id: int, env: str, correction: str) -> dict:
        return {"id": run_id, "algo": "td3", "env": env, "correction": correction, "seed": run_id,
                "divergence": None, "origin": None, "sampler": "uniform", "status": "finished"}  # fmt: skip

    envs = ["Hopper-v4", "Walker2d-v4"]
    runs = [run(10 * e + s, env, c) for e, env in enumerate(envs) for s, c in enumerate(["none"] * 3 + ["ipg"] * 3)]
    rng = np.random.default_rng(0)
    finals = {r["id"]: float(rng.uniform(1000, 3000)) + (500 if r["correction"] == "ipg" else 0) for r in runs}
    curves = {i: (np.arange(12) * 1000, np.full(12, v)) for i, v in finals.items()}
    line = across_tasks(runs, curves, FinalWindow())
    assert line.startswith(
        "across 2 tasks (Hopper, Walker2d), normalised final returns at each task's budget (offpoc at 11,000 steps),"
        " IQM [95% CI]: none "
    )
    normalised = {
        env: {c: np.asarray([(finals[r["id"]] - RANDOM[env[:-3]]) / (REFERENCE[env[:-3]] - RANDOM[env[:-3]])
                             for r in runs if r["env"] == env and r["correction"] == c]) for c in ("none", "ipg")}
        for env in envs
    }  # fmt: skip
    expected = iqm([normalised[env]["ipg"] for env in envs])
    p = probability_of_improvement({e: normalised[e]["ipg"] for e in envs}, {e: normalised[e]["none"] for e in envs})
    assert f"ipg {float(expected):.2f} [" in line and f"P(>base) {p:.2f} [" in line
    assert across_tasks(runs[:6], curves, FinalWindow()) == ""  # one task: nothing across
    older = [dict(r, env="Hopper-v2", id=r["id"] + 100) for r in runs[:6]]  # a task of a family already listed
    older_curves = {**curves, **{r["id"]: curves[r["id"] - 100] for r in older}}
    assert across_tasks(runs + older, older_curves, FinalWindow()).startswith("across 3 tasks (Hopper ×2, Walker2d)")
    # Published curves at 1M beside runs trained here at 11,000 steps: each source's budget is said, never one step
    published = [dict(r, env="Hopper-v2", id=r["id"] + 100, origin="reference:x") for r in runs[:6]]
    million = {**curves, **{r["id"]: (np.arange(11) * 100_000, curves[r["id"] - 100][1][:11]) for r in published}}
    line = across_tasks(runs + published, million, FinalWindow())
    assert "at each task's budget (offpoc at 11,000 steps, published at 1,000,000), IQM" in line, line
    pendulum = [dict(r, env="Pendulum-v1") for r in runs[:3]] + runs[6:9]
    assert "no random and reference scores for Pendulum-v1" in across_tasks(pendulum, curves, FinalWindow())
    # One seed a side on each task: no P(>base) (it would read 1.00 [1.00, 1.00]), and why.
    single = [r for r in runs if r["seed"] % 10 in (0, 3)]
    assert "P(>base) – (under 2 seeds a side on a task)" in across_tasks(single, curves, FinalWindow())
    assert "[– under 2 seeds on a task]" in across_tasks(single, curves, FinalWindow())  # no interval from one
    # Runs that have evaluated only at step 0 (a sweep just started): too short for the window, no score.
    started = {i: (np.array([0]), np.array([5.0])) for i in finals}
    assert across_tasks(runs, started, FinalWindow()) == ""
    # Nor runs whose learning starts at their last evaluation (start_steps 11,000): no score after it.
    assert across_tasks(runs, curves, FinalWindow(), starts=dict.fromkeys(finals, 11_000)) == ""
    # Some: the line says how many were left out, and on which tasks a method was scored.
    late = {r["id"]: 11_000 for r in runs if r["env"] == "Walker2d-v4" and r["correction"] == "ipg"}
    line = across_tasks(runs, curves, FinalWindow(), starts=late)
    assert "ipg (on Hopper-v4 only) " in line and line.endswith("(3 seeds too short for the window left out)"), line


@needs_reference
def test_published_aggregate_rows_do_not_move_when_own_runs_are_added(reference_store: Path, tmp_path: Path) -> None:
    """Three own 3,000-step Hopper runs once cut the published Hopper curves to 3,000 steps and pooled them with
    the other tasks at 1M (TD3 IQM 1.00 → 0.88). Each source is budgeted apart; the own rows say their budgets."""
    import shutil

    from store import open_store
    from store.runs import create_runs, finish
    from tests.support.storefill import fill, spec

    db = tmp_path / "mixed.db"
    shutil.copy(reference_store, db)

    def table() -> list[dict[str, object]]:
        result = runner.invoke(app, ["export", "--table", "aggregate", "--format", "json", "--algo", "td3",
                                     "--bootstrap", "50", "--db", str(db)])  # fmt: skip
        assert result.exit_code == 0, result.output
        return [r for r in json.loads(result.stdout) if r["source"] == "published"]

    before = table()
    store = open_store(db)
    ids = create_runs(store, [spec("td3", "none", seed=s) for s in range(3)] + [spec("td3", "none", env="Ant-v4")])
    for run_id in ids:
        fill(db, run_id, steps=3000 if run_id != ids[-1] else 5000)
        finish(open_store(db), run_id, "finished", only_from=("queued",))
    assert table() == before
    md = runner.invoke(app, ["export", "--table", "aggregate", "--format", "md", "--algo", "td3", "--bootstrap",
                             "50", "--db", str(db)])  # fmt: skip
    assert "budgets differ between tasks pooled: td3 Ant offpoc 5,000, td3 Hopper offpoc 3,000 steps" in md.stdout


@needs_reference
def test_the_figures_across_tasks_say_each_rows_budget_and_draw_every_estimate_whole(
    reference_store: Path, tmp_path: Path
) -> None:
    """Issue 69, item 13: own 3,000-step runs beside the published 1M-step ones: each row says its budget (one
    budget for all: the title says it once), and no estimate sits on the axis's edge, half cut."""
    import shutil

    from offpoc_tui.charts.aggregate import aggregate_figure, profile_figure
    from store import open_store
    from store.aggregate_tables import method_scores, task_budgets_of
    from store.runs import create_runs, finish
    from tests.support.storefill import fill, spec

    db = tmp_path / "mixed.db"
    shutil.copy(reference_store, db)
    store = open_store(db)
    for run_id in create_runs(store, [spec("td3", "none", seed=s) for s in range(3)]):
        fill(db, run_id, steps=3000)
        finish(store, run_id, "finished", only_from=("queued",))
    mixed = {"algos": ["td3"]}
    scores, budgets = method_scores(store, **mixed), task_budgets_of(store, **mixed)
    figure = aggregate_figure(scores, 50, True, budgets)
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert labels[:2] == ["TD3 · at 3,000 steps", "TD3 [published] · at 1,000,000 steps"]
    assert all(label.endswith("at 1,000,000 steps") for label in labels[1:])
    for axes in figure.axes:  # every estimate line inside the axes, with room
        low, high = axes.get_xlim()
        xs = [x for line in axes.get_lines() for x in line.get_xdata()]
        assert low < min(xs) and max(xs) < high
    published = {k: v for k, v in scores.items() if k[4] == "published"}
    profile = profile_figure(published, 50, True, budgets)
    assert profile.get_suptitle().endswith("; at 1,000,000 steps")
    assert not any("steps" in t.get_text() for t in profile.axes[0].get_legend().get_texts())
    store.close()


def test_improvement_from_one_seed_a_side_is_no_probability_and_says_why(filled_store: Path, tmp_path: Path) -> None:
    """One TD3 seed a method: P(> baseline) from one run against one reads 0, ½ or 1; the export says "–"."""
    md = runner.invoke(app, ["export", "--table", "improvement", "--format", "md", "--db", str(filled_store)])
    assert md.exit_code == 0, md.output
    row = next(line for line in md.stdout.splitlines() if line.startswith("| td3 | acoffpoc"))
    assert "– (under 2 seeds a side on a task)" in row, row
    data = runner.invoke(app, ["export", "--table", "improvement", "--format", "json", "--db", str(filled_store)])
    assert [(r["probability"], r["ci_low"], r["ci_high"]) for r in json.loads(data.stdout)] == [(None, None, None)]
    figure = runner.invoke(app, ["plot", "--kind", "improvement", "-o", str(tmp_path / "p.png"), "--db",
                                 str(filled_store)])  # fmt: skip
    assert figure.exit_code == 0 and (tmp_path / "p.png").stat().st_size > 0, figure.output
    tex = runner.invoke(app, ["export", "--table", "improvement", "--format", "latex", "--db", str(filled_store)])
    assert "– (under 2 seeds a side on a task)" in tex.stdout and "None" not in tex.stdout, tex.stdout
    # Nor an interval of the aggregate metrics from one seed on a task: its estimate, no interval, and why.
    md = runner.invoke(app, ["export", "--table", "aggregate", "--format", "md", "--db", str(filled_store)])
    row = next(line for line in md.stdout.splitlines() if line.startswith("| td3 | acoffpoc"))
    assert row.count("[– under 2 seeds on a task]") == 4, row
    data = runner.invoke(app, ["export", "--table", "aggregate", "--format", "json", "--db", str(filled_store)])
    assert {(r["ci_low"], r["ci_high"]) for r in json.loads(data.stdout)} == {(None, None)}


def test_scores_across_tasks_take_the_same_window_as_the_summary(filled_store: Path) -> None:
    """A seed's score across tasks is its summary's final return: the same window (none before the last 10% of
    steps, never step 0), not the plain last 10 evaluations."""
    from store import open_store
    from store.aggregate_tables import method_scores
    from store.summary import summary_rows

    db = open_store(filled_store)
    summary = {(r.algo, r.correction): r.mean for r in summary_rows(db)}
    scores = method_scores(db, normalise="none")
    assert {(k[0], k[1]): float(v["Hopper-v4"][0]) for k, v in scores.items()} == pytest.approx(summary)
