"""The paper's table of final returns, from any store: one row per method and environment.

A row is one (algo, env, correction, divergence, source): the seeds of one method on one
task from one origin (runs trained here, the paper's published curves, or imported SB3
runs), summarised with :func:`store.stats.final_performance`, the statistic of the
paper's tables.

    rows = summary_rows(db, last=10, envs=["Hopper"])   # Hopper-v2, Hopper-v4, ...
    rows = summary_rows(db, last=FinalWindow(steps=10_000), until=100_000)   # every task at one step
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import sqlite_utils

from store import methods
from store.reader import DEFAULT_SAMPLER, configs, list_runs, mean_until
from store.runs import RunRow
from store.stats import (
    LAST_EVALUATIONS,
    FinalWindow,
    final_performance,
    learning_start,
    paper_half_width,
    too_short,
)
from store.tasks import SOURCES, env_family, env_matches, source_of
from store.variants import label_variants

if TYPE_CHECKING:
    from store.budget import Budget

COLUMNS: tuple[str, ...] = ("algo", "env", "correction", "divergence", "n_seeds", "mean", "ci95", "source")
COLUMNS += ("env_family", "last_step", "sampler", "budget", "n_short", "variant", "paper_pm", "n_too_short")
COLUMNS += ("n_unevaluated",)


POOLED = "all"
"""A summary row's or a line's correction when ``--group-by`` pools every method's runs of one setting's value."""

PooledKey = tuple[str, str, str, None, str, str, str]


def pooled_key(run: Mapping[str, Any], setting: str, config: Mapping[str, Any]) -> PooledKey:
    """(algo, env, :data:`POOLED`, None, source, uniform, ``setting=value``): the group of every method's runs that
    hold ``setting`` at one value, what W&B's "group by a config key" makes. ``config``: the run's; a run whose
    config lacks the setting (stored before it existed) holds ``unset``."""
    value = config.get(setting, "unset")
    text = ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
    return run["algo"], run["env"], POOLED, None, source_of(run), DEFAULT_SAMPLER, f"{setting}={text}"


def method_label(
    algo: str, correction: str, divergence: str | None, sampler: str = DEFAULT_SAMPLER, variant: str = ""
) -> str:
    """``TD3``, ``TD3 + AC-Off-POC``, ``TD3 + AC-Off-POC (KL)``: the paper's row names; a sampler other
    than uniform follows in brackets (``TD3 [PER]``), a variant in braces (``TD3 {batch_size=64}``)."""
    label = methods.algorithm_title(algo)
    if correction == POOLED:  # every method's runs of one value of a setting (``--group-by``)
        return f"{label} {{{variant}}}, all methods"
    if correction != "none":
        label += " + " + methods.title(correction)
    if not methods.is_default(correction, divergence):
        label += f" ({str(divergence).upper()})"
    if sampler != DEFAULT_SAMPLER:
        label += f" [{sampler.upper()}]"  # the paper's acronyms (CER, PER, ERO); any sampler alike
    if variant:
        label += f" {{{variant}}}"
    return label


def method_rank(correction: str) -> tuple[int, str]:
    """Where a correction is listed: the baseline first, then in the order its store records (:mod:`store.methods`)."""
    return methods.rank(correction)


def series_order(env: str, correction: str, divergence: str | None, source: str) -> tuple[Any, ...]:
    """How a plot or a compare table lists one task's methods: runs trained here first, then
    by env version, then the paper's order of methods (the baseline first)."""
    return SOURCES.index(source), env, method_rank(correction), divergence or ""


@dataclass(frozen=True)
class SummaryRow:
    algo: str
    env: str
    correction: str
    divergence: str | None
    n_seeds: int
    mean: float
    """Mean over seeds of each seed's final return: the mean of its final window (its last N evaluations at or before
    the budget, within its last 10% of steps and after its learning starts: :class:`~store.stats.FinalWindow`)."""
    ci95: float
    """The 95% Student-t half-width of ``mean`` over the seeds (NaN: one seed): the interval of the per-seed
    statistic, as Compare's."""
    source: str
    env_family: str
    last_step: int
    """The furthest step the statistics reach (the budget's, or a little before it where evaluations fall
    elsewhere); for a row whose seeds are all short of the budget, the furthest step any reached."""
    sampler: str = DEFAULT_SAMPLER
    """The replay sampler of the method's runs."""
    budget: int | None = None
    """The step its task's methods are compared at (:mod:`store.budget`): every counted seed's evaluations
    up to it."""
    n_short: int = 0
    """Seeds with evaluations that have not reached the budget (still training, or ended before it): not in
    the statistics. A row whose seeds are all short has no mean (NaN)."""
    variant: str = ""
    """The settings that set these runs apart from other runs of the method (:mod:`store.variants`)."""
    paper_pm: float = math.nan
    """The paper's ±: the mean over the window's points of the per-point 95% half-width across seeds
    (:func:`store.stats.paper_half_width`), kept so the paper's tables can be checked cell by cell."""
    n_too_short: int = 0
    """Seeds that reached the budget with no evaluation in the final window (all at or before their learning
    starts): counted here, not in the statistics."""
    n_unevaluated: int = 0
    """Seeds without an evaluation (queued, running before their first, or ended before it: failed, stopped,
    lost): counted here, not in the statistics. A method whose seeds all are has a row with no mean (NaN)."""

    @property
    def n_missing(self) -> int:
        """The method's seeds not in the statistics, for whatever reason."""
        return self.n_short + self.n_too_short + self.n_unevaluated

    @property
    def training(self) -> bool:
        """No seed has reached the budget yet: the row has no final return to compare."""
        return self.n_seeds == 0

    def values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, c) for c in COLUMNS)


def final_evaluations(
    db: sqlite_utils.Database, run_id: int, window: FinalWindow, until: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """A run's evaluations (steps, returns) in its final ``window``, oldest first, counting only those
    at or before step ``until`` (None: all): one index range per run."""
    bound = until if until is not None else 2**62
    if window.steps is None:
        rows = db.execute(
            "SELECT step, return_mean FROM evaluations WHERE run_id = ? AND step <= ? ORDER BY step DESC LIMIT ?",
            [run_id, bound, window.evaluations],
        ).fetchall()[::-1]
    else:
        rows = db.execute(
            "SELECT step, return_mean FROM evaluations WHERE run_id = ? AND step <= ? AND step > "
            "(SELECT max(step) FROM evaluations WHERE run_id = ? AND step <= ?) - ? ORDER BY step",
            [run_id, bound, run_id, bound, window.steps],
        ).fetchall()
    return np.asarray([r[0] for r in rows], dtype=np.int64), np.asarray([r[1] for r in rows], dtype=np.float64)


def matching_runs(
    db: sqlite_utils.Database,
    algos: list[str] | None = None,
    envs: list[str] | None = None,
    corrections: list[str] | None = None,
    run_ids: list[int] | None = None,
    sources: list[str] | None = None,
    dedupe: bool = False,
    tags: list[str] | None = None,
) -> list[RunRow]:
    """Runs matching the filters, each with its ``variant``, one per method and seed (:mod:`store.seeds`):
    ``envs`` takes exact ids or families (``Hopper`` matches every Hopper version), ``sources`` names from
    :data:`SOURCES`; ``dedupe`` leaves out runs flagged as another's copy (:mod:`store.duplicates`); ``tags``
    keeps runs carrying every one."""
    return _matching(db, algos, envs, corrections, run_ids, sources, dedupe, tags)[0]


def repeated_runs(db: sqlite_utils.Database, **filters: Any) -> list[tuple[RunRow, RunRow]]:
    """The runs :func:`matching_runs` (same ``filters``) leaves out as repeating a seed of their method, each
    with the run kept."""
    return _matching(db, **filters)[1]


def _matching(
    db: sqlite_utils.Database,
    algos: list[str] | None = None,
    envs: list[str] | None = None,
    corrections: list[str] | None = None,
    run_ids: list[int] | None = None,
    sources: list[str] | None = None,
    dedupe: bool = False,
    tags: list[str] | None = None,
) -> tuple[list[RunRow], list[tuple[RunRow, RunRow]]]:
    from store.budget import reach_of
    from store.seeds import one_per_seed

    runs = [
        r
        for r in list_runs(db, algos=algos, corrections=corrections, run_ids=run_ids, sources=sources, tags=tags)
        if (envs is None or env_matches(r["env"], envs)) and not (dedupe and r.get("duplicate_of") is not None)
    ]
    labelled = label_variants(db, runs)
    return one_per_seed(labelled, reach_of(db, [r["id"] for r in labelled]))


def _summary_order(r: SummaryRow) -> tuple[Any, ...]:
    """Algorithm, source, uniform replay before other samplers, then the paper's order of methods."""
    return r.algo, SOURCES.index(r.source), r.sampler != DEFAULT_SAMPLER, r.sampler, method_rank(r.correction), \
        r.divergence or "", r.env  # fmt: skip


class SeedAtBudget(NamedTuple):
    """One run as the summary counts it at its task's budget."""

    run: Mapping[str, Any]
    config: Mapping[str, Any]
    """Its stored config (empty for an imported curve without one)."""
    budget: Budget
    """Its task's budget."""
    reached: int | None
    """Its latest evaluated step; None before its first evaluation."""
    curve: tuple[np.ndarray, np.ndarray] | None
    """Its evaluations up to the budget (steps, returns), from which the final window is taken; None for a run
    short of the budget, which counts for nothing."""
    start: int
    """Its learning start (the final window never reaches before it)."""


def seeds_at_budgets(
    db: sqlite_utils.Database, runs: list[RunRow], last: int | FinalWindow, until: int | None
) -> tuple[FinalWindow, list[SeedAtBudget]]:
    """The final window of ``last``, and each of ``runs`` (in order) at its task's budget: what :func:`summary_rows`
    averages per method and :func:`final_rows` lists per seed, read once for both."""
    from store.budget import reach_of, task_budgets

    reach = reach_of(db, [r["id"] for r in runs])
    budgets = task_budgets(runs, reach, until)
    window = FinalWindow.of(last)
    settings = configs(db, [r["id"] for r in runs])
    seeds = []
    for run in runs:
        budget = budgets[(run["algo"], env_family(run["env"]))]
        reached = reach.get(run["id"])
        counted = budget.counts(reached)
        curve = final_evaluations(db, run["id"], window, budget.step) if counted else None
        config = settings.get(run["id"], {})
        seeds.append(SeedAtBudget(run, config, budget, reached, curve, learning_start(config)))
    return window, seeds


def summary_rows(
    db: sqlite_utils.Database,
    last: int | FinalWindow = LAST_EVALUATIONS,
    algos: list[str] | None = None,
    envs: list[str] | None = None,
    corrections: list[str] | None = None,
    run_ids: list[int] | None = None,
    until: int | None = None,
    dedupe: bool = False,
    sources: list[str] | None = None,
    tags: list[str] | None = None,
    group_by: str | None = None,
) -> list[SummaryRow]:
    """The summary of every method with evaluations, in the paper's order (algo, source, method, env).

    ``last``: each seed's final evaluations (a count, or a :class:`~store.stats.FinalWindow` of
    steps). The filters are :func:`matching_runs`'s. Each task's methods meet at one budget
    (:mod:`store.budget`): by default the largest step every run trained here has reached; ``until``
    asks for one. A seed counts with its evaluations up to the budget, or, short of it, not at all.
    ``group_by``: a row per value of that setting in the runs' configs instead of per method, every
    method's runs of a value pooled (correction :data:`POOLED`, the value as the variant).
    """
    runs = matching_runs(
        db, algos=algos, envs=envs, corrections=corrections, run_ids=run_ids, sources=sources, dedupe=dedupe, tags=tags
    )
    window, seeds = seeds_at_budgets(db, runs, last, until)
    groups: dict[tuple[str, str, str, str | None, str, str, str], list[tuple[np.ndarray, np.ndarray]]] = {}
    starts: dict[tuple[str, str, str, str | None, str, str, str], list[int]] = {}
    short: dict[tuple[str, str, str, str | None, str, str, str], int] = {}
    furthest: dict[tuple[str, str, str, str | None, str, str, str], int] = {}
    unevaluated: dict[tuple[str, str, str, str | None, str, str, str], int] = {}
    for seed in seeds:
        run = seed.run
        sampler = run.get("sampler") or DEFAULT_SAMPLER
        key = (run["algo"], run["env"], run["correction"], run["divergence"], source_of(run), sampler,
               run.get("variant", ""))  # fmt: skip
        if group_by:
            key = pooled_key(run, group_by, seed.config)
        groups.setdefault(key, [])
        starts.setdefault(key, [])
        if seed.reached is None:  # counted, never dropped: a seed that failed before its first evaluation is said
            unevaluated[key] = unevaluated.get(key, 0) + 1
            continue
        furthest[key] = max(furthest.get(key, 0), seed.reached)
        if seed.curve is not None:
            groups[key].append(seed.curve)
            starts[key].append(seed.start)
        else:
            short[key] = short.get(key, 0) + 1
    budgets = {(seed.run["algo"], env_family(seed.run["env"])): seed.budget for seed in seeds}
    rows = []
    for key, curves in groups.items():
        algo, env, correction, divergence, source, sampler, variant = key
        n, mean, half = final_performance(curves, window, starts[key])
        family = env_family(env)
        step = budgets[(algo, family)].step
        furthest_seen = min(furthest.get(key, 0), step) if step is not None else furthest.get(key, 0)  # cut there
        last_step = max((int(steps[-1]) for steps, _ in curves if len(steps)), default=furthest_seen)
        rows.append(
            SummaryRow(
                algo,
                env,
                correction,
                divergence,
                n,
                mean,
                half,
                source,
                family,
                last_step,
                sampler,
                step,
                short.get(key, 0),
                variant,
                paper_half_width(curves, window, starts[key]),
                too_short(curves, window, starts[key]),
                unevaluated.get(key, 0),
            )
        )
    return sorted(rows, key=_summary_order)


FINAL_COLUMNS = ("source", "budget", "reached", "first_step", "last_step", "evaluations", "final_return", "mean_lambda")
"""``--table finals``, after the run metadata: one row per seed, the numbers :func:`summary_rows` averages. ``budget``
the step its task is compared at; ``reached`` the run's latest evaluated step; ``first_step``..``last_step`` and
``evaluations`` its final window; ``final_return`` their mean, empty for a run short of the budget (or with no
evaluation in the window: too short for it); ``mean_lambda`` λ's mean over every update the run logged up to the
budget (:func:`store.reader.mean_until`; the runs table's ``mean_lambda`` is its latest block's); empty without λ."""


def final_rows(
    db: sqlite_utils.Database,
    last: int | FinalWindow = LAST_EVALUATIONS,
    until: int | None = None,
    dedupe: bool = False,
    **filters: Any,
) -> list[tuple[Any, ...]]:
    """Each matching seed's final return at its task's budget (:func:`summary_rows`' per-seed numbers), run
    metadata (:data:`~store.reader.META_COLUMNS`) first, then :data:`FINAL_COLUMNS`; in run order."""
    from store.links import MEAN_LAMBDA_QUANTITY

    runs = sorted(matching_runs(db, dedupe=dedupe, **filters), key=lambda r: r["id"])
    window, seeds = seeds_at_budgets(db, runs, last, until)
    rows = []
    for seed in seeds:
        run, step = seed.run, seed.budget.step
        first = last_step = final = None
        count = 0
        if seed.curve is not None:
            steps, values = window.select(*seed.curve, seed.start)
            count = len(steps)
            if count:
                first, last_step, final = int(steps[0]), int(steps[-1]), float(np.mean(values))
        meta = (run["id"], run["name"], run["algo"], run["env"], run["correction"], run["divergence"],
                run.get("sampler") or DEFAULT_SAMPLER, run["seed"])  # fmt: skip
        lam = mean_until(db, run["id"], MEAN_LAMBDA_QUANTITY, step if step is not None else 2**62)
        rows.append((*meta, source_of(run), step, seed.reached, first, last_step, count, final, lam))
    return rows
