"""Messages the poller thread posts to the UI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from offpoc_tui.dashboard.model import CompareData, CurvesData, DetailData, Request, WeightsData


@dataclass
class RunsUpdated(Message):
    runs: list[dict[str, Any]]
    poll_s: float
    """Seconds the poll took in the thread (SQLite and data work)."""


@dataclass
class ViewData(Message):
    request: Request
    data: CurvesData | WeightsData | CompareData | DetailData


@dataclass
class StoreProblem(Message):
    message: str
