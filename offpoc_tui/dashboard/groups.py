"""Runs grouped by experiment, and the Compare table's statistics.

A group is (algo, env, correction, divergence, source, sampler): the seeds of one method on one
task from one origin (trained here, the paper's published curves, an SB3 import) with one replay
sampler. Each group compares with the baseline of its task, source and sampler, or, failing that,
the uniform one, and then its config difference column names the sampler.
Shared by the dashboard and ``offpoc dashboard --once``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from store.aggregate import MIN_SEEDS, probability_of_improvement
from store.budget import Budget, budget, cut, reach_of_curves
from store.methods import method_options
from store.reader import DEFAULT_SAMPLER
from store.runs import RunRow
from store.seeds import one_per_seed
from store.stats import (
    LAST_EVALUATIONS,
    Band,
    FinalWindow,
    band,
    final_performance,
    final_returns,
    final_span,
    learning_start,
    steps_to_reach,
    too_short,
    welch_p,
)
from store.summary import POOLED, series_order
from store.tasks import env_version
from store.variants import baseline_variant, method_of

GroupKey = tuple[str, str, str, str | None, str, str, str]
"""(algo, env, correction, divergence, source, sampler, variant)."""

BASELINE = "none"
IGNORED_IN_DIFF = frozenset({"seed", "correction", "name", "imported", "ref_std"})
"""Config keys that differ between a method and its baseline by design (``ref_std``: configs stored before
schema 12 hold AC-Off-POC's on every run); so does a correction's method option
(:func:`store.methods.method_options`)."""


def group_key(run: RunRow) -> GroupKey:
    return (*method_of(run), run.get("variant", ""))


def method(key: GroupKey) -> str:
    """``none``, ``acoffpoc/jsd``, ``none+per``, ``none {batch_size=64}``: the correction, its divergence, a
    sampler other than uniform, a variant."""
    label = key[2] if key[3] is None else f"{key[2]}/{key[3]}"
    label = label if key[5] == DEFAULT_SAMPLER else f"{label}+{key[5]}"
    return f"{label} {{{key[6]}}}" if key[6] else label


def group_label(key: GroupKey, n: int, shown: tuple[bool, bool] = (True, True)) -> str:
    """A group's name; ``shown``: whether its algorithm and its env are said (not where every line shares
    them: :func:`task_parts`)."""
    source = "" if key[4] == "offpoc" else f" [{key[4]}]"
    task = " ".join(part for part, show in zip(key[:2], shown, strict=True) if show)
    return f"{task} {method(key)}{source} (n={n})".lstrip()


def task_parts(runs: Iterable[RunRow]) -> tuple[str, tuple[bool, bool]]:
    """What every run shares of algorithm and env, said once (``", td3 on Hopper-v4"``, ``", td3"``), and
    whether each line must still say its own algorithm and env."""
    runs = list(runs)
    algos, envs = {r["algo"] for r in runs}, {r["env"] for r in runs}
    one_algo, one_env = len(algos) == 1, len(envs) == 1
    said = " on ".join([*(algos if one_algo else ()), *(envs if one_env else ())])
    return (f", {said}" if said else ""), (not one_algo, not one_env)


def shared_settings(keys: list[GroupKey]) -> list[str]:
    """The ``k=v`` settings every one of two or more rows' variants holds: they tell no row apart, so Compare
    says them once instead of in every row's name."""
    if len(keys) < 2:
        return []
    parts = [key[6].split(", ") if key[6] else [] for key in keys]
    return [p for p in parts[0] if all(p in other for other in parts[1:])]


def without(key: GroupKey, shared: list[str] | None) -> GroupKey:
    """``key`` with the ``shared`` settings (:func:`shared_settings`) left out of its variant."""
    if not shared:
        return key
    return (*key[:6], ", ".join(p for p in key[6].split(", ") if p and p not in shared))


def row_label(key: GroupKey, versions: int, shared: list[str] | None = None) -> str:
    """A Compare row: the method, then (where it helps) the source and the env version; ``shared``: settings
    every row holds, left out of the name (:func:`shared_settings`)."""
    key = without(key, shared)
    label = method(key)
    if key[4] != "offpoc":
        label += f" {'pub' if key[4] == 'published' else key[4]}"
    if versions > 1 or key[4] != "offpoc":
        label += f" {env_version(key[1])}"
    return label


def group_runs(runs: Iterable[RunRow]) -> dict[GroupKey, list[RunRow]]:
    """Runs by group, groups in order of first appearance, seeds in id order."""
    groups: dict[GroupKey, list[RunRow]] = {}
    for run in runs:
        groups.setdefault(group_key(run), []).append(run)
    return groups


def task_name(family: str, rows: list[CompareRow]) -> str:
    """``Hopper-v4`` when one version is shown, ``Hopper (v2, v4)`` when several."""
    envs = sorted({row.key[1] for row in rows})
    if len(envs) == 1:
        return envs[0]
    return f"{family} ({', '.join(env_version(e) for e in envs)})"


def versions_shown(rows: list[CompareRow]) -> int:
    """How many env versions a compare table shows (its rows then name their version)."""
    return len({row.key[1] for row in rows})


def ordered(key: GroupKey) -> tuple[Any, ...]:
    """The rows' order: the paper's (:func:`store.summary.series_order`), then sampler, then variant with its
    numbers by value (``batch_size=64`` before ``batch_size=128``)."""
    return (*series_order(key[1], key[2], key[3], key[4]), key[5] != DEFAULT_SAMPLER, key[5], natural(key[6]))


def natural(text: str) -> list[str | float]:
    """``text`` split so that its numbers compare by value: strings and numbers alternate, a string first."""
    parts = re.split(r"(?<![\w.])(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)", text)  # 64, 0.0003, 1e-05, -1: numbers
    return [float(part) if i % 2 else part for i, part in enumerate(parts)]


@dataclass(frozen=True)
class CompareRow:
    key: GroupKey
    n_seeds: int
    final_mean: float
    """Mean over seeds of the last N evaluations (the paper's statistic)."""
    final_ci: float
    """The 95% Student-t half-width of ``final_mean`` over the seeds: the interval of the per-seed statistic
    that Welch's p and a sequential decision compare."""
    diff_pct: float | None
    """Final return relative to its baseline's (same env and source), in % of the baseline's magnitude."""
    p_value: float | None
    """Welch's t-test of the seeds' final returns (each seed's mean of its last N) against the baseline's."""
    improvement: float | None
    """P(a seed's final return beats a baseline seed's), ties half (rliable's probability of improvement)."""
    steps_to_threshold: int | None
    config_diff: str
    """Config entries that differ from the baseline's (beyond the correction itself)."""
    curve: Band
    """The seeds' returns on a common step grid: the mean curve and its band."""
    final_span: tuple[int, int] | None = None
    """The steps the final statistic covers, first to last, over the seeds."""
    short: int = 0
    """Seeds with evaluations short of the budget (still training, or ended before it): not in ``n_seeds``."""
    too_short: int = 0
    """Seeds at the budget too short for the final window (no evaluation after their learning starts): not in
    ``n_seeds``."""
    queued: int = 0
    """Seeds without an evaluation yet (queued, or ended before their first)."""
    running_now: int = 0
    """Seeds not in ``n_seeds`` that are running: they may reach the budget yet."""
    queued_now: int = 0
    """Seeds not in ``n_seeds`` that are queued."""
    reference: bool = False
    """The row the others are measured against: a baseline, or, rows grouped by a setting, its default value's."""

    @property
    def training(self) -> bool:
        """No seed has reached the budget: no final return, no difference, no test."""
        return self.n_seeds == 0

    @property
    def ended_short(self) -> int:
        """Seeds not in ``n_seeds`` that ended (failed, stopped, lost, or finished before the budget)."""
        return self.short + self.queued - self.running_now - self.queued_now


class Comparison(NamedTuple):
    """One task's Compare table: its rows, the threshold used, the budget they meet at, and the runs left out
    as repeating a seed of their method (:mod:`store.seeds`), each with the run kept instead."""

    rows: list[CompareRow]
    threshold: float | None
    budget: Budget
    repeats: tuple[tuple[RunRow, RunRow], ...] = ()


def _waiting(runs: list[RunRow], status: str, budgeted: Budget, reach: dict[int, int]) -> int:
    """How many of ``runs`` have ``status`` and do not count at the budget."""
    return sum(r["status"] == status and not budgeted.counts(reach.get(r["id"])) for r in runs)


def config_diff(config: dict[str, Any], baseline: dict[str, Any], varying: frozenset[str] = frozenset()) -> str:
    """What sets a method's runs apart from its baseline's: the entries both configs have that differ, and
    of its plug-ins' own options (entries the baseline lacks, implied by the correction) those in
    ``varying``, the ones that differ between the table's groups of the same correction."""
    keys = sorted(((set(config) & set(baseline)) | (set(config) & varying)) - IGNORED_IN_DIFF - method_options())
    return ", ".join(f"{k}={config.get(k)}" for k in keys if k in varying or config.get(k) != baseline.get(k))


def pooled_methods(runs: list[RunRow]) -> str:
    """``pools none, acoffpoc/kl``: the methods a row grouped by a setting holds runs of."""
    return "pools " + ", ".join(dict.fromkeys(method((*method_of(r), "")) for r in runs))


def varying_options(configs: list[dict[str, Any]], baseline: dict[str, Any]) -> frozenset[str]:
    """The entries the baseline lacks whose values differ between ``configs`` (one correction's groups)."""
    keys = {k for c in configs for k in c} - set(baseline)
    return frozenset(k for k in keys if len({repr(c.get(k)) for c in configs}) > 1)


def within_budget(curve: Band, threshold: float | None, step: int | None) -> int | None:
    """The first step the mean curve reaches ``threshold`` at, up to the compared budget ``step`` (None: not
    reached by then, or no threshold): a table compared at 3,000 steps never reads 27,000."""
    if threshold is None:
        return None
    inside = curve.steps <= step if step is not None else np.ones(len(curve.steps), dtype=bool)
    return steps_to_reach(curve.steps[inside], curve.mean[inside], threshold)


def compare(
    groups: dict[GroupKey, list[RunRow]],
    curves: dict[int, tuple[np.ndarray, np.ndarray]],
    configs: dict[int, dict[str, Any]],
    threshold: float | None = None,
    last: int | FinalWindow = LAST_EVALUATIONS,
    until: int | None = None,
    key_of: Callable[[RunRow], GroupKey] = group_key,
    is_reference: Callable[[GroupKey], bool] = lambda key: key[2] == BASELINE,
) -> Comparison:
    """Runs trained here first, then imported ones; in each, baseline first, then every correction.

    Every group meets at one budget (:mod:`store.budget`: by default the largest step every run trained
    here has reached; ``until`` asks for one): a seed counts with its evaluations up to it, a seed short
    of it not at all, and a group with no seed there is training (no final return, difference or test).
    Each row is compared with the baseline of its own env and source (the published AC-Off-POC
    with the published TD3): the one trained with its settings, else with the default ones, else the only
    baseline there is (its config column says how they differ). ``threshold`` defaults to the first
    baseline's final return.

    ``key_of`` makes the rows (one per method unless asked otherwise); ``is_reference`` says which rows are
    baselines. A row pooling every method's runs of a setting's value (:func:`store.summary.pooled_key`)
    names the methods it pools in its config column.
    """
    every_run = [run for runs in groups.values() for run in runs]
    reach = reach_of_curves({r["id"]: curves[r["id"]] for r in every_run if r["id"] in curves})
    members, repeats = one_per_seed(every_run, reach)
    groups = {}
    for run in members:
        groups.setdefault(key_of(run), []).append(run)
    budgeted = budget(members, reach, until)
    every = {key: [curves[r["id"]] for r in runs if r["id"] in reach] for key, runs in groups.items()}
    counted = {key: [r for r in runs if budgeted.counts(reach.get(r["id"]))] for key, runs in groups.items()}
    seeds = {key: [cut(*curves[r["id"]], budgeted.step) for r in runs] for key, runs in counted.items()}
    starts = {key: [learning_start(configs.get(r["id"], {})) for r in runs] for key, runs in counted.items()}
    keys = sorted(groups, key=ordered)
    baselines = {(k[1], k[4], k[5], k[6]): k for k in keys if is_reference(k)}
    finals = {key: final_returns(seeds[key], last, starts[key]) for key in keys}
    performance = {key: final_performance(seeds[key], last, starts[key]) for key in keys}
    if threshold is None:
        first = next((k for k in baselines.values() if len(finals[k])), None)
        threshold = None if first is None else performance[first][1]
    rows = []
    for key in keys:
        n, mean, half = performance[key]
        base = baselines.get((key[1], key[4], key[5], baseline_variant(key[6])))  # the baseline with its settings,
        for fallback in ((key[1], key[4], key[5], ""), (key[1], key[4], DEFAULT_SAMPLER, "")):  # else its default's
            base = base or baselines.get(fallback)
        alone = [k for k in baselines.values() if k[1] == key[1] and k[4] == key[4]]
        base = base or (alone[0] if len(alone) == 1 else None)  # else the task's only one; config diff says how
        diff = p = improvement = None
        if base is not None and key != base and len(finals[base]) and n:
            reference = performance[base][1]
            diff = 100.0 * (mean - reference) / abs(reference) if reference else None
            if min(n, len(finals[base])) >= MIN_SEEDS:  # below it "–": one seed each is no probability
                p = welch_p(finals[key], finals[base])
                improvement = probability_of_improvement({key[1]: finals[key]}, {key[1]: finals[base]})
        base_config = configs.get(groups[base][0]["id"], {}) if base is not None else {}
        config = configs.get(groups[key][0]["id"], {})
        same_correction = [configs.get(groups[k][0]["id"], {}) for k in keys if k[1:3] == key[1:3]]
        varying = varying_options(same_correction, base_config)
        curve = band(every[key])
        rows.append(
            CompareRow(
                key=key,
                n_seeds=n,
                final_mean=mean,
                final_ci=half,
                diff_pct=diff,
                p_value=p,
                improvement=improvement,
                steps_to_threshold=within_budget(curve, threshold, budgeted.step),
                config_diff=(
                    pooled_methods(groups[key])
                    if key[2] == POOLED
                    else ""
                    if key == base
                    else config_diff(config, base_config, varying)
                ),
                curve=curve,
                final_span=final_span(seeds[key], last, starts[key]),
                short=len(every[key]) - n - too_short(seeds[key], last, starts[key]),
                too_short=too_short(seeds[key], last, starts[key]),
                queued=len(groups[key]) - len(every[key]),
                running_now=_waiting(groups[key], "running", budgeted, reach),
                queued_now=_waiting(groups[key], "queued", budgeted, reach),
                reference=key in baselines.values(),
            )
        )
    return Comparison(rows, threshold, budgeted, tuple(repeats))
