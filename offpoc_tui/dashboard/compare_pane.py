"""Compare: one algo and env, the baseline and every correction on one plot and in a table."""

from __future__ import annotations

import math
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Input, Static

from offpoc_tui.dashboard.data.compare import CompareData
from offpoc_tui.dashboard.groups import BASELINE, MIN_SEEDS, CompareRow, row_label, shared_settings, versions_shown
from offpoc_tui.dashboard.plots import FigurePlot, short
from offpoc_tui.dashboard.request import Request
from offpoc_tui.views import number
from store.stats import FinalWindow

HEADERS = (
    "method", "seeds", "final return ± 95% CI", "final over steps", "vs baseline", "Welch p", "P(>base)",
    "steps to thr.", "config vs baseline",
)  # fmt: skip
METHOD_WIDTH_MAX = 64
"""Widths are set from the cells when the rows are (instead of DataTable measuring them on idle, which a
snapshot taken under load caught half-done); the method column at most this wide."""


def p_text(p: float | None) -> str:
    if p is None or math.isnan(p):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


COMPACT_BELOW = 30
"""Below this many rows, the pane says what its figures are in two lines (the plot keeps its room); ``?`` and a
taller terminal have the whole note."""


def note(window: FinalWindow, group_by: str = "", compact: bool = False) -> str:
    """What the table's figures are (the steps each row's final window spans are its 'final over steps');
    ``group_by``: the rows pool every method's runs of a value of that setting; ``compact``: in two lines."""
    unit, against = ("seed", "the baseline of its env and source")
    if group_by:
        unit, against = ("run", f"the reference row ({group_by}'s default value, else its first), every method pooled")
    if compact:
        last = window.describe().split(" (")[0]
        return (
            f"final: mean of each {unit}'s {last} ± 95% t interval · vs {'reference' if group_by else 'baseline'};"
            " Welch p: one look, not a decision (--decide) · ? or a taller terminal: more"
        )
    return (
        f"final: mean over {unit}s of each {unit}'s {window.describe()} ± its 95% t interval over {unit}s · vs"
        f' baseline, Welch p, P(>base): against {against}; p and P(>base) "–" under {MIN_SEEDS} {unit}s a side; p is'
        " one look at the seeds there are, not a decision if looked at again (--decide)"
    )


def span_text(span: tuple[int, int] | None) -> str:
    return "–" if span is None else f"{short(span[0])}–{short(span[1])}"


def seeds_text(row: CompareRow) -> str:
    """``3``, or ``2 of 3`` when seeds are short of the budget or of the window, or queued."""
    total = row.n_seeds + row.short + row.too_short + row.queued
    return str(total) if row.n_seeds == total else f"{row.n_seeds} of {total}"


def shared_text(shared: list[str]) -> str:
    """`` · every row: start_steps=300``, or nothing."""
    return f" · every row: {', '.join(shared)}" if shared else ""


def final_text(row: CompareRow) -> str:
    """The final return ± its interval (none with one seed); where no seed is at the budget, why: training
    (a seed running), queued (seeds waiting), or ended short (every seed left ended before the budget)."""
    if row.training and row.too_short:
        return f"too short for the window ({row.too_short} seed{'s' if row.too_short > 1 else ''})"
    if row.training:
        return "training" if row.running_now else "queued" if row.queued_now else "ended short"
    if math.isnan(row.final_mean):
        return "–"
    if math.isnan(row.final_ci):
        return f"{row.final_mean:,.1f} (1 seed)"
    return f"{row.final_mean:,.1f} ± {row.final_ci:,.1f}"


def row_cells(row: CompareRow, versions: int = 1, shared: list[str] | None = None) -> list[Text | str]:
    """``versions``: how many env versions the table shows (their rows then name theirs); ``shared``: the
    settings every row holds, said once by :func:`shared_text` instead of in each name."""
    own = "baseline" if row.key[2] == BASELINE else "reference"
    diff = own if row.reference else ("–" if row.diff_pct is None else f"{row.diff_pct:+.1f}%")
    return [
        Text(row_label(row.key, versions, shared), style="" if row.key[4] == "offpoc" else "dim"),
        Text(seeds_text(row), justify="right"),
        Text(final_text(row), justify="right"),
        Text(span_text(row.final_span), justify="right"),
        Text(diff, justify="right"),
        Text(p_text(row.p_value), justify="right"),
        Text("–" if row.improvement is None else f"{row.improvement:.2f}", justify="right"),
        Text(number(row.steps_to_threshold), justify="right"),
        row.config_diff or ("" if row.reference or row.key[2] == BASELINE else "same"),
    ]


def column_widths(cells: list[list[Text | str]]) -> list[int]:
    """Each column as wide as its widest cell or header, the method column at most :data:`METHOD_WIDTH_MAX`."""
    widths = [max([len(header), *(len(str(row[i])) for row in cells)]) for i, header in enumerate(HEADERS)]
    return [min(widths[0], METHOD_WIDTH_MAX), *widths[1:]]


class ComparePane(Vertical):
    """A line naming the algo · env shown (``e`` cycles them), the plot, a note, the table; ``t`` opens
    a threshold box under the line, which enter applies and escape closes."""

    def __init__(self, window: FinalWindow | None = None) -> None:
        super().__init__()
        self.window = window or FinalWindow()
        self.keys: list[tuple[str, str]] = []
        """The (algo, env) pairs offered, as last set."""
        self.current: tuple[str, str] | None = None
        self.group_by = ""
        """The setting the rows shown are by (``g``), or "": by method."""
        self.settings: tuple[str, ...] = ()
        """The settings the task's runs differ in, as the last data said: what ``g`` cycles through."""
        self.filter_text = ""
        self.data: CompareData | None = None
        """The data shown last, shown again when the pane's size changes."""
        # Held, not queried: updates may still arrive while the app shuts down and prunes children.
        self.heading = Static(id="compare-key", classes="pane-state")
        self.threshold = Input(placeholder="threshold (enter: apply; empty: the baseline's or reference's; esc: close)",
                               id="compare-threshold")  # fmt: skip
        self.plot = FigurePlot(id="compare-plot")
        self.decisions = Static(id="compare-decisions")
        """The task's sequential studies (``run --compare --decide``), as they stand; hidden when none."""
        self.note = Static(id="compare-note", classes="pane-state")
        self.table = DataTable[Any](id="compare-table", cursor_type="row", zebra_stripes=True)

    def compose(self) -> ComposeResult:
        yield self.heading
        yield self.threshold
        yield self.plot
        yield self.decisions
        yield self.note
        yield self.table

    def on_mount(self) -> None:
        self._columns([])

    def _columns(self, cells: list[list[Text | str]]) -> None:
        """The table's columns, each as wide as its widest cell (the method column up to
        :data:`METHOD_WIDTH_MAX`), set before the rows: a long method name or ``12 of 20`` seeds is shown whole,
        and no column's width waits for the table to measure it."""
        self.table.clear(columns=True)
        for header, width in zip(HEADERS, column_widths(cells), strict=True):
            self.table.add_column(header, width=width)

    def set_keys(self, keys: list[tuple[str, str]], current: tuple[str, str] | None) -> None:
        self.keys = keys
        self.current = current if current in keys else (keys[0] if keys else None)
        self._heading()

    def show_request(self, request: Request, selected: int = 0) -> None:
        if request.filter_text != self.filter_text:
            self.filter_text = request.filter_text
            self._heading()

    def _heading(self) -> None:
        shown = f" · filter: {self.filter_text}" if self.filter_text else ""
        if self.current is None:
            self.heading.update(f"no algo · env to compare yet{shown}")
            return
        algo, env = self.current
        at, of = self.keys.index(self.current) + 1, len(self.keys)
        more = " · e: next" if of > 1 else ""
        rows = f"g rows: by {self.group_by}, methods pooled" if self.group_by else "g rows: by method"
        rows += "" if self.settings else " (no setting differs)"
        brief = f"g: by {self.group_by}, pooled" if self.group_by else "g: by method"
        brief += "" if self.settings else ", none differs"
        room = (self.heading.size.width or self.size.width or 160) - 2
        forms = [  # the longest that fits one row: at 80 columns the plot needs the row a second would take
            f" ({at} of {of}{more} · t: threshold · {rows}){shown}",
            f" ({at}/{of}{more} · t: threshold · {brief}){shown}",
        ]
        said = next((form for form in forms if len(f"{algo} · {env}{form}") <= room), forms[-1])
        self.heading.update(Text.assemble((f"{algo} · {env}", "bold"), said))

    def open_threshold(self) -> None:
        self.threshold.add_class("visible")
        self.threshold.focus()

    def close_threshold(self) -> None:
        self.threshold.remove_class("visible")
        self.table.focus()

    def on_resize(self) -> None:
        self._heading()  # its words fit the width
        if self.data is not None:  # the note's length and the columns out of view depend on the size
            self.show(self.data)

    def out_of_view(self, cells: list[list[Text | str]]) -> list[str]:
        """The columns past the table's right edge at its width now (they scroll into view)."""
        width, right = self.table.size.width or self.size.width, 0
        hidden = []
        for header, column in zip(HEADERS, column_widths(cells), strict=True):
            right += column + 2  # a cell's padding: 1 each side
            if width and right > width:
                hidden.append(header)
        return hidden

    def show(self, data: CompareData) -> None:
        self.data = data
        self.group_by, self.settings = data.group_by, data.settings
        self._heading()
        self.plot.show(data.figure)
        versions = versions_shown(data.rows)
        shared = shared_settings([row.key for row in data.rows])
        cells = [row_cells(row, versions, shared) for row in data.rows]
        self._columns(cells)
        for row in cells:
            self.table.add_row(*row)
        threshold = f"threshold {number(data.threshold, ',.1f')}" if data.threshold is not None else "no threshold"
        budget = f"compared {data.budget} · " if data.budget else ""
        across = f"\n{data.across}" if data.across else ""
        self.decisions.update(Text("\n".join(data.decisions)))
        self.decisions.set_class(bool(data.decisions), "visible")
        hidden = self.out_of_view(cells)
        cut = f" · → scrolls to {', '.join(hidden)}" if hidden else ""
        compact = 0 < self.size.height < COMPACT_BELOW
        said = note(self.window, self.group_by, compact)
        self.note.update(Text(f"{budget}{threshold}{shared_text(shared)}{cut}{across}\n{said}"))
