"""Curves and Compare with few and many seeds: the scale follows the means, the band choice, and what
each view says when it cannot show something (Pilot, on the issue's study)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from textual.pilot import Pilot
from typer.testing import CliRunner

from offpoc_tui.cli import app as cli
from offpoc_tui.dashboard.app import Dashboard
from offpoc_tui.dashboard.figures import Area, LinesFigure, y_range
from offpoc_tui.dashboard.plots import _fill, short
from store import open_store
from store.runs import create_runs
from tests.support.pilot import drive, plot, shown_text, until
from tests.support.storefill import fill_study, spec


def lines_figure(app: Dashboard, plot_id: str) -> LinesFigure:
    figure = plot(app, plot_id).figure
    assert isinstance(figure, LinesFigure)
    return figure


def means(figure: LinesFigure) -> list[np.ndarray]:
    return [np.asarray(line.y) for line in figure.lines if line.label]


@pytest.mark.parametrize("plot_id, keys", [("curves-plot", ("2", "g")), ("compare-plot", ("4",))])
def test_the_scale_follows_the_means_and_bands_are_areas_behind_them(
    study_store: Path, plot_id: str, keys: tuple[str, ...]
) -> None:
    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press(*keys)
        await until(pilot, lambda: bool(lines_figure(app, plot_id).areas))
        figure = lines_figure(app, plot_id)
        seeds = 2 if "n=2" in figure.lines[0].label else 10  # type: ignore[operator]
        lo = min(float(m.min()) for m in means(figure))
        hi = max(float(m.max()) for m in means(figure))
        assert figure.ylim == pytest.approx((lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)))
        assert len(figure.areas) == 2 and not any(line.label is None for line in figure.lines)  # no raw seeds
        widest = max(float(np.nanmax(a.upper - a.lower)) for a in figure.areas)
        if seeds == 2:  # ±12.7 standard errors: far wider than the means' range, which sets the scale anyway
            assert widest > 2 * (hi - lo)
            assert "(n=2: ±12.7 s.e.; b: other bands)" in figure.title
        else:
            assert widest < hi - lo and "s.e.;" not in figure.title
        assert "band 95% t-interval" in figure.title

    drive(study_store, scenario)


def test_b_cycles_the_band_and_the_title_says_which(study_store: Path) -> None:
    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("2", "g")
        figure = lambda: lines_figure(app, "curves-plot")  # noqa: E731
        await until(pilot, lambda: bool(figure().areas))
        ci = {round(float(np.nanmax(a.upper - a.lower))) for a in figure().areas}
        await pilot.press("b")
        await until(pilot, lambda: "band ±1 standard error" in figure().title)
        assert "s.e.;" not in figure().title
        se = {round(float(np.nanmax(a.upper - a.lower))) for a in figure().areas}
        assert max(se) < max(ci)
        await pilot.press("b")
        await until(pilot, lambda: "band min–max over seeds" in figure().title)
        for area, line in zip(figure().areas, means(figure()), strict=True):  # min–max holds the mean
            inside = np.isfinite(area.lower)
            assert np.all(area.lower[inside] <= line[inside] + 1e-9) and np.all(
                line[inside] <= area.upper[inside] + 1e-9
            )
        await pilot.press("b")
        await until(pilot, lambda: "no band, seeds faint behind" in figure().title)
        assert figure().areas == []
        raw = [line for line in figure().lines if line.label is None]
        seeds = 2 if "(n=2)" in str(figure().lines[-1].label) else 10
        assert len(raw) == 2 * seeds and figure().ylim == y_range(figure().lines)  # the seeds are drawn: they count
        await pilot.press("4")  # Compare shares the choice
        await until(pilot, lambda: "no band" in lines_figure(app, "compare-plot").title)
        await pilot.press("b")
        await until(pilot, lambda: "band 95% t-interval" in lines_figure(app, "compare-plot").title)
        assert "b band 95% t-interval" in " ".join(shown_text(app, "#curves-state").split())  # the state line too

    drive(study_store, scenario)


def test_views_say_why_they_show_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    fill_study(path, 2, steps=20_000)  # runs 1-2 none, 3-4 acoffpoc: none has recorded λ

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("3")  # the cursor is on run 1, a baseline
        await until(pilot, lambda: "no correction" in plot(app, "quantities-histogram").figure.title)
        title = plot(app, "quantities-histogram").figure.title
        assert "run 1 has no correction (none): no λ; runs with λ: 3, 4 (move the cursor to one)" in title
        assert plot(app, "quantities-training").figure.title == title
        await pilot.press("slash", *"seed=9", "enter", "2")
        await until(pilot, lambda: "matches no run" in plot(app, "curves-plot").figure.title)
        assert "the filter 'seed=9' matches no run (/ changes it; an empty filter shows all)" in (
            plot(app, "curves-plot").figure.title
        )
        await pilot.press("3")
        await until(pilot, lambda: "matches no run" in plot(app, "quantities-histogram").figure.title)

    drive(path, scenario)


def test_an_empty_store_says_so_in_every_view(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    open_store(path, create=True).close()

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        for key, plot_id in (("2", "curves-plot"), ("4", "compare-plot")):
            await pilot.press(key)
            await until(pilot, lambda plot_id=plot_id: "no runs in this store yet" in plot(app, plot_id).figure.title)

    drive(path, scenario)


def test_an_imported_run_says_it_has_no_weights(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = open_store(path, create=True)
    (run_id,) = create_runs(db, [spec()])
    db.execute(  # as `offpoc import reference` records one of the published curves
        "UPDATE runs SET source = '/data/Learning Curves/TD3/Hopper-v2/TD3_Hopper-v2_0.npy',"
        " origin = 'reference:TD3/Hopper-v2/TD3_Hopper-v2_0.npy', status = 'finished' WHERE id = ?",
        [run_id],
    )
    db.conn.commit()
    db.close()

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("3")
        await until(
            pilot,
            lambda: "was imported (published): curves only, no λ" in plot(app, "quantities-histogram").figure.title,
        )
        assert "no run in this store has a correction" in plot(app, "quantities-histogram").figure.title

    drive(path, scenario)


def test_once_states_the_final_window_in_steps(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    fill_study(path, 2, steps=100_000, every=5_000)
    result = CliRunner().invoke(cli, ["dashboard", "--once", "--db", str(path)])
    text = re.sub(r"\s+", " ", result.stdout)
    assert result.exit_code == 0 and "final over steps" in text
    assert text.count("90k–100k") == 2  # every 5,000 steps, none before the last 10% of 100,000 steps
    assert "each seed's last 10 evaluations" in text
    result = CliRunner().invoke(cli, ["dashboard", "--once", "--last-steps", "10000", "--db", str(path)])
    text = re.sub(r"\s+", " ", result.stdout)
    assert text.count("95k–100k") == 2 and "each seed's last 10,000 steps" in text
    for args, message in (
        (["--last", "3", "--last-steps", "9"], "pass one of them"),
        (["--last-steps", "0"], "at least 1"),
    ):
        result = CliRunner().invoke(cli, ["dashboard", "--once", *args, "--db", str(path)])
        assert result.exit_code == 2 and message in result.stderr


def test_tick_labels_use_k_and_m_never_exponents() -> None:
    assert [short(v) for v in (5000, 1500, 250_000, 991_000, 1_000_000, 0.25, -600, 12.5)] == [
        "5k", "1.5k", "250k", "991k", "1M", "0.25", "-600", "12.5"
    ]  # fmt: skip


def test_a_band_is_filled_within_the_scale_with_no_gaps() -> None:
    x = np.array([0.0, 50_000.0, 100_000.0])
    area = Area(x, np.array([-9000.0, 0.0, 1000.0]), np.array([9000.0, 2000.0, 3000.0]), (90, 90, 90))
    px, py = _fill(area, (0.0, 100_000.0), (-500.0, 4000.0), 160, 40)
    assert min(py) >= -500.0 and max(py) <= 4000.0  # clipped to the means' range, never stretching it
    columns = np.unique(np.round(np.asarray(px) / 100_000 * 159))
    assert len(columns) == 160  # a point in every column across the band's steps
