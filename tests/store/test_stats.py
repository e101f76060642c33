"""store.stats against scipy.stats (the reference implementation) and by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from store.stats import (
    FinalWindow,
    band,
    ci95,
    final_performance,
    final_returns,
    learning_start,
    smooth,
    steps_to_reach,
    too_short,
    welch_p,
)


@pytest.mark.parametrize("seed", range(5))
def test_welch_p_matches_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.normal(0, 1, 3 + seed), rng.normal(0.5, 2, 4 + seed)
    assert welch_p(a, b) == pytest.approx(scipy_stats.ttest_ind(a, b, equal_var=False).pvalue, rel=1e-9)


def test_welch_p_edge_cases() -> None:
    assert math.isnan(welch_p([1.0], [1.0, 2.0]))
    assert welch_p([1.0, 1.0], [1.0, 1.0]) == 1.0
    assert welch_p([1.0, 1.0], [2.0, 2.0]) == 0.0


def test_ci95_is_the_student_t_half_width_and_ignores_missing_seeds() -> None:
    matrix = np.array([[1.0, 2.0, np.nan], [2.0, 4.0, 5.0], [3.0, 3.0, np.nan]])
    expected = scipy_stats.t.ppf(0.975, 2) * np.std([1, 2, 3], ddof=1) / np.sqrt(3)
    half = ci95(matrix)
    assert half[0] == pytest.approx(expected)
    assert math.isnan(half[2])  # one seed: no interval


def test_band_aligns_runs_of_different_lengths() -> None:
    grid = band([(np.array([0, 1000]), np.array([1.0, 2.0])), (np.array([0, 1000, 2000]), np.array([3.0, 4.0, 5.0]))])
    assert grid.steps.tolist() == [0, 1000, 2000]
    assert grid.mean.tolist() == [2.0, 3.0, 5.0]
    assert grid.n.tolist() == [2, 2, 1]


def test_band_on_differing_schedules_takes_the_union_of_steps() -> None:
    # Not prefixes of one another (eval_freq 1000 vs 1500): the slow path, the same answer shape.
    a, b = (np.array([0, 1000, 2000, 3000]), np.arange(4.0)), (np.array([0, 1500, 3000]), np.array([10.0, 11.0, 12.0]))
    grid = band([a, b])
    assert grid.steps.tolist() == [0, 1000, 1500, 2000, 3000]
    assert grid.n.tolist() == [2, 1, 1, 1, 2]
    assert grid.mean.tolist() == [5.0, 1.0, 11.0, 2.0, 7.5]


def test_ci95_seed_counts_varying_along_the_curve_match_scipy() -> None:
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(6, 50))
    matrix[rng.uniform(size=matrix.shape) < 0.3] = np.nan  # 0 to 6 seeds per point
    n = np.sum(~np.isnan(matrix), axis=0)
    sd = np.nanstd(np.where(n >= 2, matrix, 0.0), axis=0, ddof=1)
    expected = np.where(n >= 2, scipy_stats.t.ppf(0.975, np.maximum(n - 1, 1)) * sd / np.sqrt(n), np.nan)
    np.testing.assert_allclose(ci95(matrix), expected, rtol=1e-12)


def test_final_returns_smoothing_and_threshold() -> None:
    curve = (np.arange(12) * 1000, np.arange(12, dtype=float))
    assert final_returns([curve], last=FinalWindow(10, share=None)).tolist() == [np.mean(np.arange(2, 12))]
    assert final_returns([curve], last=10).tolist() == [10.5]  # the last 10% of 11,000 steps: 10,000 and 11,000
    assert smooth(np.array([1.0, 2.0, 3.0, 4.0]), 2).tolist() == [1.0, 1.5, 2.5, 3.5]
    assert steps_to_reach(curve[0], curve[1], 4.5) == 5000
    assert steps_to_reach(curve[0], curve[1], 99.0) is None


def test_the_final_window_never_reaches_the_start() -> None:
    """The last 10 evaluations, but none before the last 10% of the run's steps and never step 0: a short run
    reads its end, not its untrained start (a 3,000-step run evaluated every 500 read −1,239 where its last
    evaluation was −23); a run whose only evaluation is at step 0 has none, and is counted as too short."""

    short = (np.arange(0, 3001, 500), np.array([-2000.0, -1500, -1400, -1300, -1000, -450, -23]))
    assert final_returns([short]).tolist() == [-23.0]
    assert final_returns([short], last=FinalWindow(10, share=None)).tolist() == [np.mean(short[1])]  # step 0 too
    published = (np.arange(0, 1_000_001, 1000), np.arange(1001, dtype=float))  # the paper's 1M steps
    assert final_returns([published]).tolist() == [np.mean(np.arange(991, 1001))]  # its last 10, as ever
    only_start = (np.array([0]), np.array([5.0]))
    assert final_returns([only_start, short]).tolist() == [-23.0] and too_short([only_start, short]) == 1
    assert final_returns([only_start], last=FinalWindow(steps=10_000)).tolist() == []
    assert final_performance([only_start])[0] == 0
    # A study declared before the cap and the floor reads its window as declared: step 0 included.
    assert final_returns([short], last=FinalWindow(steps=5000, share=None)).tolist() == [np.mean(short[1])]
    assert final_returns([short], last=FinalWindow(steps=5000)).tolist() == [np.mean(short[1][1:])]


def test_the_final_window_never_reaches_before_learning_starts() -> None:
    """Nor any evaluation up to the step learning starts (the run's start_steps): those are of the untrained
    policy. A 3,000-step run whose learning starts at 2,600 reads its one evaluation after it; one whose
    learning starts at its last evaluation is too short. A run whose config does not say starts at 0."""
    curve = (np.arange(0, 3001, 500), np.array([-2000.0, -1500, -1400, -1300, -1000, -450, -23]))
    late = (curve[0], curve[1][::-1].copy())  # its last two evaluations: -1500 at 2,500 and -2000 at 3,000
    assert final_returns([late], FinalWindow(steps=1000)).tolist() == [-1750.0]
    assert final_returns([late], FinalWindow(steps=1000), starts=[2600]).tolist() == [-2000.0]
    assert final_returns([late], FinalWindow(steps=1000), starts=[3000]).tolist() == []
    assert too_short([late, curve], FinalWindow(steps=1000), starts=[3000, 0]) == 1
    assert final_performance([late, curve], FinalWindow(steps=1000), starts=[3000, 2000])[:2] == (1, -236.5)
    assert learning_start({"start_steps": 2600}) == 2600 and learning_start({"imported": "x"}) == 0
    # A study declared before the floor reads its window as declared, learning start or not.
    assert final_returns([late], FinalWindow(steps=1000, share=None), starts=[3000]).tolist() == [-1750.0]
