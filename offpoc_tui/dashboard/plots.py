"""A plot widget that draws a :mod:`.figures` figure with textual-plotext.

Series are thinned to a few points per terminal column first; the picture is built off
the UI thread.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
from rich.text import Text
from textual import work
from textual.app import RenderResult
from textual.worker import get_current_worker
from textual_plotext import Plot, PlotextPlot

from offpoc_tui.dashboard.figures import Area, BarsFigure, Figure, LinesFigure, MatrixFigure, empty

POINTS_PER_COLUMN = 1
"""Points kept per terminal column when thinning a series (plotext's build time grows with them)."""


def _thin(x: np.ndarray, y: np.ndarray, limit: int) -> tuple[list[float], list[float]]:
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    if len(x) > limit:
        index = np.unique(np.linspace(0, len(x) - 1, limit).round().astype(np.int64))
        x, y = x[index], y[index]
    return x.tolist(), y.tolist()


def short(value: float) -> str:
    """A tick label: 250k, 1.5M, 5k, 0.25, 0.0043 (never 5e+03 or 4.3e-06)."""
    magnitude = abs(value)
    if magnitude >= 1e6:
        return f"{value / 1e6:.3g}M"
    if magnitude >= 1e3:
        return f"{value / 1e3:.3g}k"
    return np.format_float_positional(value, precision=3, unique=True, fractional=False, trim="-")


def ticks(lo: float, hi: float, count: int = 5) -> tuple[list[float], list[str]]:
    """``count`` evenly spaced ticks over [lo, hi] with short labels."""
    values = np.linspace(lo, hi, count).tolist() if hi > lo else [lo]
    return values, [short(v) for v in values]


def round_ticks(lo: float, hi: float, count: int = 5) -> tuple[list[float], list[str]]:
    """About ``count`` ticks at round values (1, 2, 2.5 or 5 × 10^k apart) within [lo, hi]: an axis that starts
    at a first evaluation's 0.1 s (0.00165 min) is labelled 0, 2, 4, not 0.00165, 2.5, 4.99."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return ticks(lo, hi, count)
    raw = (hi - lo) / max(count - 1, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * magnitude >= raw * (1 - 1e-9))
    first = math.ceil(lo / step - 1e-9) * step
    values = [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]
    values = [round(v / step) * step for v in values]  # 0.30000000000000004 → 0.3
    return values, [short(v) for v in values]


def y_tick_count(height: int) -> int:
    """About how many y ticks a plot ``height`` cells tall holds with a free row between two: where two ticks
    fall on one row plotext keeps one of them, and which one varies from process to process."""
    rows = max(height - 5, 1)  # the title, the x axis's line, ticks and label, and the top frame take 5
    return max(2, min(5, rows // 2 + 1))


def _resample(cells: np.ndarray, rows: int, columns: int) -> np.ndarray:
    """Nearest-cell resampling of a heatmap to the space on screen."""
    r = np.linspace(0, cells.shape[0] - 1, max(rows, 1)).round().astype(np.int64)
    c = np.linspace(0, cells.shape[1] - 1, max(columns, 1)).round().astype(np.int64)
    return cells[np.ix_(r, c)]


LEGEND_FRAME = 5
"""Rows of a plot that hold no legend entry (title, frame, the x axis's ticks and label): plotext draws the
legend only when every entry fits in the rest, else none at all."""
MORE_COLOUR = (150, 150, 150)


def legend_entries(labelled: int, height: int) -> int:
    """How many of ``labelled`` lines a plot ``height`` rows tall names in its legend: all where they fit, else
    one row fewer than fit, that row saying how many are left out; none in a plot too low to name two."""
    room = max(height - LEGEND_FRAME, 0)
    return labelled if labelled <= room else room - 1 if room >= 3 else 0


AREA_MARKER = "░"
"""A band's fill: a light shade in a dim colour, plainly not a line."""


def _x_span(figure: LinesFigure) -> tuple[float, float] | None:
    xs = [np.asarray(line.x, dtype=np.float64) for line in figure.lines] + [a.x for a in figure.areas]
    xs = [x[np.isfinite(x)] for x in xs]
    xs = [x for x in xs if x.size]
    if not xs:
        return None
    return min(float(x.min()) for x in xs), max(float(x.max()) for x in xs)


def _area_size(area: Area) -> float:
    widths = np.asarray(area.upper) - np.asarray(area.lower)
    return float(np.nanmean(widths)) if np.isfinite(widths).any() else 0.0


def _fill(
    area: Area, span: tuple[float, float], ylim: tuple[float, float], columns: int, rows: int
) -> tuple[list[float], list[float]]:
    """Points filling ``area`` a character cell apart, clipped to ``ylim``: a scatter draws them as a band."""
    ok = np.isfinite(area.lower) & np.isfinite(area.upper)
    x, lower, upper = np.asarray(area.x, dtype=np.float64)[ok], area.lower[ok], area.upper[ok]
    if len(x) < 2 or span[1] <= span[0]:
        return [], []
    count = max(2, round(columns * (x[-1] - x[0]) / (span[1] - span[0])))
    grid = np.linspace(x[0], x[-1], count)
    lo = np.clip(np.interp(grid, x, lower), *ylim)
    hi = np.clip(np.interp(grid, x, upper), *ylim)
    step = (ylim[1] - ylim[0]) / max(rows, 1)
    px: list[float] = []
    py: list[float] = []
    for column, bottom, top in zip(grid.tolist(), lo.tolist(), hi.tolist()):
        levels = np.arange(bottom, top + step / 2, step).tolist() if top > bottom else [bottom]
        px.extend([column] * len(levels))
        py.extend(levels)
    return px, py


TITLE_ROWS = 3
"""At most this many rows for a title too wide for its plot's one line (then cut, with "…")."""
MIN_PLOT_ROWS = 6
"""The rows a plot keeps for its frame, axes and curves before its title takes rows above it."""


def title_rows(figure: Figure, width: int, height: int) -> tuple[str, list[str]]:
    """The title plotext draws on the plot's top line, and the rows drawn above the plot. A title that fits
    beside plotext's frame is plotext's; a wider one is wrapped into rows above, as many as the plot can give
    and still keep ``MIN_PLOT_ROWS`` (then the figure's one-row ``short_title``, where it has one, instead;
    else the last row is cut, with "…")."""
    title = figure.title
    if len(title) <= width - 5:
        return title, []
    rows = textwrap.wrap(title, max(width - 2, 8))
    allowed = min(TITLE_ROWS, max(height - MIN_PLOT_ROWS, 0))
    if len(rows) <= allowed:
        return "", rows
    short = getattr(figure, "short_title", "")
    if short and len(short) <= width - 5:
        return short, []
    if allowed == 0:
        return title, []  # no row to spare: on the plot's line, cut
    rest = textwrap.shorten(" ".join(rows[allowed - 1 :]), max(width - 2, 8), placeholder="…")
    rows = [*rows[: allowed - 1], rest]
    return "", rows


def draw(plt: Plot, figure: Figure, width: int, height: int, title: str | None = None) -> None:
    """Put ``figure`` on a plotext figure sized ``width`` × ``height`` cells, ``title`` on its top line
    (:func:`title_rows`; None: the figure's own, cut to fit)."""
    title = figure.title if title is None else title
    plt.title(title if len(title) <= width - 5 else title[: max(width - 6, 1)] + "…")
    limit = max(width, 10) * POINTS_PER_COLUMN
    if isinstance(figure, LinesFigure):
        plt.xlabel(figure.xlabel)
        plt.ylabel(figure.ylabel)
        span = _x_span(figure)
        if figure.ylim is not None:
            plt.ylim(*figure.ylim)
            if span is not None:
                # Behind everything (later series paint over it), the widest first: a narrow band
                # stays visible on top of a wide one. Twice as many points as cells leave no gaps.
                for area in sorted(figure.areas, key=_area_size, reverse=True):
                    x, y = _fill(area, span, figure.ylim, 2 * width, 2 * height)
                    if x:
                        plt.scatter(x, y, color=area.colour, marker=AREA_MARKER)
        drawn = []
        for line in figure.lines:
            x, y = _thin(np.asarray(line.x, dtype=np.float64), np.asarray(line.y, dtype=np.float64), limit)
            if x:
                if figure.ylim is not None:  # raw seeds beyond the means' range stop at its edge
                    y = np.clip(y, *figure.ylim).tolist()
                drawn.append((line, x, y))
        labelled = sum(1 for line, _, _ in drawn if line.label)
        named = legend_entries(labelled, height)
        if named < labelled and named > 0:
            # The legend's first row says what it leaves out. Its point lies under the first line's first point,
            # which the line then paints over; plotext draws a legend entry only for a series with a point.
            first = drawn[0]
            more = f"+{labelled - named} more lines"  # short: plotext drops a legend wider than its plot
            plt.plot([first[1][0]], [first[2][0]], color=MORE_COLOUR, marker=" ", label=more)
        for line, x, y in drawn:
            label = line.label if line.label and named > 0 else None
            named -= label is not None
            plt.plot(x, y, color=line.colour, marker=line.marker, label=label)
        if span is not None:
            plt.xticks(*round_ticks(*span))
        if figure.ylim is not None:
            plt.yticks(*round_ticks(*figure.ylim, count=y_tick_count(height)))
        for level, rgb in figure.hlines:
            plt.horizontal_line(level, color=rgb)
    elif isinstance(figure, BarsFigure):
        plt.xlabel(figure.xlabel)
        plt.ylabel(figure.ylabel)
        plt.bar(figure.x.tolist(), figure.heights.tolist(), color=figure.colour, width=0.8)
        plt.xticks(*ticks(0.0, 1.0))
    elif isinstance(figure, MatrixFigure):
        rows, columns = max(height - 6, 1), max(width - 10, 1)
        cells = _resample(figure.cells, rows, columns)
        full = np.asarray(figure.colour, dtype=np.float64)
        pixels = (20 + cells[..., None] * (full - 20)).round().astype(int)
        plt.matrix_plot([[tuple(px) for px in row] for row in pixels.tolist()])
        # The axes in the figure's units, not cell indices: steps along x, the quantity's range up y.
        plt.xlabel(figure.xlabel)
        plt.ylabel(figure.ylabel)
        x_positions = np.linspace(1, cells.shape[1], 4).tolist()
        plt.xticks(x_positions, ticks(*figure.x, count=4)[1])
        y_positions = np.linspace(0, cells.shape[0] - 1, 3).tolist()  # plotext: row 0 at the bottom, rows − 1 on top
        plt.yticks(y_positions, ticks(figure.y[1], figure.y[0], count=3)[1])


class FigurePlot(PlotextPlot):
    """Shows one figure; :meth:`show` replaces it.

    plotext builds a large figure in tens of milliseconds, so the picture is built in a
    thread worker and the UI thread only paints the finished text.
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.figure: Figure = empty("", "loading…")
        self.drawn: Figure | None = None
        """The figure the picture on screen shows (tests wait for it)."""
        self.drawn_size: tuple[int, int] = (0, 0)
        """The size, in cells, that picture was drawn for."""
        self._picture: Text | None = None

    def show(self, figure: Figure) -> None:
        self.figure = figure
        self._build()

    def on_resize(self) -> None:
        self._build()

    def _build(self) -> None:
        width, height = self.size
        if width > 0 and height > 0:
            self._build_in_thread(self.figure, width, height, self._get_plotext_theme_name(self.app.theme))

    @work(thread=True, exclusive=True, group="plot")
    def _build_in_thread(self, figure: Figure, width: int, height: int, theme: str) -> None:
        plt = Plot()
        # plotext caps a figure at the size of the terminal it detects, 80×24 when its stdout is
        # not one (tests, snapshots, a pipe): the widget, not the terminal, sets the size here.
        # There is no public per-figure switch (plotext.limit_size acts on plotext's own figure).
        plt._limit_size(False, False)  # type: ignore[attr-defined]
        title, above = title_rows(figure, width, height)  # a wide title: whole, above the plot, where it can
        plt.plotsize(width, height - len(above))
        plt.theme(theme)
        draw(plt, figure, width, height - len(above), title)
        picture = Text.from_ansi(plt.build())
        if above:
            picture = Text("\n".join(row.center(width).rstrip() for row in above) + "\n", style="bold") + picture
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._paint, figure, picture, (width, height))

    def _paint(self, figure: Figure, picture: Text, size: tuple[int, int]) -> None:
        if size != tuple(self.size):  # built for a size left since: the resize's own build paints instead
            return
        self.drawn, self.drawn_size, self._picture = figure, size, picture
        self.refresh()

    def render(self) -> RenderResult:
        return self._picture if self._picture is not None else ""
