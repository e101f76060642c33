"""Statistics over learning curves: means across seeds, 95% Student-t bands, Welch's test.

Pure numpy plus ``scipy.special`` (the t distribution), which loads in a quarter of a
second where ``scipy.stats`` takes one and a half; the dashboard and the exports share
these so a figure means the same everywhere.

A curve is ``(steps, values)``, two 1-d arrays of equal length, steps increasing.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

Curve = tuple[np.ndarray, np.ndarray]

LAST_EVALUATIONS = 10
"""Final performance is the mean of each seed's last this-many evaluations."""

BandKind = Literal["ci95", "se", "minmax", "none"]
BAND_KINDS: tuple[BandKind, ...] = ("ci95", "se", "minmax", "none")


def t_quantile(df: np.ndarray | float, q: float = 0.975) -> np.ndarray:
    """Student-t quantile; NaN where ``df`` < 1."""
    from scipy.special import stdtrit

    df = np.asarray(df, dtype=np.float64)
    # A curve band asks for thousands of points but only a few distinct seed counts.
    distinct, where = np.unique(np.maximum(df, 1.0), return_inverse=True)
    return np.where(df >= 1, stdtrit(distinct, q)[where].reshape(df.shape), np.nan)


def ci95(samples: np.ndarray, axis: int = 0) -> np.ndarray:
    """Half-width of the 95% Student-t interval of the mean along ``axis``, ignoring NaNs.

    t(0.975, n − 1) · sd(ddof=1) / √n; NaN where fewer than two values are present.
    """
    samples = np.asarray(samples, dtype=np.float64)
    n = np.sum(~np.isnan(samples), axis=axis)
    with warnings.catch_warnings():  # fewer than two values: NaN, said above
        warnings.simplefilter("ignore", RuntimeWarning)
        sd = np.nanstd(samples, axis=axis, ddof=1) if samples.size else np.full(n.shape, np.nan)
        return np.where(n >= 2, t_quantile(n - 1) * sd / np.sqrt(np.maximum(n, 1)), np.nan)


def welch_p(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided p-value of Welch's t-test (unequal variances); NaN with < 2 values a side."""
    from scipy.special import stdtr

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(x) < 2 or len(y) < 2:
        return math.nan
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    if vx + vy == 0:
        return 1.0 if x.mean() == y.mean() else 0.0
    t = (x.mean() - y.mean()) / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    return float(2 * stdtr(df, -abs(t)))


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average over ``window`` points (fewer at the start)."""
    values = np.asarray(values, dtype=np.float64)
    if window <= 1 or len(values) == 0:
        return values
    sums = np.cumsum(np.insert(values, 0, 0.0))
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(idx - window, 0)
    return (sums[idx] - sums[lo]) / (idx - lo)


@dataclass(frozen=True)
class Band:
    """Curves of several seeds on a common step grid."""

    steps: np.ndarray
    """(T,) every step at which some seed was evaluated."""
    matrix: np.ndarray
    """(seeds, T) returns, NaN where a seed has no evaluation (yet) at that step."""

    @property
    def n(self) -> np.ndarray:
        """(T,) seeds present at each step."""
        return np.sum(~np.isnan(self.matrix), axis=0)

    @property
    def mean(self) -> np.ndarray:
        with warnings.catch_warnings():  # an all-NaN column is simply NaN here
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(self.matrix, axis=0)

    @property
    def half_width(self) -> np.ndarray:
        return ci95(self.matrix, axis=0)

    def interval(self, kind: BandKind) -> tuple[np.ndarray, np.ndarray] | None:
        """(T,) lower and upper edges of the band ``kind`` around the mean; NaN where fewer than two seeds.

        ``ci95``: the 95% Student-t interval of the mean (the paper's); ``se``: ± one standard
        error; ``minmax``: the lowest and highest seed; ``none``: no band (None).
        """
        if kind == "none":
            return None
        if not self.matrix.size:  # no seed has an evaluation yet (queued runs): an empty band
            empty = np.zeros(len(self.steps))
            return empty, empty.copy()
        n = self.n
        with warnings.catch_warnings():  # columns with fewer than two seeds: NaN, said above
            warnings.simplefilter("ignore", RuntimeWarning)
            if kind == "minmax":
                lower, upper = np.nanmin(self.matrix, axis=0), np.nanmax(self.matrix, axis=0)
            else:
                half = self.half_width if kind == "ci95" else np.nanstd(self.matrix, axis=0, ddof=1) / np.sqrt(n)
                lower, upper = self.mean - half, self.mean + half
        few = n < 2
        return np.where(few, np.nan, lower), np.where(few, np.nan, upper)


def band(curves: Sequence[Curve]) -> Band:
    """Put seeds' curves on the union of their steps (live runs may differ in length)."""
    if not curves:
        return Band(np.zeros(0, dtype=np.int64), np.zeros((0, 0)))
    longest = np.asarray(max((s for s, _ in curves), key=len))
    if all(np.array_equal(longest[: len(s)], s) for s, _ in curves):
        # The usual case (same evaluation schedule, some seeds further on): the longest
        # seed's steps are the grid and every other seed fills a prefix of it.
        steps = longest
        positions: list[slice | np.ndarray] = [slice(0, len(s)) for s, _ in curves]
    else:
        steps = np.unique(np.concatenate([np.asarray(s) for s, _ in curves]))
        positions = [np.searchsorted(steps, s) for s, _ in curves]
    matrix = np.full((len(curves), len(steps)), np.nan)
    for row, ((_, v), where) in enumerate(zip(curves, positions, strict=True)):
        matrix[row, where] = v
    return Band(steps, matrix)


LAST_SHARE = 0.1
"""The default window reaches no further back than this share of a run's steps."""


@dataclass(frozen=True)
class FinalWindow:
    """The evaluations that make a seed's final return: its last ``evaluations`` (the paper's
    statistic, 10 at every 1,000 steps) but none further back than the last ``share`` of its steps,
    whichever are fewer; or, with ``steps``, those within its last ``steps`` steps, which means the
    same span whatever each run's evaluation frequency. Never the evaluation at step 0 nor any up to
    the step its learning starts (:func:`learning_start`: before any update, and alike for every
    method of a seed), so a run too short for the window has none.

    On the published curves (1M steps, 1,000 apart, or cut at a budget of 100k or more) the share
    takes more than 10 evaluations: the window is the paper's. On a 3,000-step run evaluated every
    500 it is the last evaluation alone, where "the last 10" reached back to step 0."""

    evaluations: int = LAST_EVALUATIONS
    steps: int | None = None
    share: float | None = LAST_SHARE
    """None: the last ``evaluations`` whatever the run's length, step 0 included (a study declared before the
    cap and the floor keeps its window)."""

    def select(self, steps: np.ndarray, values: np.ndarray, start: int = 0) -> Curve:
        """The part of one seed's curve the window takes (empty: the run is too short for it); ``start``:
        the step its learning starts (:func:`learning_start`), the window's floor."""
        steps, values = np.asarray(steps), np.asarray(values, dtype=np.float64)
        if not len(steps):
            return steps, values
        if self.steps is not None:
            keep = steps > steps[-1] - self.steps
        else:
            keep = np.zeros(len(steps), dtype=bool)
            keep[-self.evaluations :] = True
            if self.share is not None:
                keep &= steps >= steps[-1] * (1 - self.share)
        if self.share is not None:  # None: a study declared before the floor, read as it was declared
            keep &= steps > max(start, 0)
        return steps[keep], values[keep]

    @classmethod
    def of(cls, last: int | FinalWindow) -> FinalWindow:
        """``last`` as a window: a count of evaluations, or already one."""
        return last if isinstance(last, FinalWindow) else cls(last)

    def describe(self) -> str:
        """``last 10 evaluations (within the last 10% of steps, after learning starts)`` or ``last 10,000
        steps (after learning starts)``."""
        if self.steps is not None:
            return f"last {self.steps:,} steps (after learning starts)"
        if self.share is None:
            return f"last {self.evaluations} evaluations"
        return f"last {self.evaluations} evaluations (within the last {self.share:.0%} of steps, after learning starts)"


def learning_start(config: Mapping[str, Any]) -> int:
    """The step a run's learning starts, from its stored config: its ``start_steps`` (updates begin after
    it; the evaluations up to it are of the untrained policy). 0 for a run whose config does not say (an
    imported curve): then only step 0 is left out."""
    start = config.get("start_steps")
    return int(start) if isinstance(start, (int, float)) and start > 0 else 0


def _chosen(curves: Sequence[Curve], window: FinalWindow, starts: Sequence[int] | None) -> list[Curve]:
    """Each seed's window (:meth:`FinalWindow.select`), ``starts`` its learning starts (None: step 0 each)."""
    floors = [0] * len(curves) if starts is None else list(starts)
    if len(floors) != len(curves):
        raise ValueError(f"{len(curves)} curves but {len(floors)} learning starts")
    return [window.select(s, v, start) for (s, v), start in zip(curves, floors, strict=True)]


def final_returns(
    curves: Sequence[Curve], last: int | FinalWindow = LAST_EVALUATIONS, starts: Sequence[int] | None = None
) -> np.ndarray:
    """Per seed, the mean of its final window (``last``: evaluations, or a window; ``starts``: each seed's
    learning start, the window's floor); seeds with none left out."""
    chosen = _chosen(curves, FinalWindow.of(last), starts)
    return np.asarray([float(np.mean(v)) for _, v in chosen if len(v)], dtype=np.float64)


def too_short(
    curves: Sequence[Curve], last: int | FinalWindow = LAST_EVALUATIONS, starts: Sequence[int] | None = None
) -> int:
    """Seeds whose window takes no evaluation (all at or before learning starts, or none up to the budget: a
    curve evaluated only past it, such as an imported one with no step 0): no final return, yet counted."""
    chosen = _chosen(curves, FinalWindow.of(last), starts)
    return sum(1 for _, taken in chosen if not len(taken))


def final_span(
    curves: Sequence[Curve], last: int | FinalWindow = LAST_EVALUATIONS, starts: Sequence[int] | None = None
) -> tuple[int, int] | None:
    """The steps the final windows of these seeds cover, first to last; None without evaluations."""
    chosen = [s for s, _ in _chosen(curves, FinalWindow.of(last), starts) if len(s)]
    if not chosen:
        return None
    return int(min(c[0] for c in chosen)), int(max(c[-1] for c in chosen))


def steps_to_reach(steps: np.ndarray, mean: np.ndarray, threshold: float) -> int | None:
    """First step at which the mean curve reaches ``threshold`` (None if it never does)."""
    hit = np.flatnonzero(np.asarray(mean) >= threshold)
    return int(steps[hit[0]]) if len(hit) else None


def final_performance(
    curves: Sequence[Curve], last: int | FinalWindow = LAST_EVALUATIONS, starts: Sequence[int] | None = None
) -> tuple[int, float, float]:
    """One method's final performance: (seeds, mean, ± half-width).

    ``mean``: the mean over seeds of each seed's final window (its last ``last`` evaluations, or a
    :class:`FinalWindow`): the paper's statistic. ``±``: the 95% Student-t half-width of that mean over
    the seeds, the interval of the very quantity the mean, Welch's p and a sequential decision compare
    (the paper's ± is another figure: :func:`paper_half_width`). NaN half-width with a single seed.
    """
    finals = final_returns(curves, last, starts)
    if not len(finals):
        return 0, math.nan, math.nan
    return len(finals), float(finals.mean()), float(ci95(finals))


def paper_half_width(
    curves: Sequence[Curve], last: int | FinalWindow = LAST_EVALUATIONS, starts: Sequence[int] | None = None
) -> float:
    """The paper's ±: the mean, over the window's evaluation points, of the per-point 95% Student-t
    half-width across seeds. Seeds are aligned from their last evaluation, so runs of equal length give
    exactly the paper's figure. It is not an interval of the seeds' final means: on the published seeds
    it is a median 1.27× that interval, up to 2.73×. NaN with a single seed."""
    values = [v for _, v in _chosen(curves, FinalWindow.of(last), starts) if len(v)]
    if not values:
        return math.nan
    points = max(len(v) for v in values)
    matrix = np.full((len(values), points), np.nan)
    for row, v in enumerate(values):
        matrix[row, points - len(v) :] = v
    half = ci95(matrix, axis=0)
    return float(np.mean(half[~np.isnan(half)])) if (~np.isnan(half)).any() else math.nan


def binned_band(
    runs: Sequence[tuple[np.ndarray, np.ndarray]], bins: int = 20
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Several runs' (positions in [0, 1], values) on ``bins`` equal bins: (centres, the mean over runs of
    each run's bin mean, its 95% Student-t half-width across runs, how many runs have a value there)."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    per_run = np.full((len(runs), bins), np.nan)
    for r, (positions, values) in enumerate(runs):
        index = np.clip(np.digitize(positions, edges) - 1, 0, bins - 1)
        sums = np.bincount(index, weights=values, minlength=bins)
        counts = np.bincount(index, minlength=bins)
        per_run[r, counts > 0] = sums[counts > 0] / counts[counts > 0]
    with warnings.catch_warnings():  # an empty bin: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(per_run, axis=0)
    return (edges[:-1] + edges[1:]) / 2, mean, ci95(per_run, axis=0), (~np.isnan(per_run)).sum(0)
