"""AdaStop with several comparisons (store.sequential): error control whichever methods are equal, and a
pair's verdict that no other method of the study can undo. The full-size runs of these checks (≥ 2,000
studies each, the published seeds too) are `benchmarks/sequential_evidence.py`'s; docs/sequential.md has
their tables."""

from __future__ import annotations

import numpy as np
import pytest

from store.sequential import Design, _PairTest, _Permutations, _Spending, decide, interval

DESIGN = Design(alpha=0.05, interim_seeds=5, max_interims=2, permutations=1000)


def _partial_null(studies: int, spread: float, seed: int) -> float:
    """Five comparisons with the baseline: m0 is the baseline's equal, m1–m4 are tight (sd 0.05) at ±spread.
    The share of studies that call m0 different."""
    rng = np.random.default_rng(seed)
    pairs = [(f"m{i}", "base") for i in range(5)]
    different = 0
    for study in range(studies):
        values = {"base": rng.normal(0.0, 1.0, 10), "m0": rng.normal(0.0, 1.0, 10)}
        for i, mean in enumerate((spread, -spread, spread, -spread), start=1):
            values[f"m{i}"] = rng.normal(mean, 0.05, 10)
        outcome = decide(values, pairs, Design(**{**DESIGN.__dict__, "seed": study}))
        different += outcome.verdicts["m0", "base"] in ("larger", "smaller")
    return different / studies


def test_an_equal_pair_among_unequal_ones_is_called_different_at_most_alpha() -> None:
    """Strong control: the equal pair's error stays within α when the other four pairs differ. Shuffling every
    method of the study together (the package's null of all-equal) called it different in 17% of these."""
    studies = 300
    rate = _partial_null(studies, 0.3, seed=11)
    error = (0.05 * 0.95 / studies) ** 0.5
    assert rate <= DESIGN.alpha + 2.5 * error, rate


def test_a_method_joining_a_study_never_undoes_a_decided_pair() -> None:
    """A pair decided in a study of its two methods alone stays decided, the same way, when a third method far
    better than both joins the study (it was undone in every such study when all the methods were shuffled
    together)."""
    rng = np.random.default_rng(12)
    decided = kept = 0
    for study in range(120):
        values = {"base": rng.normal(0.0, 1.0, 10), "m1": rng.normal(1.3, 1.0, 10), "far": rng.normal(20.0, 1.0, 10)}
        design = Design(**{**DESIGN.__dict__, "seed": study})
        alone = decide({m: values[m] for m in ("base", "m1")}, [("m1", "base")], design).verdicts["m1", "base"]
        if alone not in ("larger", "smaller"):
            continue
        decided += 1
        joined = decide(values, [("m1", "base"), ("far", "base")], design)
        kept += joined.verdicts["m1", "base"] == alone
    assert decided >= 60 and kept >= 0.95 * decided, (decided, kept)


def test_each_comparison_is_tested_at_holms_level() -> None:
    """Three comparisons: the first interim tests each at α/3; one called different raises the others to α/2."""
    rng = np.random.default_rng(13)
    values = {"base": rng.normal(0, 1, 20), "far": rng.normal(50, 1, 20), "a": rng.normal(0, 1, 20)}
    values["b"] = rng.normal(0, 1, 20)
    design = Design(interim_seeds=10, max_interims=2)
    outcome = decide(values, [("far", "base"), ("a", "base"), ("b", "base")], design)
    first = outcome.interims[0]
    assert first.decided == {("far", "base"): "larger"}
    assert first.levels == {("far", "base"): pytest.approx(0.05 / 3), ("a", "base"): 0.025, ("b", "base"): 0.025}
    assert all(first.spent[p] <= first.levels[p] / 2 for p in first.levels)


@pytest.mark.slow
@pytest.mark.parametrize("spread", [0.3, 0.6])
def test_partial_null_over_two_thousand_studies(spread: float) -> None:
    """The issue's figure: ≤ 5%, and the 95% upper bound ≤ 6%."""
    studies = 2000
    rate = _partial_null(studies, spread, seed=21)
    assert rate <= 0.05 and rate + 1.96 * (rate * (1 - rate) / studies) ** 0.5 <= 0.06, rate


# ---- the estimate and its interval -----------------------------------------------------------------------
def _coverage(studies: int, shift: float, design: Design, seed: int) -> float:
    """Two methods a shift apart (normal, sd 1), stopped where the test stops: the share of studies whose
    interval at the stop covers the shift."""
    rng = np.random.default_rng(seed)
    covered = 0
    for study in range(studies):
        values = {"a": rng.normal(shift, 1.0, design.seeds_at_most), "b": rng.normal(0.0, 1.0, design.seeds_at_most)}
        this = Design(**{**design.__dict__, "seed": study})
        stop = decide(values, [("a", "b")], this).decided_at["a", "b"]
        low, high = interval(values, ("a", "b"), this, stop)
        covered += low <= shift <= high
    return covered / studies


def test_the_interval_ends_where_the_sequential_test_starts_to_reject() -> None:
    """At interim 1 of 4 the interval is every shift the test at α·1/4 keeps: a's values moved by a shift just
    inside it are not called different at interim 1, just outside they are."""
    rng = np.random.default_rng(31)
    design = Design(interim_seeds=6, max_interims=4, permutations=2000)
    values = {"a": rng.normal(1.0, 1.0, 6), "b": rng.normal(0.0, 1.0, 6)}
    low, high = interval(values, ("a", "b"), design, 1)
    estimate = values["a"].mean() - values["b"].mean()
    assert low < estimate < high
    for end, outward in ((low, -1.0), (high, 1.0)):
        for step, called in ((-1e-3, False), (1e-3, True)):
            shifted = {"a": values["a"] - (end + outward * step), "b": values["b"]}
            verdict = decide(shifted, [("a", "b")], design).verdicts["a", "b"]
            assert (verdict in ("larger", "smaller")) is called, (end, step, verdict)


def test_an_interim_that_cannot_reject_has_an_unbounded_interval() -> None:
    design = Design(interim_seeds=3, max_interims=2)  # C(6, 3) = 20: 2/20 > 0.05/2 at interim 1
    values = {"a": np.array([5.0, 6.0, 7.0]), "b": np.array([0.0, 1.0, 2.0])}
    assert interval(values, ("a", "b"), design, 1) == (-np.inf, np.inf)


def test_the_interval_covers_the_true_difference_wherever_the_study_stopped() -> None:
    """300 studies at a shift of 0.5 sd, a fifth of them stopped early."""
    studies = 300
    coverage = _coverage(studies, 0.5, Design(interim_seeds=5, max_interims=4, permutations=500), seed=32)
    assert coverage >= 0.95 - 2.5 * (0.05 * 0.95 / studies) ** 0.5, coverage


@pytest.mark.slow
@pytest.mark.parametrize("shift", [0.0, 0.5, 1.0, 2.0])
def test_coverage_over_two_thousand_studies(shift: float) -> None:
    """The issue's figure: ≥ 94% of 2,000 studies of the default design, early stops included."""
    coverage = _coverage(2000, shift, Design(interim_seeds=5, max_interims=4, permutations=1000), seed=33)
    assert coverage >= 0.94, coverage


def test_a_pairs_boundary_never_falls_as_its_level_falls() -> None:
    """Holm needs a pair that crosses at a lower level to cross at every higher one. AdaStop's boundaries alone
    do not give that: a lower level spends less early and so has more left later (42 of 1,400 interims of
    random studies had a boundary at α/3 below the one at α/2). Each boundary is the largest of those at the
    levels above it, and never below its own level's (its error stays within that level)."""
    rng = np.random.default_rng(0)
    design = Design(interim_seeds=3, max_interims=4, permutations=500, seed=0)
    test = _PairTest(("a", "b"), _Permutations(design), 0.05, 3)
    a, b = rng.normal(rng.normal() * 0.5, 1.0, 12), rng.normal(0.0, 1.0, 12)
    for k in range(4):
        test.add(k, a[3 * k : 3 * k + 3], b[3 * k : 3 * k + 3])
    own = []
    for r in (1, 2, 3):
        spending = _Spending(test.paths, test.perms, 0.05 / r)
        spending.through(3)
        own.append(spending.boundaries)
    assert any(own[2][k] < own[1][k] for k in range(4))  # the case this guards against is in this study
    for k in range(4):
        used = [test.boundary(k, r)[0] for r in (1, 2, 3)]
        assert used == sorted(used) and all(u >= o[k] for u, o in zip(used, own, strict=True)), (k, used)


def test_a_fixed_design_of_equal_power_needs_fewer_seeds_than_the_cap() -> None:
    """Seeds saved are counted against the fixed design with this design's power, not its cap n·K: with one
    interim the two are the same design; with four the sequential design's looks cost it seeds (n = 5, K = 4:
    18 a method have its power, not 20)."""
    assert [Design(interim_seeds=n, max_interims=1).equal_power_seeds() for n in (3, 5, 10)] == [3, 5, 10]
    assert Design(interim_seeds=5, max_interims=4).equal_power_seeds() == 18
    assert Design(interim_seeds=10, max_interims=4).equal_power_seeds() in (35, 36)
    assert Design(interim_seeds=5, max_interims=4).equal_power_seeds(comparisons=5) >= 18


def test_the_interval_leaves_out_zero_exactly_where_the_verdict_is_a_difference() -> None:
    """At the level each pair was tested at (Holm's), with its own permutation samples: a verdict and its
    interval never disagree, whatever the methods' names (they order the samples)."""
    rng = np.random.default_rng(34)
    design = Design(interim_seeds=5, max_interims=2, permutations=500)
    pairs = [("ris-off-pac", "none"), ("ace", "none"), ("acoffpoc", "none")]
    checked = decided = 0
    for study in range(60):
        values = {"none": rng.normal(0.0, 1.0, 10)}
        for (method, _), shift in zip(pairs, rng.normal(0.0, 1.2, 3), strict=True):
            values[method] = rng.normal(shift, 1.0, 10)
        this = Design(**{**design.__dict__, "seed": study})
        outcome = decide(values, pairs, this)
        for pair in pairs:
            k = outcome.decided_at[pair]
            level = outcome.interims[k - 1].levels[pair]
            low, high = interval(values, pair, this, k, round(this.alpha / level))
            different = outcome.verdicts[pair] in ("larger", "smaller")
            assert (not low <= 0.0 <= high) == different, (study, pair, outcome.verdicts[pair], low, high)
            checked, decided = checked + 1, decided + different
    assert checked == 180 and 30 <= decided <= 150
