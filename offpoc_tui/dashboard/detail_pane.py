"""Run detail: status, config and a failed run's traceback (as ``offpoc show``), losses, Q, α, SPS."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Grid, VerticalScroll
from textual.widgets import Static

from offpoc_tui.dashboard.model import DetailData
from offpoc_tui.dashboard.plots import FigurePlot
from offpoc_tui.views import run_view


class DetailPane(Grid):
    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail-facts"):
            yield Static(id="detail-text")
        yield FigurePlot(id="detail-losses")
        yield FigurePlot(id="detail-q")
        yield FigurePlot(id="detail-sps")

    def show(self, data: DetailData) -> None:
        run = data.run
        text = self.query_one("#detail-text", Static)
        text.update("No run under the cursor." if run is None else run_view(run))
        self.query_one("#detail-losses", FigurePlot).show(data.losses)
        self.query_one("#detail-q", FigurePlot).show(data.q_alpha)
        self.query_one("#detail-sps", FigurePlot).show(data.sps)
