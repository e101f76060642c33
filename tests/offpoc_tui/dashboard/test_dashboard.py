"""The dashboard driven through Textual's Pilot on a real store, with a real writer adding data live."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from textual.pilot import Pilot
from typer.testing import CliRunner

from offpoc_tui.cli import app as cli
from offpoc_tui.dashboard.app import Dashboard
from offpoc_tui.dashboard.caches import EvalCache
from offpoc_tui.dashboard.compare_pane import ComparePane
from offpoc_tui.dashboard.detail_pane import DetailPane
from offpoc_tui.dashboard.figures import BarsFigure, LinesFigure, MatrixFigure
from offpoc_tui.dashboard.groups import GroupKey
from offpoc_tui.dashboard.help_screen import HelpScreen
from offpoc_tui.dashboard.runs_table import RunsTable
from store import open_store
from store.curve_imports import import_curves, read_reference
from store.links import LocalLink
from store.runs import claim, create_runs
from store.stats import welch_p
from store.writer import RunWriter
from tests.conftest import REFERENCE_CURVES, needs_reference
from tests.support.pilot import SIZE, drive, labels, plot, shown_text, until
from tests.support.storefill import spec


def test_every_view_shows_the_store(dashboard_store: Path) -> None:
    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        table = app.query_one(RunsTable)
        assert table.row_count == 6
        await pilot.press("2")
        await until(pilot, lambda: len(labels(app, "curves-plot")) == 6)
        await pilot.press("3")
        await until(pilot, lambda: isinstance(plot(app, "quantities-histogram").figure, BarsFigure))
        assert labels(app, "quantities-training") == ["p10", "p50", "p90"]
        await pilot.press("h")
        await until(pilot, lambda: isinstance(plot(app, "quantities-training").figure, MatrixFigure))
        await pilot.press("4")
        await until(pilot, lambda: app.query_one("#compare-table").row_count == 2)
        await pilot.press("5")
        await until(pilot, lambda: isinstance(plot(app, "detail-losses").figure, LinesFigure))
        assert labels(app, "detail-losses") == ["critic_loss", "actor_loss"]
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)

    drive(dashboard_store, scenario)


def test_filter_select_sort_and_group(dashboard_store: Path) -> None:
    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        table = app.query_one(RunsTable)
        await pilot.press("slash", *"correction=acoffpoc seed=0,1", "enter")
        assert table.shown == [4, 5]
        await pilot.press("slash", *"colour=red", "enter")  # unknown key: said, filter kept
        assert table.shown == [4, 5]
        await pilot.press("escape", "slash", "ctrl+u", "enter")  # an empty filter shows everything
        assert table.shown == [1, 2, 3, 4, 5, 6]
        assert "sorted by id ↑" in str(app.status_bar.render())
        await pilot.press("S")  # the same column (id), the other way
        assert table.shown == [6, 5, 4, 3, 2, 1] and "sorted by id ↓" in str(app.status_bar.render())
        keys = [k for k in table.keys if k != "sel"]
        await pilot.press(*"s" * keys.index("seed"))  # s steps through the columns shown: to seed
        assert [app.runs[i - 1]["seed"] for i in table.shown] == [0, 0, 1, 1, 2, 2]
        assert "sorted by seed ↑" in str(app.status_bar.render())
        await pilot.press("S")
        assert [app.runs[i - 1]["seed"] for i in table.shown] == [2, 2, 1, 1, 0, 0]
        await pilot.press(*"s" * (len(keys) - keys.index("seed")))  # round to id again
        await pilot.press("S")
        assert table.shown == [6, 5, 4, 3, 2, 1]
        table.move_cursor(row=0)  # the cursor stayed on its run (1) through the sort
        await pilot.press("space", "down", "space")
        assert app.selected == {6, 5}
        await pilot.press("2")
        await until(pilot, lambda: len(labels(app, "curves-plot")) == 2)
        await pilot.press("1", "a", "2")  # select every run shown, then group: two methods, three seeds each
        await pilot.press("g")
        await until(pilot, lambda: all("(n=3)" in label for label in labels(app, "curves-plot")))
        assert len(labels(app, "curves-plot")) == 2
        await pilot.press("w", "m")
        await until(pilot, lambda: "wall time" in plot(app, "curves-plot").figure.xlabel)  # type: ignore[union-attr]
        assert "smoothed over 5" in plot(app, "curves-plot").figure.title

    drive(dashboard_store, scenario)


def test_compare_table_reports_the_seeds_statistics(dashboard_store: Path) -> None:
    db = open_store(dashboard_store)
    # The window: the last 10 evaluations, but none before the last 10% of 20,000 steps: 18k, 19k and 20k.
    finals = {
        run_id: np.mean([r[0] for r in db.execute(
            "SELECT return_mean FROM evaluations WHERE run_id = ? AND step >= 18000", [run_id]
        )])
        for run_id in range(1, 7)
    }  # fmt: skip
    db.close()
    base, corrected = [finals[i] for i in (1, 2, 3)], [finals[i] for i in (4, 5, 6)]
    half = stats.t.ppf(0.975, 2) * np.std(base, ddof=1) / np.sqrt(3)  # the interval of the seeds' finals

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("4")
        pane = app.query_one(ComparePane)
        await until(pilot, lambda: pane.query_one("#compare-table").row_count == 2)
        table = pane.query_one("#compare-table")
        baseline, correction = (table.get_row_at(i) for i in range(2))
        assert str(baseline[0]) == "none" and str(correction[0]) == "acoffpoc/jsd"
        assert str(baseline[2]) == f"{np.mean(base):,.1f} ± {half:,.1f}"
        diff = 100 * (np.mean(corrected) - np.mean(base)) / abs(np.mean(base))
        assert str(baseline[3]) == str(correction[3]) == "18k–20k"  # the last 10% of 20,000 steps
        assert str(correction[4]) == f"{diff:+.1f}%"
        p = welch_p(corrected, base)
        assert str(correction[5]) == ("<0.001" if p < 0.001 else f"{p:.3f}")
        await pilot.press("t", *"100000", "enter")  # nobody gets there
        assert pane.table.has_focus  # enter applies and leaves the box
        await until(pilot, lambda: str(pane.query_one("#compare-table").get_row_at(0)[6]) == "–")

    drive(dashboard_store, scenario)


@needs_reference
def test_compare_shows_published_curves_beside_the_users_runs(dashboard_store: Path) -> None:
    root = REFERENCE_CURVES / "Learning Curves"
    db = open_store(dashboard_store)
    files = sorted((root / "TD3" / "Hopper-v2").glob("*.npy"))
    assert import_curves(db, (read_reference(root, f) for f in files)).imported == 60
    db.close()

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("4")
        pane = app.query_one(ComparePane)
        await until(pilot, lambda: pane.table.row_count == 8)
        labels = [str(pane.table.get_row_at(i)[0]) for i in range(8)]
        assert labels[:2] == ["none v4", "acoffpoc/jsd v4"]  # the user's Hopper-v4 first, versions named
        assert labels[2:] == ["none pub v2", "acoffpoc/jsd pub v2", "ace pub v2", "geoff-pac pub v2", "ipg pub v2",
                              "ris-off-pac pub v2"]  # fmt: skip
        # The published curves meet the user's runs at their budget, 20,000 steps: the window's evaluations to it
        # (its last 10% of steps: 18k to 20k).
        curves = {name: np.stack([np.load(root / "TD3" / "Hopper-v2" / f"{name}Hopper-v2_{seed}.npy")
                                  for seed in range(10)]) for name in ("AC-Off-POC_TD3_", "TD3_")}  # fmt: skip
        at_budget = {name: float(c[:, 18:21].mean()) for name, c in curves.items()}
        published = pane.table.get_row_at(3)
        assert str(published[2]).startswith(f"{at_budget['AC-Off-POC_TD3_']:,.1f} ± ")
        assert str(published[3]) == "18k–20k"
        expected = 100 * (at_budget["AC-Off-POC_TD3_"] / at_budget["TD3_"] - 1)
        assert str(published[4]) == f"{expected:+.1f}%"  # vs published TD3, at the same budget
        assert "compared at 20,000 steps, reached by all 66 runs" in shown_text(app, "#compare-note")  # 6 + 60
        figure = pane.plot.figure
        assert isinstance(figure, LinesFigure) and "dotted: imported curves" in figure.title
        assert "table at 20,000 steps" in figure.title
        reference = [line for line in figure.lines if line.label and "pub" in line.label]
        assert len(reference) == 6 and all(line.marker == "dot" for line in reference)
        assert max(float(line.x.max()) for line in reference) == 20_000  # cut to where the user's runs are

    drive(dashboard_store, scenario)

    async def at_a_million(app: Dashboard, pilot: Pilot) -> None:  # --until 1000000: the paper's own budget
        await pilot.press("4")
        pane = app.query_one(ComparePane)
        await until(pilot, lambda: pane.table.row_count == 8)
        published = pane.table.get_row_at(3)
        # The paper's Table 1 mean; ± is the interval of the 10 seeds' finals (the paper's own ± is 354.5).
        seeds = [np.load(root / "TD3" / "Hopper-v2" / f"AC-Off-POC_TD3_Hopper-v2_{seed}.npy") for seed in range(10)]
        finals = np.array([curve[-10:].mean() for curve in seeds])
        assert str(published[2]) == f"3,658.8 ± {stats.t.ppf(0.975, 9) * finals.std(ddof=1) / np.sqrt(10):,.1f}"
        assert str(published[3]) == "991k–1M"  # the paper's statistic: the last 10 of evaluations every 1,000 steps
        assert str(published[4]) == f"{100 * (3658.846488622688 / 3174.564622039358 - 1):+.1f}%"  # vs published TD3
        own = pane.table.get_row_at(0)
        # finished at 20,000 steps: they ended short of 1M, not "training"
        assert [str(own[i]) for i in (1, 2, 4, 5)] == ["0 of 3", "ended short", "baseline", "–"]
        assert str(pane.table.get_row_at(1)[4]) == "–"  # no difference for a method short of the budget
        assert "(asked for)" in shown_text(app, "#compare-note")

    drive(dashboard_store, at_a_million, until_step=1_000_000)


def test_new_runs_and_evaluations_appear_while_a_writer_writes(dashboard_store: Path) -> None:
    db = open_store(dashboard_store)
    (new_id,) = create_runs(db, [spec(correction="none", seed=7)])
    db.close()
    written = threading.Event()

    def writer() -> None:
        store = open_store(dashboard_store)
        out = RunWriter(store, new_id, flush_interval=0.0)
        for step in range(0, 5001, 1000):
            out.add_eval(step, step / 100, 10.0 + step, 1.0, [1.0], [10])
            out.flush(step, step)
            time.sleep(0.15)
        store.close()
        written.set()

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        table = app.query_one(RunsTable)
        await until(pilot, lambda: table.row_count == 7)
        await pilot.press("2")
        thread = threading.Thread(target=writer)
        thread.start()
        figure = lambda: plot(app, "curves-plot").figure  # noqa: E731
        mine = lambda: [ln for ln in figure().lines if ln.label and ln.label.startswith(f"{new_id} ")]  # noqa: E731
        await until(pilot, lambda: len(mine()) == 1 and 0 < len(mine()[0].x) < 6)  # seen part-way
        await until(pilot, lambda: written.is_set() and len(mine()) == 1 and len(mine()[0].x) == 6)
        thread.join()
        assert mine()[0].y.tolist() == [10.0 + s for s in range(0, 5001, 1000)]
        # Hidden, the runs table waits; back on its tab it shows the run's latest return.
        assert "5,010.0" not in str(table.get_row(str(new_id))[12])
        await pilot.press("1")
        await until(pilot, lambda: "5,010.0" in str(table.get_row(str(new_id))[12]))

    drive(dashboard_store, scenario)


def test_records_a_resumed_run_replaced_are_redrawn(dashboard_store: Path) -> None:
    """A run resumed from its checkpoint at step 2,000 replaces what it recorded past it: as many
    evaluations, at the same steps, with other returns. The curve on screen must be the new one."""
    db = open_store(dashboard_store)
    (run_id,) = create_runs(db, [spec(correction="none", seed=8)])
    owner = claim(db, run_id, os.getpid())
    link = LocalLink(db, owner)
    first = RunWriter(link, run_id, flush_interval=0.0)
    for step in range(0, 5001, 1000):
        first.add_eval(step, step / 100, 1.0 + step, 1.0, [1.0], [10])
    first.flush(5000, 5000)

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("2")
        figure = lambda: plot(app, "curves-plot").figure  # noqa: E731
        mine = lambda: [ln for ln in figure().lines if ln.label and ln.label.startswith(f"{run_id} ")]  # noqa: E731
        await until(pilot, lambda: len(mine()) == 1 and len(mine()[0].x) == 6)
        assert mine()[0].y.tolist() == [1.0 + s for s in range(0, 5001, 1000)]
        resumed = RunWriter(link, run_id, flush_interval=0.0)  # what a worker resuming at step 2,000 does
        resumed.rewind(2000)
        for step in range(3000, 5001, 1000):
            resumed.add_eval(step, step / 100, -1.0 - step, 1.0, [1.0], [10])
        resumed.flush(5000, 5000)
        expected = [1.0, 1001.0, 2001.0, -3001.0, -4001.0, -5001.0]
        await until(pilot, lambda: len(mine()) == 1 and mine()[0].y.tolist() == expected)

    drive(dashboard_store, scenario)
    db.close()


def test_the_evaluation_cache_reads_only_what_is_new(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    db = open_store(path, create=True)
    (run_id,) = create_runs(db, [spec()])
    writer = RunWriter(db, run_id, flush_interval=0.0)
    cache = EvalCache()
    total = 0
    for chunk in (1, 70, 200):  # past the first capacity (64) and its doubling
        for step in range(total, total + chunk):
            writer.add_eval(step * 1000, float(step), 2.0 * step, 0.0, [1.0], [1])
        writer.flush(step * 1000, step)
        total += chunk
        curve = cache.update(db, [run_id])[run_id]
        steps, wall, returns = curve.arrays()
        assert steps.tolist() == [1000 * i for i in range(total)]
        assert returns.tolist() == [2.0 * i for i in range(total)] and wall.tolist() == [float(i) for i in range(total)]
        assert cache.version([run_id]) == (total,)
    assert not returns.flags.writeable  # the figures share the cache's memory: read-only
    assert cache.update(db, [run_id])[run_id].size == total  # nothing new: nothing appended
    db.close()


def test_rows_off_screen_catch_up_when_they_scroll_into_view(tmp_path: Path) -> None:
    path = tmp_path / "many.db"
    db = open_store(path, create=True)
    ids = create_runs(db, [spec(seed=i) for i in range(120)])
    db.close()

    async def main() -> None:
        app = Dashboard(path, poll_s=3600.0)  # polls only when woken: drawing on scroll is seen alone
        async with app.run_test(size=SIZE) as pilot:
            table = app.query_one(RunsTable)
            await until(pilot, lambda: table.row_count == 120)
            db = open_store(path)
            with db.conn:
                db.conn.execute("UPDATE runs SET status = 'running', last_return = 1234.5")
            db.close()
            first, last = (str(ids[0]), str(ids[-1]))
            app.wake.set()
            await until(pilot, lambda: "1,234.5" in str(table.get_row(first)[12]))
            assert "1,234.5" not in str(table.get_row(last)[12])  # off screen: noted, not drawn
            polls = app.polls
            table.scroll_end(animate=False)  # the last rows scroll into view (the cursor stays) and are drawn
            await until(pilot, lambda: "1,234.5" in str(table.get_row(last)[12]))
            assert str(table.get_row(last)[8]) == "running"
            assert app.polls == polls  # drawn from what the table held, not from a new poll

    asyncio.run(main())


def test_stop_a_queued_run_from_the_table_and_see_a_failure_in_detail(dashboard_store: Path) -> None:
    db = open_store(dashboard_store)
    (queued,) = create_runs(db, [spec(seed=9)])
    db.execute("UPDATE runs SET status = 'failed', error = 'boom', traceback = 'Traceback: boom here' WHERE id = 1")
    db.conn.commit()
    db.close()

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        table = app.query_one(RunsTable)
        await until(pilot, lambda: table.row_count == 7)
        table.move_cursor(row=table.shown.index(queued))
        await pilot.press("x")  # one x asks; it stops nothing
        await until(
            pilot, lambda: any("press x again within 3 s to stop run" in str(n.message) for n in app._notifications)
        )
        await pilot.pause(0.5)
        assert str(table.get_row(str(queued))[8]) == "queued"
        await pilot.press("x")
        await until(pilot, lambda: str(table.get_row(str(queued))[8]) == "stopped")
        table.move_cursor(row=0)
        await pilot.press("enter")
        await until(pilot, lambda: "boom here" in shown_text(app, "#detail-text"))
        assert app.query_one(DetailPane).display

    drive(dashboard_store, scenario)


def test_a_second_x_after_the_first_lapsed_says_so_and_stops_nothing(
    dashboard_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 69, item 4: a second x after the window passed did nothing the user could see; it now says the
    first lapsed and asks again, and a third x in time stops the run."""
    from offpoc_tui.dashboard import run_control

    monkeypatch.setattr(run_control, "CONFIRM_S", 0.5)
    db = open_store(dashboard_store)
    (queued,) = create_runs(db, [spec(seed=9)])
    db.close()

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        table = app.query_one(RunsTable)
        await until(pilot, lambda: table.row_count == 7)
        table.move_cursor(row=table.shown.index(queued))
        await pilot.press("x")
        await pilot.pause(0.8)  # past the window
        await pilot.press("x")
        await until(pilot, lambda: any("the first x lapsed after 0.5 s" in str(n.message) for n in app._notifications))
        await pilot.pause(0.2)
        assert str(table.get_row(str(queued))[8]) == "queued"
        await pilot.press("x")  # within the window of the one that asked again
        await until(pilot, lambda: str(table.get_row(str(queued))[8]) == "stopped")

    drive(dashboard_store, scenario)


def test_a_stop_that_meets_a_locked_store_is_said_and_the_dashboard_goes_on(
    dashboard_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFPOC_BUSY_TIMEOUT_S", "0.3")
    db = open_store(dashboard_store)
    (queued,) = create_runs(db, [spec(seed=9)])
    db.close()
    lock = sqlite3.connect(dashboard_store)

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        table = app.query_one(RunsTable)
        await until(pilot, lambda: table.row_count == 7)
        table.move_cursor(row=table.shown.index(queued))
        lock.execute("BEGIN IMMEDIATE")  # another process's long transaction
        await pilot.press("x", "x")
        await until(pilot, lambda: any("database is locked" in str(n.message) for n in app._notifications))
        lock.rollback()
        await pilot.press("x", "x")  # the app lives on: the next stop goes through
        await until(pilot, lambda: str(table.get_row(str(queued))[8]) == "stopped")

    try:
        drive(dashboard_store, scenario)
    finally:
        lock.close()


def test_hidden_views_cost_nothing(dashboard_store: Path) -> None:
    """On the runs table, the poller reads runs only: no curves are loaded."""

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        polls = app.polls
        await until(pilot, lambda: app.polls >= polls + 3)
        assert app.request.view == "runs"
        for plot_id in ("curves-plot", "quantities-training", "compare-plot", "detail-losses"):
            assert plot(app, plot_id).figure.title.endswith("loading…"), plot_id  # never given data

    drive(dashboard_store, scenario)


# ---- the command ---------------------------------------------------------------------------------
def test_once_prints_runs_and_the_comparison(dashboard_store: Path) -> None:
    result = CliRunner().invoke(cli, ["dashboard", "--once", "--db", str(dashboard_store)])
    assert result.exit_code == 0, result.output
    assert "6 runs" in result.output
    assert "td3 on Hopper-v4, compared at 20,000 steps, reached by all 6 runs · threshold" in " ".join(
        result.output.split()
    )
    assert "acoffpoc/jsd" in result.output and "baseline" in result.output


def test_one_seed_a_side_gives_no_p_and_no_probability(filled_store: Path) -> None:
    """One TD3 seed a method: P(>base) would read 1.00 or 0.00 from one seed against one; it says "–", and why."""
    result = CliRunner().invoke(cli, ["dashboard", "--once", "--db", str(filled_store)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    row = next(line.split() for line in result.output.splitlines() if line.strip().startswith("acoffpoc/jsd"))
    assert row[1] == "1" and row[-4:-2] == ["–", "–"], row  # Welch p, P(>base); then steps to thr., config
    assert '"–" under 2 seeds a side' in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--db", "missing.db"], "no store at missing.db"),
        (["--refresh", "0", "--db", "offpoc.db"], "--refresh"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["dashboard", *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_a_foreign_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("not a database")
    result = CliRunner().invoke(cli, ["dashboard", "--db", str(path)])
    assert result.exit_code == 2 and result.output.startswith("error: ")
    assert path.read_text() == "not a database"


def test_an_unattended_dashboard_polls_less_until_a_key(dashboard_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No key for IDLE_AFTER_S: the poller waits IDLE_POLL_S between reads; a key brings the pace back at once."""
    from offpoc_tui.dashboard import poller

    monkeypatch.setattr(poller, "IDLE_AFTER_S", 0.6)
    monkeypatch.setattr(poller, "IDLE_POLL_S", 3.0)

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.pause(1.2)  # idle by now (the last poll started before 0.6 s may still run its 0.1 s wait)
        idle_from = app.polls
        await pilot.pause(1.5)
        assert app.polls - idle_from <= 1  # one slow poll at most: not the 15 of a 0.1 s pace
        await pilot.press("1")  # a key that asks nothing new of the poller (Runs is shown)
        await pilot.pause(1.0)
        assert app.polls - idle_from >= 5  # awake: woken at once, then every 0.1 s

    drive(dashboard_store, scenario)


def test_g_groups_curves_by_a_setting_the_runs_differ_in(dashboard_store: Path) -> None:
    """g: off → by method → by batch_size (the one setting these runs differ in) → off."""
    import dataclasses as dc

    from tests.support.storefill import fill_learning

    db = open_store(dashboard_store)
    swept = [dc.replace(spec(seed=s), total_steps=20_000, config={**spec(seed=s).config, "batch_size": b})
             for s, b in ((10, 64), (11, 64), (12, 128))]  # fmt: skip
    ids = create_runs(db, swept)
    db.execute("UPDATE runs SET status = 'finished'")
    db.conn.commit()
    db.close()
    for run_id in ids:
        fill_learning(dashboard_store, run_id, 20_000, gain=1.2)

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("2", "g")
        await until(pilot, lambda: any("(n=" in label for label in labels(app, "curves-plot")))
        assert "grouped: by method" in str(app.panes["curves"].state.render())
        await pilot.press("g")
        expected = ["batch_size=unset (n=6)", "batch_size=64 (n=2)", "batch_size=128 (n=1)"]  # td3 on Hopper: title
        await until(pilot, lambda: labels(app, "curves-plot") == expected)
        assert "mean over runs with the same batch_size" in plot(app, "curves-plot").figure.title
        assert "grouped: by batch_size" in str(app.panes["curves"].state.render())
        await pilot.press("g")  # no other setting differs: back to one line per run
        await until(pilot, lambda: len(labels(app, "curves-plot")) == 9)

    drive(dashboard_store, scenario)


def test_compare_follows_the_filter_and_g_regroups_its_rows_by_a_setting(swept_store: Path) -> None:
    """Compare shows the runs the filter shows (``tag=sweep``: the 8 sweep runs, not the 6 others), and
    ``g`` turns its rows from one per method into one per batch size, every method's runs pooled, measured
    against the row of the default or else the first value; ``g`` again goes back."""

    def rows(app: Dashboard) -> list[list[str]]:
        table = app.compare_pane.table
        return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("4")
        await until(pilot, lambda: len(rows(app)) == 6)  # by method: 6 unswept + (2 methods × 2 sizes)
        await pilot.press("slash", *"tag=sweep", "enter", "4")  # the filter opens over the runs table
        await until(pilot, lambda: len(rows(app)) == 4)
        assert {r[1] for r in rows(app)} == {"2"}, "only the tagged runs, two seeds a method"
        assert "filter: tag=sweep" in shown_text(app, "#compare-key")
        await pilot.press("g")
        await until(pilot, lambda: [r[0] for r in rows(app)] == ["all {batch_size=64}", "all {batch_size=128}"])
        small, large = rows(app)
        assert small[1] == large[1] == "4", "both methods' 2 seeds pooled in each row"
        assert small[4] == "reference" and large[4].startswith("+"), "128 learns faster, against 64"
        assert large[8] == small[8] == "pools none, acoffpoc/jsd"
        assert "g rows: by batch_size, methods pooled" in shown_text(app, "#compare-key")
        assert "mean over runs with the same batch_size" in plot(app, "compare-plot").figure.title
        await pilot.press("2")  # Curves keeps its own grouping
        assert "grouped: off" in str(app.panes["curves"].state.render())
        await pilot.press("4", "g")  # batch_size is the only setting that varies: back to a row per method
        await until(pilot, lambda: len(rows(app)) == 4 and rows(app)[0][0] != "all {batch_size=64}")
        await pilot.press("slash", "end", *" id=7,8,9,10", "enter", "4", "g")  # one batch size: no rows to make
        await until(pilot, lambda: "no setting differs" in shown_text(app, "#compare-key"))
        assert len(rows(app)) == 2 and "g rows: by method" in shown_text(app, "#compare-key")

    drive(swept_store, scenario)


def test_curves_offer_and_label_only_the_settings_the_runs_shown_differ_in(swept_store: Path) -> None:
    """Issue 69, item 2: the runs shown all have batch_size=128 (a setting other runs in the store differ in).
    Their lines do not repeat it, nor the algorithm and env they all share: the title says them once. ``g``
    offers no grouping by it (one line, n=4): by method, then off."""

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        await pilot.press("slash", *"tag=sweep batch_size=128", "enter", "2")
        await until(pilot, lambda: len(labels(app, "curves-plot")) == 4)
        assert not any("batch_size" in label or "Hopper" in label for label in labels(app, "curves-plot"))
        title = "Evaluation return, td3 on Hopper-v4 (every line: batch_size=128)"
        assert plot(app, "curves-plot").figure.title.startswith(title)
        await pilot.press("g")
        await until(pilot, lambda: len(labels(app, "curves-plot")) == 2)
        assert labels(app, "curves-plot") == ["none (n=2)", "acoffpoc/jsd (n=2)"]
        assert plot(app, "curves-plot").figure.title.startswith(f"{title}, mean")
        await pilot.press("g")  # no setting differs among the runs shown: back to off, never "by batch_size"
        assert "grouped: off" in str(app.panes["curves"].state.render())

    drive(swept_store, scenario)


def test_the_filter_takes_settings_and_results_and_says_the_keys_there_are(swept_store: Path) -> None:
    """Issue 69, item 6: ``/`` reads any setting of the runs' configs and conditions on results, in the grammar
    ``ps``, ``export`` and ``plot`` take; an unknown key is refused in one line naming the settings there are;
    the box reopens with the filter selected, so typing replaces it."""

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        table = app.query_one(RunsTable)
        await pilot.press("slash", *"batch_size>=128 correction=acoffpoc", "enter")
        assert table.shown == [13, 14] and app.filter_text == "batch_size>=128 correction=acoffpoc"
        best = max(app.runs, key=lambda r: r["last_return"])
        await pilot.press("slash", *f"return>{best['last_return'] - 1e-6:.6f}", "enter")  # typing replaced it
        assert table.shown == [best["id"]]
        await pilot.press("slash", *"batch_siz=64", "enter")
        await until(pilot, lambda: any("unknown filter key 'batch_siz'" in str(n.message) for n in app._notifications))
        message = next(str(n.message) for n in app._notifications if "batch_siz" in str(n.message))
        assert "(did you mean batch_size?)" in message and "a setting: batch_size," in message and "\n" not in message
        assert table.shown == [best["id"]], "the filter it could not read changed nothing"

    drive(swept_store, scenario)


def test_rows_by_a_setting_are_measured_against_its_default_value() -> None:
    """The default's row (``batch_size=256``) is the reference, else the first value by number, per env;
    imported curves are never it."""
    from offpoc_tui.dashboard.data.compare import reference_rows

    def key(env: str, value: str, source: str = "offpoc") -> GroupKey:
        return ("td3", env, "all", None, source, "uniform", f"batch_size={value}")

    keys = [key("Hopper-v4", v) for v in ("128", "256", "64")] + [key("Hopper-v2", "unset", "published")]
    assert reference_rows(keys, "batch_size=256") == {key("Hopper-v4", "256")}
    assert reference_rows(keys, "batch_size=512") == {key("Hopper-v4", "64")}
    assert reference_rows([*keys, key("Hopper-v5", "128")], "batch_size=256") == {
        key("Hopper-v4", "256"),
        key("Hopper-v5", "128"),
    }
