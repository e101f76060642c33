"""Curves: evaluation return against steps or wall time, per run or per group with a 95% band."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from offpoc_tui.dashboard.model import CurvesData, Request
from offpoc_tui.dashboard.plots import FigurePlot


class CurvesPane(Vertical):
    def compose(self) -> ComposeResult:
        yield Static(id="curves-state", classes="pane-state")
        yield FigurePlot(id="curves-plot")

    def show_request(self, request: Request, selected: int) -> None:
        subject = f"{selected} selected runs" if selected else "every run the filter shows (none selected)"
        self.query_one("#curves-state", Static).update(
            f"[b]showing[/] {subject} · [b]g[/] grouped: {'on' if request.grouped else 'off'}"
            f" · [b]w[/] x axis: {'wall time' if request.wall_time else 'steps'}"
            f" · [b]m[/] smoothing: {f'{request.smoothing} evaluations' if request.smoothing > 1 else 'off'}"
        )

    def show(self, data: CurvesData) -> None:
        self.query_one("#curves-plot", FigurePlot).show(data.figure)
