"""Stopping and resuming runs from the dashboard: ``x x`` stops, ``r`` resumes.

One ``x`` alone never stops a run: :class:`StopConfirmation` waits for a second on the same runs within
:data:`CONFIRM_S`. The store is written from a worker thread (:func:`control`), never the UI's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from store import StoreError, open_store

CONFIRM_S = 3.0
"""How long a first ``x`` waits for the second that stops the runs."""


class StopConfirmation:
    """The runs a first ``x`` named, and when: a second ``x`` on the same runs within :data:`CONFIRM_S` stops them."""

    def __init__(self) -> None:
        self.asked: tuple[list[int], float] | None = None
        self.lapsed = False
        """Whether the last ``x`` came after an earlier one on the same runs had lapsed (it asks again, and says so)."""

    def confirmed(self, targets: list[int], now: float) -> bool:
        """Whether this ``x`` on ``targets`` is the second; if not, it is the first (where there are targets), and
        :attr:`lapsed` says whether a first ``x`` on the same runs came too long ago."""
        self.lapsed = self.asked is not None and self.asked[0] == targets and now - self.asked[1] >= CONFIRM_S
        if self.asked is not None and self.asked[0] == targets and not self.lapsed:
            self.asked = None
            return True
        self.asked = (targets, now) if targets else None
        return False


def asking(targets: list[int], lapsed: bool = False) -> str:
    """What a first ``x`` says (``lapsed``: a first ``x`` on them came more than :data:`CONFIRM_S` ago)."""
    said = f"run {targets[0]}" if len(targets) == 1 else f"{len(targets)} runs ({', '.join(map(str, targets[:8]))}"
    said += "" if len(targets) == 1 else ("…)" if len(targets) > 8 else ")")
    again = f"the first x lapsed after {CONFIRM_S:g} s: " if lapsed else ""
    return f"{again}press x again within {CONFIRM_S:g} s to stop {said} (checkpoint, resumable)"


def control(db_path: Path, what: str, run_ids: list[int], say: Callable[..., Any]) -> None:
    """Stop or resume ``run_ids`` in the store at ``db_path``, each outcome a notification through ``say``
    (``say(text, severity=...)``); run in a worker thread."""
    from offpoc_tui.runtime.stop_resume import ControlError, resume, stop_run

    if not run_ids:
        say("no run under the cursor", severity="warning")
        return
    try:
        store = open_store(db_path)
    except StoreError as error:
        say(str(error), severity="error")
        return
    for run_id in run_ids:
        try:
            if what == "stop":
                line = stop_run(store, run_id) or f"run {run_id}: stopping (checkpoint, then stopped)"
            else:
                line = resume(db_path, store, run_id)
            say(line)
        except (ControlError, StoreError) as error:
            say(str(error), severity="error")
        except sqlite3.Error as error:  # a store locked too long, a full disk: said, and the app goes on
            say(f"run {run_id}: {what} failed: {error}", severity="error")
    store.close()
