"""Live progress bars for runs, read from the store (``--follow`` and ``offpoc follow``)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from offpoc_tui.views import number
from store import TERMINAL, open_store
from store.reader import list_runs
from store.runs import reap_lost

POLL_S = 1.0
LINE_EVERY_S = 10.0
"""Piped or in a log (no terminal), a line per run this often, and whenever one's status changes."""


class Studies:
    """The sequential studies a follow watches: their runs queued since (next interims), and whether they are
    done. A study whose runs have all ended, neither finished nor held, waits on the scheduler to queue its
    next interim; if none does within :data:`WAKE_S` (it was killed), one is started."""

    def __init__(self, db_path: Path, ids: Sequence[int]) -> None:
        self.db_path, self.ids = db_path, list(ids)
        self.waiting_since: float | None = None

    def runs(self, db: Any, run_ids: list[int]) -> list[int]:
        """``run_ids`` and every run of the studies."""
        if not self.ids:
            return run_ids
        marks = ",".join("?" * len(self.ids))
        sql = f"SELECT id FROM runs WHERE study_id IN ({marks}) ORDER BY id"
        return list(dict.fromkeys([*run_ids, *(r[0] for r in db.execute(sql, self.ids))]))

    def done(self, db: Any, runs_ended: bool) -> bool:
        """Whether the follow is over: every run followed has ended (``runs_ended``) and no study will queue
        another interim without someone's help (each has ended, or is held by a run to resume)."""
        from store.studies import state, studies

        if not runs_ended:
            self.waiting_since = None
            return False
        waiting = [s for s in studies(db, status="running") if s.id in self.ids and not state(db, s).holds]
        if not waiting:
            return True
        now = time.monotonic()
        if self.waiting_since is None:
            self.waiting_since = now
        elif now - self.waiting_since > WAKE_S:
            from offpoc_tui.runtime.scheduler import start_scheduler

            start_scheduler(self.db_path)  # exits at once where one runs
            self.waiting_since = now
        return False


WAKE_S = 10.0


def follow(
    db_path: Path, run_ids: list[int], console: Console, poll: float = POLL_S, studies: Sequence[int] = ()
) -> dict[int, str]:
    """Show a bar per run until every run has ended (on a terminal; elsewhere lines: :func:`follow_lines`);
    their final statuses. ``studies``: also their runs queued meanwhile, until each study ends or is held.

    Ctrl-C raises ``KeyboardInterrupt`` to the caller (which detaches; workers keep running).
    """
    if not console.is_terminal:
        return follow_lines(db_path, run_ids, console, poll, studies=studies)
    db = open_store(db_path)
    watched = Studies(db_path, studies)
    columns = [
        TextColumn("{task.description}"),
        BarColumn(bar_width=24),
        MofNCompleteColumn(),
        TextColumn("steps"),
        TimeRemainingColumn(),
        TextColumn(
            "{task.fields[status]:>8}  {task.fields[sps]:>5} SPS  return {task.fields[ret]:>8}  λ {task.fields[lam]}"
        ),
    ]
    statuses: dict[int, str] = {}
    with Progress(*columns, console=console, refresh_per_second=4) as progress:
        tasks = {}
        while True:
            reap_lost(db)
            run_ids = watched.runs(db, run_ids)
            for run in list_runs(db, run_ids=run_ids):
                fields: dict[str, Any] = {
                    "status": run["status"],
                    "sps": number(run["sps"], ".0f"),
                    "ret": number(run["last_return"], ".1f"),
                    "lam": number(run["mean_lambda"], ".3f"),
                }
                if run["id"] not in tasks:
                    label = f"#{run['id']} {run['algo']} {run['env']} {run['correction']} s{run['seed']}"
                    tasks[run["id"]] = progress.add_task(label, total=run["total_steps"], **fields)
                progress.update(tasks[run["id"]], completed=run["steps"], **fields)
                statuses[run["id"]] = run["status"]
            if watched.done(db, all(status in TERMINAL for status in statuses.values())):
                return statuses  # also when none of the runs exists any more
            time.sleep(poll)


def follow_lines(
    db_path: Path,
    run_ids: list[int],
    console: Console,
    poll: float = POLL_S,
    every: float = LINE_EVERY_S,
    studies: Sequence[int] = (),
) -> dict[int, str]:
    """:func:`follow` for a pipe or a log: a run's line when its status changes (it starts, ends, is lost), and
    every ``every`` seconds a line per running run and one summing up all,
    ``#3 td3 Hopper-v4 acoffpoc s0: running 12,000/1,000,000 steps, 214 SPS, return 1,034.2, λ 0.871`` and
    ``· 2 running, 497 queued, 3 finished; 428 steps/s in all``: as many lines as runs run at once, not as
    runs are followed."""
    db = open_store(db_path)
    watched = Studies(db_path, studies)
    statuses: dict[int, str] = {}
    last = time.monotonic()
    while True:
        reap_lost(db)
        run_ids = watched.runs(db, run_ids)
        runs = list_runs(db, run_ids=run_ids)
        for run in runs:
            if statuses.get(run["id"]) != run["status"] and (run["id"] in statuses or run["status"] != "queued"):
                _print_run(console, run)
        if time.monotonic() - last >= every:
            last = time.monotonic()
            running = [run for run in runs if run["status"] == "running"]
            for run in running:
                _print_run(console, run)
            counts = Counter(run["status"] for run in runs)
            said = ", ".join(
                f"{counts[s]:,} {s}"
                for s in ("running", "queued", *sorted(set(counts) - {"running", "queued"}))
                if counts[s]
            )
            speed = sum(run["sps"] or 0.0 for run in running)
            console.print(f"· {said}; {speed:,.0f} steps/s in all", markup=False, highlight=False)
        statuses = {run["id"]: run["status"] for run in runs}
        if watched.done(db, all(status in TERMINAL for status in statuses.values())):
            return statuses
        time.sleep(poll)


def _print_run(console: Console, run: Any) -> None:
    console.print(
        f"#{run['id']} {run['algo']} {run['env']} {run['correction']} s{run['seed']}: {run['status']}"
        f" {run['steps']:,}/{run['total_steps']:,} steps, {number(run['sps'], ',.0f')} SPS,"
        f" return {number(run['last_return'], ',.1f')}, λ {number(run['mean_lambda'], '.3f')}",
        markup=False,
        highlight=False,
    )
