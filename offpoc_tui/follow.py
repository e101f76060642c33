"""Live progress bars for runs, read from the store (``--follow`` and ``offpoc follow``)."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from offpoc_tui.views import number
from store import TERMINAL, open_store
from store.reader import list_runs
from store.runs import reap_lost

POLL_S = 1.0


def follow(db_path: Path, run_ids: list[int], console: Console, poll: float = POLL_S) -> dict[int, str]:
    """Show a bar per run until every run has ended; their final statuses.

    Ctrl-C raises ``KeyboardInterrupt`` to the caller (which detaches; workers keep running).
    """
    db = open_store(db_path)
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
            for run in list_runs(db, run_ids=run_ids):
                fields = {
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
            if all(status in TERMINAL for status in statuses.values()):
                return statuses  # also when none of the runs exists any more
            time.sleep(poll)
