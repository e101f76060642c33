"""What the UI shows now (:class:`Request`: view, runs, toggles), which the poller answers, and why a view has
nothing to show."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from offpoc_tui.dashboard.caches import Sources
from store.runs import RunRow
from store.stats import BandKind
from store.where import Filter, FilterError, parse

View = str
"""``runs``, or a view of :data:`~offpoc_tui.dashboard.panes.PANES` (each one of :data:`.model.VIEWS`)."""


SMOOTHING = (1, 5, 10)
"""Moving-average windows (evaluations) the smoothing toggle cycles through."""


@dataclass(frozen=True)
class Request:
    view: View = "runs"
    run_ids: tuple[int, ...] = ()
    """Curves: the selected runs, or every run the filter shows when none is selected."""
    cursor: int | None = None
    """The highlighted run: the subject of Quantities and Detail."""
    grouped: bool = False
    group_by: str = ""
    """Curves, grouped: the setting whose values make the groups (``batch_size``), seeds and methods pooled within
    each; "" groups by method (correction, divergence, sampler and the settings that set runs apart)."""
    compare_by: str = ""
    """Compare: the setting its rows are by (``g``), every method's runs of a value pooled; "": by method."""
    wall_time: bool = False
    smoothing: int = 1
    heatmap: bool = False
    interval: int = -1
    """Histogram interval: an index into the subject's intervals (−1: the latest)."""
    quantity: int = 0
    """Quantities: which of the subject's logged quantities (λ first), modulo their number; ``v`` cycles."""
    compare_key: tuple[str, str] | None = None
    threshold: float | None = None
    band: BandKind = "ci95"
    """The band around each group's mean curve (Curves grouped, Compare); ``b`` cycles."""
    filter_text: str = ""
    """The runs table's filter, for views to say why they show nothing."""
    imported: bool = False
    """Curves: also the imported curves, which are hidden while the runs shown include any trained here."""


EMPTY_STORE = "no runs in this store yet (start some with `offpoc run`)"


def no_runs(request: Request) -> str:
    """Why a view has no run to show, and the key that changes it."""
    if request.filter_text:
        return f"the filter '{request.filter_text}' matches no run (/ changes it; an empty filter shows all)"
    return EMPTY_STORE


def filtered(text: str) -> Filter:
    """The runs table's filter (already checked when the user gave it), over runs read with their configs."""
    try:
        return parse(text, lenient=True)  # any key not a column or result is a setting: one no run has keeps none
    except FilterError:
        return parse("")


Prepared = tuple[tuple[Any, ...], Callable[[], Any]]
"""A view's basis (what its data is built from: equal bases, equal data) and the function that builds it."""
Prepare = Callable[["Sources", sqlite_utils.Database, list[RunRow], Request], Prepared]
"""A view module's ``prepare``: see :data:`offpoc_tui.dashboard.model.VIEWS`."""
