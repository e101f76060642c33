"""Piped ``follow``: a line per change of status and, each tick, the running runs and a summary; never every run."""

from __future__ import annotations

import io
import os
import socket
import threading
import time
from pathlib import Path

from rich.console import Console

from offpoc_tui.follow import follow_lines
from store import open_store
from store.runs import create_runs
from tests.support.storefill import spec


def test_piped_follow_prints_changes_and_a_summary_not_every_run(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    db = open_store(path, create=True)
    ids = create_runs(db, [spec(seed=s) for s in range(40)])
    alive = os.getpid()  # a live "worker", so the runs are not found lost

    def move(status: str, run_ids: list[int], **extra: float) -> None:
        sets = ", ".join(f"{key} = ?" for key in ("status", "pid", "host", "heartbeat", *extra))
        values = [status, alive, socket.gethostname(), time.time(), *extra.values()]
        db.execute(f"UPDATE runs SET {sets} WHERE id IN ({','.join('?' * len(run_ids))})", [*values, *run_ids])
        db.conn.commit()

    out = io.StringIO()
    console = Console(file=out, width=200, markup=False)
    done: dict[int, str] = {}
    follower = threading.Thread(target=lambda: done.update(follow_lines(path, ids, console, poll=0.05, every=0.3)))
    follower.start()
    time.sleep(0.3)
    move("running", ids[:2], steps=1000, sps=120.0)
    time.sleep(1.0)  # a few ticks with 2 running and 38 queued
    move("finished", ids[:2])
    time.sleep(0.3)
    move("finished", ids[2:])
    follower.join(timeout=90)
    assert not follower.is_alive() and set(done.values()) == {"finished"}
    lines = out.getvalue().splitlines()
    summaries = [line for line in lines if line.startswith("· ")]
    assert len(summaries) >= 3 and "· 2 running, 38 queued; 240 steps/s in all" in summaries
    for run_id in ids[2:]:  # queued, then finished: one line, at its change
        assert sum(line.startswith(f"#{run_id} ") for line in lines) == 1
    assert len(lines) < 40 + 2 * 2 + 2 * len(summaries) + 2  # running runs each tick; never the 38 queued
