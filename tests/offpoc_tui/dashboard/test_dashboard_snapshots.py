"""Each view at a fixed terminal size on deterministic data (pytest-textual-snapshot).

After an intended change of look, regenerate with ``pytest -n 0 --snapshot-update
tests/offpoc_tui/dashboard/test_dashboard_snapshots.py`` (in one process: syrupy finds and removes snapshots no test
uses only there) and review the SVGs in ``tests/offpoc_tui/dashboard/__snapshots__``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from offpoc_tui.dashboard.app import Dashboard
from offpoc_tui.dashboard.figures import LinesFigure, MatrixFigure
from offpoc_tui.dashboard.plots import FigurePlot
from store import open_store
from tests.support.pilot import drive, until

SIZES = {"80x24": (80, 24), "160x45": (160, 45)}
"""The smallest terminal every view must be readable at, and a large one whose space it must use."""


def has_data(plot: FigurePlot) -> bool:
    figure = plot.figure
    return isinstance(figure, MatrixFigure) or (isinstance(figure, LinesFigure) and bool(figure.lines))


def ready(plot_id: str | None, keys: tuple[str, ...]) -> Callable[[Pilot], Any]:
    """Press ``keys`` once the first poll is in, then wait for the view's plot to hold data."""

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        assert isinstance(app, Dashboard)
        await until(pilot, lambda: app.polls > 0)
        await pilot.press(*keys)
        if plot_id is not None:
            plot = app.query_one(f"#{plot_id}", FigurePlot)
            await until(pilot, lambda: has_data(plot))
            await until(pilot, lambda: app.polls > 2)  # the view's data has been answered again
            await until(pilot, lambda: app.answered == app.request)  # for the last key pressed
        plots = [p for p in app.screen.query(FigurePlot) if p.size.width]

        def settled() -> bool:  # every picture built (in threads) for its figure and its size now
            return all(p.drawn is p.figure and p.drawn_size == tuple(p.size) for p in plots)

        await until(pilot, settled)
        await pilot.pause(0.2)
        await until(pilot, settled)  # a layout that moved during the pause has its pictures again

    return run_before


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(
    ("plot_id", "keys"),
    [
        pytest.param(None, (), id="runs"),
        pytest.param("curves-plot", ("2",), id="curves"),  # a line per run: the legend names each
        pytest.param("curves-plot", ("2", "g"), id="curves-grouped"),
        pytest.param("quantities-training", ("3",), id="quantities"),
        pytest.param("quantities-training", ("3", "h"), id="quantities-heatmap"),
        pytest.param("compare-plot", ("4",), id="compare"),
        pytest.param("detail-losses", ("5",), id="detail"),
        pytest.param(None, ("question_mark",), id="help"),
    ],
)
def test_view(dashboard_store: Path, snap_compare: Any, plot_id: str | None, keys: tuple[str, ...], size: str) -> None:
    app = Dashboard(dashboard_store, poll_s=0.1)
    assert snap_compare(app, terminal_size=SIZES[size], run_before=ready(plot_id, keys))


@pytest.mark.parametrize(
    ("plot_id", "keys"),
    [pytest.param("curves-plot", ("2", "g"), id="curves-grouped"), pytest.param("compare-plot", ("4",), id="compare")],
)
def test_study_with_few_and_many_seeds(
    study_store: Path, snap_compare: Any, plot_id: str, keys: tuple[str, ...]
) -> None:
    """The issue's HalfCheetah study at 160×45: with n=2 the 95% band spans ±12.7 standard errors; the
    y-axis still follows the means, the band is a clipped dim fill behind them, and the title says why."""
    app = Dashboard(study_store, poll_s=0.1)
    assert snap_compare(app, terminal_size=(160, 45), run_before=ready(plot_id, keys))


@pytest.mark.parametrize("size", SIZES)
def test_tagged_compare_regrouped_by_a_setting(swept_store: Path, snap_compare: Any, size: str) -> None:
    """Compare of the runs tagged ``sweep`` with its rows by batch size (``g``): what the heading, the plot's
    legend and the table say of a filtered, regrouped comparison."""
    app = Dashboard(swept_store, poll_s=0.1)
    keys = ("slash", *"tag=sweep", "enter", "4", "g")
    assert snap_compare(app, terminal_size=SIZES[size], run_before=ready("compare-plot", keys))


@pytest.mark.parametrize("grouped", [False, True], ids=["fourteen-runs", "by-method"])
def test_curves_name_their_lines_at_80x24(swept_store: Path, snap_compare: Any, grouped: bool) -> None:
    """Issue 69, item 1: fourteen runs' lines at 80×24 (more than the plot has rows: the legend names those that
    fit and says how many it leaves out, where plotext would drop it whole), and by method."""
    app = Dashboard(swept_store, poll_s=0.1)
    keys = ("2", "g") if grouped else ("2",)
    assert snap_compare(app, terminal_size=SIZES["80x24"], run_before=ready("curves-plot", keys))


TRACEBACK = "\n".join(
    ["Traceback (most recent call last):"]
    + [f'  File "agents/training.py", line {100 + i}, in step\n    self._update()' for i in range(30)]
    + ["RuntimeError: the critic loss is nan at step 12,000: training diverged"]
)


@pytest.fixture
def failed_store(dashboard_store: Path) -> Path:
    """The dashboard store with run 1, the cursor's, failed with a traceback longer than a screen."""
    db = open_store(dashboard_store)
    db.execute(
        "UPDATE runs SET status = 'failed', error = ?, traceback = ? WHERE id = 1",
        ["RuntimeError: the critic loss is nan at step 12,000: training diverged", TRACEBACK],
    )
    db.conn.commit()
    db.close()
    return dashboard_store


@pytest.mark.parametrize("size", SIZES)
def test_detail_shows_a_failure_first(failed_store: Path, snap_compare: Any, size: str) -> None:
    app = Dashboard(failed_store, poll_s=0.1)
    assert snap_compare(app, terminal_size=SIZES[size], run_before=ready("detail-losses", ("5",)))


def test_detail_scrolls_from_the_keyboard(failed_store: Path) -> None:
    """PageDown, End and Home reach every line of Detail's facts: the config's ~40 rows and the traceback."""

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("5")
        facts = app.detail_pane.facts
        await until(pilot, lambda: facts.max_scroll_y > facts.size.height)
        await pilot.press("pagedown")
        await pilot.pause(0.1)
        assert 0 < facts.scroll_y < facts.max_scroll_y
        await pilot.press("end")
        await pilot.pause(0.1)
        assert facts.scroll_y == facts.max_scroll_y
        await pilot.press("home")
        await pilot.pause(0.1)
        assert facts.scroll_y == 0
        await pilot.press("1", "end")  # the runs table: End is its last row
        await until(pilot, lambda: app.table.cursor_run == 6)

    drive(failed_store, scenario)
