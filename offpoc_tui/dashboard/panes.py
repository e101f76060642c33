"""The dashboard's views after the runs table, each a pane in its own tab: the one table the app reads.

A view is a data module (:mod:`offpoc_tui.dashboard.data`, registered in :data:`~.model.VIEWS`) and a pane
registered here. The app lays the tabs out in this order, numbers their keys (``2`` on), shows each
answer in its view's pane, and tells every pane when the request changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from textual.widget import Widget

from offpoc_tui.dashboard.compare_pane import ComparePane
from offpoc_tui.dashboard.curves_pane import CurvesPane
from offpoc_tui.dashboard.detail_pane import DetailPane
from offpoc_tui.dashboard.quantities_pane import QuantitiesPane
from offpoc_tui.dashboard.request import Request
from store.stats import FinalWindow


class Pane(Protocol):
    """What the app asks of a view's pane."""

    def show(self, data: Any) -> None:
        """Lay out the view's data (the poller's answer to the request on screen)."""

    def show_request(self, request: Request, selected: int) -> None:
        """Say what the view now shows (``selected``: how many runs are selected)."""


@dataclass(frozen=True)
class PaneEntry:
    view: str
    """The view's name: the request's ``view`` and its :data:`~.model.VIEWS` key."""
    title: str
    make: Callable[[FinalWindow], Widget]
    """The pane, given Compare's final statistic."""


PANES: tuple[PaneEntry, ...] = (
    PaneEntry("curves", "Curves", lambda window: CurvesPane()),
    PaneEntry("quantities", "Quantities", lambda window: QuantitiesPane()),
    PaneEntry("compare", "Compare", ComparePane),
    PaneEntry("detail", "Detail", lambda window: DetailPane()),
)
"""The views in tab order, after the runs table (key ``1``)."""
