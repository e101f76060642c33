"""Aggregate statistics across tasks (store.aggregate): rliable's definitions on data with known answers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from store.aggregate import (
    METRICS,
    _resample,
    improvement_interval,
    interval,
    iqm,
    mean,
    median,
    optimality_gap,
    probability_of_improvement,
)

HAND = {"a": np.array([0.0, 1.0, 2.0, 3.0]), "b": np.array([10.0, 20.0]), "c": np.array([0.5, 0.5, 0.5])}
"""Task means 1.5, 15 and 0.5."""


def tasks(scores: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [scores[t] for t in sorted(scores)]


def test_each_metric_on_hand_made_scores() -> None:
    assert float(mean(tasks(HAND))) == pytest.approx((1.5 + 15 + 0.5) / 3)
    assert float(median(tasks(HAND))) == pytest.approx(1.5)
    pooled = [0.0, 1.0, 2.0, 3.0, 10.0, 20.0, 0.5, 0.5, 0.5]  # 9 scores: int(9 / 4) = 2 off each end
    assert float(iqm(tasks(HAND))) == pytest.approx(np.mean(sorted(pooled)[2:7]))
    assert float(iqm(tasks(HAND))) == pytest.approx(stats.trim_mean(pooled, 0.25))
    # Shortfalls below 1: a: mean(1, 0, 0, 0) = 0.25; b: 0; c: 0.5.
    assert float(optimality_gap(tasks(HAND))) == pytest.approx((0.25 + 0 + 0.5) / 3)


def test_iqm_is_scipys_trimmed_mean_of_all_scores_pooled() -> None:
    rng = np.random.default_rng(0)
    for runs in (3, 5, 10):
        scores = {f"t{i}": rng.normal(i, 2.0, runs) for i in range(7)}
        pooled = np.concatenate(tasks(scores))
        assert float(iqm(tasks(scores))) == pytest.approx(stats.trim_mean(pooled, 0.25), rel=1e-12)


def test_probability_of_improvement_counts_pairs_and_ties_half() -> None:
    x = {"a": np.array([1.0, 3.0]), "b": np.array([5.0])}
    y = {"a": np.array([2.0, 3.0]), "b": np.array([5.0]), "only_y": np.array([0.0])}
    # Task a: pairs (1>2 no, 1>3 no, 3>2 yes, 3=3 half) → 1.5/4; task b: a tie → 0.5; only_y is not shared.
    assert probability_of_improvement(x, y) == pytest.approx((1.5 / 4 + 0.5) / 2)
    assert probability_of_improvement(x, x) == pytest.approx(0.5)
    high = {t: v + 100 for t, v in x.items()}
    assert probability_of_improvement(high, x) == 1.0 and probability_of_improvement(x, high) == 0.0
    with pytest.raises(ValueError, match="share no task"):
        probability_of_improvement({"a": np.ones(2)}, {"b": np.ones(2)})


def test_the_bootstrap_reproduces_for_a_seed_and_never_moves_runs_across_tasks() -> None:
    rng = np.random.default_rng(1)
    scores = {"low": rng.uniform(0, 1, 6), "high": rng.uniform(100, 101, 4)}
    for metric in METRICS.values():
        assert interval(metric, scores, 500, seed=3) == interval(metric, scores, 500, seed=3)
    assert interval(mean, scores, 500, seed=3) != interval(mean, scores, 500, seed=4)
    high, low = _resample(tasks(scores), 1000, np.random.default_rng(0))  # tasks in name order: high, low
    assert high.shape == (1000, 4) and low.shape == (1000, 6)  # each task keeps its own run count
    assert np.isin(high, scores["high"]).all() and np.isin(low, scores["low"]).all()
    estimate, lo, hi = interval(mean, scores, 2000, seed=0)
    assert lo <= estimate <= hi
    p, p_lo, p_hi = improvement_interval(scores, scores, 2000, seed=0)
    assert p == 0.5 and p_lo < 0.5 < p_hi


def test_the_interval_covers_the_true_value_at_about_the_nominal_rate() -> None:
    rng = np.random.default_rng(7)
    true_means = np.linspace(0.0, 1.0, 5)
    covered = 0
    experiments = 300
    for seed in range(experiments):
        scores = {f"t{i}": rng.normal(m, 0.5, 10) for i, m in enumerate(true_means)}
        _, low, high = interval(mean, scores, 400, seed=seed)
        covered += low <= true_means.mean() <= high
    # Percentile intervals run a little narrow with 10 runs a task; 95% nominal, binomial spread ±2.5%.
    assert 0.88 <= covered / experiments <= 0.99
