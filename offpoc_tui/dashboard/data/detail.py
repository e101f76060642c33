"""Detail's data: the run under the cursor, its losses, Q and α, and its throughput."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import sqlite_utils

from offpoc_tui.dashboard.caches import Sources
from offpoc_tui.dashboard.figures import (
    Figure,
    Line,
    LinesFigure,
    colour,
    empty,
)
from offpoc_tui.dashboard.request import Prepared, Request, no_runs
from store.reader import run_detail, train_points
from store.runs import RunRow


@dataclass(frozen=True)
class DetailData:
    run: RunRow | None
    losses: Figure
    q_alpha: Figure
    sps: Figure


def detail_data(db: sqlite_utils.Database, run: RunRow | None, request: Request) -> DetailData:
    if run is None:
        nothing = empty("Run", no_runs(request) if request.filter_text else "no run under the cursor")
        return DetailData(None, nothing, nothing, nothing)
    full = run_detail(db, run["id"])
    points = train_points(db, run["id"])
    steps = np.asarray([p["step"] for p in points], dtype=np.float64)

    def figure(title: str, ylabel: str, names: list[str]) -> Figure:
        lines = []
        for i, name in enumerate(names):
            values = np.asarray([np.nan if p[name] is None else p[name] for p in points], dtype=np.float64)
            known = ~np.isnan(values)
            if known.any():
                lines.append(Line(steps[known], values[known], colour(i), name))
        if not lines:
            status = run["status"]
            said = (
                "no training statistics yet"
                if status in ("queued", "running")
                else f"no training statistics: {status} before any"
            )
            short = "none yet" if status in ("queued", "running") else f"none ({status})"  # a narrow pane: one row
            return replace(empty(title, said), short_title=f"{title}: {short}")
        return LinesFigure(f"{title}, run {run['id']}", "environment steps", ylabel, lines)

    return DetailData(
        full,
        figure("Losses", "loss", ["critic_loss", "actor_loss"]),
        figure("Mean Q and α", "value", ["q_mean", "alpha"]),
        figure("Throughput", "steps/s", ["sps"]),
    )


def prepare(sources: Sources, db: sqlite_utils.Database, runs: list[RunRow], request: Request) -> Prepared:
    """What Detail is built from (the run under the cursor and its progress), and how."""
    cursor = next((r for r in runs if r["id"] == request.cursor), None)
    basis = (
        request,
        () if cursor is None else (cursor["id"], cursor["steps"], cursor["status"], cursor.get("revision", 0)),
    )
    return basis, lambda: detail_data(db, cursor, request)
