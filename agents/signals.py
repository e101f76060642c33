"""Stopping a run from a signal: a handler that sets an event safely."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["signal_setter"]


def signal_setter(event: threading.Event) -> Callable[..., None]:
    """A signal handler that sets ``event`` without taking its lock in the handler. Python runs a handler in
    the main thread between two bytecodes, possibly inside ``event.set()`` itself (a second signal while the
    first is handled: ``offpoc stop`` and the scheduler's shutdown may both send one, a user presses Ctrl-C
    twice): taking the lock there again would wait on the main thread forever. A short-lived thread sets it
    instead."""

    def handler(*_: object) -> None:
        if not event.is_set():  # a plain read, no lock
            threading.Thread(target=event.set, name="stop-on-signal", daemon=True).start()

    return handler
