"""AdaStop (store.sequential): the authors' package on the same inputs, error control, and holding for seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from store.sequential import Design, decide

adastop = pytest.importorskip("adastop", reason="the authors' package is a test dependency (pip install -e .[test])")


class PaperAdaStop(adastop.MultipleAgentsComparator):
    """The package with the paper's two-sided permutation statistic (|S|, as its T is); the package's own
    takes the max of the signed differences (see store/sequential.py)."""

    def compute_mean_diffs(self, k: int, Z: list[np.ndarray]) -> dict[str, np.ndarray]:
        return {c: np.abs(v) for c, v in super().compute_mean_diffs(k, Z).items()}


def _theirs(values: dict[str, np.ndarray], design: Design, interims: int) -> PaperAdaStop:
    comparator = PaperAdaStop(n=design.interim_seeds, K=design.max_interims, B=design.permutations, alpha=design.alpha)
    for k in range(1, interims + 1):
        if comparator.is_finished:
            break
        comparator.partial_compare({m: v[: k * design.interim_seeds] for m, v in values.items()}, verbose=False)
    return comparator


def _their_verdicts(comparator: PaperAdaStop) -> dict[tuple[str, str], str]:
    names = comparator.agent_names
    return {(names[i], names[j]): comparator.decisions[str(np.array([i, j]))] for i, j in comparator.comparisons}


def _studies(count: int, seeds: int, rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    """Two methods each (where the package's pairwise splits and our joint shuffle are the same test),
    half of them with no difference at all."""
    out = []
    for _ in range(count):
        shift = rng.normal(0.0, 1.2) * rng.integers(0, 2)
        out.append({"a": rng.normal(shift, 1.0, size=seeds), "b": rng.normal(0.0, 1.0, size=seeds)})
    return out


@pytest.mark.parametrize(("n", "big_k"), [(3, 3), (5, 1), (4, 2), (2, 4), (4, 1)])
def test_the_first_interim_is_the_authors_exactly(n: int, big_k: int) -> None:
    """Where every split is enumerated, the boundary and the decision of interim 1 are the package's; where
    its boundary is the largest split's value, which the observed split cannot pass, ours says ∞."""
    design = Design(alpha=0.05, interim_seeds=n, max_interims=big_k)
    decided = 0
    for values in _studies(40, n * big_k, np.random.default_rng(n)):
        theirs = _theirs(values, design, 1)
        ours = decide({m: v[:n] for m, v in values.items()}, [("a", "b")], design)
        boundary = ours.interims[0].boundaries["a", "b"]  # interim 1: a mean difference is the package's sum
        if math.isinf(boundary):
            assert design.first_possible_decision() != 1
        else:
            assert boundary == pytest.approx(theirs.boundary[0][1], rel=1e-12)
        verdict = _their_verdicts(theirs)["a", "b"]
        open_end = "undecided" if big_k == 1 else "continue"  # the package names an open end "equal"
        assert ours.verdicts["a", "b"] == (verdict if verdict in ("larger", "smaller") else open_end)
        decided += verdict in ("larger", "smaller")
    assert decided or big_k > 1  # a one-interim design decides something in 40 studies


def test_every_interim_agrees_with_the_authors_but_where_they_count_a_tie_as_spent() -> None:
    """n = 2, K = 4 and n = 3, K = 2: both enumerate every split of every interim. The package counts ties
    by position, so where |S| of a split and of its mirror tie it spends a little more level than the
    tail holds and rejects less: ours may decide where theirs does not, never the other way round."""
    studies = [(Design(interim_seeds=2, max_interims=4), v) for v in _studies(40, 8, np.random.default_rng(7))]
    studies += [(Design(interim_seeds=3, max_interims=2), v) for v in _studies(40, 6, np.random.default_rng(8))]
    disagree = decided = 0
    for design, values in studies:
        ours = decide(values, [("a", "b")], design).verdicts["a", "b"]
        theirs = _their_verdicts(_theirs(values, design, design.max_interims))["a", "b"]
        decided += ours in ("larger", "smaller")
        if (theirs, ours) == ("equal", "undecided"):  # the package names an open end "equal"
            continue
        if ours != theirs:
            assert theirs == "equal" and ours in ("larger", "smaller"), (ours, theirs)
            disagree += 1
    assert decided >= 10 and disagree <= 0.05 * len(studies)


def test_no_difference_is_called_different_more_often_than_alpha() -> None:
    """A/A on normal data, two arms, 4 interims of 5: the rate of a decision is ≤ α within Monte-Carlo
    error. The package's signed statistic decides about 2α of these (≈ 0.10)."""
    design = Design(alpha=0.05, interim_seeds=5, max_interims=4, permutations=2000)
    rng = np.random.default_rng(3)
    replays = 800
    different = 0
    for r in range(replays):
        values = {"a": rng.normal(size=20), "b": rng.normal(size=20)}
        outcome = decide(values, [("a", "b")], Design(**{**design.__dict__, "seed": r}))
        different += outcome.verdicts[("a", "b")] in ("larger", "smaller")
    rate, error = different / replays, (0.05 * 0.95 / replays) ** 0.5
    assert rate <= design.alpha + 2.5 * error, rate


def test_a_clear_difference_is_decided_at_the_first_interim_that_can_and_its_sign_is_right() -> None:
    """Two comparisons: the first is tested at α/2, which 5 seeds a method cannot reach at interim 1 of 4."""
    rng = np.random.default_rng(0)
    values = {"acoffpoc": rng.normal(10.0, 1.0, 20), "none": rng.normal(0.0, 1.0, 20), "ace": rng.normal(0, 1, 20)}
    design = Design()
    outcome = decide(values, [("acoffpoc", "none"), ("ace", "none")], design)
    first = design.first_possible_decision(comparisons=2)
    assert (first, design.first_possible_decision()) == (2, 1)
    assert outcome.verdicts[("acoffpoc", "none")] == "larger" and outcome.decided_at[("acoffpoc", "none")] == first
    flipped = decide(values, [("none", "acoffpoc")], design)
    assert flipped.verdicts[("none", "acoffpoc")] == "smaller" and flipped.decided_at[("none", "acoffpoc")] == 1
    assert outcome.open_methods() <= {"ace", "none"}  # acoffpoc runs no further seed for this study


def test_a_missing_seed_holds_the_interim_and_never_shrinks_it() -> None:
    rng = np.random.default_rng(1)
    values = {"a": rng.normal(0, 1, 10), "b": rng.normal(0, 1, 9)}
    held = decide(values, [("a", "b")], Design(interim_seeds=5, max_interims=4))
    assert len(held.interims) == 1 and held.waiting_for == {"b": 1} and not held.finished
    values["b"] = np.append(values["b"], rng.normal())
    assert len(decide(values, [("a", "b")], Design(interim_seeds=5, max_interims=4)).interims) == 2


def test_a_decision_recomputed_later_keeps_every_earlier_interim() -> None:
    """Stateless: the interims a reader computed from 10 seeds are those it computes from 20 (same
    permutations, same boundaries), so every process that reads the store agrees."""
    rng = np.random.default_rng(2)
    values = {m: rng.normal(0.3 * i, 1, 20) for i, m in enumerate("abc")}
    pairs = [("b", "a"), ("c", "a")]
    early = decide({m: v[:10] for m, v in values.items()}, pairs, Design())
    late = decide(values, pairs, Design())
    assert late.interims[: len(early.interims)] == early.interims


def test_methods_decided_are_not_read_past_their_interim() -> None:
    """6 seeds an interim: enough to decide at interim 1 at Holm's first level, α/2."""
    rng = np.random.default_rng(4)
    values = {"big": rng.normal(50, 1, 6), "none": rng.normal(0, 1, 24), "same": rng.normal(0, 1, 24)}
    outcome = decide(values, [("big", "none"), ("same", "none")], Design(interim_seeds=6, max_interims=4))
    assert outcome.verdicts[("big", "none")] == "larger"
    assert outcome.finished and outcome.verdicts[("same", "none")] in ("undecided", "larger", "smaller")


def test_the_cap_closes_what_is_open_as_undecided() -> None:
    rng = np.random.default_rng(5)
    values = {"a": rng.normal(0, 1, 6), "b": rng.normal(0, 1, 6)}
    outcome = decide(values, [("a", "b")], Design(interim_seeds=3, max_interims=2))
    assert outcome.finished and outcome.verdicts[("a", "b")] == "undecided" and outcome.decided_at[("a", "b")] == 2
    assert outcome.interims[-1].spent["a", "b"] <= 0.05


@pytest.mark.parametrize(
    ("design", "message"),
    [
        (Design(alpha=0), "alpha must be in (0, 1)"),
        (Design(interim_seeds=0), "interim seeds must be 1 to 100"),
        (Design(max_interims=0), "max interims must be 1 to 20"),
        (Design(permutations=5), "permutations must be 100 to 1,000,000"),
    ],
)
def test_a_design_out_of_bounds_is_refused_in_one_line(design: Design, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        decide({"a": [1.0], "b": [2.0]}, [("a", "b")], design)


def test_values_that_are_not_finite_are_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        decide({"a": [1.0, float("nan")], "b": [2.0, 3.0]}, [("a", "b")], Design(interim_seeds=2))


@pytest.mark.slow
def test_six_methods_called_different_no_more_often_than_alpha() -> None:
    """A/A with six methods, five compared with the first: family-wise error ≤ α within its Monte-Carlo
    error. Splitting each pair's values on its own (the package's reference) gave 0.063 here."""
    design = Design(alpha=0.05, interim_seeds=5, max_interims=4, permutations=2000)
    rng = np.random.default_rng(21)
    names = [f"m{i}" for i in range(6)]
    pairs = [(m, "m0") for m in names[1:]]
    studies = 5000
    different = 0
    for r in range(studies):
        values = {m: rng.normal(size=20) for m in names}
        outcome = decide(values, pairs, Design(**{**design.__dict__, "seed": r}))
        different += any(v in ("larger", "smaller") for v in outcome.verdicts.values())
    rate, error = different / studies, (0.05 * 0.95 / studies) ** 0.5
    assert rate <= design.alpha + 2.5 * error, rate


@pytest.mark.parametrize(("n", "big_k"), [(2, 2), (3, 1), (1, 4), (2, 1), (4, 1), (3, 2), (2, 3), (1, 6)])
def test_a_design_decides_a_huge_difference_exactly_when_it_says_it_can(n: int, big_k: int) -> None:
    """Two methods 1,000 apart with no noise: decided at the first interim the design says it can decide,
    never where it says it cannot; and a boundary that cannot be passed reads as ∞, not as a number."""
    design = Design(interim_seeds=n, max_interims=big_k)
    values = {"a": 1000.0 + np.arange(n * big_k) * 1e-3, "b": np.arange(n * big_k) * 1e-3}
    outcome = decide(values, [("a", "b")], design)
    first = design.first_possible_decision()
    if first is None:
        assert outcome.verdicts["a", "b"] == "undecided"
        assert all(i.boundaries["a", "b"] == float("inf") for i in outcome.interims)
    else:
        assert outcome.verdicts["a", "b"] == "larger" and outcome.decided_at["a", "b"] == first
        assert all(i.boundaries["a", "b"] == float("inf") for i in outcome.interims[: first - 1])
