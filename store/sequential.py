"""AdaStop: decide, interim by interim, which methods differ on one task, with the family-wise error ≤ α.

Mathieu et al., "AdaStop: adaptive statistical testing for sound comparisons of deep RL agents" (TMLR
2024). Each method runs ``n`` seeds per interim, at most ``K`` interims. After interim ``k`` every open
comparison (a, b) has the statistic

    S_ab = Σ_{j ≤ k} (mean of a's seeds in interim j − mean of b's seeds in interim j),

and its own two-arm test rejects "a and b are equal" when |S_ab| exceeds a boundary b_k read from the
permutation distribution of |S_ab| (each interim's 2n values of a and b shuffled between the two),
conditioned on not having crossed an earlier boundary, with the level spent linearly: at most L·k/K by
interim k at level L. Holm's step-down runs over the comparisons: each open one is tested at α / (the
comparisons not yet called different), and each one called different raises the others' level, so the
chance of calling any pair of equal methods different, over all the comparisons and all the interims, is
at most α whichever of the methods are equal (docs/sequential.md argues it). What is left open after
interim K is *undecided*: no difference was found at level α. AdaStop's own code names that "equal"; it
is not a proof of equality, and the screen says so.

Where ours differs from the authors' package (`adastop` 0.1.3, which the tests run on the same inputs):

- the permutation distribution is of |S| as the paper's test is two-sided; the package takes the max of
  the *signed* differences but compares |S| with it, which spends about 2α on one comparison;
- the decision is recomputed from the stored seeds' values alone (the permutations of interim k come
  from a generator seeded by ``(design.seed, k)``), so every process that reads the store reaches the
  same decision and none holds state;
- with three or more methods the package reads one boundary from the maximum over the comparisons (each
  pair split on its own); ours tests each pair on its own two methods' values, with Holm over the pairs,
  which controls the error whichever methods are equal (with two methods it is the same test);
- every interim's permutations are drawn once, for all samples: when C(2n, n)^K ≤ ``permutations`` the
  whole product of the interims' splits is enumerated (exact, as the package is there), otherwise
  ``permutations`` joint samples are drawn; the package's normalisation after a first random interim
  (n ≥ 8 at its defaults) divides by 1 and can no longer reject there.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Verdict = Literal["continue", "larger", "smaller", "undecided"]
Pair = tuple[str, str]
"""(a, b): "larger" means a's mean is larger than b's."""


@dataclass(frozen=True)
class Design:
    """A sequential comparison, declared before its first seed runs."""

    alpha: float = 0.05
    """Family-wise error over every comparison of the study (one task), over all interims."""
    interim_seeds: int = 5
    """Seeds per method in each interim (n)."""
    max_interims: int = 4
    """Interims at most (K): a method runs at most n·K seeds."""
    permutations: int = 10_000
    """Permutation samples (B); exact enumeration where C(2n, n)^K ≤ B."""
    seed: int = 0
    """Seeds the permutations' generator, so a decision is the same wherever it is recomputed."""

    def problems(self) -> list[str]:
        """What is wrong with this design, one line each (empty: none)."""
        out = []
        if not 0 < self.alpha < 1:
            out.append(f"alpha must be in (0, 1), not {self.alpha}")
        if not 1 <= self.interim_seeds <= 100:
            out.append(f"interim seeds must be 1 to 100, not {self.interim_seeds}")
        if not 1 <= self.max_interims <= 20:
            out.append(f"max interims must be 1 to 20, not {self.max_interims}")
        if not 100 <= self.permutations <= 1_000_000:
            out.append(f"permutations must be 100 to 1,000,000, not {self.permutations}")
        return out

    def first_possible_decision(self, comparisons: int = 1) -> int | None:
        """The first interim at which two methods can be told apart at all, or None: with n seeds each, the
        smallest share of splits as extreme as the one observed is 2/C(2n, n)^k (a split and its mirror tie),
        and a first rejection at interim k needs it to be at most (α/comparisons)·k/K (Holm's first level)."""
        splits = math.comb(2 * self.interim_seeds, self.interim_seeds)
        for k in range(1, self.max_interims + 1):
            if 2 / splits**k <= self.alpha / comparisons * k / self.max_interims:
                return k
        return None

    @property
    def seeds_at_most(self) -> int:
        """Seeds per method of the fixed design with the same cap (n·K)."""
        return self.interim_seeds * self.max_interims

    def equal_power_seeds(self, comparisons: int = 1, power: float = 0.8) -> int:
        """Seeds per method of the fixed-sample design with the same power as this one: ``power`` at the
        difference this design detects with that chance, both two-sided at α/``comparisons`` (Holm's first
        level, the least a comparison of the study is tested at). A normal approximation of the permutation
        test (known spread, equal per method), computed once per design: a sequential design's cap n·K is
        more than such a fixed design needs, so seeds saved are counted against this, not against the cap."""
        return _equal_power_seeds(self.interim_seeds, self.max_interims, self.alpha / comparisons, power)


@functools.lru_cache(maxsize=64)
def _equal_power_seeds(n: int, big_k: int, level: float, power: float, paths: int = 50_000) -> int:
    """:meth:`Design.equal_power_seeds`: the sequential test's boundaries on standard normal partial sums
    (the same linear spending and crossing rule as :class:`_Spending`), the drift per interim at which it
    crosses with chance ``power`` (bisection, the same seeded paths), then the fixed n_f whose one look at
    level ``level`` has that power at that difference: n_f = n·K·((z₁₋ₗ/₂ + z_power) / (θ·√K))², less 2% for
    the Monte-Carlo error of θ, then rounded up (so that K = 1, a fixed design itself, gives n rather than
    n + 1). About 0.3 s a design."""
    from statistics import NormalDist

    steps = np.random.default_rng(12345).standard_normal((paths, big_k)).cumsum(axis=1)
    boundaries, alive, spent = [], np.ones(paths, dtype=bool), 0.0
    for k in range(big_k):
        live = np.abs(steps[alive, k])
        boundary, added = _boundary(live, spent, level * (k + 1) / big_k, paths, exact=False)
        boundaries.append(boundary)
        spent += added
        alive[np.flatnonzero(alive)] = live <= boundary
    drift = np.arange(1, big_k + 1)

    def detects(theta: float) -> float:
        shifted = np.abs(steps + theta * drift) > np.array(boundaries)
        return float(np.mean(shifted.any(axis=1)))

    low, high = 0.0, 1.0
    while detects(high) < power:
        high *= 2
    for _ in range(30):
        middle = (low + high) / 2
        low, high = (middle, high) if detects(middle) < power else (low, middle)
    theta = (low + high) / 2
    z = NormalDist().inv_cdf
    needed = n * big_k * ((z(1 - level / 2) + z(power)) / (theta * math.sqrt(big_k))) ** 2
    return max(1, math.ceil(needed * 0.98))


@dataclass(frozen=True)
class Interim:
    """What one interim decided: each comparison open at its start, on the scale of a mean difference."""

    index: int
    """1-based."""
    seeds: int
    """Seeds per method in the comparisons still open at this interim (n·index)."""
    statistics: dict[Pair, float]
    """Each open comparison's mean difference over its seeds so far (a − b; S/k in the paper's terms)."""
    boundaries: dict[Pair, float]
    """Each open comparison's boundary for |mean difference| at its level (b_k/k); inf: it cannot be rejected
    at this interim."""
    levels: dict[Pair, float]
    """Each open comparison's level at this interim: Holm's α / (comparisons not yet called different), the
    level at which it was called different where it was."""
    spent: dict[Pair, float]
    """Each open comparison's own test: permutation probability of a rejection by this interim under no
    difference, at its level (≤ level·index/K)."""
    decided: dict[Pair, Verdict]
    """Comparisons this interim closed, with their verdict ("undecided" only at the cap)."""


@dataclass(frozen=True)
class Outcome:
    """The state of a study's comparisons after the complete interims of its data."""

    design: Design
    comparisons: tuple[Pair, ...]
    verdicts: dict[Pair, Verdict]
    decided_at: dict[Pair, int]
    """Interim (1-based) that closed each decided comparison."""
    interims: tuple[Interim, ...] = field(default=())
    waiting_for: dict[str, int] = field(default_factory=dict)
    """Method → seeds it still needs for the next interim (empty when finished)."""

    @property
    def finished(self) -> bool:
        return all(v != "continue" for v in self.verdicts.values())

    def open_methods(self) -> set[str]:
        """Methods in a comparison still open: only these run further seeds."""
        return {m for pair, v in self.verdicts.items() if v == "continue" for m in pair}


class _Permutations:
    """The permutation samples: per interim, how each sample deals that interim's values out to two arms.

    Where C(2n, n)^K ≤ B every split of every interim is enumerated (the product of the interims' splits):
    exact. Otherwise B samples are drawn, from a generator seeded by ``(design.seed, interim)``."""

    def __init__(self, design: Design) -> None:
        n, big_k = design.interim_seeds, design.max_interims
        self.design = design
        self.splits_per_interim = math.comb(2 * n, n)
        self.exact = self.splits_per_interim**big_k <= design.permutations
        self.count = self.splits_per_interim**big_k if self.exact else design.permutations
        self._all_splits = np.array(list(itertools.combinations(range(2 * n), n))) if self.exact else None
        self._orders: dict[int, np.ndarray] = {}

    def arm_means(self, interim: int, values: np.ndarray) -> np.ndarray:
        """(2, N): each arm's mean under each sample, from ``values`` (2, n), interim ``interim`` (0-based)."""
        arms, n = values.shape
        flat = values.reshape(-1)
        if self._all_splits is not None:  # sample s takes split (s // c^k) mod c at interim k: the whole product
            index = (np.arange(self.count) // self.splits_per_interim**interim) % self.splits_per_interim
            # The mirror of split i is split c − 1 − i (combinations in lexicographic order): summing it, not
            # the total less the first arm, makes a split and its mirror tie exactly, as they should.
            mirror = self.splits_per_interim - 1 - index
            first, second = flat[self._all_splits[index]].sum(axis=1), flat[self._all_splits[mirror]].sum(axis=1)
            return np.stack([first / n, second / n])
        if interim not in self._orders:  # the same draws for every comparison of the study
            rng = np.random.default_rng([self.design.seed, interim])
            self._orders[interim] = rng.permuted(np.tile(np.arange(arms * n), (self.count, 1)), axis=1)
        return flat[self._orders[interim]].reshape(self.count, arms, n).mean(axis=2).T


def _exceeds(statistic: float, boundary: float) -> bool:
    """Strictly above the boundary: the observed split is one of the permutation samples, computed in another
    order, so values equal to rounding are the same value (a tie does not reject)."""
    return statistic > boundary + 1e-9 * max(1.0, abs(boundary))


def _boundary(live: np.ndarray, spent: float, level: float, count: int, exact: bool) -> tuple[float, float]:
    """(The smallest boundary t, P(|S| > t)) such that ``spent`` + P(|S| > t, no earlier crossing) ≤ ``level``:
    ``live`` holds the |S| of the samples that crossed no earlier boundary, out of ``count``. Tails are counted
    strictly above, as the exact product repeats values. inf where no boundary fits, or where only the largest
    split's value does (in an exact enumeration the observed split is one of them: it cannot pass it)."""
    allowed = min(len(live), max(-1, math.floor((level - spent) * count)))  # samples the level left can hold
    while allowed < len(live) and spent + (allowed + 1) / count <= level:  # the float test decides, as ever
        allowed += 1
    while allowed >= 0 and not spent + allowed / count <= level:
        allowed -= 1
    if allowed < 0 or len(live) == 0:
        return math.inf, 0.0
    rank = max(0, len(live) - allowed - 1)  # at most ``allowed`` samples lie strictly above this order statistic
    boundary = float(np.partition(live, rank)[rank])
    added = int(np.count_nonzero(live > boundary)) / count
    if exact and added == 0.0:
        return math.inf, 0.0
    return boundary, added


class _Spending:
    """One comparison's boundaries at one level, interim by interim: AdaStop's for two arms. Boundary b_j is
    the smallest value such that the share of permutation samples that crossed no earlier boundary and whose
    |S_j| exceeds it, added to the level spent before, is at most level·j/K."""

    def __init__(self, paths: list[np.ndarray], perms: _Permutations, level: float) -> None:
        self.paths, self.perms, self.level = paths, perms, level
        self.boundaries: list[float] = []
        self.spent: list[float] = []
        self._alive = np.ones(perms.count, dtype=bool)

    def through(self, k: int) -> None:
        """Boundaries for interims 0..k (0-based)."""
        perms, big_k = self.perms, self.perms.design.max_interims
        while len(self.boundaries) <= k:
            j = len(self.boundaries)
            spent = self.spent[-1] if self.spent else 0.0
            live = np.abs(self.paths[j][self._alive])
            boundary, added = _boundary(live, spent, self.level * (j + 1) / big_k, perms.count, perms.exact)
            self.boundaries.append(boundary)
            self.spent.append(spent + added)
            self._alive[np.flatnonzero(self._alive)] = live <= boundary


def _monotone(spendings: list[_Spending], k: int) -> float:
    """Interim ``k``'s boundary made monotone in the level: the largest of the boundaries of ``spendings``
    (one per level α/1 … α/r), so a comparison that crosses at a lower level crosses at every higher one."""
    for spending in spendings:
        spending.through(k)
    return max(spending.boundaries[k] for spending in spendings)


class _PairTest:
    """One comparison's own test: AdaStop for its two arms alone. Its permutation samples deal out only these
    two arms' values, so what other methods of the study did never moves its statistic's reference."""

    def __init__(self, pair: Pair, perms: _Permutations, alpha: float, comparisons: int) -> None:
        self.pair, self.perms = pair, perms
        self.paths: list[np.ndarray] = []
        """S (a sum of per-interim mean differences) under each permutation sample, after each interim."""
        self.observed: list[float] = []
        """The observed S after each interim."""
        self._slopes: list[np.ndarray] = []
        self._spread = 0.0
        self._levels = [alpha / r for r in range(1, comparisons + 1)]
        self._spending: dict[int, _Spending] = {}

    def add(self, interim: int, a: np.ndarray, b: np.ndarray) -> None:
        """Interim ``interim``'s (0-based) values of the comparison's two methods."""
        first = self.pair[0] < self.pair[1]  # the arms in name order, as one study of two methods deals them
        means = self.perms.arm_means(interim, np.array([a, b] if first else [b, a]))
        difference = means[0] - means[1] if first else means[1] - means[0]
        self.paths.append(difference if not self.paths else self.paths[-1] + difference)
        self.observed.append(float(a.mean() - b.mean()) + (self.observed[-1] if self.observed else 0.0))
        self._spread = max(self._spread, float(np.std(np.concatenate([a, b]))))

    def _slope(self, count: int) -> list[np.ndarray]:
        """How each sample's S moves when a's values move by δ, after each of the first ``count`` interims:
        −δ·(share of a's values dealt to a − to b), summed. Only an interval needs it: made on first use."""
        first = self.pair[0] < self.pair[1]
        n = self.perms.design.interim_seeds
        ones, zeros = np.ones(n), np.zeros(n)
        while len(self._slopes) < count:
            dealt = self.perms.arm_means(len(self._slopes), np.array([ones, zeros] if first else [zeros, ones]))
            share = dealt[0] - dealt[1] if first else dealt[1] - dealt[0]
            self._slopes.append(share if not self._slopes else self._slopes[-1] + share)
        return self._slopes

    def interval(self, k: int, remaining: int = 1) -> tuple[float, float]:
        """The repeated confidence interval at interim ``k`` (0-based), at the level this comparison was tested
        at there, α/``remaining``: every shift δ of a over b that its own test (the same spending, the same
        boundaries monotone in the level as the verdict's) does not reject at interim k, with a's values moved
        by −δ. It covers the true shift at every interim at once with probability ≥ 1 − α/``remaining``, so
        also at whichever interim the study stopped; and it leaves out 0 exactly where the verdict is a
        difference."""
        count = k + 1
        estimate = self.observed[k] / count

        slopes = self._slope(count)

        def rejected(delta: float) -> bool:
            paths = [self.paths[j] - delta * slopes[j] for j in range(count)]
            spendings = [_Spending(paths, self.perms, level) for level in self._levels[:remaining]]
            return _exceeds(abs(self.observed[k] - delta * count), _monotone(spendings, k))

        scale = max(abs(estimate), self._spread, 1e-12)
        ends = []
        for sign in (-1.0, 1.0):
            inside, step = estimate, scale / 4
            for _ in range(60):  # out from the estimate until a shift is rejected
                if rejected(estimate + sign * step):
                    break
                inside, step = estimate + sign * step, step * 2
            else:
                ends.append(sign * math.inf)
                continue
            outside = estimate + sign * step
            while abs(outside - inside) > 1e-6 * scale:  # then in between, to a millionth of the scale
                middle = (inside + outside) / 2
                inside, outside = (inside, middle) if rejected(middle) else (middle, outside)
            ends.append(inside)
        return ends[0], ends[1]

    def boundary(self, k: int, remaining: int) -> tuple[float, float]:
        """(b_k on the |S| scale, the level spent by k) at level α/``remaining``. Made monotone in the level:
        the largest of the boundaries at α/r for r ≤ ``remaining``, so a comparison that crosses at a lower
        level also crosses at every higher one (what Holm's step-down needs); each is at least the boundary
        at its own level, so its test's error stays within that level."""
        spendings = [
            self._spending.setdefault(r, _Spending(self.paths, self.perms, self._levels[r - 1]))
            for r in range(1, remaining + 1)
        ]
        return _monotone(spendings, k), spendings[-1].spent[k]


def decide(values: Mapping[str, Sequence[float] | np.ndarray], comparisons: Sequence[Pair], design: Design) -> Outcome:
    """Run AdaStop over the complete interims of ``values`` (method → its seeds' statistic, in run order).

    Each comparison is its own two-arm AdaStop test; Holm's step-down over them holds the family-wise error at
    α whichever methods are equal (strong control): at each interim a comparison still open is tested at level
    α / (the comparisons not yet called different), and each one called different raises the others' level.

    Interim k uses seeds [k·n, (k+1)·n) of each method; it is evaluated only when every method of every
    comparison still open has all of them (a missing seed holds the decision, it never shrinks an
    interim). Methods of comparisons already decided need no further seeds and are not looked at again.
    """
    if problems := design.problems():
        raise ValueError(problems[0])
    comparisons = tuple(dict.fromkeys((str(a), str(b)) for a, b in comparisons))
    for a, b in comparisons:
        if a == b:
            raise ValueError(f"a method cannot be compared with itself: {a}")
        for m in (a, b):
            if m not in values:
                raise ValueError(f"no values for method {m!r}")
    data = {m: np.asarray(v, dtype=np.float64) for m, v in values.items()}
    for m, v in data.items():
        if v.ndim != 1 or not np.all(np.isfinite(v)):
            raise ValueError(f"the values of {m!r} must be a 1-d sequence of finite numbers")
    n, big_k, alpha = design.interim_seeds, design.max_interims, design.alpha
    verdicts: dict[Pair, Verdict] = dict.fromkeys(comparisons, "continue")
    decided_at: dict[Pair, int] = {}
    interims: list[Interim] = []
    perms = _Permutations(design)
    tests = {pair: _PairTest(pair, perms, alpha, len(comparisons)) for pair in comparisons}
    for k in range(big_k):
        still = [p for p in comparisons if verdicts[p] == "continue"]
        if not still:
            break
        needed = {m: (k + 1) * n for p in still for m in p}
        short = {m: need - len(data[m]) for m, need in needed.items() if len(data[m]) < need}
        if short:
            return Outcome(design, comparisons, verdicts, decided_at, tuple(interims), short)
        this = slice(k * n, (k + 1) * n)
        for a, b in still:
            tests[a, b].add(k, data[a][this], data[b][this])
        boundaries: dict[Pair, float] = {}
        levels: dict[Pair, float] = {}
        spent: dict[Pair, float] = {}
        decided: dict[Pair, Verdict] = {}
        while True:  # Holm's step-down: every comparison that crosses at the current level, then the level again
            remaining = sum(v in ("continue", "undecided") for v in verdicts.values())
            crossed = []
            for pair in [p for p in still if p not in decided]:
                boundary, spent[pair] = tests[pair].boundary(k, remaining)
                boundaries[pair], levels[pair] = boundary, alpha / remaining
                if _exceeds(abs(tests[pair].observed[k]), boundary):
                    crossed.append(pair)
            for pair in crossed:
                verdicts[pair] = decided[pair] = "larger" if tests[pair].observed[k] > 0 else "smaller"
                decided_at[pair] = k + 1
            if not crossed or len(decided) == len(still):
                break
        if k == big_k - 1:
            for pair in still:
                if pair not in decided:
                    verdicts[pair] = decided[pair] = "undecided"
                    decided_at[pair] = k + 1
        interims.append(
            Interim(
                index=k + 1,
                seeds=(k + 1) * n,
                statistics={p: tests[p].observed[k] / (k + 1) for p in still},
                boundaries={p: boundaries[p] / (k + 1) for p in still},
                levels=levels,
                spent=spent,
                decided=decided,
            )
        )
    return Outcome(design, comparisons, verdicts, decided_at, tuple(interims))


def interval(
    values: Mapping[str, Sequence[float] | np.ndarray], pair: Pair, design: Design, interim: int, remaining: int = 1
) -> tuple[float, float]:
    """The difference of ``pair``'s means (a − b) after ``interim`` (1-based): its repeated confidence interval
    at the level the comparison was tested at there (α/``remaining``, ``remaining`` the study's comparisons not
    yet called different: :attr:`Interim.levels`), from the two methods' seeds of interims 1..``interim``
    (docs/sequential.md). The same permutation samples as the verdict's (the pair's real names order them).
    Valid whenever the study stopped; (−inf, inf) where the design cannot reject at that interim."""
    a, b = pair
    n = design.interim_seeds
    test = _PairTest(pair, _Permutations(design), design.alpha, remaining)
    for k in range(interim):
        this = slice(k * n, (k + 1) * n)
        test.add(k, np.asarray(values[a], dtype=np.float64)[this], np.asarray(values[b], dtype=np.float64)[this])
    return test.interval(interim - 1, remaining)
