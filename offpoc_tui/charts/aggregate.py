"""Figures of statistics across tasks (``offpoc plot --kind aggregate|profile|improvement``).

- ``aggregate``: rliable's interval estimates, a panel per metric (mean, median, IQM, optimality
  gap), each method's point estimate and 95% stratified-bootstrap interval;
- ``profile``: performance profiles, the fraction of runs above each normalised score, with bands,
  a panel per algorithm;
- ``improvement``: each method's probability of beating its baseline, with its interval.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from offpoc_tui.charts.curves import COLOURS, DPI, style
from store.aggregate import METRICS, MIN_SEEDS, interval, profile_band
from store.aggregate_tables import MethodKey, MethodScores, improvement_rows, method_steps
from store.budget import Budget, steps_range
from store.methods import algorithm_title
from store.summary import method_label, method_rank

KINDS = ("curves", "aggregate", "profile", "improvement")
METRIC_TITLES = {"mean": "Mean", "median": "Median", "iqm": "IQM", "optimality_gap": "Optimality gap"}


def _label(key: MethodKey) -> str:
    algo, correction, divergence, sampler, source, variant = key
    label = method_label(algo, correction, divergence, sampler, variant)
    return label + ("" if source == "offpoc" else f" [{source}]")


Budgets = dict[tuple[str, str, str], Budget]
"""Each (algorithm, env family, source)'s budget: the step its runs were scored at (``source_budgets``)."""


def budget_texts(scores: MethodScores, budgets: Budgets) -> tuple[dict[tuple[str, str], str], str]:
    """What to say of the steps the scores were taken at: per (algorithm, source), `` · at 3,000 steps``
    where they differ, or else "" each and ``at 1,000,000 steps`` once, for the title."""
    steps: dict[tuple[str, str], set[int]] = {}
    for key, found in method_steps(scores, budgets).items():
        steps.setdefault((key[0], key[4]), set()).update(found)

    def text(values: set[int]) -> str:
        return f"at {steps_range(values)} steps" if values else "at its last step"

    texts = {group: text(values) for group, values in steps.items()}
    if len(set(texts.values())) <= 1:
        return {group: "" for group in texts}, next(iter(texts.values()), "")
    return {group: f" · {t}" for group, t in texts.items()}, "budgets differ"


def _titled(title: str, common: str) -> str:
    return f"{title}; {common}" if common else title


def aggregate_figure(scores: MethodScores, resamples: int, normalised: bool, budgets: Budgets | None = None) -> Figure:
    keys = list(scores)
    per, common = budget_texts(scores, budgets or {})
    few = {key for key in keys if min(len(v) for v in scores[key].values()) < MIN_SEEDS}
    fig = Figure(figsize=(3.2 * len(METRICS), 0.9 + 0.28 * len(keys)), dpi=DPI, layout="constrained")
    grid = fig.subplots(1, len(METRICS), sharey=True, squeeze=False)[0]
    for axes, (metric, function) in zip(grid, METRICS.items(), strict=True):
        for row, key in enumerate(keys):
            estimate, low, high = interval(function, scores[key], resamples)
            colour = COLOURS[method_rank(key[1])[0] % len(COLOURS)]  # a method's colour, whatever its algorithm
            if key not in few:  # one seed on a task: resampling it is no interval; the label says so
                axes.barh(row, high - low, left=low, height=0.6, color=colour, alpha=0.35)
            axes.plot([estimate, estimate], [row - 0.3, row + 0.3], color=colour, linewidth=2)
        axes.set_title(METRIC_TITLES[metric], fontsize=10)
        axes.use_sticky_edges = False  # a bar's base must not hold the limit at an estimate: drawn whole
        axes.margins(x=0.08)
        style(axes, "normalised score" if normalised else "return", grid="x")
    labels = [
        _label(k)
        + per.get((k[0], k[4]), "")
        + (f" (no interval: under {MIN_SEEDS} seeds on a task)" if k in few else "")
        for k in keys
    ]
    grid[0].set_yticks(range(len(keys)), labels)
    grid[0].invert_yaxis()
    fig.suptitle(_titled("95% stratified-bootstrap intervals over runs within tasks", common), fontsize=9)
    return fig


def profile_figure(scores: MethodScores, resamples: int, normalised: bool, budgets: Budgets | None = None) -> Figure:
    per, common = budget_texts(scores, budgets or {})
    algos = sorted({key[0] for key in scores})
    pooled = np.concatenate([runs for tasks in scores.values() for runs in tasks.values()])
    taus = np.linspace(min(0.0, pooled.min()) if normalised else pooled.min(), pooled.max(), 101)
    fig = Figure(figsize=(4.2 * len(algos), 3.2), dpi=DPI, layout="constrained")
    grid = fig.subplots(1, len(algos), squeeze=False)[0]
    for axes, algo in zip(grid, algos, strict=True):
        for i, key in enumerate(k for k in scores if k[0] == algo):
            curve, low, high = profile_band(scores[key], taus, resamples)
            colour = COLOURS[i % len(COLOURS)]
            axes.plot(taus, curve, color=colour, linewidth=1.2, label=_label(key) + per.get((key[0], key[4]), ""))
            axes.fill_between(taus, low, high, color=colour, alpha=0.18, linewidth=0)
        axes.set_title(algorithm_title(algo), fontsize=10)
        style(axes, "normalised score τ" if normalised else "return τ", "fraction of runs with score > τ", legend=True)
    fig.suptitle(_titled("performance profiles, shaded: 95% stratified-bootstrap bands", common), fontsize=9)
    return fig


def improvement_figure(scores: MethodScores, resamples: int, budgets: Budgets | None = None) -> Figure:
    per, common = budget_texts(scores, budgets or {})
    rows = improvement_rows(scores, resamples)
    fig = Figure(figsize=(5.0, 0.9 + 0.28 * max(len(rows), 1)), dpi=DPI, layout="constrained")
    axes = fig.subplots()
    algos = sorted({row[0] for row in rows})
    for i, (algo, *_, probability, low, high, _shared) in enumerate(rows):
        if probability is None:  # under two seeds a side on a task: the label says so, nothing is drawn
            continue
        colour = COLOURS[algos.index(algo) % len(COLOURS)]
        axes.barh(i, high - low, left=low, height=0.6, color=colour, alpha=0.35)
        axes.plot([probability, probability], [i - 0.3, i + 0.3], color=colour, linewidth=2)
    labels = [f"{algorithm_title(algo)}: {method} > {baseline}" + ("" if src == "offpoc" else f" [{src}]")
              + per.get((algo, src), "") + (" (–: under 2 seeds a side)" if row[4] is None else "")
              for row in rows for algo, method, src, baseline in [row[:4]]]  # fmt: skip
    axes.set_yticks(range(len(rows)), labels)
    axes.invert_yaxis()
    axes.axvline(0.5, color="grey", linewidth=0.8, linestyle="--")
    axes.set_xlim(-0.03, 1.03)  # a probability of 0 or 1 is drawn whole
    style(axes, "P(a run of the method beats a run of its baseline)", grid=None)
    fig.suptitle(_titled("probability of improvement, 95% stratified-bootstrap intervals", common), fontsize=9)
    return fig
