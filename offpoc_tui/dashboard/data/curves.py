"""Curves' data: each run's, or each group's, evaluation returns against steps or wall time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlite_utils

from offpoc_tui.dashboard.bands import BAND_LABELS, RAW_STRENGTH, band_area, small_n_note
from offpoc_tui.dashboard.caches import RunCurve, Sources
from offpoc_tui.dashboard.figures import (
    PALETTE,
    Area,
    Figure,
    Line,
    LinesFigure,
    colour,
    empty,
    faint,
    y_range,
)
from offpoc_tui.dashboard.groups import (
    GroupKey,
    group_key,
    group_label,
    group_runs,
    method,
    shared_settings,
    task_parts,
    without,
)
from offpoc_tui.dashboard.request import Prepared, Request, no_runs
from store.reader import configs
from store.runs import RunRow
from store.stats import band, smooth
from store.summary import pooled_key
from store.tasks import source_of

MAX_RAW_LINES = 40
"""Beyond this many runs, curves are drawn as group means only."""


@dataclass(frozen=True)
class CurvesData:
    figure: Figure


def curve_members(runs: list[RunRow], request: Request) -> list[RunRow]:
    """The runs Curves draws: where any was trained here, those alone unless imported curves are asked for."""
    if request.imported or all(source_of(r) != "offpoc" for r in runs):
        return runs
    return [r for r in runs if source_of(r) == "offpoc"]


def curves_figure(
    runs: list[RunRow],
    curves: dict[int, RunCurve],
    request: Request,
    hidden: int = 0,
    settings: dict[int, dict[str, Any]] | None = None,
) -> Figure:
    """The runs' return curves (``hidden``: imported curves left out, which the title says); grouped by
    ``request.group_by``, the runs' ``settings`` (configs by id) give each its group."""
    if not runs:
        return empty("Evaluation return", no_runs(request))

    timeless = 0
    if request.wall_time:  # imported curves record no wall time: left out, and the title says how many
        timed = [r for r in runs if np.isfinite(curves[r["id"]].arrays()[1]).any()]
        timeless, runs = len(runs) - len(timed), timed
        if not runs:
            return empty("Evaluation return", "no wall time recorded for these runs (imported); press w for steps")
    x_of = 1 if request.wall_time else 0
    xlabel, per = "environment steps", 1.0
    if request.wall_time:  # seconds, minutes or hours, whichever reads best for the longest run
        longest = max(float(np.nanmax(curves[r["id"]].arrays()[1])) for r in runs)
        unit, per = ("s", 1.0) if longest < 120 else ("min", 60.0) if longest < 7200 else ("h", 3600.0)
        xlabel = f"wall time ({unit})"

    def series(run: RunRow) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(steps, wall time in ``xlabel``'s unit, smoothed returns) of a run that is drawn."""
        steps, wall, returns = curves[run["id"]].arrays()
        return steps, wall / per, smooth(returns, request.smoothing)

    said, shown = task_parts(runs)  # an algorithm or env every line shares: in the title, not on each line
    title = "Evaluation return" + said
    if request.smoothing > 1:
        title += f", smoothed over {request.smoothing} evaluations"
    lines: list[Line] = []
    shared = shared_settings(list({group_key(r): None for r in runs}))  # said once in the title, not a line
    if not request.grouped:
        title += shared_note(shared)
        for i, run in enumerate(runs[:MAX_RAW_LINES]):
            task = " ".join(part for part, show in zip((run["algo"], run["env"]), shown, strict=True) if show)
            label = f"{run['id']} {task} {method(without(group_key(run), shared))} s{run['seed']}".replace("  ", " ")
            drawn = series(run)
            lines.append(Line(drawn[x_of], drawn[2], colour(i), label))
        if len(runs) > MAX_RAW_LINES:
            title += f" (first {MAX_RAW_LINES} of {len(runs)} runs; press g to group)"
        return LinesFigure(title + hidden_note(hidden, timeless), xlabel, "return", lines, ylim=y_range(lines))
    raw: list[Line] = []
    means: list[Line] = []
    areas: list[Area] = []
    seed_counts = []

    def setting_label(key: tuple[str, str, str], n: int) -> str:
        task = " ".join(part for part, show in zip(key[:2], shown, strict=True) if show)
        return f"{task} {request.group_by}={key[2]} (n={n})".lstrip()

    groups: dict[Any, list[RunRow]] = (
        setting_groups(runs, request.group_by, settings or {}) if request.group_by else group_runs(runs)
    )

    def method_label(key: GroupKey, n: int) -> str:
        return group_label(without(key, shared), n, shown)

    labelled: Callable[[Any, int], str] = setting_label if request.group_by else method_label
    for i, (key, members) in enumerate(groups.items()):
        seeds = [series(r) for r in members if curves[r["id"]].size]
        if request.band == "none" and len(runs) <= MAX_RAW_LINES:  # no band: the seeds, faint, behind the mean
            raw.extend(Line(seed[x_of], seed[2], faint(colour(i), RAW_STRENGTH)) for seed in seeds)
        grid = band([(steps, returns) for steps, _, returns in seeds])
        x = grid.steps.astype(np.float64)
        if request.wall_time:  # the seeds' mean wall time at each step
            x = band([(steps, wall) for steps, wall, _ in seeds]).mean
        areas += band_area(x, grid.interval(request.band), i)
        means.append(Line(x, grid.mean, colour(i), labelled(key, len(members))))
        seed_counts.append(len(seeds))
    pooled = f"mean over runs with the same {request.group_by}" if request.group_by else "mean over seeds"
    title += "" if request.group_by else shared_note(shared)  # before the band's words: a long title is cut at its end
    title += f", {pooled} · {BAND_LABELS[request.band]}{small_n_note(request.band, seed_counts)}"
    if len(means) > len(PALETTE):  # colours repeat and the legend no longer fits
        title += f"; {len(means)} groups (/ filters)"
    title += hidden_note(hidden, timeless)
    return LinesFigure(title, xlabel, "return", raw + means, areas=areas, ylim=y_range(raw + means))


def setting_groups(
    runs: list[RunRow], setting: str, settings: dict[int, dict[str, Any]]
) -> dict[tuple[str, str, str], list[RunRow]]:
    """Runs by (algo, env, the value of ``setting`` in their config): what W&B's "group by a config key" does.
    A run whose config lacks the setting (stored before it existed) has the value ``unset``."""
    groups: dict[tuple[str, str, str], list[RunRow]] = {}
    for run in runs:
        key = pooled_key(run, setting, settings.get(run["id"], {}))
        groups.setdefault((key[0], key[1], key[6].split("=", 1)[1]), []).append(run)
    return groups


def group_settings(runs: list[RunRow]) -> list[str]:
    """The settings ``g`` can group the runs by: those their variants name (what sets runs of a method apart in
    the store, or differs from the defaults) that take more than one value among ``runs``, in order."""
    found = {part.split("=", 1)[0] for run in runs for part in (run.get("variant") or "").split(", ") if "=" in part}
    return sorted(k for k in found if len({repr((r.get("config") or {}).get(k)) for r in runs}) > 1)


def shared_note(shared: list[str]) -> str:
    """`` (every line: start_steps=500)``: the settings every line holds, said once instead of on each."""
    return f" (every line: {', '.join(shared)})" if shared else ""


def hidden_note(hidden: int, timeless: int = 0) -> str:
    """What Curves left out (imported curves beside runs trained here; on a wall-time axis, curves that recorded
    no time), and the key that shows them."""
    note = f"; {hidden:,} imported curves hidden beside runs trained here (p shows them)" if hidden else ""
    return note + (f"; {timeless:,} curves without wall time left out (w: steps)" if timeless else "")


def prepare(sources: Sources, db: sqlite_utils.Database, runs: list[RunRow], request: Request) -> Prepared:
    """What Curves' figure is built from (its basis), and how to build it."""
    by_id = {r["id"]: r for r in runs}
    asked = [by_id[i] for i in request.run_ids if i in by_id]
    members = curve_members(asked, request)
    ids = [r["id"] for r in members]
    curves = sources.evals.update(db, ids)
    revisions = tuple(by_id[i].get("revision", 0) for i in ids)
    basis = (request, tuple(ids), sources.evals.version(ids), revisions)

    def build() -> CurvesData:
        settings = configs(db, ids) if request.grouped and request.group_by else None
        return CurvesData(curves_figure(members, curves, request, len(asked) - len(members), settings))

    return basis, build
