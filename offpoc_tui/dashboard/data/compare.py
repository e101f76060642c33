"""Compare's data: one algo and env family's methods (or a setting's values) as a table and a plot."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlite_utils

from offpoc_tui.dashboard.across import across_tasks
from offpoc_tui.dashboard.bands import BAND_LABELS, band_area, small_n_note
from offpoc_tui.dashboard.caches import RunCurve, Sources
from offpoc_tui.dashboard.figures import (
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
    CompareRow,
    Comparison,
    GroupKey,
    compare,
    group_runs,
    ordered,
    row_label,
    task_name,
    versions_shown,
)
from offpoc_tui.dashboard.request import EMPTY_STORE, Prepared, Request, filtered, no_runs
from store.methods import method_options
from store.reader import configs, learning_starts
from store.runs import RunRow
from store.seeds import repeats_note
from store.stats import BandKind, FinalWindow
from store.study_text import task_lines
from store.summary import pooled_key
from store.tasks import env_family, source_of
from store.variants import NOT_A_VARIANT, default_text


@dataclass(frozen=True)
class CompareData:
    key: tuple[str, str] | None
    figure: Figure
    rows: list[CompareRow]
    threshold: float | None
    across: str = ""
    """The algorithm's methods across every environment on screen (:mod:`.across`)."""
    budget: str = ""
    """Where the rows meet: ``at 20,000 steps, reached by all 4 runs`` (:mod:`store.budget`)."""
    decisions: tuple[str, ...] = ()
    """The task's sequential studies, as they stand (:mod:`store.study_text`)."""
    settings: tuple[str, ...] = ()
    """The settings the task's runs trained here differ in: what ``g`` offers to make rows by."""
    group_by: str = ""
    """The setting the rows are by (one of :attr:`settings`), or "": by method."""


def compare_keys(runs: list[RunRow]) -> list[tuple[str, str]]:
    """(algo, env family) pairs present, in order of first appearance: Hopper-v4 runs meet the published Hopper-v2."""
    return list(dict.fromkeys((r["algo"], env_family(r["env"])) for r in runs))


def compare_members(runs: list[RunRow], key: tuple[str, str] | None) -> list[RunRow]:
    """The runs of one (algo, env family)."""
    return [r for r in runs if (r["algo"], env_family(r["env"])) == key]


def compare_key(runs: list[RunRow], request: Request) -> tuple[str, str] | None:
    """The (algo, env family) asked for, or the first present."""
    keys = compare_keys(runs)
    return request.compare_key if request.compare_key in keys else (keys[0] if keys else None)


def compare_rows(
    db: sqlite_utils.Database,
    members: list[RunRow],
    curves: dict[int, RunCurve],
    threshold: float | None,
    window: FinalWindow | None = None,
    until: int | None = None,
    group_by: str = "",
) -> Comparison:
    """The compare table of one algo and env's runs (``curves``: their evaluations, up to date): a row per
    method, or with ``group_by`` a row per value of that setting, every method's runs pooled, each measured
    against the row of the setting's default value (:func:`reference_rows`)."""
    returns = {run_id: c.arrays()[::2] for run_id, c in curves.items()}  # (steps, returns)
    found = configs(db, [r["id"] for r in members])  # every run's: a group's first may be a repeat left out
    if not group_by:
        return compare(group_runs(members), returns, found, threshold, window or FinalWindow(), until)
    members = [r for r in members if source_of(r) == "offpoc"]  # imported curves hold no settings to group by

    def key_of(run: RunRow) -> GroupKey:
        return pooled_key(run, group_by, found.get(run["id"], {}))

    groups: dict[GroupKey, list[RunRow]] = {}
    for run in members:
        groups.setdefault(key_of(run), []).append(run)
    default = default_text(db, members[0]["algo"], group_by) if members else None
    chosen = reference_rows(list(groups), f"{group_by}={default}")
    return compare(groups, returns, found, threshold, window or FinalWindow(), until, key_of, chosen.__contains__)


def reference_rows(keys: list[GroupKey], default: str) -> set[GroupKey]:
    """Rows grouped by a setting: each env's row trained here that holds the setting at its ``default``
    (``batch_size=256``), else its first in order; the others are measured against it."""
    chosen = set()
    for env in dict.fromkeys(k[1] for k in keys):
        own = sorted((k for k in keys if k[1] == env and k[4] == "offpoc"), key=ordered)
        chosen |= {next((k for k in own if k[6] == default), own[0])} if own else set()
    return chosen


def compare_data(
    db: sqlite_utils.Database,
    members: list[RunRow],
    curves: dict[int, RunCurve],
    key: tuple[str, str] | None,
    threshold: float | None,
    kind: BandKind = "ci95",
    window: FinalWindow | None = None,
    until: int | None = None,
    group_by: str = "",
    nothing: str = EMPTY_STORE,
) -> CompareData:
    """``nothing``: what the plot says when there is no task to compare."""
    if key is None:
        return CompareData(None, empty("Compare", nothing), [], None)
    rows, threshold, budget, repeats = compare_rows(db, members, curves, threshold, window, until, group_by)
    figure = compare_figure(key, rows, threshold, kind, budget.step, group_by)
    decisions = tuple(task_lines(db, *key))
    said = budget.describe() + (f"; {repeated}" if (repeated := repeats_note(repeats)) else "")
    return CompareData(key, figure, rows, threshold, budget=said, decisions=decisions, group_by=group_by)


def varying_settings(found: dict[int, dict[str, Any]]) -> tuple[str, ...]:
    """The settings ``found`` (configs by run id) hold at more than one value, among the runs that hold them;
    what is part of a method's name or only says how a run is measured (:data:`NOT_A_VARIANT`) never."""
    values: dict[str, set[str]] = {}
    for config in found.values():
        for name, value in config.items():
            values.setdefault(name, set()).add(json.dumps(value, sort_keys=True))
    return tuple(
        sorted(
            k
            for k, v in values.items()
            if len(v) > 1 and k not in NOT_A_VARIANT | method_options() | {"name", "imported"}
        )
    )


def compare_figure(
    key: tuple[str, str],
    rows: list[CompareRow],
    threshold: float | None,
    kind: BandKind = "ci95",
    budget: int | None = None,
    group_by: str = "",
) -> Figure:
    """Runs trained here as mean and band; imported curves as plain reference lines, cut to the
    steps the runs trained here have reached (a 6,000-step run beside a 1M-step curve). The title
    names the step the table compares at (``budget``)."""
    own = [row for row in rows if row.key[4] == "offpoc"]
    reach = max((float(row.curve.steps[-1]) for row in own if len(row.curve.steps)), default=math.inf)
    versions = versions_shown(rows)
    lines: list[Line] = []
    areas: list[Area] = []
    for i, row in enumerate(rows):
        x = row.curve.steps.astype(np.float64)
        seeds = row.n_seeds + row.short
        label = f"{row_label(row.key, versions)} (n={seeds})"
        if row.key[4] == "offpoc":
            areas += band_area(x, row.curve.interval(kind), i)
            lines.append(Line(x, row.curve.mean, colour(i), label))
        else:
            shown = x <= reach
            lines.append(Line(x[shown], row.curve.mean[shown], faint(colour(i), 0.8), label, marker="dot"))
    hlines = [(threshold, (160, 160, 160))] if threshold is not None and not math.isnan(threshold) else []
    pooled = f"mean over runs with the same {group_by}, every method" if group_by else "mean over seeds"
    title = f"{key[0]} on {task_name(key[1], rows)}, {pooled}"
    if own:  # imported curves are drawn without a band
        title += f" · {BAND_LABELS[kind]}{small_n_note(kind, [row.n_seeds + row.short for row in own])}"
    title += ", grey: threshold" if hlines else ""
    if len(own) < len(rows):
        title += "; dotted: imported curves"
    if budget is not None:
        title += f"; table at {budget:,} steps"
    # One row for a short plot (80×24): the task is in the pane's header, the step in the notes below it, the
    # seeds' spread in the table's interval.
    short = pooled + (f" · {BAND_LABELS[kind]}" if own else "") + (", grey: threshold" if hlines else "")
    short += "; dotted: imported" if len(own) < len(rows) else ""
    return LinesFigure(
        title, "environment steps", "return", lines, hlines, areas=areas, ylim=y_range(lines), short_title=short
    )


def prepare(sources: Sources, db: sqlite_utils.Database, runs: list[RunRow], request: Request) -> Prepared:
    """What Compare is built from (its basis: the runs the filter shows of its task and its algorithm), and how
    to build it."""
    shows = filtered(request.filter_text)
    runs = [r for r in runs if shows(r)]  # the runs the table's filter shows, as Curves' are
    by_id = {r["id"]: r for r in runs}
    key = compare_key(runs, request)
    members = compare_members(runs, key)
    ids = [r["id"] for r in members]
    algo_runs = [r for r in runs if key is not None and r["algo"] == key[0]]  # the line across tasks
    every = [r["id"] for r in algo_runs]
    curves = {**sources.evals.update(db, ids), **sources.evals.update(db, every)}
    revisions = tuple(by_id[i].get("revision", 0) for i in every + ids)
    basis = (request, tuple(ids), tuple(every), sources.evals.version(every + ids), revisions)

    def build() -> CompareData:
        window, until = sources.window, sources.until
        settings = varying_settings(configs(db, [r["id"] for r in members if source_of(r) == "offpoc"]))
        by = request.compare_by if request.compare_by in settings else ""  # one the shown runs still differ in
        data = compare_data(
            db, members, curves, key, request.threshold, request.band, window, until, by, no_runs(request)
        )
        returns = {run_id: c.arrays()[::2] for run_id, c in curves.items()}
        across = across_tasks(algo_runs, returns, window, until, learning_starts(db, every))
        return dataclasses.replace(data, across=across, settings=settings)

    return basis, build
