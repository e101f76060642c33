"""Messages the poller thread posts to the UI."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from offpoc_tui.dashboard.model import ViewData as AnyViewData
from offpoc_tui.dashboard.request import Request
from store.runs import RunRow


@dataclass
class RunsUpdated(Message):
    runs: list[RunRow]
    poll_s: float
    """Seconds the poll took in the thread (SQLite and data work)."""


@dataclass
class ViewData(Message):
    request: Request
    data: AnyViewData


@dataclass
class StoreProblem(Message):
    message: str
