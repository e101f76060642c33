"""Quantities' data: a logged quantity's histogram per evaluation interval and its quantiles (or heatmap) over
training, for the run under the cursor or its group."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlite_utils

from offpoc_tui.dashboard.caches import RunQuantiles, Sources
from offpoc_tui.dashboard.figures import (
    BarsFigure,
    Figure,
    Line,
    LinesFigure,
    MatrixFigure,
    colour,
    empty,
    faint,
)
from offpoc_tui.dashboard.groups import (
    group_key,
    group_label,
)
from offpoc_tui.dashboard.request import Prepared, Request, no_runs
from store.reader import histograms, quantities
from store.runs import TERMINAL, RunRow
from store.stats import band
from store.tasks import source_of


@dataclass(frozen=True)
class QuantitiesData:
    histogram: Figure
    training: Figure


@dataclass(frozen=True)
class Shown:
    """The logged quantity the Quantities view shows, and a note naming the others."""

    name: str
    label: str
    low: float
    high: float
    others: str
    """'' when it is the only one; else ' (v: ρ̄, w)'."""

    @classmethod
    def of(cls, logged: list[dict[str, Any]], index: int) -> Shown:
        chosen = logged[index % len(logged)]
        rest = [q["label"] for q in logged if q is not chosen]
        others = f" (v: {', '.join(rest)})" if rest else ""
        return cls(chosen["name"], chosen["label"], chosen["low"], chosen["high"], others)


def quantile_figure(subject: str, per_run: list[RunQuantiles], shown: Shown, per_evaluation: bool) -> Figure:
    """p10/p50/p90 per stored block of updates over training (one line: the value, for a quantity recorded
    once per evaluation), averaged over a group's seeds."""
    if not per_run:
        return empty(f"{shown.label} over training, {subject}", "no values recorded yet")
    curves = [(np.asarray(q.steps), np.asarray(q.values)) for q in per_run]
    quantiles = (("value", 1.0),) if per_evaluation else (("p10", 0.55), ("p50", 1.0), ("p90", 0.55))
    lines = []
    for j, (name, shade) in enumerate(quantiles):
        grid = band([(s, v[:, 1 if per_evaluation else j]) for s, v in curves])
        lines.append(Line(grid.steps.astype(np.float64), grid.mean, faint(colour(0), shade), name))
    spans = sorted({span for q in per_run for span in q.spans if span})
    span = f"{spans[-1]:,}" if spans else "1,000"  # the full blocks' (a last, partial one is shorter)
    what = "one value per evaluation" if per_evaluation else f"quantiles per {span} updates"
    seeds = f", mean over {len(per_run)} seeds" if len(per_run) > 1 else ""
    return LinesFigure(f"{shown.label} over training, {subject}: {what}{seeds}{shown.others}",
                       "environment steps", shown.label, lines)  # fmt: skip


def nothing_logged(run: RunRow) -> str:
    """Why a corrected run shows no logged values: not yet, or never (a correction such as IPG logs none)."""
    if run["status"] in TERMINAL and run["steps"]:
        return f"run {run['id']} ({run['correction']}) recorded no per-update values: its correction logs none"
    return "no values recorded yet"


def no_quantities(run: RunRow, runs: list[RunRow]) -> str | None:
    """Why a run can have no λ at all (None when it can), and which runs have some."""
    if run["source"]:
        why = f"run {run['id']} was imported ({source_of(run)}): curves only, no λ"
    elif run["correction"] == "none":
        why = f"run {run['id']} has no correction (none): no λ"
    else:
        return None
    others = [r["id"] for r in runs if r["correction"] != "none" and not r["source"]]
    if not others:
        return f"{why}; no run in this store has a correction"
    shown = ", ".join(map(str, others[:8])) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
    return f"{why}; runs with λ: {shown} (move the cursor to one)"


def histogram_figure(
    subject: str, hists: list[tuple[int, int, np.ndarray]], interval: int, shown: Shown, per_evaluation: bool = False
) -> Figure:
    """A quantity's distribution over one evaluation interval, or over one evaluation's steps for a quantity
    recorded per evaluation (summed over a group's seeds)."""
    steps = sorted({step for _, step, _ in hists})
    if not steps:
        return empty(f"{shown.label} histogram, {subject}", "no interval finished yet")
    index = min(max(interval, -len(steps)), len(steps) - 1)
    step = steps[index]
    counts = sum(c for _, s, c in hists if s == step)
    assert isinstance(counts, np.ndarray)
    share = counts / max(counts.sum(), 1)
    centres = shown.low + (np.arange(len(counts)) + 0.5) / len(counts) * (shown.high - shown.low)
    position = index % len(steps) + 1
    at = "evaluation at" if per_evaluation else "interval ending at"
    # Which interval first: a title wider than the plot is cut at its end, and the subject is the cursor's.
    title = f"{shown.label} histogram, {at} step {step:,} ({position} of {len(steps)}; [ ] to move) · {subject}"
    return BarsFigure(title + shown.others, shown.label, "share of values", centres, share)


def heatmap_figure(subject: str, hists: list[tuple[int, int, np.ndarray]], shown: Shown) -> Figure:
    """A quantity's distribution per interval as columns (its top value at the top), each column normalised."""
    steps = sorted({step for _, step, _ in hists})
    if not steps:
        return empty(f"{shown.label} heatmap, {subject}", "no interval finished yet")
    index = {step: i for i, step in enumerate(steps)}
    bins = len(hists[0][2])
    cells = np.zeros((bins, len(steps)))
    for _, step, counts in hists:
        cells[:, index[step]] += counts[::-1]
    cells /= np.maximum(cells.max(axis=0, keepdims=True), 1)
    title = f"{shown.label} heatmap, {subject}: each column one interval's share of values, to step {steps[-1]:,}"
    return MatrixFigure(
        title + shown.others,
        cells,
        x=(float(steps[0]), float(steps[-1])),
        y=(shown.high, shown.low),
        xlabel="environment steps (interval end)",
        ylabel=shown.label,
    )


def prepare(sources: Sources, db: sqlite_utils.Database, runs: list[RunRow], request: Request) -> Prepared:
    """What Quantities is built from (the run under the cursor, or its group, and their progress), and how."""
    cursor = next((r for r in runs if r["id"] == request.cursor), None)
    members = (
        []
        if cursor is None
        else [r for r in runs if group_key(r) == group_key(cursor)]
        if request.grouped
        else [cursor]
    )
    basis = (request, tuple((r["id"], r["steps"], r["status"], r.get("revision", 0)) for r in members))

    def build() -> QuantitiesData:
        if cursor is None:
            nothing = empty("λ", no_runs(request) if not runs or request.filter_text else "no run under the cursor")
            return QuantitiesData(nothing, nothing)
        subject = group_label(group_key(cursor), len(members)) if request.grouped else f"run {cursor['id']}"
        ids = [r["id"] for r in members]
        logged = quantities(db, ids)
        if not logged:
            nothing = empty(f"λ, {subject}", no_quantities(cursor, runs) or nothing_logged(cursor))
            return QuantitiesData(nothing, nothing)
        shown = Shown.of(logged, request.quantity)
        hists = histograms(db, ids, shown.name)
        per_run = [q for q in (sources.quantities.update(db, r["id"], shown.name) for r in members) if q.steps]
        per_evaluation = bool(per_run) and all(q.per_evaluation for q in per_run)
        training = (
            heatmap_figure(subject, hists, shown)
            if request.heatmap
            else quantile_figure(subject, per_run, shown, per_evaluation)
        )
        return QuantitiesData(histogram_figure(subject, hists, request.interval, shown, per_evaluation), training)

    return basis, build
