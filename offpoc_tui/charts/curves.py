"""``offpoc plot``: paper-style learning-curve figures with matplotlib.

One panel per (algorithm, environment family), so a user's Hopper-v4 runs and the
published Hopper-v2 curves share a panel; in each, every method's mean return over seeds
with its 95% Student-t band. Where a panel mixes sources, imported curves are dashed.
A panel is its task's comparison, as the summary's (:mod:`store.budget`): every curve cut at the
task's budget (``--until``: that step), and a seed short of it left out and counted in its line's
legend (as are seeds with no evaluation up to it), so a line's mean is over the same seeds from its first step
to its last.
Uses matplotlib's object API (no pyplot, no GUI backend): safe in a headless worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

from store.budget import cut, task_budgets
from store.methods import algorithm_title
from store.reader import configs, eval_series
from store.runs import RunRow
from store.stats import band, smooth
from store.summary import method_label, method_rank, pooled_key, series_order
from store.tasks import env_version, source_of, task_of

FORMATS = ("png", "svg", "pdf")
PANEL_SIZE_IN = (4.2, 3.2)
"""Width and height of one panel, in inches."""
DPI = 150
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")

Series = tuple[str, str, str | None, str, str, str]
"""(env, correction, divergence, source, sampler, variant): one line in a panel."""


@dataclass(frozen=True)
class Panel:
    algo: str
    family: str
    series: dict[Series, list[tuple[np.ndarray, np.ndarray]]]
    """Each line's seeds at the budget: (steps, returns) up to it."""
    budget: int | None = None
    """The step the panel's curves are cut at (its task's budget, or ``--until``)."""
    short: dict[Series, int] = field(default_factory=dict)
    """Each line's seeds not drawn: short of the budget (still training, or ended before it), with no evaluation
    yet (queued, or failed before the first), or with none at or before the budget; left out, and said."""


def panels(
    db: sqlite_utils.Database,
    runs: list[RunRow],
    window: int = 1,
    until: int | None = None,
    group_by: str | None = None,
) -> list[Panel]:
    """The runs' evaluations (one query) up to step ``until``, smoothed over ``window`` evaluations, by panel
    and line: a line per method, or with ``group_by`` per value of that setting in the runs' configs (every
    method's runs with that value pooled; a config without it reads ``unset``)."""
    settings = configs(db, [r["id"] for r in runs]) if group_by else {}
    curves = eval_series(db, {r["id"]: -1 for r in runs})
    reach = {run_id: int(steps[-1]) for run_id, (steps, _, _) in curves.items() if len(steps)}
    budgets = task_budgets(runs, reach, until)
    found: dict[tuple[str, str], dict[Series, list[tuple[np.ndarray, np.ndarray]]]] = {}
    short: dict[tuple[str, str], dict[Series, int]] = {}
    evaluated = {task_of(run) for run in runs if run["id"] in reach}  # a panel: a task with an evaluation
    for run in runs:
        sampler = run.get("sampler") or "uniform"
        series = (run["env"], run["correction"], run["divergence"], source_of(run), sampler, run.get("variant", ""))
        if group_by:
            series = pooled_key(run, group_by, settings.get(run["id"], {}))[1:]
        panel = task_of(run)
        if panel not in evaluated:
            continue
        found.setdefault(panel, {})
        budget = budgets[panel]
        steps, returns = np.zeros(0, dtype=np.int64), np.zeros(0)
        if budget.counts(reach.get(run["id"])):
            raw_steps, _, raw_returns = curves[run["id"]]
            steps, returns = cut(np.asarray(raw_steps, dtype=np.int64), np.asarray(raw_returns), budget.step)
        if not len(steps):  # short of the budget, not evaluated, or none up to it: a mean over fewer seeds
            short.setdefault(panel, {})[series] = short.get(panel, {}).get(series, 0) + 1  # reads as all of them
            continue
        found[panel].setdefault(series, []).append((steps, smooth(returns, window)))
    return [
        Panel(algo, family, found[(algo, family)], budgets[(algo, family)].step, short.get((algo, family), {}))
        for algo, family in sorted(found)
    ]


def _label(algo: str, series: Series, mixed: bool) -> str:
    env, correction, divergence, source, sampler, variant = series
    label = method_label(algo, correction, divergence, sampler, variant)
    return f"{label} [{source} {env_version(env)}]" if mixed else label


def figure(panel_list: list[Panel], window: int = 1) -> Figure:
    """Rows: algorithms; columns: environment families. Colours follow the method across panels."""
    algos = sorted({p.algo for p in panel_list})
    families = sorted({p.family for p in panel_list})
    methods = sorted(
        {(s[1], s[2], s[4], s[5]) for p in panel_list for s in (*p.series, *p.short)},
        key=lambda m: (m[2] != "uniform", m[2], method_rank(m[0]), m[1] or "", m[3]),
    )
    colour = {m: COLOURS[i % len(COLOURS)] for i, m in enumerate(methods)}
    width, height = PANEL_SIZE_IN
    fig = Figure(figsize=(width * len(families), height * len(algos)), dpi=DPI, layout="constrained")
    grid = fig.subplots(len(algos), len(families), squeeze=False)
    for axes in grid.flat:
        axes.set_visible(False)
    for panel in panel_list:
        axes = grid[algos.index(panel.algo), families.index(panel.family)]
        axes.set_visible(True)
        every = {*panel.series, *panel.short}
        mixed = len({(s[0], s[3]) for s in every}) > 1
        for series in sorted(every, key=lambda s: (*series_order(*s[:4]), s[4] != "uniform", s[4], s[5])):
            seeds, missing = panel.series.get(series, []), panel.short.get(series, 0)
            line_colour = colour[(series[1], series[2], series[4], series[5])]
            label = _label(panel.algo, series, mixed)
            if not seeds:  # no seed at the budget: a legend entry that says so, no line
                axes.plot([], [], ":", color=line_colour, label=f"{label} (none at the budget: {missing} left out)")
                continue
            curve = band(seeds)
            x, mean, half = curve.steps, curve.mean, curve.half_width
            dashes = "--" if mixed and series[3] != "offpoc" else "-"
            counted = f"n={len(seeds)}" + (f" of {len(seeds) + missing}, {missing} left out" if missing else "")
            axes.plot(x, mean, dashes, color=line_colour, linewidth=1.2, label=f"{label} ({counted})")
            ok = ~np.isnan(half)
            axes.fill_between(x[ok], (mean - half)[ok], (mean + half)[ok], color=line_colour, alpha=0.18, linewidth=0)
        envs = sorted({s[0] for s in every})
        where = envs[0] if len(envs) == 1 else panel.family
        at = f" · at {panel.budget:,} steps" if panel.budget is not None else ""
        axes.set_title(f"{algorithm_title(panel.algo)} · {where}{at}", fontsize=10)
        axes.xaxis.set_major_formatter(EngFormatter(sep=""))
        style(axes, "environment steps", "average return", legend=True)
    note = "mean over the seeds at each panel's budget (seeds short of it or not evaluated up to it left out),"
    note += " shaded: 95% Student-t CI"
    fig.suptitle(note + (f"; smoothed over {window} evaluations" if window > 1 else ""), fontsize=9)
    return fig


def style(
    axes: Any, xlabel: str, ylabel: str | None = None, *, legend: bool = False, grid: str | None = "both"
) -> None:
    """Every figure's axes alike: small labels and ticks, a faint grid (``grid``: both, x or None), a legend."""
    axes.set_xlabel(xlabel, fontsize=8)
    if ylabel is not None:
        axes.set_ylabel(ylabel, fontsize=8)
    axes.tick_params(labelsize=7)
    if grid is not None:
        axes.grid(axis=grid, alpha=0.3, linewidth=0.5)
    if legend:
        axes.legend(fontsize=6, frameon=False)


def save(fig: Figure, path: Path) -> None:
    """Write the figure in the format its suffix names (:func:`offpoc_tui.console.written`: a failed write leaves
    no half file, a symlink stays one, a FIFO is written into); OSError where it cannot be written."""
    from offpoc_tui.outputs import written

    with written(path, binary=True) as handle:
        # tight: the figure grows to hold every title and legend (a narrow panel's would be cut at its edge)
        fig.savefig(handle, format=path.suffix.lstrip(".").lower(), dpi=DPI, bbox_inches="tight", pad_inches=0.05)
