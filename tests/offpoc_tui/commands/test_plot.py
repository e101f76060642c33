"""``offpoc plot``: paper-style figures from the published curves and the user's runs."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner, Result

from offpoc_tui.charts.curves import figure, panels
from offpoc_tui.cli import app
from store import open_store
from store.reader import eval_series
from store.runs import create_runs, finish
from store.stats import smooth
from store.summary import matching_runs
from tests.conftest import REFERENCE_CURVES, needs_reference
from tests.support.storefill import fill_learning, spec

runner = CliRunner()
MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-", "svg": b"<?xml"}


def invoke(*args: str) -> Result:
    return runner.invoke(app, list(args))


def published(algo: str, env: str, prefix: str = "") -> np.ndarray:
    folder = REFERENCE_CURVES / "Learning Curves" / algo / env
    return np.stack([np.load(folder / f"{prefix}{algo}_{env}_{seed}.npy") for seed in range(10)])


@needs_reference
def test_figure_has_a_panel_per_algo_and_env_with_the_seed_means(reference_store: Path) -> None:
    db = open_store(reference_store)
    runs = matching_runs(db, algos=["td3", "sac"], envs=["Hopper", "Swimmer-v2"])
    assert len(runs) == 2 * 2 * 60
    found = panels(db, runs, window=5)
    fig = figure(found, window=5)
    visible = [axes for axes in fig.axes if axes.get_visible()]
    assert [axes.get_title() for axes in visible] == [
        f"{task} · at 1,000,000 steps" for task in ("SAC · Hopper-v2", "SAC · Swimmer-v2", "TD3 · Hopper-v2",
                                                    "TD3 · Swimmer-v2")
    ]  # fmt: skip
    td3_hopper = visible[2]
    lines = {line.get_label(): line for line in td3_hopper.get_lines()}
    assert list(lines) == ["TD3 (n=10)", "TD3 + AC-Off-POC (n=10)", "TD3 + ACE (n=10)", "TD3 + Geoff-PAC (n=10)",
                           "TD3 + IPG (n=10)", "TD3 + RIS-Off-PAC (n=10)"]  # fmt: skip
    expected = np.mean([smooth(seed, 5) for seed in published("TD3", "Hopper-v2", "AC-Off-POC_")], axis=0)
    x, y = lines["TD3 + AC-Off-POC (n=10)"].get_data()
    np.testing.assert_array_equal(x, np.arange(1001) * 1000)
    np.testing.assert_allclose(y, expected)
    assert len(td3_hopper.collections) == 6  # a 95% band per method
    assert "smoothed over 5 evaluations" in fig.get_suptitle()


@needs_reference
@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_plot_writes_each_format(reference_store: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"fig.{fmt}"
    result = invoke("plot", "--algo", "td3", "--env", "Hopper", "--env", "Walker2d", "-o", str(out),
                    "--db", str(reference_store))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "2 panels, 12 curves from 120 runs" in result.stderr
    data = out.read_bytes()
    assert len(data) > 10_000 and data.startswith(MAGIC[fmt])
    assert not list(tmp_path.glob("*.tmp"))
    if fmt == "png":
        with Image.open(out) as image:
            assert image.size[0] > image.size[1] > 300  # two panels side by side


@needs_reference
def test_users_runs_share_the_panel_with_the_published_curves(reference_store: Path, tmp_path: Path) -> None:
    db_path = tmp_path / "mixed.db"
    shutil.copy(reference_store, db_path)
    db = open_store(db_path)
    ids = create_runs(db, [spec(correction=c, seed=s, env="Hopper-v4") for c in ("none", "acoffpoc") for s in (0, 1)])
    for run_id in ids:
        fill_learning(db_path, run_id, 8_000, gain=1.0)
        finish(db, run_id, "finished", only_from=("queued",))
    found = panels(db, matching_runs(db, algos=["td3"], envs=["Hopper"], corrections=["none", "acoffpoc"]))
    assert len(found) == 1
    axes = next(a for a in figure(found).axes if a.get_visible())
    assert axes.get_title() == "TD3 · Hopper · at 8,000 steps"  # the published curves meet the runs at theirs
    assert max(line.get_xdata().max() for line in axes.get_lines()) == 8_000
    styles = {line.get_label(): line.get_linestyle() for line in axes.get_lines()}
    assert styles == {
        "TD3 [offpoc v4] (n=2)": "-",
        "TD3 + AC-Off-POC [offpoc v4] (n=2)": "-",
        "TD3 [published v2] (n=10)": "--",
        "TD3 + AC-Off-POC [published v2] (n=10)": "--",
    }
    only_ours = invoke("plot", "--source", "offpoc", "-o", str(tmp_path / "ours.svg"), "--db", str(db_path))
    assert only_ours.exit_code == 0 and "1 panel, 2 curves from 4 runs" in only_ours.stderr
    # --until cuts every curve at that step instead.
    cut = panels(db, matching_runs(db, algos=["td3"], envs=["Hopper"]), until=4_000)
    axes = next(a for a in figure(cut).axes if a.get_visible())
    assert max(line.get_xdata().max() for line in axes.get_lines()) <= 4_000 and axes.get_xlim()[1] < 5_000
    assert invoke("plot", "--until", "4000", "-o", str(tmp_path / "cut.png"), "--db", str(db_path)).exit_code == 0


def test_a_line_is_a_mean_over_the_same_seeds_at_the_budget_and_says_who_is_left_out(tmp_path: Path) -> None:
    """A seed short of the panel's budget (stopped at 1,000 of 3,000 steps) once stayed in its line: beyond 1,000
    the line went on as the other seeds' mean, labelled n=3, its band gone where one seed was left. The line is
    the seeds with evaluations up to the budget now, and its label counts the rest of its seeds: short of the
    budget, not evaluated (queued, failed before the first), or evaluated only past the budget."""
    from store.writer import RunWriter

    db_path = tmp_path / "s.db"
    db = open_store(db_path, create=True)
    ids = create_runs(db, [spec(correction=c, seed=s, env="Hopper-v4") for c in ("none", "acoffpoc") for s in range(3)])
    ids += create_runs(db, [spec(correction="ipg", seed=0, env="Hopper-v4"), spec(correction="none", seed=3)])
    ids += create_runs(db, [spec(correction="acoffpoc", seed=3, env="Hopper-v4"), spec(correction="none", seed=4)])
    late, failed = ids[7], ids[9]  # ids[8] stays queued
    create_runs(db, [spec(correction="none", seed=0, env="Walker2d-v4")])  # queued: a task with no evaluation
    for run_id in ids[:7]:
        short = run_id in (ids[5], ids[6])
        fill_learning(db_path, run_id, 1_000 if short else 3_000, gain=1.0 + run_id)
        finish(db, run_id, "stopped" if short else "finished", only_from=("queued",))
    writer = RunWriter(db, late)  # evaluated only past the budget (an imported curve without step 0 alike)
    for step in (4_000, 5_000):
        writer.add_eval(step, 1.0, 10.0, 0.0, [10.0], [100])
    writer.flush(5_000, 4_000)
    finish(db, late, "finished", only_from=("queued",))
    finish(db, failed, "failed", only_from=("queued",))
    (panel,) = panels(db, matching_runs(db), until=3_000)
    assert panel.budget == 3_000 and sum(panel.short.values()) == 5
    axes = next(a for a in figure([panel]).axes if a.get_visible())
    lines = {line.get_label(): line for line in axes.get_lines()}
    assert set(lines) == {"TD3 (n=3 of 5, 2 left out)", "TD3 + AC-Off-POC (n=2 of 4, 2 left out)",
                          "TD3 + IPG (JSD) (none at the budget: 1 left out)"}, set(lines)  # fmt: skip
    x, y = lines["TD3 + AC-Off-POC (n=2 of 4, 2 left out)"].get_data()
    both = [np.asarray(eval_series(db, {i: -1})[i][2]) for i in ids[3:5]]
    np.testing.assert_array_equal(x, np.arange(4) * 1000)
    np.testing.assert_allclose(y, np.mean(both, axis=0))  # the two seeds at every step, never one alone
    written = invoke("plot", "--until", "3000", "-o", str(tmp_path / "f.png"), "--db", str(db_path))
    said = "from 11 runs (5 short of their panel's budget or not evaluated up to it, left out; 1 in tasks with no"
    assert said + " evaluation yet, no panel)" in written.stderr, written.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "fig.txt"], "name it .png, .svg or .pdf"),
        (["-o", "missing-dir/fig.png"], "not a file in an existing directory"),
        (["-o", "fig.png", "--smooth", "0"], "--smooth must be at least 1"),
        (["-o", "fig.png", "--until", "-5"], "--until must be a step (0 or more), got -5"),
        (["-o", "fig.png", "--source", "paper"], "unknown source 'paper'"),
        (["-o", "fig.png", "--env", "Ant"], "no evaluations match these filters"),
        ([], "Missing option '--output'"),
    ],
)
def test_bad_plot_input_exits_2_and_writes_nothing(
    filled_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("plot", *args, "--db", str(filled_store))
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("fig*"))


def test_group_by_draws_a_line_per_value_of_a_setting(tmp_path: Path) -> None:
    import dataclasses

    db_path = tmp_path / "g.db"
    db = open_store(db_path, create=True)
    made = [(c, s, b) for c in ("none", "acoffpoc") for s, b in ((0, 64), (1, 256))]
    specs = [dataclasses.replace(spec(correction=c, seed=s), config={**spec(correction=c, seed=s).config,
                                                                     "batch_size": b}) for c, s, b in made]  # fmt: skip
    ids = create_runs(db, specs)
    for run_id in ids:
        fill_learning(db_path, run_id, 6_000, gain=1.0)
    (panel,) = panels(db, matching_runs(db), group_by="batch_size")
    axes = next(a for a in figure([panel]).axes if a.get_visible())
    assert sorted(line.get_label() for line in axes.get_lines()) == [
        "TD3 {batch_size=256}, all methods (n=2)",
        "TD3 {batch_size=64}, all methods (n=2)",
    ]
    db.close()
    ok = invoke("plot", "--group-by", "batch_size", "-o", str(tmp_path / "g.png"), "--db", str(db_path))
    assert ok.exit_code == 0 and "1 panel, 2 curves from 4 runs" in ok.stderr
    bad = invoke("plot", "--group-by", "batchsize", "-o", str(tmp_path / "b.png"), "--db", str(db_path))
    assert bad.exit_code == 2 and "no run here has the setting 'batchsize'" in bad.stderr
    summary = invoke(
        "export", "--table", "summary", "--format", "csv", "--group-by", "batch_size", "--db", str(db_path)
    )
    assert summary.exit_code == 0, summary.output
    rows = list(csv.DictReader(io.StringIO(summary.stdout)))
    assert sorted((row["correction"], row["n_seeds"], row["variant"]) for row in rows) == [
        ("all", "2", "batch_size=256"),
        ("all", "2", "batch_size=64"),
    ]
    table = invoke("export", "--table", "summary", "--format", "md", "--group-by", "batch_size", "--db", str(db_path))
    assert "TD3 {batch_size=64}, all methods" in table.stdout and "TD3 {batch_size=256}, all methods" in table.stdout
    assert "Mean over runs (every method's runs of a value pooled, a seed once per method" in table.stdout  # not seeds
    assert " seed" not in table.stdout.split("Bold:")[1], table.stdout  # its note counts runs too
    # A setting no run has, or none named, is refused in one line by export as by plot (issue 69, item 11).
    for command in (["export", "--table", "summary"], ["plot", "-o", str(tmp_path / "n.png")]):
        for name, said in (("nosuch", "no run here has the setting 'nosuch'"), ("", "--group-by needs a setting's")):
            refused = invoke(*command, "--group-by", name, "--db", str(db_path))
            assert refused.exit_code == 2 and said in refused.stderr, (command, name, refused.output)
            assert len(refused.stderr.strip().splitlines()) == 1 and not refused.stdout


def test_a_saved_figure_holds_its_titles_and_legends_whole(tmp_path: Path) -> None:
    """One narrow panel with a long title note (smoothing) and long legend labels: the PNG is as large as
    everything drawn on it, so nothing is cut at its edges."""
    import dataclasses

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from offpoc_tui.charts.curves import DPI, save
    from store.variants import label_variants

    db_path = tmp_path / "wide.db"
    db = open_store(db_path, create=True)
    made = [(c, s, b) for c in ("none", "acoffpoc") for s, b in ((0, 64), (1, 64), (2, 128))]
    specs = [dataclasses.replace(spec(correction=c, seed=s), config={**spec(correction=c, seed=s).config,
                                                                     "batch_size": b}) for c, s, b in made]  # fmt: skip
    for run_id in create_runs(db, specs):
        fill_learning(db_path, run_id, 6_000, gain=1.0)
    fig = figure(panels(db, label_variants(db, matching_runs(db)), 5), 5)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    drawn = fig.get_tightbbox(canvas.get_renderer())  # inches, everything drawn
    assert drawn.x0 < 0 or drawn.x1 > fig.get_figwidth(), "this figure's title is wider than its panel"
    save(fig, tmp_path / "wide.png")
    width, height = Image.open(tmp_path / "wide.png").size
    assert width >= drawn.width * DPI and height >= drawn.height * DPI
    db.close()
