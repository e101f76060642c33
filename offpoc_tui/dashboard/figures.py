"""What a plot shows, as plain data: built off the UI thread, drawn by :mod:`.plots`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

RGB = tuple[int, int, int]

PALETTE: tuple[RGB, ...] = (
    (86, 156, 255),  # blue
    (255, 140, 66),  # orange
    (92, 200, 120),  # green
    (235, 87, 87),  # red
    (190, 130, 250),  # purple
    (240, 200, 70),  # yellow
    (70, 210, 210),  # cyan
    (240, 120, 190),  # pink
)


def colour(index: int) -> RGB:
    return PALETTE[index % len(PALETTE)]


def faint(rgb: RGB, strength: float = 0.35) -> RGB:
    """The colour blended towards a dark background, for bands and raw curves behind a mean."""
    r, g, b = (round(c * strength + 30 * (1 - strength)) for c in rgb)
    return r, g, b


@dataclass(frozen=True)
class Line:
    x: np.ndarray
    y: np.ndarray
    colour: RGB
    label: str | None = None
    marker: str = "braille"


@dataclass(frozen=True)
class Area:
    """A band between ``lower`` and ``upper`` over ``x``, drawn as a dim fill behind the lines."""

    x: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    colour: RGB


@dataclass(frozen=True)
class LinesFigure:
    title: str
    xlabel: str
    ylabel: str
    lines: list[Line] = field(default_factory=list)
    hlines: list[tuple[float, RGB]] = field(default_factory=list)
    """Horizontal reference lines (a threshold)."""
    areas: list[Area] = field(default_factory=list)
    """Bands, drawn first: clipped to ``ylim``, they never set the scale."""
    ylim: tuple[float, float] | None = None
    """The y range; None lets the plot fit everything drawn."""
    short_title: str = ""
    """What the title says in one row, for a plot too short to give its whole title rows of its own (what it
    leaves out is on screen beside it); empty: the title, wrapped or cut."""


def y_range(lines: list[Line], margin: float = 0.05) -> tuple[float, float] | None:
    """What the lines span (NaNs ignored), with a margin: a plot's scale follows what it is about."""
    values = [np.asarray(line.y, dtype=np.float64) for line in lines]
    values = [v[np.isfinite(v)] for v in values]
    values = [v for v in values if v.size]
    if not values:
        return None
    lo, hi = min(float(v.min()) for v in values), max(float(v.max()) for v in values)
    pad = (hi - lo) * margin if hi > lo else max(abs(hi), 1.0) * margin
    return lo - pad, hi + pad


@dataclass(frozen=True)
class BarsFigure:
    title: str
    xlabel: str
    ylabel: str
    x: np.ndarray
    heights: np.ndarray
    colour: RGB = PALETTE[0]


@dataclass(frozen=True)
class MatrixFigure:
    """A heatmap: ``cells`` (rows top to bottom, columns left to right) in [0, 1]."""

    title: str
    cells: np.ndarray
    colour: RGB = PALETTE[0]
    x: tuple[float, float] = (0.0, 1.0)
    """What the first and the last column stand for (environment steps): the x axis's ticks."""
    y: tuple[float, float] = (1.0, 0.0)
    """What the top and the bottom row stand for (the quantity's range): the y axis's ticks."""
    xlabel: str = ""
    ylabel: str = ""


Figure = LinesFigure | BarsFigure | MatrixFigure


def empty(title: str, why: str) -> LinesFigure:
    """A figure with nothing to plot yet; the title says why."""
    return LinesFigure(f"{title}: {why}", "", "")
