"""The aggregate and improvement tables of a store: every method's final scores, normalised per task,
through :mod:`store.aggregate`.

A method is (algo, correction with its divergence, sampler, source); a task is an environment id.
A run's final score is the mean of its final evaluations (the summary's window) at its task's budget
(:mod:`store.budget`, each source's apart: published rows do not move when runs trained here are
added; or ``until``; a run short of it is left out), normalised per task (:mod:`store.normalise`). Each method's
probability of improvement is over the baseline (``none``) of its algorithm, sampler and source, on
the tasks both have.
"""

from __future__ import annotations

from typing import IO, Any

import numpy as np
import sqlite_utils

from store import methods
from store.aggregate import METRICS, MIN_SEEDS, improvement_interval, interval
from store.budget import Budget, reach_of, source_budgets, steps_range
from store.normalise import normaliser
from store.reader import DEFAULT_SAMPLER, configs
from store.stats import LAST_EVALUATIONS, FinalWindow, learning_start
from store.summary import final_evaluations, matching_runs, method_rank
from store.tasks import env_family, source_of, task_of
from store.variants import baseline_variant

AGGREGATE_COLUMNS = ("algo", "method", "source", "metric", "estimate", "ci_low", "ci_high", "n_tasks", "n_runs")
IMPROVEMENT_COLUMNS = ("algo", "method", "source", "baseline", "probability", "ci_low", "ci_high", "n_tasks")
BASELINE = "none"

MethodKey = tuple[str, str, str | None, str, str, str]
"""(algo, correction, divergence, sampler, source, variant)."""
MethodScores = dict[MethodKey, dict[str, np.ndarray]]


def method_name(key: MethodKey) -> str:
    """``none``, ``acoffpoc``, ``acoffpoc/kl``, ``none+per``: the divergence where not the paper's, a sampler
    other than uniform."""
    _, correction, divergence, sampler, _, variant = key
    name = correction if methods.is_default(correction, divergence) else f"{correction}/{divergence}"
    name = name if sampler == DEFAULT_SAMPLER else f"{name}+{sampler}"
    return f"{name} {{{variant}}}" if variant else name


def task_budgets_of(
    db: sqlite_utils.Database, until: int | None = None, **filters: Any
) -> dict[tuple[str, str, str], Budget]:
    """The budget of each task and source the filters cover (what :func:`method_scores` cuts its runs at)."""
    runs = matching_runs(db, **filters)
    return source_budgets(runs, reach_of(db, [r["id"] for r in runs]), until)


def method_scores(
    db: sqlite_utils.Database,
    last: int | FinalWindow = LAST_EVALUATIONS,
    until: int | None = None,
    normalise: str = "minmax",
    too_short: list[int] | None = None,
    **filters: Any,
) -> MethodScores:
    """Per method, per task, its runs' normalised final scores at the task's budget (runs short of it, or
    without an evaluation, left out). ``too_short``, if given, gets the ids of the runs left out as too
    short for the window (no evaluation after their learning starts), for the note that says so.

    Raises :class:`store.normalise.NormalisationError` for a task with no normalising scores."""
    window = FinalWindow.of(last)
    found: dict[MethodKey, dict[str, list[float]]] = {}
    runs = matching_runs(db, **filters)
    reach = reach_of(db, [r["id"] for r in runs])
    budgets = source_budgets(runs, reach, until)
    settings = configs(db, [r["id"] for r in runs])
    for run in runs:
        budget = budgets[(*task_of(run), source_of(run))]
        if not budget.counts(reach.get(run["id"])):
            continue
        start = learning_start(settings.get(run["id"], {}))
        _, returns = window.select(*final_evaluations(db, run["id"], window, budget.step), start)
        if not len(returns):  # too short for the window (no evaluation after learning starts): no final score
            if too_short is not None:
                too_short.append(run["id"])
            continue
        offset, scale = normaliser(run["env"], normalise)
        sampler = run.get("sampler") or DEFAULT_SAMPLER
        key = (run["algo"], run["correction"], run["divergence"], sampler, source_of(run), run.get("variant", ""))
        score = (float(np.mean(returns)) - offset) / scale  # the window's evaluations, as the summary takes them
        found.setdefault(key, {}).setdefault(run["env"], []).append(score)
    order = sorted(
        found, key=lambda k: (k[0], k[4], k[3] != DEFAULT_SAMPLER, k[3], method_rank(k[1]), k[2] or "", k[5])
    )
    return {key: {task: np.asarray(v) for task, v in sorted(found[key].items())} for key in order}


def aggregate_rows(scores: MethodScores, resamples: int = 2000, seed: int = 0) -> list[tuple[Any, ...]]:
    """One row per method and metric (:data:`AGGREGATE_COLUMNS`); no interval (None) where a task has under
    :data:`MIN_SEEDS` runs of the method (resampling one seed gives a zero-width interval, not certainty)."""
    rows = []
    for key, tasks in scores.items():
        runs = sum(len(v) for v in tasks.values())
        few = min(len(v) for v in tasks.values()) < MIN_SEEDS  # a bootstrap of one seed is no interval
        for name, metric in METRICS.items():
            estimate, low, high = interval(metric, tasks, resamples, seed)
            edges = (None, None) if few else (low, high)
            rows.append((key[0], method_name(key), key[4], name, estimate, *edges, len(tasks), runs))
    return rows


def improvement_rows(scores: MethodScores, resamples: int = 2000, seed: int = 0) -> list[tuple[Any, ...]]:
    """P(method > its baseline) for each method but the baselines, on their shared tasks
    (:data:`IMPROVEMENT_COLUMNS`); no probability (None) where a shared task has under :data:`MIN_SEEDS` seeds
    a side."""
    rows: list[tuple[Any, ...]] = []
    for key, tasks in scores.items():
        algo, correction, _, sampler, source, variant = key
        base: MethodKey = (algo, BASELINE, None, sampler, source, baseline_variant(variant))
        if base not in scores:  # a variant the baseline was not run in: the baseline's default settings,
            base = (algo, BASELINE, None, sampler, source, "")
        alone = [k for k in scores if k[0] == algo and k[1] == BASELINE and k[4] == source]
        if base not in scores and len(alone) == 1:  # else the only baseline there is (as Compare does)
            base = alone[0]
        if correction == BASELINE or base not in scores or not set(tasks) & set(scores[base]):
            continue
        shared_tasks = set(tasks) & set(scores[base])
        fewest = min(min(len(tasks[t]), len(scores[base][t])) for t in shared_tasks)
        if fewest < MIN_SEEDS:  # P(>base) from one seed against one reads 0, ½ or 1: no probability
            rows.append((algo, method_name(key), source, method_name(base), None, None, None, len(shared_tasks)))
            continue
        probability, low, high = improvement_interval(tasks, scores[base], resamples, seed)
        rows.append((algo, method_name(key), source, method_name(base), probability, low, high, len(shared_tasks)))
    return rows


def too_short_note(count: int) -> str:
    """``2 seeds too short for the window (no evaluation after learning starts) left out``."""
    seeds = f"{count} seed{'s' if count > 1 else ''}"
    return f"{seeds} too short for the window (no evaluation after learning starts) left out"


def interval_text(estimate: float | None, low: float | None, high: float | None) -> str:
    """``0.28 [0.25, 0.32]``: an estimate and its 95% interval, as tables in the docs show them; "–" and why
    where there is none."""
    if estimate is None:
        return f"– (under {MIN_SEEDS} seeds a side on a task)"
    if low is None or high is None:
        return f"{estimate:.2f} [– under {MIN_SEEDS} seeds on a task]"
    return f"{estimate:.2f} [{low:.2f}, {high:.2f}]"


def markdown_rows(table: str, data: list[tuple[Any, ...]]) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """The rows of :func:`aggregate_rows` or :func:`improvement_rows` laid out for reading: one row per method,
    each metric as ``estimate [low, high]``."""
    if table == "improvement":
        columns: tuple[str, ...] = ("algo", "method", "source", "baseline", "P(> baseline) [95% CI]", "n_tasks")
        return columns, [(a, m, s, b, interval_text(p, lo, hi), n) for a, m, s, b, p, lo, hi, n in data]
    metrics = list(METRICS)
    by_method: dict[tuple[Any, ...], dict[str, str]] = {}
    counts: dict[tuple[Any, ...], tuple[Any, Any]] = {}
    for algo, method, source, metric, estimate, low, high, n_tasks, n_runs in data:
        by_method.setdefault((algo, method, source), {})[metric] = interval_text(estimate, low, high)
        counts[(algo, method, source)] = (n_tasks, n_runs)
    columns = ("algo", "method", "source", *(f"{m} [95% CI]" for m in metrics), "n_tasks", "n_runs")
    rows = [(*key, *(cells.get(m, "") for m in metrics), *counts[key]) for key, cells in by_method.items()]
    return columns, rows


BUDGET_COLUMNS = ("budget_min", "budget_max")
"""Appended to both tables' rows: the least and the greatest step the row's tasks are compared at (one source's
budgets: the published curves' 1,000,000 beside runs' 100,000 is said in every format, not in a note alone)."""


def method_steps(scores: MethodScores, budgets: dict[tuple[str, str, str], Budget]) -> dict[MethodKey, set[int]]:
    """Each method's budgets over its tasks, in steps (its source's: :func:`task_budgets_of`); a task without
    one adds none."""
    found: dict[MethodKey, set[int]] = {}
    for key, tasks in scores.items():
        budgeted = (budgets.get((key[0], env_family(env), key[4])) for env in tasks)
        found[key] = {b.step for b in budgeted if b is not None and b.step is not None}
    return found


def final_table(
    out: IO[str],
    table: str,
    fmt: str,
    scores: MethodScores,
    resamples: int,
    budgets: dict[tuple[str, str, str], Budget],
    note: str = "",
) -> int:
    """Write the ``aggregate`` or ``improvement`` table in ``fmt`` (csv, json, md, latex); returns its rows.
    ``budgets``: each (algo, family, source)'s (:func:`task_budgets_of`), for each row's budget columns;
    ``note``: a line under a Markdown table (where each task's runs were compared)."""
    from store.export import write_rows
    from store.tables import latex_rows

    columns: tuple[str, ...] = AGGREGATE_COLUMNS if table == "aggregate" else IMPROVEMENT_COLUMNS
    data = aggregate_rows(scores, resamples) if table == "aggregate" else improvement_rows(scores, resamples)
    if fmt in ("md", "latex"):  # laid out for reading: an estimate with its interval, or "–" and why
        columns, data = markdown_rows(table, data)
    steps = {(key[0], method_name(key), key[4]): found for key, found in method_steps(scores, budgets).items()}
    if fmt in ("md", "latex"):
        columns += ("budget (steps)",)
        data = [(*row, steps_range(steps[(row[0], row[1], row[2])])) for row in data]
    else:
        columns += BUDGET_COLUMNS
        edges = {key: (min(found), max(found)) if found else (None, None) for key, found in steps.items()}
        data = [(*row, *edges[(row[0], row[1], row[2])]) for row in data]
    if fmt == "latex":
        out.write(latex_rows(columns, data))
        return len(data)
    count = write_rows(out, fmt, columns, iter(data))
    if fmt == "md" and note:
        out.write(f"\n{note}\n")
    return count
