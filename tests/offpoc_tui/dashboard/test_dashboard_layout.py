"""The dashboard readable at 80×24 and usable from the keyboard: columns by priority, keys in every view,
imported curves out of the way, axes in units (Pilot on real stores)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np
import pytest
from textual.pilot import Pilot

from offpoc_tui.dashboard.app import Dashboard
from offpoc_tui.dashboard.figures import LinesFigure, MatrixFigure
from offpoc_tui.dashboard.model import Model
from offpoc_tui.dashboard.plots import short
from offpoc_tui.dashboard.request import Request
from offpoc_tui.dashboard.runs_table import WIDTHS, columns_for
from store import RunSpec, open_store, where
from store.curve_imports import Curve, import_curves
from store.reader import list_runs
from store.runs import create_runs
from tests.support.storefill import fill_learning, spec


async def until(pilot: Pilot, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the dashboard never got there"
        await pilot.pause(0.05)


def drive(path: Path, scenario: Callable[[Dashboard, Pilot], Awaitable[None]], size: tuple[int, int]) -> None:
    async def main() -> None:
        app = Dashboard(path, poll_s=0.1)
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: app.polls > 0)
            await scenario(app, pilot)

    asyncio.run(main())


def imported(path: Path, count: int = 3) -> None:
    """``count`` curves as the paper's import makes them (origin reference:...), beside the store's own runs."""
    import numpy as np

    db = open_store(path)
    steps = np.arange(0, 21_000, 1000)
    curves = []
    for seed in range(count):
        config = {"algo": "td3", "env_id": "Hopper-v2", "correction": "none", "seed": seed, "imported": True}
        run = RunSpec("reference", "td3", "Hopper-v2", "none", None, seed, int(steps[-1]), config)
        origin = f"reference:TD3/Hopper-v2/TD3_Hopper-v2_{seed}.npy"
        curves.append(Curve(run, origin, f"/nowhere/TD3_Hopper-v2_{seed}.npy", steps, np.linspace(0, 3000, 21)))
    import_curves(db, curves)
    db.close()


def test_the_runs_table_keeps_columns_by_priority_and_never_cuts_lambda() -> None:
    narrow = columns_for(80)
    assert narrow[:2] == ["sel", "id"] and {"status", "progress", "last_return", "mean_lambda", "env"} <= set(narrow)
    assert sum(WIDTHS[k] + 2 for k in narrow) <= 80 and WIDTHS["mean_lambda"] >= len("0.873")
    assert len(columns_for(160)) > len(narrow) and "name" in columns_for(160)


def test_at_80_columns_the_runs_table_shows_lambda_whole(dashboard_store: Path) -> None:
    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        table = app.table
        assert table.keys == columns_for(table.size.width) and "mean_lambda" in table.keys
        values = [str(table.get_row_at(i)[table.keys.index("mean_lambda")]) for i in range(table.row_count)]
        assert any(len(v) == 5 and v.startswith("0.") for v in values)  # 0.873, not a stub

    drive(dashboard_store, scenario, (80, 24))


def test_keys_move_the_cursor_and_leave_the_threshold_box(dashboard_store: Path) -> None:
    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("3")
        first = app.request.cursor
        await pilot.press("down", "down")
        assert app.request.cursor != first and app.table.cursor_row == 2  # ↓ moves the cursor in Weights
        await pilot.press("4")
        pane = app.compare_pane
        assert pane.table.has_focus and not pane.threshold.has_focus
        await pilot.press("3", "5")  # switch views: nothing typed anywhere
        assert app.request.view == "detail" and pane.threshold.value == ""
        await pilot.press("4", "t", *"123")
        assert pane.threshold.has_focus and pane.threshold.value == "123"
        await pilot.press("escape")
        assert pane.table.has_focus and not pane.threshold.has_class("visible") and app.request.threshold is None
        await pilot.press("5")
        assert app.request.view == "detail"

    drive(dashboard_store, scenario, (80, 24))


def test_e_cycles_compare_through_every_algo_and_env(dashboard_store: Path) -> None:
    db = open_store(dashboard_store)
    (extra,) = create_runs(db, [spec(algo="sac", correction="none", env="Walker2d-v4")])
    db.close()
    fill_learning(dashboard_store, extra, 3000, gain=1.0)

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("4")
        await until(pilot, lambda: app.answered == app.request)
        seen = [app.compare_pane.current]
        await pilot.press("e")
        await until(pilot, lambda: app.answered == app.request and app.compare_pane.current != seen[0])
        seen.append(app.compare_pane.current)
        assert set(seen) == {("td3", "Hopper"), ("sac", "Walker2d")}
        assert re.search(r"\(2( of |\/)2 · e: next", str(app.compare_pane.heading.render()))  # one row: 2/2

    drive(dashboard_store, scenario, (80, 24))


def test_imported_curves_wait_behind_p_while_own_runs_exist(dashboard_store: Path) -> None:
    imported(dashboard_store)
    db = open_store(dashboard_store)
    runs = list_runs(db)
    every = tuple(r["id"] for r in runs)
    model = Model()
    drawn = model.answer(db, runs, Request(view="curves", run_ids=every))
    assert isinstance(drawn.figure, LinesFigure) and len(drawn.figure.lines) == 6  # type: ignore[union-attr]
    assert "3 imported curves hidden beside runs trained here (p shows them)" in drawn.figure.title  # type: ignore[union-attr]
    shown = model.answer(db, runs, Request(view="curves", run_ids=every, imported=True))
    assert len(shown.figure.lines) == 9  # type: ignore[union-attr]
    only = [r for r in runs if r["origin"]]
    alone = Model().answer(db, only, Request(view="curves", run_ids=tuple(r["id"] for r in only)))
    assert len(alone.figure.lines) == 3  # type: ignore[union-attr]  # nothing trained here: they show
    db.close()


def test_the_filter_knows_sources(dashboard_store: Path) -> None:
    imported(dashboard_store)
    db = open_store(dashboard_store)
    runs = list_runs(db)
    db.close()
    assert len([r for r in runs if where.parse("source=published")(r)]) == 3
    assert len([r for r in runs if where.parse("source=offpoc,zoo")(r)]) == 6
    with pytest.raises(where.FilterError, match="unknown source 'pub'; use one of offpoc, published, zoo"):
        where.parse("source=pub")


def test_ticks_read_as_numbers_and_wall_time_in_a_unit_that_fits(dashboard_store: Path) -> None:
    assert [short(v) for v in (4.31e-06, 0.25, 5000, 1.5e6)] == ["0.00000431", "0.25", "5k", "1.5M"]
    db = open_store(dashboard_store)
    runs = list_runs(db)
    figure = Model().answer(db, runs, Request(view="curves", run_ids=(1,), wall_time=True)).figure  # type: ignore[union-attr]
    assert isinstance(figure, LinesFigure) and figure.xlabel == "wall time (min)"  # 20,000 steps in 167 s
    assert "hidden" not in figure.title  # nothing imported to hide
    heat = Model().answer(db, runs, Request(view="quantities", cursor=4, heatmap=True)).training  # type: ignore[union-attr]
    assert isinstance(heat, MatrixFigure) and heat.x == (2000.0, 20000.0) and heat.y == (1.0, 0.0)
    assert heat.xlabel == "environment steps (interval end)" and "row" not in heat.title
    db.close()


def test_axis_ticks_fall_on_round_values() -> None:
    """A wall-time axis from a first evaluation at 0.1 s (0.00165 min) reads 2, 4, 6, not 0.00165, 1.98, 3.95."""
    from offpoc_tui.dashboard.plots import round_ticks

    assert round_ticks(0.00165, 7.9)[1] == ["2", "4", "6"]
    assert round_ticks(0, 1_000_000)[1] == ["0", "250k", "500k", "750k", "1M"]
    assert round_ticks(1_500, 19_000)[1] == ["5k", "10k", "15k"]
    assert round_ticks(0.1, 0.9)[1] == ["0.2", "0.4", "0.6", "0.8"]


@pytest.mark.parametrize("height", [10, 24])
def test_a_heatmaps_y_ticks_stand_at_its_top_middle_and_bottom_rows(height: int) -> None:
    """plotext puts a matrix's row 0 at the bottom: the top label must be on the top row, not above the frame."""
    import re

    import plotext as plt

    from offpoc_tui.dashboard.plots import draw

    cells = np.linspace(0, 1, 10 * 12).reshape(10, 12)
    plt.clear_figure()
    plt.plotsize(60, height)
    draw(plt, MatrixFigure("λ heatmap", cells, y=(1.0, 0.0)), 60, height)
    rows = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in plt.build().splitlines()]
    framed = [row for row in rows if "┤" in row or "│" in row]
    labelled = [row.split("┤")[0].strip() for row in framed if "┤" in row]
    assert labelled == ["1", "0.5", "0"] and "┤" in framed[0] and "┤" in framed[-1]


@pytest.mark.parametrize("height", [7, 8, 9, 10, 12, 16, 24])
def test_every_y_tick_of_a_short_plot_is_on_screen(height: int) -> None:
    """Where two y ticks fall on one row plotext keeps one of them, and which one varies with the process's
    hash seed; a plot asks for as many as its height holds, so each label it asks for is drawn."""
    from textual_plotext import Plot

    from offpoc_tui.dashboard.figures import Line
    from offpoc_tui.dashboard.plots import draw, round_ticks, y_tick_count

    x = np.linspace(0, 20_000, 21)
    figure = LinesFigure("returns", "environment steps", "return", [Line(x, x / 7, (200, 0, 0), "a")],
                         ylim=(-180.0, 2980.0))  # fmt: skip
    plt = Plot()
    plt._limit_size(False, False)  # type: ignore[attr-defined]
    plt.plotsize(80, height)
    draw(plt, figure, 80, height)
    picture = re.sub(r"\x1b\[[0-9;]*m", "", plt.build())  # its colours out
    axis = [line.split("┤")[0].split("├")[0].strip() for line in picture.splitlines() if "┤" in line or "├" in line]
    asked = round_ticks(-180.0, 2980.0, count=y_tick_count(height))[1]
    assert [label for label in axis if label] == sorted(asked, key=lambda t: -float(t.replace("k", "e3")))


def test_a_picture_built_for_a_size_left_since_is_never_shown(dashboard_store: Path) -> None:
    """A plot draws in a thread; a resize meanwhile starts a build for the new size. The build for the old size,
    finishing after, must not replace what is on screen (a picture of the wrong size until the next poll)."""
    from rich.text import Text

    from offpoc_tui.dashboard.figures import empty
    from offpoc_tui.dashboard.plots import FigurePlot

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("2")
        plot = app.query_one("#curves-plot", FigurePlot)
        await until(pilot, lambda: plot.drawn is plot.figure and plot.drawn_size == tuple(plot.size))
        shown = plot.drawn
        stale = (plot.size.width + 7, plot.size.height)
        plot._paint(empty("stale", "built for another size"), Text("stale"), stale)
        assert plot.drawn is shown and plot.drawn_size == tuple(plot.size)

    drive(dashboard_store, scenario, (120, 40))


def test_detail_says_a_run_that_ended_before_any_statistics_never_had_them(tmp_path: Path) -> None:
    """Issue 69, item 14: Detail read "no training statistics yet" for a failed run, as if some might come."""
    from offpoc_tui.dashboard.data.detail import detail_data
    from offpoc_tui.dashboard.request import Request
    from store import open_store
    from store.reader import list_runs
    from store.runs import create_runs
    from tests.support.storefill import spec

    db = open_store(tmp_path / "d.db", create=True)
    (failed, queued) = create_runs(db, [spec(), spec(seed=1)])
    db.execute("UPDATE runs SET status = 'failed' WHERE id = ?", [failed])
    db.conn.commit()
    runs = {r["id"]: r for r in list_runs(db)}
    figures = [detail_data(db, runs[i], Request(view="detail")).losses for i in (failed, queued)]
    assert [f.title for f in figures] == ["Losses: no training statistics: failed before any",
                                          "Losses: no training statistics yet"]  # fmt: skip
    assert [f.short_title for f in figures] == ["Losses: none (failed)", "Losses: none yet"]  # a narrow pane's row


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_help_shows_many_keys_and_its_scroll_keys_move_it_alone(dashboard_store: Path, size: tuple[int, int]) -> None:
    """Issue 69, item 3: in ``?`` help PgDn and End did nothing (the runs table behind took them), ↑ ↓ also moved
    the Runs cursor behind it, and about six keys showed at 80×24 (a Markdown table: three rows a key). Now each
    key is a line, PgDn/End/Home/↑/↓ scroll the help alone, and the cursor behind it stays."""
    from textual.containers import VerticalScroll

    from offpoc_tui.dashboard.help_screen import HelpScreen

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        cursor = app.request.cursor
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.pause(0.2)
        scroller = app.screen.query_one("#help", VerticalScroll)
        rows = scroller.size.height
        assert rows >= (18 if size == (80, 24) else 39), rows  # the keys shown at once
        await pilot.press("pagedown")
        await pilot.pause(0.1)
        assert scroller.scroll_y > 0 or scroller.max_scroll_y == 0
        await pilot.press("end")
        await pilot.pause(0.1)
        assert scroller.scroll_y == scroller.max_scroll_y
        await pilot.press("home", "down", "down")
        await pilot.pause(0.1)
        assert scroller.scroll_y == min(2, scroller.max_scroll_y)
        await pilot.press("escape")
        assert app.request.cursor == cursor  # nothing behind the help moved

    drive(dashboard_store, scenario, size)


def test_the_status_line_gives_up_words_before_it_cuts_the_filter() -> None:
    """Issue 69, item 7: at 80 columns the status line cut the filter ("… · filter…"). It now drops the keys'
    hint, then a selection of none, then the words around the counts; only a filter longer than the whole
    line is cut."""
    from offpoc_tui.dashboard.app import state_text

    wide = state_text(1, 1446, 0, 5, "id ↑", "status=failed", 158)
    assert wide == "1 of 1446 runs shown · 0 selected · cursor: run 5 · sorted by id ↑ · filter: status=failed" + (
        " (s: next column, S: reverse)"
    )
    narrow = state_text(1, 1446, 0, 5, "id ↑", "status=failed tag=smoke", 78)
    assert narrow.endswith("filter: status=failed tag=smoke") and len(narrow) <= 78, narrow
    assert state_text(1, 1446, 2, 5, "id ↑", "status=failed", 78).count("2 selected") == 1  # a selection stays
    long = state_text(1, 1446, 0, 5, "id ↑", "x" * 200, 78)
    assert len(long) == 78 and long.endswith("…") and long.startswith("1/1446 shown · run 5 · by id ↑ · filter: xx")


@pytest.mark.parametrize(("size", "shown"), [((80, 24), None), ((160, 45), 30), ((220, 45), 48)])
def test_the_room_a_wide_terminal_leaves_goes_to_names(
    dashboard_store: Path, size: tuple[int, int], shown: int | None
) -> None:
    """Issue 69, item 8 in the dashboard: names were cut at 20 characters at any width. The room the columns
    leave widens the names (and envs), up to 48: at 220 columns a 44-character name shows whole."""
    from offpoc_tui.dashboard.runs_table import RunsTable

    name = "a-rather-long-experiment-name-for-ablation-7"  # 44 characters
    db = open_store(dashboard_store)
    db.execute("UPDATE runs SET name = ?", [name])
    db.conn.commit()
    db.close()

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        table = app.query_one(RunsTable)
        await until(pilot, lambda: table.row_count == 6)
        if shown is None:  # 80 columns: no room for names at all
            assert "name" not in table.keys
            return
        cell = str(table.get_row("1")[table.keys.index("name")])
        assert cell == (name if shown >= len(name) else name[: shown - 1] + "…"), cell
        assert table.widths["name"] == shown > WIDTHS["name"]

    drive(dashboard_store, scenario, size)


@pytest.mark.parametrize(("height", "rows"), [(40, 2), (6, 0)])
def test_a_wide_title_is_whole_above_a_tall_plot_and_short_above_a_short_one(height: int, rows: int) -> None:
    """Issue 69, item 7: a title wider than its plot was cut ("1,440 imported curves hi…"). Above a plot with
    room it is wrapped, whole, into rows of its own; a plot that has no rows to spare (Compare at 80×24) says
    the figure's one-row short title instead, so neither is cut."""
    from offpoc_tui.dashboard.plots import title_rows

    title = "Evaluation return (every line: start_steps=500); 1,440 imported curves hidden beside runs (p shows)"
    figure = LinesFigure(title, "steps", "return", short_title="mean over seeds · band 95% t-interval")
    on_plot, above = title_rows(figure, 80, height)
    assert len(above) == rows
    if rows:
        assert on_plot == "" and " ".join(above) == title  # whole, in words
    else:
        assert on_plot == "mean over seeds · band 95% t-interval"
    bare = LinesFigure(title, "steps", "return")  # no short title: the rows it can have, the last cut
    on_plot, above = title_rows(bare, 80, 7)
    assert on_plot == "" and len(above) == 1 and above[-1].endswith("…")
    assert title_rows(bare, 80, 6) == (title, [])  # no row to spare: on the plot's own line (draw cuts it)


@pytest.mark.parametrize(
    ("size", "said"), [((80, 24), "(1/1 · t: threshold · g: by method"), ((160, 45), "(1 of 1 · t")]
)
def test_compares_heading_is_one_row_at_80_columns(dashboard_store: Path, size: tuple[int, int], said: str) -> None:
    """Issue 69, item 5: at 80×24 Compare's heading took two rows of the plot's few; it says the same in one."""

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("4")
        heading = app.panes["compare"].heading  # type: ignore[attr-defined]
        await until(pilot, lambda: "td3 · Hopper" in str(heading.render()))
        text = str(heading.render())
        assert said in text and len(text) <= size[0] - 2, text

    drive(dashboard_store, scenario, size)
