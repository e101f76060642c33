"""Curves: evaluation return against steps or wall time, per run or per group with a band around the mean."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical

from offpoc_tui.dashboard.bands import BAND_LABELS
from offpoc_tui.dashboard.data.curves import CurvesData
from offpoc_tui.dashboard.plots import FigurePlot
from offpoc_tui.dashboard.request import Request
from offpoc_tui.dashboard.state_line import StateLine


def grouping(request: Request) -> str:
    """What ``g`` has set: off, by method, or by a setting."""
    if not request.grouped:
        return "off"
    return f"by {request.group_by}" if request.group_by else "by method"


class CurvesPane(Vertical):
    def __init__(self) -> None:
        super().__init__()
        # Held, not queried: updates may still arrive while the app shuts down and prunes children.
        self.state = StateLine(id="curves-state", classes="pane-state")
        self.plot = FigurePlot(id="curves-plot")

    def compose(self) -> ComposeResult:
        yield self.state
        yield self.plot

    def show_request(self, request: Request, selected: int) -> None:
        subject = f"{selected} selected runs" if selected else "every run the filter shows (none selected)"
        self.state.update(
            f"[b]showing[/] {subject} · [b]g[/] grouped: {grouping(request)}"
            f" · [b]w[/] x axis: {'wall time' if request.wall_time else 'steps'}"
            f" · [b]m[/] smoothing: {f'{request.smoothing} evaluations' if request.smoothing > 1 else 'off'}"
            f" · [b]b[/] {BAND_LABELS[request.band]}{'' if request.grouped else ' (when grouped)'}"
            f" · [b]p[/] imported curves: {'shown' if request.imported else 'hidden beside runs trained here'}"
        )

    def show(self, data: CurvesData) -> None:
        self.plot.show(data.figure)
