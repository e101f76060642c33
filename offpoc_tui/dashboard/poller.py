"""The thread that reads the store for the dashboard: runs, then the data of the view on screen.

It owns the SQLite connection and every data computation, and posts :mod:`.messages` to the UI, which only
lays out what it receives. It answers the :class:`~.request.Request` of the tab on screen only, so hidden
views cost nothing.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from pathlib import Path
from typing import Protocol

from textual.message import Message
from textual.worker import Worker

from offpoc_tui.dashboard.messages import RunsUpdated, StoreProblem, ViewData
from offpoc_tui.dashboard.model import Model
from offpoc_tui.dashboard.request import Request
from store import StoreError, open_store
from store.reader import list_runs
from store.runs import reap_lost
from store.stats import FinalWindow
from store.variants import VariantLabels
from store.where import Configs

POLL_S = 1.0
IDLE_AFTER_S = 30.0
IDLE_POLL_S = 3.0
"""With no key pressed nor mouse used for :data:`IDLE_AFTER_S`, the poller reads the store this often instead:
an unattended dashboard beside live runs stays under 2% of a core (``benchmarks/dashboard_idle.py``). A
key or a click brings the faster pace back at once."""
REAP_EVERY_S = 10.0
"""How often the poller marks runs whose worker died as lost (as ``offpoc ps`` does)."""
WAKE_CHECK_S = 0.1


class Host(Protocol):
    """What the poller reads of the app (:class:`~offpoc_tui.dashboard.app.Dashboard`) and how it answers."""

    db_path: Path
    poll_s: float
    window: FinalWindow
    until: int | None
    request: Request
    last_input: float
    wake: threading.Event

    def post_message(self, message: Message) -> bool: ...


def poll(host: Host, worker: Worker[None]) -> None:
    """Read the store until ``worker`` is cancelled: every :data:`POLL_S` (:data:`IDLE_POLL_S` when idle),
    or at once when ``host.wake`` is set (a request changed)."""
    try:
        store = open_store(host.db_path)
    except StoreError as error:
        host.post_message(StoreProblem(str(error)))
        return
    model = Model(window=host.window, until=host.until)
    labels, settings = VariantLabels(), Configs()
    reaped = 0.0
    while not worker.is_cancelled:
        host.wake.clear()  # a request made while this poll runs wakes the next at once
        start = time.perf_counter()
        try:
            if time.monotonic() - reaped > REAP_EVERY_S:
                reaped = time.monotonic()
                with contextlib.suppress(sqlite3.OperationalError):  # read-only store: show what is there
                    reap_lost(store)
            runs = settings.attach(store, labels.label(store, list_runs(store)))
            model.forget(runs)
            host.post_message(RunsUpdated(runs, time.perf_counter() - start))
            request = host.request
            data = model.answer(store, runs, request)
            if data is not None:
                host.post_message(ViewData(request, data))
        except sqlite3.Error as error:
            host.post_message(StoreProblem(f"reading {host.db_path}: {error}"))
        idle = time.monotonic() - host.last_input > IDLE_AFTER_S
        deadline = time.monotonic() + (max(host.poll_s, IDLE_POLL_S) if idle else host.poll_s)
        while not (worker.is_cancelled or host.wake.is_set()) and time.monotonic() < deadline:
            host.wake.wait(WAKE_CHECK_S)  # short waits: quitting never waits for a poll interval
    store.close()
