"""Quantities: λ's histogram over one interval, and λ over training as quantile lines or a heatmap."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical

from offpoc_tui.dashboard.data.quantities import QuantitiesData
from offpoc_tui.dashboard.plots import FigurePlot
from offpoc_tui.dashboard.request import Request
from offpoc_tui.dashboard.state_line import StateLine


def interval_text(interval: int) -> str:
    """The histogram's interval as the header says it: ``latest`` (``interval`` −1), else ``earlier``; the
    histogram's title gives its step and place (``3 of 7``), clamped to the intervals there are."""
    return "latest" if interval == -1 else "earlier (its step in the title)"


class QuantitiesPane(Vertical):
    def __init__(self) -> None:
        super().__init__()
        # Held, not queried: updates may still arrive while the app shuts down and prunes children.
        self.state = StateLine(id="quantities-state", classes="pane-state")
        self.histogram = FigurePlot(id="quantities-histogram")
        self.training = FigurePlot(id="quantities-training")

    def compose(self) -> ComposeResult:
        yield self.state
        yield self.histogram
        yield self.training

    def show_request(self, request: Request, selected: int = 0) -> None:
        self.state.update(
            f"[b]showing[/] the run under the cursor{' and its group' if request.grouped else ''}"
            f" · [b]g[/] grouped: {'on' if request.grouped else 'off'}"
            f" · [b][ ][/] interval: {interval_text(request.interval)}"
            f" · [b]h[/] over training: {'heatmap' if request.heatmap else 'quantiles p10/p50/p90'}"
        )

    def show(self, data: QuantitiesData) -> None:
        self.histogram.show(data.histogram)
        self.training.show(data.training)
