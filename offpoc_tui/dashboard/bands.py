"""The band drawn around a group's mean curve (Curves grouped, Compare), and what its title says of it."""

from __future__ import annotations

import numpy as np

from offpoc_tui.dashboard.figures import (
    Area,
    colour,
    faint,
)
from store.stats import BandKind, t_quantile

BAND_LABELS: dict[BandKind, str] = {
    "ci95": "band 95% t-interval",
    "se": "band ±1 standard error",
    "minmax": "band min–max over seeds",
    "none": "no band, seeds faint behind",
}


SMALL_N = 3
"""At most this many seeds, a 95% t-interval spans so many standard errors (12.7 at n = 2, 4.3 at
n = 3) that the figure says so and points to the other bands."""


AREA_STRENGTH = 0.45
"""How bright a band's fill is against its mean's colour."""


RAW_STRENGTH = 0.45
"""How bright a seed's own curve is, drawn behind its group's mean."""


def band_area(x: np.ndarray, edges: tuple[np.ndarray, np.ndarray] | None, index: int) -> list[Area]:
    """A group's band as a dim area, where two or more seeds exist; none for no band."""
    if edges is None or not np.isfinite(edges[0]).any():
        return []
    return [Area(x, edges[0], edges[1], faint(colour(index), AREA_STRENGTH))]


def small_n_note(kind: BandKind, seed_counts: list[int]) -> str:
    """What a reader must know about the band at these seed counts, with the key that changes it."""
    counted = [n for n in seed_counts if n]
    if not counted or kind == "none":
        return ""
    fewest = min(counted)
    if fewest < 2:
        return " (n=1: no band)"
    if kind == "ci95" and fewest <= SMALL_N:
        return f" (n={fewest}: ±{float(t_quantile(fewest - 1)):.1f} s.e.; b: other bands)"
    return ""
