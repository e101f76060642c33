"""The store's WAL under real use: workers writing, the dashboard's stop and resume, readers in a loop,
the scheduler leaving and coming back. No process may make another's WAL disappear.

SQLite deletes a store's ``-wal`` when the last connection to it closes. A process that opens and closes
the store file outside SQLite drops every lock it holds on it (POSIX locks are per process), and another
process's last connection then deletes the WAL under its open connections; transactions committed there
can be lost. About a minute.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot

from offpoc_tui.dashboard.app import Dashboard
from tests.support.processes import SMALL, offpoc, run_row

pytestmark = pytest.mark.process

STEPS = 3000
RUN = ["td3", "Pendulum-v1", "--correction", "acoffpoc", *SMALL, "--seeds", "0-1", "--steps", str(STEPS),
       "--eval-freq", "500", "--set", "checkpoint_every=1000"]  # fmt: skip


class WalWatch(threading.Thread):
    """Looks at the ``-wal`` file every few milliseconds while it is told a connection is open."""

    def __init__(self, db: Path) -> None:
        super().__init__(daemon=True)
        self.wal = db.with_name(db.name + "-wal")
        self.done = threading.Event()
        self.missing: list[float] = []

    def run(self) -> None:
        while not self.done.is_set():
            if not self.wal.exists():
                self.missing.append(time.monotonic())
            time.sleep(0.005)


class Readers(threading.Thread):
    """``ps``, ``show`` and ``export`` from other processes, in a loop."""

    def __init__(self, db: Path) -> None:
        super().__init__(daemon=True)
        self.db = db
        self.done = threading.Event()
        self.failures: list[str] = []
        self.rounds = 0

    def run(self) -> None:
        commands = (["ps", "--all"], ["show", "1"], ["export", "--table", "evaluations"])
        while not self.done.is_set():
            for command in commands:
                result = subprocess.run(
                    [sys.executable, "-m", "offpoc_tui.cli", *command, "--db", str(self.db)],
                    capture_output=True, text=True, timeout=120,
                )  # fmt: skip
                if result.returncode != 0:
                    self.failures.append(f"{command}: {result.stderr.strip()}")
            self.rounds += 1


def status(db: Path, run_id: int) -> str:
    return str(run_row(db, run_id)["status"])


def test_no_process_loses_the_wal_and_every_committed_record_is_kept(tmp_path: Path) -> None:
    db = tmp_path / "offpoc.db"
    offpoc(db, "run", *RUN)  # two workers; the store exists, with its WAL, from here on
    scheduler_log = tmp_path / "offpoc.db-runs" / "scheduler.log"
    watch, readers = WalWatch(db), Readers(db)

    async def scenario() -> None:
        app = Dashboard(db, poll_s=0.1)
        async with app.run_test(size=(160, 48)) as pilot:
            await until(pilot, lambda: app.polls > 0 and app.table.cursor_run == 1)
            watch.start()  # the dashboard's poller holds a connection from here on
            readers.start()
            await until(pilot, lambda: run_row(db, 1)["steps"] >= 1200)
            await pilot.press("x", "x")  # stop run 1 (a second x confirms): it checkpoints, then stops
            await until(pilot, lambda: status(db, 1) == "stopped")
            await until(pilot, lambda: status(db, 2) == "finished")
            await until(pilot, lambda: scheduler_log.read_text().count("scheduler done") == 1)  # the scheduler left
            await pilot.press("r")  # resume run 1: a new scheduler, a new worker
            await until(pilot, lambda: status(db, 1) == "finished")
            await until(pilot, lambda: scheduler_log.read_text().count("scheduler done") == 2)
            await pilot.pause(1.0)  # every other process has closed its connection by now
            watch.done.set()
            readers.done.set()

    try:
        asyncio.run(scenario())
    finally:
        watch.done.set()
        readers.done.set()
    watch.join()
    readers.join()
    assert readers.rounds > 0 and not readers.failures, readers.failures
    assert not watch.missing, f"the WAL was gone {len(watch.missing)} times while the dashboard held a connection"
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        for run_id in (1, 2):  # every record a worker committed is there: no step missing, none twice
            evaluations = [r[0] for r in conn.execute("SELECT step FROM evaluations WHERE run_id = ? ORDER BY step",
                                                      [run_id])]  # fmt: skip
            assert evaluations == list(range(0, STEPS + 1, 500)), (run_id, evaluations)
            episodes = [r[0] for r in conn.execute("SELECT episode FROM episodes WHERE run_id = ? ORDER BY step",
                                                   [run_id])]  # fmt: skip
            assert episodes == list(range(len(episodes))) and len(episodes) >= STEPS // 200 - 1, (run_id, episodes)
            blocks = conn.execute("SELECT first_step, count FROM quantity_blocks WHERE run_id = ?"
                                  " AND quantity = 'lambda' ORDER BY first_step", [run_id]).fetchall()  # fmt: skip
            steps = [s for first, count in blocks for s in range(first, first + count)]
            assert steps == list(range(steps[0], STEPS + 1)), run_id
            assert conn.execute("SELECT status, steps FROM runs WHERE id = ?", [run_id]).fetchone() == (
                "finished",
                STEPS,
            )
    finally:
        conn.close()


async def until(pilot: Pilot, predicate: object, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.1)
