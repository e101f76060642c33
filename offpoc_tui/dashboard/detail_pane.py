"""Run detail: status, config and a failed run's traceback (as ``offpoc show``), losses, Q, α, SPS."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Grid, VerticalScroll
from textual.widgets import Static

from offpoc_tui.dashboard.data.detail import DetailData
from offpoc_tui.dashboard.plots import FigurePlot
from offpoc_tui.dashboard.request import Request
from offpoc_tui.views import run_view


class DetailPane(Grid):
    def __init__(self) -> None:
        super().__init__()
        # Held, not queried: updates may still arrive while the app shuts down and prunes children.
        self.text = Static(id="detail-text")
        self.facts = VerticalScroll(self.text, id="detail-facts")
        self.losses = FigurePlot(id="detail-losses")
        self.q_alpha = FigurePlot(id="detail-q")
        self.sps = FigurePlot(id="detail-sps")

    def compose(self) -> ComposeResult:
        yield self.facts
        yield self.losses
        yield self.q_alpha
        yield self.sps

    def show_request(self, request: Request, selected: int = 0) -> None:
        """Detail says what it shows in its own text."""

    def show(self, data: DetailData) -> None:
        run = data.run
        self.text.update("No run under the cursor." if run is None else run_view(run, failure_first=True))
        self.losses.show(data.losses)
        self.q_alpha.show(data.q_alpha)
        self.sps.show(data.sps)
