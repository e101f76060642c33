"""Runs grouped by experiment, and the Compare table's statistics.

A group is (algo, env, correction, divergence): the seeds of one method on one task.
Shared by the dashboard and ``offpoc dashboard --once``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from store.stats import LAST_EVALUATIONS, Band, band, ci95, final_returns, steps_to_reach, welch_p

GroupKey = tuple[str, str, str, str | None]

BASELINE = "none"
IGNORED_IN_DIFF = {"seed", "correction", "divergence", "ref_std", "name"}
"""Config keys that differ between a method and its baseline by design."""


def group_key(run: dict[str, Any]) -> GroupKey:
    return run["algo"], run["env"], run["correction"], run["divergence"]


def method(key: GroupKey) -> str:
    """``none``, ``acoffpoc/jsd``: the correction and its divergence."""
    return key[2] if key[3] is None else f"{key[2]}/{key[3]}"


def group_label(key: GroupKey, n: int) -> str:
    return f"{key[0]} {key[1]} {method(key)} (n={n})"


def group_runs(runs: Iterable[dict[str, Any]]) -> dict[GroupKey, list[dict[str, Any]]]:
    """Runs by group, groups in order of first appearance, seeds in id order."""
    groups: dict[GroupKey, list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault(group_key(run), []).append(run)
    return groups


def _ordered(key: GroupKey) -> tuple[int, str]:
    return (0 if key[2] == BASELINE else 1, method(key))


@dataclass(frozen=True)
class CompareRow:
    key: GroupKey
    n_seeds: int
    final_mean: float
    final_ci: float
    diff_pct: float | None
    """Final return relative to the baseline's, in % of the baseline's magnitude."""
    p_value: float | None
    """Welch's t-test of the seeds' final returns against the baseline's."""
    steps_to_threshold: int | None
    config_diff: str
    """Config entries that differ from the baseline's (beyond the correction itself)."""
    curve: Band
    """The seeds' returns on a common step grid: the mean curve and its band."""


def config_diff(config: dict[str, Any], baseline: dict[str, Any]) -> str:
    keys = sorted((set(config) | set(baseline)) - IGNORED_IN_DIFF)
    return ", ".join(f"{k}={config.get(k)}" for k in keys if config.get(k) != baseline.get(k))


def compare(
    groups: dict[GroupKey, list[dict[str, Any]]],
    curves: dict[int, tuple[np.ndarray, np.ndarray]],
    configs: dict[int, dict[str, Any]],
    threshold: float | None = None,
    last: int = LAST_EVALUATIONS,
) -> tuple[list[CompareRow], float | None]:
    """Baseline first, then every correction: final return ± 95% CI across seeds, and the tests.

    ``threshold`` defaults to the baseline's final return. Returns the rows and the threshold used.
    """
    finals: dict[GroupKey, np.ndarray] = {}
    bands: dict[GroupKey, Band] = {}
    for key, members in groups.items():
        seeds = [curves[r["id"]] for r in members if len(curves.get(r["id"], ((), ()))[0])]
        finals[key] = final_returns(seeds, last)
        bands[key] = band(seeds)
    keys = sorted(groups, key=_ordered)
    base = next((k for k in keys if k[2] == BASELINE), None)
    base_final = finals[base] if base is not None and len(finals[base]) else None
    if threshold is None and base_final is not None:
        threshold = float(base_final.mean())
    base_config = configs.get(groups[base][0]["id"], {}) if base is not None else {}
    rows = []
    for key in keys:
        final = finals[key]
        mean = float(final.mean()) if len(final) else math.nan
        diff = p = None
        if base_final is not None and key != base and len(final):
            reference = float(base_final.mean())
            diff = 100.0 * (mean - reference) / abs(reference) if reference else None
            p = welch_p(final, base_final)
        curve = bands[key]
        rows.append(
            CompareRow(
                key=key,
                n_seeds=len(final),
                final_mean=mean,
                final_ci=float(ci95(final)) if len(final) else math.nan,
                diff_pct=diff,
                p_value=p,
                steps_to_threshold=None if threshold is None else steps_to_reach(curve.steps, curve.mean, threshold),
                config_diff="" if key == base else config_diff(configs.get(groups[key][0]["id"], {}), base_config),
                curve=curve,
            )
        )
    return rows, threshold
