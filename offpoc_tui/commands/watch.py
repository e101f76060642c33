"""Commands that watch runs: ``follow``, ``ps``, ``show``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from offpoc_tui.console import (
    DEFAULT_DB,
    DbOption,
    TagFilter,
    WhereFilter,
    err,
    fail,
    open_db,
    out,
    resolve_one,
    resolve_runs,
    tables_out,
    where_ids,
)
from store import StoreError
from store.codec import json_text
from store.db import read_only
from store.files import RunFiles
from store.reader import PS_COLUMNS, list_runs, run_detail
from store.runs import reap_lost


def follow_runs(db_path: Path, ids: list[int], studies: list[int] | None = None) -> None:
    """Progress until the runs end; ``studies``: also their next interims, until each study ends or is held."""
    from offpoc_tui.follow import follow as show_progress

    try:
        statuses = show_progress(db_path, ids, out, studies=studies or [])
    except KeyboardInterrupt:
        out.print("detached: the runs keep going in the background (offpoc ps, offpoc follow)")
        return
    except StoreError as error:
        fail(str(error))
    counts = Counter(statuses.values())
    out.print("done: " + ", ".join(f"{counts[status]} {status}" for status in sorted(counts)))
    if studies:
        _say_studies(db_path, studies)
    if any(s in ("failed", "lost") for s in statuses.values()):
        raise typer.Exit(1)


def _say_studies(db_path: Path, ids: list[int]) -> None:
    """Where each followed study ended: its decisions, or the runs that hold it."""
    from store.studies import state, studies
    from store.study_text import study_lines

    store = open_db(db_path)
    for study in studies(store):
        if study.id in ids:
            for line in study_lines(state(store, study)):
                out.print(line, markup=False, highlight=False)
    store.close()


def follow(
    runs: Annotated[list[str] | None, typer.Argument(help="Run ids or names [default: all active runs].")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Progress bars for runs until they end (Ctrl-C detaches; the runs keep going); with no runs named, every
    active run and the next interims of running --decide studies."""
    from store.studies import state
    from store.studies import studies as stored_studies

    store = open_db(db)
    reap_lost(store)
    wake_scheduler(store, db)
    ids = resolve_runs(store, runs) if runs else [r["id"] for r in list_runs(store, statuses=["queued", "running"])]
    running = [] if runs else [s.id for s in stored_studies(store, status="running") if not state(store, s).holds]
    store.close()
    if not ids and not running:
        out.print("no active runs")
        return
    follow_runs(db, ids, running)


def ps(
    json_: Annotated[bool, typer.Option("--json", help="A JSON list instead of a table.")] = False,
    all_: Annotated[bool, typer.Option("--all", "-a", help="Also finished runs (and imported curves).")] = False,
    tag: TagFilter = None,
    where: WhereFilter = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """List runs: queued, running, and those that can resume (stopped, lost, failed); --all: every run."""
    if not db.exists():
        print("[]") if json_ else out.print(f"no runs yet ({db} does not exist)")
        return
    store = open_db(db)
    reap_lost(store)
    wake_scheduler(store, db)
    runs = list_runs(store, tags=tag, run_ids=where_ids(store, where))
    shown = runs if all_ else [r for r in runs if r["status"] != "finished"]
    if json_:
        print(json_text([{key: run.get(key) for key in PS_COLUMNS} for run in shown], indent=1))
        return
    from offpoc_tui.views import runs_table

    if shown:
        console = tables_out()
        console.print(runs_table(shown, console.width))
    ended = Counter(r["status"] for r in runs if r not in shown)
    hidden = ", ".join(f"{n:,} {status}" for status, n in sorted(ended.items()))
    if not runs and tag:
        out.print(f"no run carries the tag{'s' if len(tag) > 1 else ''} {' and '.join(tag)}", markup=False)
    elif not runs:
        out.print(f"no runs yet in {db}: start some with offpoc run", markup=False, highlight=False)
    elif not shown:
        out.print("no active or resumable runs" + (f"; not shown: {hidden} (offpoc ps --all)" if hidden else ""))
    elif hidden:
        out.print(f"not shown: {hidden} (offpoc ps --all)", style="dim", markup=False)


def show(
    run: Annotated[str, typer.Argument(help="Run id (or a name that matches one run).")],
    json_: Annotated[bool, typer.Option("--json", help="JSON instead of panels.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """One run: resolved config, status, timings, summary; the traceback of a failed run."""
    store = open_db(db)
    reap_lost(store)
    wake_scheduler(store, db)
    detail = run_detail(store, resolve_one(store, run))
    assert detail is not None
    if not detail["source"]:  # trained here: its checkpoint and log are in the store's run files
        detail["files"] = str(RunFiles.of(store, db).run_dir(detail["id"]))
    if json_:
        print(json_text(detail, indent=1))
        return
    from offpoc_tui.views import run_view

    out.print(run_view(detail))


def wake_scheduler(store: Any, db: Path) -> None:
    """Queued runs that no scheduler will start (the command that queued them was killed first): start one."""
    from offpoc_tui.runtime.ray_leftovers import reap_leftovers
    from offpoc_tui.runtime.scheduler import needs_scheduler, start_scheduler

    if not read_only(store):
        reap_leftovers(RunFiles.of(store, db).root)

    stranded = needs_scheduler(store, db)
    if stranded:
        start_scheduler(db)
        plural = "s" if stranded != 1 else ""
        err.print(f"note: started the store's scheduler for {stranded} queued run{plural} that had none")
