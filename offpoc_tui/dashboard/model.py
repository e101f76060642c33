"""From the store to figures and tables, for the view on screen: runs in the poller thread.

:class:`~offpoc_tui.dashboard.request.Request` is what the UI currently shows (view, runs, toggles);
:class:`Model` answers it from incremental caches with the view's own module in
:mod:`offpoc_tui.dashboard.data`, found in :data:`VIEWS`. Nothing here touches a widget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlite_utils

from offpoc_tui.dashboard.caches import Sources
from offpoc_tui.dashboard.data import compare, curves, detail, quantities
from offpoc_tui.dashboard.data.compare import CompareData
from offpoc_tui.dashboard.data.curves import CurvesData
from offpoc_tui.dashboard.data.detail import DetailData
from offpoc_tui.dashboard.data.quantities import QuantitiesData
from offpoc_tui.dashboard.request import Prepare, Request
from store.runs import RunRow
from store.stats import FinalWindow

ViewData = CurvesData | QuantitiesData | CompareData | DetailData

VIEWS: dict[str, Prepare] = {
    "curves": curves.prepare,
    "quantities": quantities.prepare,
    "compare": compare.prepare,
    "detail": detail.prepare,
}
"""Each view with data to build, and its module's ``prepare`` (the runs table needs none)."""


@dataclass
class Model:
    window: FinalWindow = field(default_factory=FinalWindow)
    """Compare's final statistic."""
    until: int | None = None
    """Compare's budget for every task (None: each task's own, :mod:`store.budget`)."""
    last: tuple[Any, ...] | None = None
    """What the previous answer was built from: the request and its runs' progress."""

    def __post_init__(self) -> None:
        self.sources = Sources(self.window, self.until)

    def forget(self, runs: list[RunRow]) -> None:
        """Drop what is cached of runs deleted, or whose records were replaced (their ``revision`` moved on)."""
        current = {r["id"]: r.get("revision", 0) for r in runs}
        self.sources.evals.forget(current)
        self.sources.quantities.forget(current)

    def answer(self, db: sqlite_utils.Database, runs: list[RunRow], request: Request) -> ViewData | None:
        """The view's data, or None when nothing it is built from changed since the last answer."""
        prepare = VIEWS.get(request.view)
        if prepare is None:
            return None
        basis, build = prepare(self.sources, db, runs, request)
        if basis == self.last:
            return None
        self.last = basis
        data: ViewData = build()
        return data
