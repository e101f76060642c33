"""A signal that arrives while the stop event is being set must not wait on the main thread forever."""

from __future__ import annotations

import subprocess
import sys

SECOND_SIGNAL = """
import threading, time
from agents.signals import signal_setter

stop = threading.Event()
handler = signal_setter(stop)
with stop._cond:  # where the main thread is while the first signal's stop.set() runs
    handler()  # the second signal's handler, run in the main thread, as Python runs handlers
time.sleep(0.05)
print("set" if stop.wait(5) else "not set")
"""


def test_a_second_signal_during_the_first_stop_neither_hangs_nor_is_lost() -> None:
    """A worker told to stop twice at once (``offpoc stop`` of a lane group's lanes, the scheduler shutting
    down) ran ``Event.set`` inside ``Event.set`` and waited on its own lock forever (a 4-lane group hung so
    here, its runs found lost). The handler now leaves the lock to a helper thread."""
    done = subprocess.run([sys.executable, "-c", SECOND_SIGNAL], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "set", done.stderr
