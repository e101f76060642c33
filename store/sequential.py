"""AdaStop: decide, interim by interim, which methods differ on one task, with the family-wise error ≤ α.

Mathieu et al., "AdaStop: adaptive statistical testing for sound comparisons of deep RL agents" (TMLR
2024). Each method runs ``n`` seeds per interim, at most ``K`` interims. After interim ``k`` every open
comparison (a, b) has the statistic

    S_ab = Σ_{j ≤ k} (mean of a's seeds in interim j − mean of b's seeds in interim j),

and the procedure rejects "a and b are equal" when |S_ab| exceeds a boundary b_k read from the
permutation distribution of max_ab |S_ab| (each interim's 2n values shuffled between the two arms),
conditioned on not having crossed an earlier boundary, with the level spent linearly: at most α·k/K by
interim k. Rejections step down (the largest statistic first, the boundary read again over the
comparisons left), so the chance of calling any equal pair different, over all the comparisons and all
the interims, is at most α. What is left open after interim K is *undecided*: no difference was found at
level α. AdaStop's own code names that "equal"; it is not a proof of equality, and the screen says so.

Where ours differs from the authors' package (`adastop` 0.1.3, which the tests run on the same inputs):

- the permutation distribution is of |S| as the paper's test is two-sided; the package takes the max of
  the *signed* differences but compares |S| with it, which spends about 2α on one comparison;
- the decision is recomputed from the stored seeds' values alone (the permutations of interim k come
  from a generator seeded by ``(design.seed, k)``), so every process that reads the store reaches the
  same decision and none holds state;
- every interim's permutations are drawn once, for all samples: when C(2n, n)^K ≤ ``permutations`` the
  whole product of the interims' splits is enumerated (exact, as the package is there), otherwise
  ``permutations`` joint samples are drawn; the package's normalisation after a first random interim
  (n ≥ 8 at its defaults) divides by 1 and can no longer reject there.
"""

from __future__ import annotations

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

    def first_possible_decision(self) -> int | None:
        """The first interim at which two methods can be told apart at all, or None: with n seeds each, the
        smallest share of splits as extreme as the one observed is 2/C(2n, n)^k (a split and its mirror tie),
        and a rejection at interim k needs it to be at most α·k/K."""
        splits = math.comb(2 * self.interim_seeds, self.interim_seeds)
        for k in range(1, self.max_interims + 1):
            if 2 / splits**k <= self.alpha * k / self.max_interims:
                return k
        return None

    @property
    def seeds_at_most(self) -> int:
        """Seeds per method of the fixed design with the same cap (n·K)."""
        return self.interim_seeds * self.max_interims


@dataclass(frozen=True)
class Interim:
    """What one interim decided."""

    index: int
    """1-based."""
    seeds: int
    """Seeds per method in the comparisons still open at this interim (n·index)."""
    boundary: float
    """b_k on the scale of |S| (a sum of per-interim mean differences); inf: nothing can be rejected yet."""
    level_spent: float
    """Permutation probability of a rejection by this interim under no difference (≤ α·index/K)."""
    statistics: dict[Pair, float]
    """Signed S of each comparison open at the start of this interim."""
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
    """The permutation samples: per interim, how each sample deals that interim's values out to the arms.

    All the arms of the comparisons still open are shuffled together (one permutation of their m·n
    values per sample), so the max over comparisons is taken under one rearrangement of the data, as
    the null of "all these methods are the same" allows. With two methods and C(2n, n)^K ≤ B every split
    of every interim is enumerated (the product of the interims' splits): exact."""

    def __init__(self, design: Design, methods: int) -> None:
        n, big_k = design.interim_seeds, design.max_interims
        self.design = design
        self.splits_per_interim = math.comb(2 * n, n)
        self.exact = methods == 2 and self.splits_per_interim**big_k <= design.permutations
        self.count = self.splits_per_interim**big_k if self.exact else design.permutations
        self._all_splits = np.array(list(itertools.combinations(range(2 * n), n))) if self.exact else None

    def arm_means(self, interim: int, values: np.ndarray) -> np.ndarray:
        """(m, N): each arm's mean under each sample, from ``values`` (m, n), interim ``interim`` (0-based)."""
        arms, n = values.shape
        flat = values.reshape(-1)
        if self._all_splits is not None:  # sample s takes split (s // c^k) mod c at interim k: the whole product
            index = (np.arange(self.count) // self.splits_per_interim**interim) % self.splits_per_interim
            # The mirror of split i is split c − 1 − i (combinations in lexicographic order): summing it, not
            # the total less the first arm, makes a split and its mirror tie exactly, as they should.
            mirror = self.splits_per_interim - 1 - index
            first, second = flat[self._all_splits[index]].sum(axis=1), flat[self._all_splits[mirror]].sum(axis=1)
            return np.stack([first / n, second / n])
        rng = np.random.default_rng([self.design.seed, interim])
        order = rng.permuted(np.tile(np.arange(arms * n), (self.count, 1)), axis=1)
        return flat[order].reshape(self.count, arms, n).mean(axis=2).T


def _exceeds(statistic: float, boundary: float) -> bool:
    """Strictly above the boundary: the observed split is one of the permutation samples, computed in another
    order, so values equal to rounding are the same value (a tie does not reject)."""
    return statistic > boundary + 1e-9 * max(1.0, abs(boundary))


def decide(values: Mapping[str, Sequence[float] | np.ndarray], comparisons: Sequence[Pair], design: Design) -> Outcome:
    """Run AdaStop over the complete interims of ``values`` (method → its seeds' statistic, in run order).

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
    perms = _Permutations(design, len({m for pair in comparisons for m in pair}))
    sums = np.zeros((len(comparisons), perms.count))  # S of each comparison under each permutation sample
    observed = np.zeros(len(comparisons))
    alive = np.ones(perms.count, dtype=bool)  # samples that crossed no earlier boundary
    level_spent = 0.0
    for k in range(big_k):
        open_rows = [i for i, p in enumerate(comparisons) if verdicts[p] == "continue"]
        if not open_rows:
            break
        needed = {m: (k + 1) * n for i in open_rows for m in comparisons[i]}
        short = {m: need - len(data[m]) for m, need in needed.items() if len(data[m]) < need}
        if short:
            return Outcome(design, comparisons, verdicts, decided_at, tuple(interims), short)
        # This interim's values of every method still compared, dealt out again by each permutation sample.
        this = slice(k * n, (k + 1) * n)
        arms = sorted({m for i in open_rows for m in comparisons[i]})
        column = {m: j for j, m in enumerate(arms)}
        means = perms.arm_means(k, np.array([data[m][this] for m in arms]))
        rows = np.array(open_rows)
        for i in open_rows:
            sums[i] += means[column[comparisons[i][0]]] - means[column[comparisons[i][1]]]
            observed[i] += data[comparisons[i][0]][this].mean() - data[comparisons[i][1]][this].mean()
        statistics = {comparisons[i]: float(observed[i]) for i in open_rows}
        survivors = np.flatnonzero(alive)
        live = np.abs(sums[np.ix_(rows, survivors)])  # (open, survivors)
        keep = np.ones(len(rows), dtype=bool)
        level = alpha * (k + 1) / big_k
        decided: dict[Pair, Verdict] = {}
        while True:  # step down: reject the largest statistic, then read the boundary again over the rest
            tail = np.sort(np.max(live, axis=0, where=keep[:, None], initial=0.0))
            # P(max |S| > tail[i], no earlier crossing): counted strictly above, as the exact product repeats values.
            above = (len(tail) - np.searchsorted(tail, tail, side="right")) / perms.count
            admissible = level_spent + above <= level
            boundary, level_to_add = math.inf, 0.0
            if admissible.any():  # the smallest boundary whose tail still fits in the level left
                boundary, level_to_add = float(tail[admissible][0]), float(above[admissible][0])
                if perms.exact and level_to_add == 0.0:  # the largest split's value: the observed one cannot pass it
                    boundary = math.inf
            largest = max(np.flatnonzero(keep), key=lambda j: abs(observed[rows[j]]))
            if not _exceeds(abs(observed[rows[largest]]), boundary):
                break
            pair = comparisons[rows[largest]]
            verdicts[pair] = decided[pair] = "larger" if observed[rows[largest]] > 0 else "smaller"
            decided_at[pair] = k + 1
            keep[largest] = False
            if not keep.any():
                break
        level_spent += level_to_add
        alive[survivors] = np.max(live, axis=0, where=keep[:, None], initial=0.0) <= boundary
        if k == big_k - 1:
            for j in np.flatnonzero(keep):
                verdicts[comparisons[rows[j]]] = decided[comparisons[rows[j]]] = "undecided"
                decided_at[comparisons[rows[j]]] = k + 1
        interims.append(Interim(k + 1, (k + 1) * n, boundary, level_spent, statistics, decided))
    return Outcome(design, comparisons, verdicts, decided_at, tuple(interims))
