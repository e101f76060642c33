"""Aggregate statistics across tasks, as rliable defines them (Agarwal et al., NeurIPS 2021).

Each method has, per task, the final scores of its runs. The point estimates:

- ``mean``: the mean over tasks of each task's mean score;
- ``median``: the median over tasks of each task's mean score;
- ``iqm``: the interquartile mean, the 25%-trimmed mean of every run's score on every task pooled;
- ``optimality_gap``: the mean over tasks of each task's mean shortfall below γ = 1, mean(max(γ − x, 0));

and the probability of improvement P(X > Y): per task, the probability that a random run of X
scores above a random run of Y (ties count half, the Mann-Whitney statistic), averaged over tasks.

Intervals are stratified-bootstrap percentiles: each resample redraws, with replacement, the runs
within each task (never across tasks), as many as the task has; P(X > Y) redraws X's and Y's runs
independently. A fixed seed makes every interval reproduce.

    scores = {"Hopper": np.array([...]), "Walker2d": np.array([...])}   # one method, runs per task
    estimate, low, high = interval(iqm, scores, resamples=2000, seed=0)
    p, low, high = improvement_interval(scores, baseline_scores)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

Scores = Mapping[str, np.ndarray]
"""Per task, the final scores of one method's runs (1-d)."""
Metric = Callable[[Sequence[np.ndarray]], np.ndarray]
"""Tasks' scores, each (..., runs), to the metric, (...): the leading axes are bootstrap resamples."""

CONFIDENCE = 0.95
MAX_BOOTSTRAP = 100_000
"""The most resamples a table or figure takes (``--bootstrap``): its arrays grow with them (rliable uses 2,000)."""
GAMMA = 1.0
"""The optimality gap's target: a normalised score of 1."""


def mean(tasks: Sequence[np.ndarray]) -> np.ndarray:
    return np.mean([runs.mean(-1) for runs in tasks], axis=0)


def median(tasks: Sequence[np.ndarray]) -> np.ndarray:
    return np.median([runs.mean(-1) for runs in tasks], axis=0)


def iqm(tasks: Sequence[np.ndarray]) -> np.ndarray:
    """The mean of the middle 50% of all runs' scores pooled over tasks (``scipy.stats.trim_mean(x, 0.25)``)."""
    pooled = np.sort(np.concatenate(list(tasks), axis=-1), axis=-1)
    cut = int(0.25 * pooled.shape[-1])  # as scipy: the same whole number of scores off each end
    return pooled[..., cut : pooled.shape[-1] - cut].mean(-1)


def optimality_gap(tasks: Sequence[np.ndarray], gamma: float = GAMMA) -> np.ndarray:
    return np.mean([np.maximum(gamma - runs, 0.0).mean(-1) for runs in tasks], axis=0)


METRICS: dict[str, Metric] = {"mean": mean, "median": median, "iqm": iqm, "optimality_gap": optimality_gap}


def _improvement(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> np.ndarray:
    per_task = [((x[..., :, None] > y[..., None, :]) + 0.5 * (x[..., :, None] == y[..., None, :])).mean((-2, -1))
                for x, y in zip(xs, ys, strict=True)]  # fmt: skip
    return np.mean(per_task, axis=0)


def _arrays(scores: Scores, tasks: Sequence[str]) -> list[np.ndarray]:
    return [np.asarray(scores[task], dtype=np.float64) for task in tasks]


def _resample(tasks: Sequence[np.ndarray], resamples: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Stratified resamples, (resamples, runs) per task: each task's runs drawn with replacement from it alone."""
    return [runs[rng.integers(0, len(runs), (resamples, len(runs)))] for runs in tasks]


def _percentiles(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 95% percentile interval over the resamples (the first axis)."""
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail], axis=0)
    return low, high


def interval(metric: Metric, scores: Scores, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """(estimate, low, high): the metric over the tasks of ``scores`` and its stratified-bootstrap 95%
    percentile interval."""
    tasks = _arrays(scores, sorted(scores))
    draws = metric(_resample(tasks, resamples, np.random.default_rng(seed)))
    low, high = _percentiles(draws)
    return float(metric(tasks)), float(low), float(high)


MIN_SEEDS = 2
"""Seeds a side (on every task) that P(> baseline) and Welch's p need: from one seed against one, P(> baseline)
reads 0, ½ or 1, a certainty it is not. Compare, the across-tasks line and the improvement table hold to it."""


def probability_of_improvement(x: Scores, y: Scores) -> float:
    """P(X > Y) averaged over the tasks both have: per task, the share of (x, y) run pairs with x > y,
    ties counting half."""
    tasks = sorted(set(x) & set(y))
    if not tasks:
        raise ValueError("the two methods share no task")
    return float(_improvement(_arrays(x, tasks), _arrays(y, tasks)))


def improvement_interval(x: Scores, y: Scores, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """(P(X > Y), low, high) with X's and Y's runs resampled independently within each shared task."""
    tasks = sorted(set(x) & set(y))
    if not tasks:
        raise ValueError("the two methods share no task")
    xs, ys = _arrays(x, tasks), _arrays(y, tasks)
    rng = np.random.default_rng(seed)
    draws = _improvement(_resample(xs, resamples, rng), _resample(ys, resamples, rng))
    low, high = _percentiles(draws)
    return float(_improvement(xs, ys)), float(low), float(high)


def profile(tasks: Sequence[np.ndarray], taus: np.ndarray) -> np.ndarray:
    """The performance profile (score distribution): for each threshold τ, the fraction of runs scoring
    above it, averaged over tasks; (..., len(taus)) for tasks (..., runs)."""
    return np.mean([(runs[..., :, None] > taus).mean(-2) for runs in tasks], axis=0)


def profile_band(
    scores: Scores, taus: np.ndarray, resamples: int = 2000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(profile, low, high) over ``taus``, the band a stratified-bootstrap 95% percentile interval."""
    tasks = _arrays(scores, sorted(scores))
    draws = profile(_resample(tasks, resamples, np.random.default_rng(seed)), taus)
    return profile(tasks, taus), *_percentiles(draws)
