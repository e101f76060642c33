"""From the store to figures and tables, for the view on screen: runs in the poller thread.

:class:`Request` is what the UI currently shows (view, runs, toggles); :class:`Model`
answers it from incremental caches. Nothing here touches a widget.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import sqlite_utils

from offpoc_tui.dashboard import filters
from offpoc_tui.dashboard.across import across_tasks
from offpoc_tui.dashboard.caches import EvalCache, RunCurve, RunQuantiles, WeightCache
from offpoc_tui.dashboard.figures import (
    PALETTE,
    Area,
    BarsFigure,
    Figure,
    Line,
    LinesFigure,
    MatrixFigure,
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
    group_key,
    group_label,
    group_runs,
    method,
    ordered,
    row_label,
    task_name,
    versions_shown,
)
from store.reader import configs, histograms, quantities, run_detail, train_points
from store.runs import TERMINAL, RunRow
from store.seeds import repeats_note
from store.stats import BandKind, FinalWindow, band, smooth, t_quantile
from store.study_text import task_lines
from store.summary import pooled_key
from store.tasks import env_family, source_of
from store.variants import default_text

View = Literal["runs", "curves", "weights", "compare", "detail"]
BAND_LABELS: dict[BandKind, str] = {
    "ci95": "band 95% t-interval",
    "se": "band ±1 standard error",
    "minmax": "band min–max over seeds",
    "none": "no band, seeds faint behind",
}
SMALL_N = 3
"""At most this many seeds, a 95% t-interval spans so many standard errors (12.7 at n = 2, 4.3 at
n = 3) that the figure says so and points to the other bands."""
MAX_RAW_LINES = 40
"""Beyond this many runs, curves are drawn as group means only."""
SMOOTHING = (1, 5, 10)
"""Moving-average windows (evaluations) the smoothing toggle cycles through."""


@dataclass(frozen=True)
class Request:
    view: View = "runs"
    run_ids: tuple[int, ...] = ()
    """Curves: the selected runs, or every run the filter shows when none is selected."""
    cursor: int | None = None
    """The highlighted run: the subject of Weights and Detail."""
    grouped: bool = False
    group_by: str = ""
    """Curves, grouped: the setting whose values make the groups (``batch_size``), seeds and methods pooled within
    each; "" groups by method (correction, divergence, sampler and the settings that set runs apart)."""
    wall_time: bool = False
    smoothing: int = 1
    heatmap: bool = False
    interval: int = -1
    """Histogram interval: an index into the subject's intervals (−1: the latest)."""
    quantity: int = 0
    """Weights: which of the subject's logged quantities (λ first), modulo their number; ``v`` cycles."""
    compare_key: tuple[str, str] | None = None
    threshold: float | None = None
    band: BandKind = "ci95"
    """The band around each group's mean curve (Curves grouped, Compare); ``b`` cycles."""
    filter_text: str = ""
    """The runs table's filter, for views to say why they show nothing."""
    imported: bool = False
    """Curves: also the imported curves, which are hidden while the runs shown include any trained here."""


@dataclass(frozen=True)
class CurvesData:
    figure: Figure


@dataclass(frozen=True)
class WeightsData:
    histogram: Figure
    training: Figure


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


@dataclass(frozen=True)
class DetailData:
    run: RunRow | None
    losses: Figure
    q_alpha: Figure
    sps: Figure


@dataclass
class Model:
    window: FinalWindow = field(default_factory=FinalWindow)
    """Compare's final statistic."""
    until: int | None = None
    """Compare's budget for every task (None: each task's own, :mod:`store.budget`)."""
    evals: EvalCache = field(default_factory=EvalCache)
    weights: WeightCache = field(default_factory=WeightCache)
    last: tuple[Any, ...] | None = None
    """What the previous answer was built from: the request and its runs' progress."""

    def forget(self, runs: list[RunRow]) -> None:
        """Drop what is cached of runs deleted, or whose records were replaced (their ``revision`` moved on)."""
        current = {r["id"]: r.get("revision", 0) for r in runs}
        self.evals.forget(current)
        self.weights.forget(current)

    def answer(
        self, db: sqlite_utils.Database, runs: list[RunRow], request: Request
    ) -> CurvesData | WeightsData | CompareData | DetailData | None:
        """The view's data, or None when nothing it is built from changed since the last answer."""
        by_id = {r["id"]: r for r in runs}
        if request.view in ("curves", "compare"):
            if request.view == "compare":  # the runs the table's filter shows, as Curves' are
                shows = filtered(request.filter_text)
                runs = [r for r in runs if shows(r)]
            key = compare_key(runs, request) if request.view == "compare" else None
            if request.view == "curves":
                asked = [by_id[i] for i in request.run_ids if i in by_id]
                members = curve_members(asked, request)
                hidden = len(asked) - len(members)
            else:
                members = compare_members(runs, key)
            ids = [r["id"] for r in members]
            curves = self.evals.update(db, ids)
            algo_runs = [r for r in runs if key is not None and r["algo"] == key[0]]  # the line across tasks
            every = [r["id"] for r in algo_runs]
            if request.view == "compare":
                curves = {**curves, **self.evals.update(db, every)}
            revisions = tuple(by_id[i].get("revision", 0) for i in every + ids)
            basis: tuple[Any, ...] = (request, tuple(ids), tuple(every), self.evals.version(every + ids), revisions)
        elif request.view in ("weights", "detail"):
            cursor = None if request.cursor is None else by_id.get(request.cursor)
            members = [] if cursor is None else subjects(runs, cursor, request)
            basis = (request, tuple((r["id"], r["steps"], r["status"], r.get("revision", 0)) for r in members))
        else:
            return None
        if basis == self.last:
            return None
        self.last = basis
        if request.view == "curves":
            settings = configs(db, ids) if request.grouped and request.group_by else None
            return CurvesData(curves_figure(members, curves, request, hidden, settings))
        if request.view == "compare":
            data = compare_data(
                db, members, curves, key, request.threshold, request.band, self.window, self.until, request.group_by
            )
            returns = {run_id: c.arrays()[::2] for run_id, c in curves.items()}
            return dataclasses.replace(data, across=across_tasks(algo_runs, returns, self.window, self.until))
        if request.view == "weights":
            return self.weights_data(db, runs, members, cursor, request)
        return detail_data(db, cursor, request)

    # ---- weights --------------------------------------------------------------------------
    def weights_data(
        self,
        db: sqlite_utils.Database,
        runs: list[RunRow],
        members: list[RunRow],
        cursor: RunRow | None,
        request: Request,
    ) -> WeightsData:
        if cursor is None:
            nothing = empty("λ", no_runs(request) if not runs or request.filter_text else "no run under the cursor")
            return WeightsData(nothing, nothing)
        subject = group_label(group_key(cursor), len(members)) if request.grouped else f"run {cursor['id']}"
        ids = [r["id"] for r in members]
        logged = quantities(db, ids)
        if not logged:
            nothing = empty(f"λ, {subject}", no_weights(cursor, runs) or nothing_logged(cursor))
            return WeightsData(nothing, nothing)
        shown = Shown.of(logged, request.quantity)
        hists = histograms(db, ids, shown.name)
        per_run = [q for q in (self.weights.update(db, r["id"], shown.name) for r in members) if q.steps]
        per_evaluation = bool(per_run) and all(q.per_evaluation for q in per_run)
        return WeightsData(
            histogram=histogram_figure(subject, hists, request.interval, shown, per_evaluation),
            training=(
                heatmap_figure(subject, hists, shown)
                if request.heatmap
                else quantile_figure(subject, per_run, shown, per_evaluation)
            ),
        )


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


@dataclass(frozen=True)
class Shown:
    """The logged quantity the Weights view shows, and a note naming the others."""

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


# ---- curves -------------------------------------------------------------------------------------
EMPTY_STORE = "no runs in this store yet (start some with `offpoc run`)"


def no_runs(request: Request) -> str:
    """Why a view has no run to show, and the key that changes it."""
    if request.filter_text:
        return f"the filter '{request.filter_text}' matches no run (/ changes it; an empty filter shows all)"
    return EMPTY_STORE


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

    title = "Evaluation return"
    if request.smoothing > 1:
        title += f", smoothed over {request.smoothing} evaluations"
    lines: list[Line] = []
    if not request.grouped:
        for i, run in enumerate(runs[:MAX_RAW_LINES]):
            label = f"{run['id']} {run['algo']} {run['env']} {method(group_key(run))} s{run['seed']}"
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
        return f"{key[0]} {key[1]} {request.group_by}={key[2]} (n={n})"

    groups: dict[Any, list[RunRow]] = (
        setting_groups(runs, request.group_by, settings or {}) if request.group_by else group_runs(runs)
    )
    labelled: Callable[[Any, int], str] = setting_label if request.group_by else group_label
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
    """The settings ``g`` can group the runs by: those their variants name (what varies between them, or
    differs from the defaults), in order."""
    found = {part.split("=", 1)[0] for run in runs for part in (run.get("variant") or "").split(", ") if "=" in part}
    return sorted(found)


def hidden_note(hidden: int, timeless: int = 0) -> str:
    """What Curves left out (imported curves beside runs trained here; on a wall-time axis, curves that recorded
    no time), and the key that shows them."""
    note = f"; {hidden:,} imported curves hidden beside runs trained here (p shows them)" if hidden else ""
    return note + (f"; {timeless:,} curves without wall time left out (w: steps)" if timeless else "")


AREA_STRENGTH = 0.45
"""How bright a band's fill is against its mean's colour."""
RAW_STRENGTH = 0.45
"""How bright a seed's own curve is, drawn behind its group's mean."""


def band_area(x: np.ndarray, edges: tuple[np.ndarray, np.ndarray] | None, index: int) -> list[Area]:
    """A group's band as a dim area, where two or more seeds exist; none for no band."""
    if edges is None or not np.isfinite(edges[0]).any():
        return []
    return [Area(x, edges[0], edges[1], faint(colour(index), AREA_STRENGTH))]


def small_n_note(kind: BandKind, seed_counts: list[int]) -> str:
    """What a reader must know about the band at these seed counts, with the key that changes it."""
    counted = [n for n in seed_counts if n]
    if not counted or kind == "none":
        return ""
    fewest = min(counted)
    if fewest < 2:
        return " (n=1: no band)"
    if kind == "ci95" and fewest <= SMALL_N:
        return f" (n={fewest}: ±{float(t_quantile(fewest - 1)):.1f} s.e.; b: other bands)"
    return ""


def nothing_logged(run: RunRow) -> str:
    """Why a corrected run shows no logged values: not yet, or never (a correction such as IPG logs none)."""
    if run["status"] in TERMINAL and run["steps"]:
        return f"run {run['id']} ({run['correction']}) recorded no per-update values: its correction logs none"
    return "no values recorded yet"


def no_weights(run: RunRow, runs: list[RunRow]) -> str | None:
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
    title = f"{shown.label} histogram, {subject}: {at} step {step:,} ({position} of {len(steps)};"
    return BarsFigure(title + f" [ ] to move){shown.others}", shown.label, "share of values", centres, share)


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


# ---- compare ----------------------------------------------------------------------------------
def filtered(text: str) -> filters.Predicate:
    """The runs table's filter (already checked when the user gave it)."""
    try:
        return filters.parse(text)
    except filters.FilterError:
        return filters.parse("")


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


def subjects(runs: list[RunRow], cursor: RunRow, request: Request) -> list[RunRow]:
    """Weights and Detail: the run under the cursor, or (Weights, grouped) its whole group."""
    if request.view == "weights" and request.grouped:
        return [r for r in runs if group_key(r) == group_key(cursor)]
    return [cursor]


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
) -> CompareData:
    if key is None:
        return CompareData(None, empty("Compare", EMPTY_STORE), [], None)
    rows, threshold, budget, repeats = compare_rows(db, members, curves, threshold, window, until, group_by)
    figure = compare_figure(key, rows, threshold, kind, budget.step, group_by)
    decisions = tuple(task_lines(db, *key))
    said = budget.describe() + (f"; {repeated}" if (repeated := repeats_note(repeats)) else "")
    return CompareData(key, figure, rows, threshold, budget=said, decisions=decisions)


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
    return LinesFigure(title, "environment steps", "return", lines, hlines, areas=areas, ylim=y_range(lines))


# ---- run detail -------------------------------------------------------------------------------
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
            return empty(title, "no training statistics yet")
        return LinesFigure(f"{title}, run {run['id']}", "environment steps", ylabel, lines)

    return DetailData(
        full,
        figure("Losses", "loss", ["critic_loss", "actor_loss"]),
        figure("Mean Q and α", "value", ["q_mean", "alpha"]),
        figure("Throughput", "steps/s", ["sps"]),
    )
