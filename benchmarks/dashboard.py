"""Dashboard speed on a big store: 1,000 runs × 1,001 evaluations, with weights and histograms.

    python benchmarks/dashboard.py                 # builds /tmp/offpoc-dashboard-bench.db once (about a minute)
    python benchmarks/dashboard.py --runs 200      # a smaller store

Measures, in one process, each against a named peer timed in the same run:
- first render: from starting the app to the runs table showing every run, against
  ``offpoc ps --all`` rendering the same runs to a string (the CLI's table);
- one refresh of the runs view after every run advanced (the poll in its thread, then
  the in-place table update in the UI, then Textual's repaint of the visible rows),
  against re-reading the runs;
- the curves view grouped over all runs: first load, then one refresh after a new evaluation
  per run (the new figure handed to the plot, and its picture painted), against re-reading
  every evaluation from scratch (what a non-incremental poll does).
Targets (issue 4): first render < 2 s, refresh < 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import track

from offpoc_tui.dashboard.app import Dashboard
from offpoc_tui.dashboard.figures import LinesFigure
from offpoc_tui.dashboard.plots import FigurePlot
from offpoc_tui.views import runs_table
from store import RunSpec, open_store
from store.codec import encode_counts, encode_values
from store.reader import eval_points, list_runs
from store.runs import create_runs

EVALS = 1001
BLOCKS = 20
"""Per-batch weight blocks (1,000 updates each) per run: 20M weights over 1,000 runs."""


def build(path: Path, runs: int) -> None:
    db = open_store(path, create=True)
    specs = []
    for i in range(runs):
        correction = "acoffpoc" if i % 2 else "none"
        algo, env = ("td3", "sac")[i // 500 % 2], ("Hopper-v4", "Walker2d-v4", "Ant-v4", "HalfCheetah-v4")[i // 10 % 4]
        config = {"algo": algo, "env_id": env, "correction": correction, "seed": i % 10, "total_steps": 1_000_000}
        divergence = "jsd" if i % 2 else None
        specs.append(RunSpec(f"{algo}-{env}-{correction}", algo, env, correction, divergence, i % 10, 10**6, config))
    ids = create_runs(db, specs)
    rng = np.random.default_rng(0)
    steps = np.arange(EVALS) * 1000
    for run_id in track(ids, description="building the store"):
        returns = 3000 * (1 - np.exp(-steps / 2e5)) + rng.normal(0, 100, EVALS)
        counts = encode_counts(np.bincount(rng.integers(0, 50, 256), minlength=50))
        with db.conn:
            db.conn.executemany(
                "INSERT INTO evaluations (run_id, step, wall_time, return_mean, return_std, length_mean, returns,"
                " lengths) VALUES (?, ?, ?, ?, 0, 1000, '[]', '[]')",
                [(run_id, int(s), s / 120, float(r)) for s, r in zip(steps, returns)],
            )
            db.conn.executemany(
                "INSERT INTO histograms (run_id, quantity, step, counts) VALUES (?, 'lambda', ?, ?)",
                [(run_id, int(s), counts) for s in steps[1:]],
            )
            db.conn.executemany(
                "INSERT INTO quantity_blocks (run_id, quantity, first_update, first_step, count, columns, mean, data)"
                " VALUES (?, 'lambda', ?, ?, 1000, 'lambda', 0.5, ?)",
                [(run_id, b * 1000 + 1, b * 1000 + 1001, encode_values(rng.uniform(0, 1, (1000, 1))))
                 for b in range(BLOCKS)],
            )  # fmt: skip
            db.conn.execute(
                "INSERT INTO quantities (run_id, name, label, low, high) VALUES (?, 'lambda', 'λ', 0, 1)", [run_id]
            )
            db.conn.execute(
                "UPDATE runs SET status = 'finished', steps = 1000000, updates = 999000, sps = 120, last_return = ?,"
                " best_return = ?, mean_lambda = 0.5 WHERE id = ?",
                [float(returns[-1]), float(returns.max()), run_id],
            )
    db.close()


def advance(path: Path, new_evaluation: bool) -> None:
    """Every run moves on: new progress columns, and optionally one more evaluation each."""
    db = open_store(path)
    with db.conn:
        db.conn.execute("UPDATE runs SET steps = steps + 1000, sps = sps + 0.1, last_return = last_return + 1")
        if new_evaluation:
            db.conn.execute(
                "INSERT INTO evaluations (run_id, step, wall_time, return_mean, return_std, length_mean, returns,"
                " lengths) SELECT run_id, MAX(step) + 1000, MAX(wall_time) + 8, 3000, 0, 1000, '[]', '[]'"
                " FROM evaluations GROUP BY run_id"
            )
    db.close()


def peer_ps(path: Path) -> float:
    start = time.perf_counter()
    db = open_store(path)
    Console(file=io.StringIO(), width=200).print(runs_table(list_runs(db)))
    db.close()
    return time.perf_counter() - start


def peer_reread(path: Path, evaluations: bool) -> float:
    start = time.perf_counter()
    db = open_store(path)
    runs = list_runs(db)
    if evaluations:
        eval_points(db, {r["id"]: -1 for r in runs})
    db.close()
    return time.perf_counter() - start


async def measure(path: Path, runs: int) -> dict[str, float]:
    out: dict[str, float] = {}
    start = time.perf_counter()
    app = Dashboard(path, poll_s=3600.0)  # polls only when woken, so each refresh is timed alone
    # Waiting below is asyncio.sleep, not pilot.pause: a pause forces a screen update each
    # time, which a user's idle terminal never does, and would compete with what is timed.
    async with app.run_test(size=(160, 48)) as pilot:
        while app.table.row_count < runs:
            await pilot.pause(0.005)
        await pilot.pause(0)  # let the table paint
        out["first_render"] = time.perf_counter() - start
        await asyncio.sleep(0.5)  # the table's first layout settles

        # Textual repaints the table's visible lines through its Line API (render_line):
        # timing those calls gives the repaint a refresh causes.
        painting = [0.0]
        render_line = app.table.render_line

        def timed_render_line(y: int) -> Any:
            began = time.perf_counter()
            try:
                return render_line(y)
            finally:
                painting[0] += time.perf_counter() - began

        app.table.render_line = timed_render_line  # type: ignore[method-assign]
        refresh_poll, refresh_ui, refresh_paint = [], [], []
        for _ in range(5):
            advance(path, new_evaluation=False)
            polls = app.polls
            painting[0] = 0.0
            app._wake.set()
            while app.polls == polls:
                await asyncio.sleep(0.002)
            await asyncio.sleep(0.3)  # the repaint follows at the next frame
            refresh_poll.append(app.last_poll_s)
            refresh_ui.append(app.table.last_sync_s)
            refresh_paint.append(painting[0])
        out["refresh_poll"] = statistics.median(refresh_poll)
        out["refresh_ui"] = statistics.median(refresh_ui)
        out["refresh_paint"] = statistics.median(refresh_paint)

        plot = app.query_one("#curves-plot", FigurePlot)
        start = time.perf_counter()
        await pilot.press("2", "g")
        while not (isinstance(plot.figure, LinesFigure) and "(n=" in str([ln.label for ln in plot.figure.lines])):
            await asyncio.sleep(0.002)
        out["curves_first"] = time.perf_counter() - start
        times, drawn = [], []
        for _ in range(3):
            advance(path, new_evaluation=True)
            before = plot.figure
            start = time.perf_counter()
            app._wake.set()
            while plot.figure is before:
                await asyncio.sleep(0.002)
            times.append(time.perf_counter() - start)
            while plot.drawn is not plot.figure:  # plotext builds the picture in its thread
                await asyncio.sleep(0.002)
            drawn.append(time.perf_counter() - start)
        out["curves_refresh"] = statistics.median(times)
        out["curves_drawn"] = statistics.median(drawn)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--db", type=Path, default=None, help="Where to build the store (reused if present).")
    args = parser.parse_args()
    path = args.db or Path(f"/tmp/offpoc-dashboard-bench-{args.runs}.db")
    if not path.exists():
        build(path, args.runs)
    size_mb = path.stat().st_size / 1e6
    print(f"store: {path} ({size_mb:,.0f} MB), {args.runs:,} runs × {EVALS:,} evaluations, {BLOCKS} weight blocks each")

    ps = statistics.median(peer_ps(path) for _ in range(3))
    reread_runs = statistics.median(peer_reread(path, False) for _ in range(3))
    reread_all = statistics.median(peer_reread(path, True) for _ in range(3))
    result = asyncio.run(measure(path, args.runs))
    refresh = result["refresh_poll"] + result["refresh_ui"]
    everything = "re-read all evaluations"
    rows = [
        ("first render (app start → all runs shown)", result["first_render"], "offpoc ps --all", ps, "< 2 s"),
        ("refresh, runs view (poll + table update)", refresh, "re-read runs", reread_runs, "< 100 ms"),
        ("  of which the poll (thread)", result["refresh_poll"], "", None, ""),
        ("  of which the table update (UI)", result["refresh_ui"], "", None, ""),
        ("  then Textual's repaint of the visible rows", result["refresh_paint"], "", None, ""),
        ("curves, all runs grouped: first load", result["curves_first"], everything, reread_all, ""),
        ("curves, all runs grouped: refresh", result["curves_refresh"], everything, reread_all, "< 100 ms"),
        ("  and the new picture painted", result["curves_drawn"], everything, reread_all, ""),
    ]  # fmt: skip
    print(f"{'measure':<46}{'ms':>9}  {'peer':<26}{'peer ms':>9}{'ratio':>8}  target")
    for name, value, peer, peer_value, target in rows:
        ratio = f"{value / peer_value:8.2f}" if peer_value else " " * 8
        peer_ms = f"{1000 * peer_value:9.1f}" if peer_value else " " * 9
        print(f"{name:<46}{1000 * value:9.1f}  {peer:<26}{peer_ms}{ratio}  {target}")


if __name__ == "__main__":
    main()
