"""``offpoc export --table summary``: the paper's statistic, its tables reproduced, md/latex layout."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner, Result

from offpoc_tui.cli import app
from store import open_store
from store.reader import quantity_rows
from store.runs import create_runs, finish
from store.stats import final_performance, paper_half_width
from store.summary import method_label, method_rank
from store.tasks import env_family, env_matches
from tests.conftest import REFERENCE_CURVES, needs_reference
from tests.support.storefill import fill_learning, spec

runner = CliRunner()
PAPER = REFERENCE_CURVES.parent / "paper" / "ac-off-poc-paper.tex"


def invoke(*args: str) -> Result:
    return runner.invoke(app, list(args))


def summary_json(db: Path, *args: str) -> list[dict]:
    result = invoke("export", "--table", "summary", "--format", "json", "--db", str(db), *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def paper_cell(algo: str, env: str, prefix: str, last: int = 10) -> tuple[float, float, float]:
    """Straight from the .npy files, with scipy.stats (independent of store.stats): the paper's mean, the
    paper's ± (the mean per-point half-width) and the 95% interval of the seeds' final means (offpoc's ±)."""
    folder = REFERENCE_CURVES / "Learning Curves" / algo / env
    matrix = np.stack([np.load(folder / f"{prefix}{algo}_{env}_{seed}.npy")[-last:] for seed in range(10)])
    half = stats.t.ppf(0.975, 9) * matrix.std(axis=0, ddof=1) / np.sqrt(10)
    seeds = stats.t.ppf(0.975, 9) * matrix.mean(axis=1).std(ddof=1) / np.sqrt(10)
    return matrix.mean(), half.mean(), seeds


def pm(algo: str, env: str, prefix: str) -> str:
    """offpoc's ± of one published cell, as the tables print it."""
    return f"{paper_cell(algo, env, prefix)[2]:.2f}"


# ---- the statistic --------------------------------------------------------------------------------
def test_final_performance_is_the_papers_mean_with_the_interval_of_the_seeds() -> None:
    rng = np.random.default_rng(0)
    matrix = rng.normal(100, 20, (5, 30))
    curves = [(np.arange(971, 1001) * 1000, row) for row in matrix]  # the last 30 of 1M steps, as published
    n, mean, half = final_performance(curves, last=10)
    assert n == 5
    assert mean == pytest.approx(matrix[:, -10:].mean())
    finals = matrix[:, -10:].mean(axis=1)  # the per-seed statistic Welch's p and a decision compare
    assert half == pytest.approx(stats.t.ppf(0.975, 4) * finals.std(ddof=1) / np.sqrt(5))
    # The paper's ± is another figure: the mean per-point half-width, wider on the same data.
    paper = stats.t.ppf(0.975, 4) * matrix[:, -10:].std(axis=0, ddof=1) / np.sqrt(5)
    assert paper_half_width(curves, last=10) == pytest.approx(paper.mean()) and paper.mean() > half
    assert np.isnan(final_performance(curves[:1])[2]) and np.isnan(paper_half_width(curves[:1]))
    assert final_performance([])[0] == 0 and np.isnan(final_performance([])[1])


def test_env_families_line_up_versions(tmp_path: Path) -> None:
    open_store(tmp_path / "new.db", create=True)  # a store names its corrections: a new one the built-in ones
    assert env_family("Hopper-v2") == env_family("Hopper-v4") == env_family("Hopper-v5") == "Hopper"
    assert env_family("LunarLanderContinuous-v3") == "LunarLanderContinuous"
    assert method_label("td3", "acoffpoc", "kl") == "TD3 + AC-Off-POC (KL)"
    assert [method_rank(c)[0] for c in ("none", "acoffpoc", "ris-off-pac")] == [0, 1, 5]  # the paper's order, colours
    assert (
        method_label("sac", "none", None) == "SAC" and method_label("ddpg", "ris-off-pac", None) == "DDPG + RIS-Off-PAC"
    )
    assert method_label("td3", "none", None, "per") == "TD3 [PER]"
    assert method_label("td3", "acoffpoc", "jsd", "my-replay") == "TD3 + AC-Off-POC [MY-REPLAY]"  # a plug-in's alike


def test_env_filters_take_ids_and_families_alike_in_sql_and_in_python(tmp_path: Path) -> None:
    """The tidy tables filter runs in SQL (store.reader.where_runs), the summary in Python (env_matches): one
    answer for every id, odd ones too (GLOB's own characters, a module path, no version, a version-like tail)."""
    from store.reader import list_runs

    envs = ["Hopper-v2", "Hopper-v4", "Hopper-v10", "Hopper", "Hopper-vx", "Hopper-v4x", "HopperX-v4", "a*b-v1",
            "aXb-v1", "Foo[1]-v0", "Foo1-v0", "m:E?-v3", "m:Ex-v3", "Hopper-v2-v0"]  # fmt: skip
    store = open_store(tmp_path / "envs.db", create=True)
    create_runs(store, [spec(env=env) for env in envs])
    for wanted in (["Hopper"], ["Hopper-v4"], ["a*b"], ["Foo[1]"], ["m:E?"], ["Hopper-v2"], ["Hopper", "HopperX"]):
        assert [r["env"] for r in list_runs(store, envs=wanted)] == [e for e in envs if env_matches(e, wanted)], wanted
    assert [r["env"] for r in list_runs(store, envs=["Hopper"])] == ["Hopper-v2", "Hopper-v4", "Hopper-v10", "Hopper"]


# ---- the published curves ------------------------------------------------------------------------
@needs_reference
@pytest.mark.parametrize(
    ("algo", "env", "prefix"),
    [("TD3", "Hopper-v2", "AC-Off-POC_"), ("SAC", "Humanoid-v2", ""), ("DDPG", "LunarLanderContinuous-v2", "IPG_")],
)
def test_summary_cells_match_an_independent_computation(
    reference_store: Path, algo: str, env: str, prefix: str
) -> None:
    correction = {"": "none", "AC-Off-POC_": "acoffpoc", "IPG_": "ipg"}[prefix]
    rows = summary_json(reference_store, "--algo", algo.lower(), "--env", env, "--correction", correction)
    assert len(rows) == 1
    mean, half, seeds = paper_cell(algo, env, prefix)
    assert rows[0]["n_seeds"] == 10 and rows[0]["source"] == "published" and rows[0]["last_step"] == 1_000_000
    assert rows[0]["mean"] == pytest.approx(mean, rel=1e-12)
    assert rows[0]["ci95"] == pytest.approx(seeds, rel=1e-9)  # the interval of the per-seed statistic
    assert rows[0]["paper_pm"] == pytest.approx(half, rel=1e-9)  # the paper's
    other = summary_json(
        reference_store, "--algo", algo.lower(), "--env", env, "--correction", correction, "--last", "3"
    )
    assert other[0]["mean"] == pytest.approx(paper_cell(algo, env, prefix, last=3)[0], rel=1e-12)


def mixed_store(reference_store: Path, tmp_path: Path) -> tuple[np.ndarray, Path, list[int]]:
    """The published curves and two finished TD3 + AC-Off-POC Hopper-v4 seeds of 12,000 steps: the published
    TD3 + AC-Off-POC Hopper-v2 seeds' curves (10 × 1,001 evaluations), the store, the two runs' ids."""
    folder = REFERENCE_CURVES / "Learning Curves" / "TD3" / "Hopper-v2"
    curves = np.stack([np.load(folder / f"AC-Off-POC_TD3_Hopper-v2_{seed}.npy") for seed in range(10)])
    db = tmp_path / "mixed.db"
    shutil.copy(reference_store, db)
    store = open_store(db)
    ids = create_runs(store, [spec(correction="acoffpoc", seed=s, env="Hopper-v4") for s in (0, 1)])
    store.close()
    for run_id in ids:
        fill_learning(db, run_id, 12_000, gain=1.0)
        finish(open_store(db), run_id, "finished", only_from=("queued",))  # finished runs set the budget
    return curves, db, ids


@needs_reference
def test_published_and_own_runs_meet_at_one_budget(reference_store: Path, tmp_path: Path) -> None:
    # The published curves evaluate every 1,000 steps: at step 100,000 the last 10 are indices 91-100,
    # and the last 50,000 steps are indices 51-100.
    curves, db, _ = mixed_store(reference_store, tmp_path)
    filters = ("--algo", "td3", "--env", "Hopper", "--correction", "acoffpoc")
    # By default the published curves meet the runs trained here at their budget: 12,000 steps.
    default = {r["source"]: r for r in summary_json(db, *filters)}
    assert default["published"]["budget"] == default["offpoc"]["budget"] == 12_000
    assert default["published"]["last_step"] == 12_000
    # The last 10% of 12,000 steps: 11,000 and 12,000 (the last 10 would reach back to 3,000).
    assert default["published"]["mean"] == pytest.approx(curves[:, 11:13].mean(), rel=1e-12)
    # --until asks for a budget: the published curves there, the runs trained here short of it left out.
    rows = {r["source"]: r for r in summary_json(db, *filters, "--until", "100000")}
    assert rows["published"]["last_step"] == 100_000 and rows["published"]["budget"] == 100_000
    assert rows["published"]["mean"] == pytest.approx(curves[:, 91:101].mean(), rel=1e-12)
    assert (rows["offpoc"]["n_seeds"], rows["offpoc"]["n_short"], rows["offpoc"]["mean"]) == (0, 2, None)
    cut = {r["source"]: r for r in summary_json(db, *filters, "--until", "6000")}["offpoc"]
    assert cut["last_step"] == 6_000 and cut["n_seeds"] == 2 and cut["mean"] != default["offpoc"]["mean"]
    spans = {r["source"]: r for r in summary_json(db, *filters, "--until", "100000", "--last-steps", "50000")}
    assert spans["published"]["mean"] == pytest.approx(curves[:, 51:101].mean(), rel=1e-12)
    md = invoke("export", "--table", "summary", "--format", "md", *filters, "--until", "100000", "--db", str(db))
    assert (
        "Mean over seeds of the last 10 evaluations (within the last 10% of steps, after learning starts)"
        " up to step 100,000 ±" in md.stdout
    )
    assert "none at 100,000 (2 short)" in md.stdout and "td3 Hopper at 100,000 steps" in md.stdout
    assert "**training" not in md.stdout  # a row short of the budget is never the best


@needs_reference
def test_finals_are_each_seeds_number_in_the_summary(reference_store: Path, tmp_path: Path) -> None:
    """``--table finals``: a row per seed with the final return the summary averages, at the same budget and
    window; a seed short of the budget is a row with no final return. ``--env Hopper`` takes every version
    in the tidy tables as in the summary (it once matched no run there, silently)."""
    curves, db, ids = mixed_store(reference_store, tmp_path)
    filters = ("--algo", "td3", "--env", "Hopper", "--correction", "acoffpoc")

    def finals(*args: str) -> list[dict]:
        result = invoke("export", "--table", "finals", "--format", "json", "--db", str(db), *filters, *args)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    rows = finals("--until", "100000", "--last-steps", "50000")
    published = sorted((r for r in rows if r["source"] == "published"), key=lambda r: r["seed"])
    assert [r["final_return"] for r in published] == pytest.approx(curves[:, 51:101].mean(axis=1), rel=1e-12)
    assert {(r["first_step"], r["last_step"], r["evaluations"], r["budget"]) for r in published} == {
        (51_000, 100_000, 50, 100_000)
    }
    own = [r for r in rows if r["source"] == "offpoc"]
    assert [(r["run_id"], r["reached"], r["final_return"], r["evaluations"]) for r in own] == [
        (run_id, 12_000, None, 0) for run_id in ids
    ]
    for row in own:  # λ over every logged update: all of them, as these runs end at 12,000 steps
        logged = [float(v[0]) for _, _, _, v in quantity_rows(open_store(db), row["run_id"], "lambda")]
        assert row["mean_lambda"] == pytest.approx(np.mean(logged), rel=1e-6)
    for row in [r for r in finals("--until", "6500") if r["source"] == "offpoc"]:  # a budget inside a block
        rows_ = list(quantity_rows(open_store(db), row["run_id"], "lambda"))
        assert rows_[-1][1] > 6500 and any(step == 6500 for _, step, _, _ in rows_)
        assert row["mean_lambda"] == pytest.approx(np.mean([v[0] for _, s, _, v in rows_ if s <= 6500]), rel=1e-6)
    summary = {r["source"]: r for r in summary_json(db, *filters, "--until", "100000", "--last-steps", "50000")}
    assert summary["published"]["mean"] == pytest.approx(np.mean([r["final_return"] for r in published]), rel=1e-12)
    at_own = [r for r in finals("--until", "12000") if r["source"] == "offpoc"]
    assert all(r["final_return"] is not None and r["last_step"] == 12_000 for r in at_own)
    tidy = invoke("export", "--table", "runs", "--format", "json", "--db", str(db), *filters)
    assert {r["env"] for r in json.loads(tidy.stdout)} == {"Hopper-v2", "Hopper-v4"}
    refused = invoke("export", "--table", "finals", "--format", "latex", "--db", str(db))
    assert refused.exit_code == 2 and "unknown format 'latex' for --table finals" in refused.output


def paper_tables() -> dict[tuple[str, str], tuple[float, float]]:
    """(row label, environment) → (mean, ±) from the paper's Tables 1 and 2 (the .tex source)."""
    tex = PAPER.read_text()
    cells = {}
    for label in ("split_1", "split_2"):
        end = tex.index(f"\\label{{table:{label}}}")
        body = tex[tex.rindex("\\begin{tabular}", 0, end) : end]
        envs = re.findall(r"\\textbf\{(\w+)\}", re.search(r"\\textbf\{Method\}(.*?)\\\\", body).group(1))
        for line in body.split("\\midrule")[1].split("\\bottomrule")[0].split("\\\\"):
            parts = [p.strip() for p in line.replace("\\textbf{", "").replace("}", "").split("&")]
            for env, cell in zip(envs, parts[1:]):
                mean, half = (float(x) for x in re.findall(r"-?\d+\.\d+", cell.replace(" ", ""))[:2])
                cells[(parts[0], env)] = (mean, half)
    return cells


@needs_reference
@pytest.mark.skipif(not PAPER.exists(), reason=f"the paper's source is not at {PAPER}")
def test_the_summary_reproduces_the_papers_tables_1_and_2(reference_store: Path) -> None:
    expected = paper_tables()
    assert len(expected) == 3 * 6 * 8
    ours = {
        (method_label(r["algo"], r["correction"], r["divergence"]), r["env_family"]): (r["mean"], r["paper_pm"])
        for r in summary_json(reference_store)
    }
    assert len(ours) == len(expected)
    for key, (mean, half) in expected.items():
        assert (round(ours[key][0], 2), round(ours[key][1], 2)) == pytest.approx((mean, half), abs=0.0051), key


@needs_reference
def test_markdown_and_latex_lay_out_like_the_paper(reference_store: Path) -> None:
    md = invoke("export", "--table", "summary", "--format", "md", "--db", str(reference_store)).stdout
    tables = [t for t in md.split("\n\n") if t.startswith("| Method")]
    assert len(tables) == 2  # eight environments, four per table, as in the paper
    lines = tables[0].splitlines()
    assert lines[0] == "| Method | Ant-v2 | BipedalWalker-v3 | HalfCheetah-v2 | Hopper-v2 |"
    labels = [line.split(" | ")[0].lstrip("| ") for line in lines[2:]]
    methods = ["", " + AC-Off-POC", " + ACE", " + Geoff-PAC", " + IPG", " + RIS-Off-PAC"]
    assert labels == [algo + m for algo in ("DDPG", "SAC", "TD3") for m in methods]
    td3 = lines[2 + 12 + 1].split(" | ")
    hopper = pm("TD3", "Hopper-v2", "AC-Off-POC_")
    assert td3[0] == "| TD3 + AC-Off-POC" and td3[4].rstrip(" |") == f"**3658.85 ± {hopper}**"
    bold = [cell for line in lines[2:] for cell in line.split(" | ") if cell.startswith("**")]
    assert len(bold) == 3 * 4  # one best per algorithm and environment
    second = tables[1].splitlines()
    lunar = next(line for line in second if line.startswith("| DDPG + Geoff-PAC"))
    assert f"**210.53 ± {pm('DDPG', 'LunarLanderContinuous-v2', 'Geoff-PAC_')}**" in lunar  # AC-Off-POC's one loss

    tex = invoke("export", "--table", "summary", "--format", "latex", "--db", str(reference_store)).stdout
    assert tex.count("\\begin{table*}") == 2 and tex.count("\\toprule") == 2
    assert "\\begin{tabular}{lcccc}" in tex and tex.count("\\addlinespace") == 4
    ant, walker = pm("TD3", "Ant-v2", "AC-Off-POC_"), pm("TD3", "BipedalWalker-v3", "AC-Off-POC_")
    assert f"TD3 + AC-Off-POC & \\textbf{{5472.19 $\\pm$ {ant}}} & \\textbf{{322.38 $\\pm$ {walker}}}" in tex
    humanoid, lunar = pm("DDPG", "Humanoid-v2", "AC-Off-POC_"), pm("DDPG", "LunarLanderContinuous-v2", "AC-Off-POC_")
    assert f"DDPG + AC-Off-POC & \\textbf{{1115.81 $\\pm$ {humanoid}}} & 173.02 $\\pm$ {lunar}" in tex
    assert "$\\pm$: the 95\\% Student-t interval of that average over them (the paper's $\\pm$" in tex


@needs_reference
def test_user_runs_sit_beside_the_published_curves(reference_store: Path, tmp_path: Path) -> None:
    db = tmp_path / "mixed.db"
    shutil.copy(reference_store, db)
    store = open_store(db)
    ids = create_runs(
        store, [spec(correction=c, seed=s, env="Hopper-v4") for c in ("none", "acoffpoc") for s in (0, 1)]
    )
    store.close()
    for run_id in ids:
        fill_learning(db, run_id, 12_000, gain=1.0)
        finish(open_store(db), run_id, "finished", only_from=("queued",))  # finished runs set the budget
    rows = summary_json(db, "--algo", "td3", "--env", "Hopper")
    assert {(r["env"], r["source"]) for r in rows} == {("Hopper-v4", "offpoc"), ("Hopper-v2", "published")}
    assert [r["correction"] for r in rows if r["source"] == "offpoc"] == ["none", "acoffpoc"]
    ours = next(r for r in rows if r["source"] == "offpoc")
    assert ours["n_seeds"] == 2 and ours["last_step"] == 12_000

    md = invoke("export", "--table", "summary", "--format", "md", "--algo", "td3", "--env", "Hopper", "--db", str(db))
    lines = md.stdout.splitlines()
    assert lines[0] == "| Method | Hopper |"  # one column for the family, each cell naming its version
    assert lines[2].startswith("| TD3 [offpoc] | ") and lines[2].endswith("(v4) |")
    published = next(r for r in rows if r["source"] == "published" and r["correction"] == "acoffpoc")
    assert published["budget"] == 12_000  # the published curves meet these runs at their budget
    assert not any("3658.85" in line for line in lines)  # their 1M figure would set 12k runs beside 1M ones
    asked = invoke("export", "--table", "summary", "--format", "md", "--algo", "td3", "--env", "Hopper", "--until",
                   "1000000", "--db", str(db)).stdout.splitlines()  # fmt: skip
    cell = f"**3658.85 ± {pm('TD3', 'Hopper-v2', 'AC-Off-POC_')} (v2)**"
    assert any(line.startswith(f"| TD3 + AC-Off-POC [published] | {cell}") for line in asked)
    assert any(line.startswith("| TD3 [offpoc] | none at 1,000,000 (2 short) (v4)") for line in asked)

    out = invoke("export", "--table", "summary", "--env", "Hopper-v4", "--db", str(db), "-o", str(tmp_path / "s.csv"))
    assert out.exit_code == 0 and "wrote 2 summary rows" in out.stderr
    table = list(csv.DictReader(io.StringIO((tmp_path / "s.csv").read_text())))
    assert list(table[0])[:7] == ["algo", "env", "correction", "divergence", "n_seeds", "mean", "ci95"]
    assert {r["env"] for r in table} == {"Hopper-v4"}


# ---- bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--table", "summary", "--last", "0"], "--last must be at least 1"),
        (["--table", "summary", "--format", "xlsx"], "unknown format 'xlsx' for --table summary"),
        (["--table", "evaluations", "--format", "latex"], "unknown format 'latex' for --table evaluations"),
        (["--table", "evaluations", "--last", "5"], "--last applies to --table finals, summary, aggregate"),
        (["--table", "weights", "--until", "5000"], "--until applies to --table finals, summary, aggregate"),
        (["--table", "summary", "--last", "3", "--last-steps", "5000"], "pass one of them"),
        (["--table", "summary", "--last-steps", "0"], "--last-steps must be at least 1"),
        (["--table", "summary", "--until", "-1"], "--until must be a step"),
    ],
)
def test_bad_summary_options_exit_2(filled_store: Path, args: list[str], message: str) -> None:
    result = invoke("export", *args, "--db", str(filled_store))
    assert result.exit_code == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1


def test_summary_of_a_single_seed_has_no_interval(filled_store: Path) -> None:
    rows = summary_json(filled_store)
    assert [(r["algo"], r["correction"], r["n_seeds"]) for r in rows] == [("sac", "acoffpoc", 1), ("td3", "none", 1),
                                                                          ("td3", "acoffpoc", 1)]  # fmt: skip
    assert all(r["ci95"] is None for r in rows)
    md = invoke("export", "--table", "summary", "--format", "md", "--db", str(filled_store)).stdout
    assert "±" not in md.split("\n\n")[0]


def test_a_seed_trained_twice_counts_once_in_the_summary_and_the_table_says_so(tmp_path: Path) -> None:
    """quick.toml's TD3 seed 0 and a --compare study's seed 0 (differing only in budget) once showed as two
    seeds: one run a seed is counted, the furthest, and the Markdown note names the one left out."""
    from store.summary import summary_rows
    from tests.support.storefill import fill

    db = tmp_path / "s.db"
    store = open_store(db, create=True)
    ids = create_runs(store, [spec("td3", "none", seed=0), spec("td3", "none", seed=0), spec("td3", "none", seed=1)])
    for run_id, steps in zip(ids, (3000, 4000, 4000), strict=True):
        fill(db, run_id, steps=steps)
        finish(open_store(db), run_id, "finished", only_from=("queued",))
    rows = summary_rows(open_store(db))
    assert [(r.n_seeds, r.budget) for r in rows] == [(2, 4000)]  # runs 2 and 3, at 4,000: run 1 left out
    md = CliRunner().invoke(app, ["export", "--table", "summary", "--format", "md", "--db", str(db)])
    assert f"1 run repeats a seed of its method, left out (run {ids[0]} for run {ids[1]})" in md.stdout
    finals = CliRunner().invoke(app, ["export", "--table", "finals", "--format", "json", "--db", str(db)])
    assert [r["run_id"] for r in json.loads(finals.stdout)] == ids[1:]  # the summary's seeds, and it says so
    assert f"note: 1 run repeats a seed of its method, left out (run {ids[0]} for run {ids[1]})" in finals.stderr


def test_a_seed_too_short_for_its_window_is_counted_and_said(tmp_path: Path) -> None:
    """A seed whose evaluations all fall at or before its learning start (start_steps) has no final return:
    the summary counts it in n_too_short, and a row with no other seed says so instead of a number."""
    import dataclasses

    db = tmp_path / "short.db"
    store = open_store(db, create=True)
    late = [dataclasses.replace(s, config={**s.config, "start_steps": 3000}) for s in (spec(seed=0), spec(seed=1))]
    ids = create_runs(store, [*late, spec(correction="none", seed=0)])
    store.close()
    for run_id in ids:
        fill_learning(db, run_id, 3000, gain=1.0)
        finish(open_store(db), run_id, "finished", only_from=("queued",))
    rows = {r["correction"]: r for r in summary_json(db)}
    assert (rows["acoffpoc"]["n_seeds"], rows["acoffpoc"]["n_too_short"], rows["acoffpoc"]["mean"]) == (0, 2, None)
    assert (rows["none"]["n_seeds"], rows["none"]["n_too_short"]) == (1, 0)
    md = invoke("export", "--table", "summary", "--format", "md", "--db", str(db)).stdout
    assert "too short for the window (2 seeds)" in md and "2 seeds too short for the window" in md, md
    from store.aggregate_tables import method_scores

    scores = method_scores(open_store(db), normalise="none")  # the scores across tasks: the same window
    assert [key[1] for key in scores] == ["none"], scores
    aggregate = invoke("export", "--table", "aggregate", "--format", "md", "--db", str(db)).stdout
    assert "2 seeds too short for the window (no evaluation after learning starts) left out." in aggregate


def test_a_finals_window_reaching_before_learning_starts_stops_there(tmp_path: Path) -> None:
    """``--last-steps`` longer than a run's learning: its final return is the mean of the evaluations after
    its start_steps only (none of the untrained policy's), the same in the finals table as in the summary."""
    import dataclasses

    from store.stats import FinalWindow
    from store.summary import final_rows

    db = tmp_path / "floor.db"
    store = open_store(db, create=True)
    run_spec = spec(seed=0)
    (run_id,) = create_runs(store, [dataclasses.replace(run_spec, config={**run_spec.config, "start_steps": 4000})])
    store.close()
    fill_learning(db, run_id, 12_000, gain=1.0)
    finish(open_store(db), run_id, "finished", only_from=("queued",))
    stored = {step: value for step, value in open_store(db).execute(
        "SELECT step, return_mean FROM evaluations WHERE run_id = ?", [run_id]).fetchall()}  # fmt: skip
    (row,) = final_rows(open_store(db), FinalWindow(steps=50_000), 12_000)
    first, last, count, final = row[-5:-1]
    assert (first, last, count) == (5_000, 12_000, 8)
    assert final == pytest.approx(np.mean([stored[s] for s in range(5_000, 12_001, 1000)]), rel=1e-12)
    (summary,) = summary_json(db, "--until", "12000", "--last-steps", "50000")
    assert summary["mean"] == pytest.approx(final, rel=1e-12)


def test_a_seed_that_failed_before_its_first_evaluation_is_counted_and_said(tmp_path: Path) -> None:
    """A seed that ended with no evaluation used to vanish: its method's row showed 2 seeds, bold, beside a
    baseline of 3, no note said a seed was missing, and the budget called it "queued". It is counted now, the
    row's cell names its own count, the note says why, and a method whose seeds all failed keeps a row."""
    db = tmp_path / "s.db"
    store = open_store(db, create=True)
    specs = [spec(correction="none", seed=s) for s in range(3)] + [spec(seed=s) for s in range(3)]
    ids = create_runs(store, [*specs, spec(algo="sac", correction="none"), spec(algo="sac")])
    store.close()
    for run_id in ids[:5] + ids[6:7]:
        fill_learning(db, run_id, 3000, gain=1.0 + run_id / 10)
    for run_id in ids:
        status = "failed" if run_id in (ids[5], ids[7]) else "finished"
        finish(open_store(db), run_id, status, only_from=("queued",))
    rows = {(r["algo"], r["correction"]): r for r in summary_json(db)}
    assert [rows["td3", c]["n_seeds"] for c in ("none", "acoffpoc")] == [3, 2]
    assert rows["td3", "acoffpoc"]["n_unevaluated"] == 1 and rows["td3", "none"]["n_unevaluated"] == 0
    assert (rows["sac", "acoffpoc"]["n_seeds"], rows["sac", "acoffpoc"]["n_unevaluated"]) == (0, 1)
    md = invoke("export", "--table", "summary", "--format", "md", "--db", str(db)).stdout
    td3 = next(line for line in md.splitlines() if line.startswith("| TD3 + AC-Off-POC"))
    assert "(2 of 3 seeds)" in td3, md
    sac = next(line for line in md.splitlines() if line.startswith("| SAC + AC-Off-POC"))
    assert "no evaluations" in sac, md
    assert re.search(r"^\| SAC \| \**-?[\d.]+ \(1 seed\)\** \|$", md, re.M), md  # one seed, none missing
    assert "2 seeds with no evaluation (queued, or ended before the first) are left out." in md, md
    one = invoke("export", "--table", "summary", "--format", "md", "--algo", "td3", "--db", str(db)).stdout
    assert "1 seed with no evaluation (queued, or ended before the first) is left out." in one, one
    assert "queued)" not in invoke("dashboard", "--once", "--db", str(db)).stdout


def test_a_seed_with_no_evaluation_up_to_the_budget_is_counted_too_short(tmp_path: Path) -> None:
    """A seed past the budget whose evaluations all come after it (evaluated at 10,000 and 20,000, compared at
    5,000; an imported curve without step 0 alike) was in none of the counts, its row's last_step 20,000 beyond
    the budget. It is too short for the window there: counted, said, and the row stops at the budget."""
    from store.summary import summary_rows
    from store.writer import RunWriter

    db = tmp_path / "s.db"
    store = open_store(db, create=True)
    (run_id,) = create_runs(store, [spec(correction="none")])
    writer = RunWriter(store, run_id)
    for step in (10_000, 20_000):
        writer.add_eval(step, step / 100, 1000.0, 10.0, [1000.0] * 3, [1000] * 3)
    writer.flush(20_000, 19_000)
    finish(store, run_id, "finished", only_from=("queued",))
    (row,) = summary_rows(open_store(db), until=5_000)
    assert (row.n_seeds, row.n_short, row.n_too_short, row.n_unevaluated) == (0, 0, 1, 0)
    assert row.last_step <= 5_000
