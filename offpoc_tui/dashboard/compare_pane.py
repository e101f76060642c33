"""Compare: one algo and env, the baseline and every correction on one plot and in a table."""

from __future__ import annotations

import math
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Select, Static

from offpoc_tui.dashboard.groups import BASELINE, CompareRow, row_label, versions_shown
from offpoc_tui.dashboard.model import CompareData
from offpoc_tui.dashboard.plots import FigurePlot, short
from offpoc_tui.views import number
from store.stats import FinalWindow

HEADERS = (
    "method", "seeds", "final return ± 95% CI", "final over steps", "vs baseline", "Welch p", "P(>base)",
    "steps to thr.", "config vs baseline",
)  # fmt: skip
METHOD_WIDTH = 24
"""Fixed widths (the method column; the others their header's) instead of DataTable measuring the
rows on idle, which a snapshot taken under load caught half-done; only the config column grows."""


def p_text(p: float | None) -> str:
    if p is None or math.isnan(p):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def note(window: FinalWindow) -> str:
    """What the table's figures are (the steps each row's final window spans are its 'final over steps')."""
    return (
        f"final: mean over seeds of each seed's {window.describe()} ± mean per-point 95% t half-width"
        " · vs baseline, Welch p, P(>base) (a seed beats a baseline seed): the baseline of the same env and source"
    )


def span_text(span: tuple[int, int] | None) -> str:
    return "–" if span is None else f"{short(span[0])}–{short(span[1])}"


def seeds_text(row: CompareRow) -> str:
    """``3``, or ``2 of 3`` when seeds are short of the budget or queued."""
    total = row.n_seeds + row.short + row.queued
    return str(total) if row.n_seeds == total else f"{row.n_seeds} of {total}"


def final_text(row: CompareRow) -> str:
    if row.training:
        return "queued" if row.short == 0 else "training"
    return "–" if math.isnan(row.final_mean) else f"{row.final_mean:,.1f} ± {number(row.final_ci, ',.1f')}"


def row_cells(row: CompareRow, versions: int = 1) -> list[Text | str]:
    """``versions``: how many env versions the table shows (their rows then name theirs)."""
    diff = "baseline" if row.key[2] == BASELINE else ("–" if row.diff_pct is None else f"{row.diff_pct:+.1f}%")
    return [
        Text(row_label(row.key, versions), style="" if row.key[4] == "offpoc" else "dim"),
        Text(seeds_text(row), justify="right"),
        Text(final_text(row), justify="right"),
        Text(span_text(row.final_span), justify="right"),
        Text(diff, justify="right"),
        Text(p_text(row.p_value), justify="right"),
        Text("–" if row.improvement is None else f"{row.improvement:.2f}", justify="right"),
        Text(number(row.steps_to_threshold), justify="right"),
        row.config_diff or ("" if row.key[2] == BASELINE else "same"),
    ]


class ComparePane(Vertical):
    def __init__(self, window: FinalWindow | None = None) -> None:
        super().__init__()
        self.window = window or FinalWindow()
        self.keys: list[tuple[str, str]] = []
        """The (algo, env) pairs offered, as last set."""
        # Held, not queried: updates may still arrive while the app shuts down and prunes children.
        self.select = Select[tuple[str, str]]([], prompt="algo · env", id="compare-key", allow_blank=True)
        self.plot = FigurePlot(id="compare-plot")
        self.note = Static(id="compare-note", classes="pane-state")
        self.table = DataTable[Any](id="compare-table", cursor_type="row", zebra_stripes=True)

    def compose(self) -> ComposeResult:
        with Horizontal(id="compare-controls"):
            yield self.select
            yield Input(placeholder="threshold (default: baseline's final return)", id="compare-threshold")
        yield self.plot
        yield self.note
        yield self.table

    def on_mount(self) -> None:
        *fixed, config = HEADERS
        for header in fixed:
            self.table.add_column(header, width=METHOD_WIDTH if header == "method" else len(header))
        self.table.add_column(config)

    def set_keys(self, keys: list[tuple[str, str]], current: tuple[str, str] | None) -> None:
        select = self.select
        with select.prevent(Select.Changed):
            if keys != self.keys:
                self.keys = keys
                select.set_options([(f"{algo} · {env}", (algo, env)) for algo, env in keys])
            if current in keys and select.value != current:
                select.value = current

    def show(self, data: CompareData) -> None:
        self.plot.show(data.figure)
        table = self.table
        table.clear()
        versions = versions_shown(data.rows)
        for row in data.rows:
            table.add_row(*row_cells(row, versions))
        threshold = f"threshold {number(data.threshold, ',.1f')}" if data.threshold is not None else "no threshold"
        across = f"\n{data.across}" if data.across else ""
        budget = f"compared {data.budget} · " if data.budget else ""
        self.note.update(Text(f"{budget}{note(self.window)} · {threshold}{across}"))
