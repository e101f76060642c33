"""Commands that control runs: ``stop``, ``resume``, ``rm``, ``duplicates``."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from offpoc_tui.commands.backend_options import AddressOption, CheckpointDirOption, check_backend
from offpoc_tui.commands.watch import follow_runs
from offpoc_tui.console import (
    DEFAULT_DB,
    DbOption,
    fail,
    id_list,
    open_db,
    out,
    resolve_runs,
)
from offpoc_tui.runtime.stop_resume import KEEP_BACKEND, ControlError, stop_run, whole_groups
from store import TERMINAL
from store.queue import record_backend
from store.reader import list_runs
from store.runs import RunBusy, delete_runs, get_run, pid_alive, reap_lost

STOP_WAIT_S = 300.0


def stop(
    runs: Annotated[list[str] | None, typer.Argument(help="Run ids or names.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every queued or running run.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Stop runs gracefully: each checkpoints, then becomes `stopped` (resume continues it)."""
    if bool(runs) == all_:
        fail("name the runs to stop, or pass --all")
    store = open_db(db)
    reap_lost(store)
    ids = (
        [r["id"] for r in list_runs(store, statuses=["queued", "running"])] if all_ else resolve_runs(store, runs or [])
    )
    waiting = []
    together = whole_groups(store, ids)  # a whole lane group: one signal, every lane stopped at one step
    signalled: set[tuple[Any, Any]] = set()
    for run_id in ids:
        row = (get_run(store, run_id) or {}) if run_id in together else {}
        worker = (row.get("host"), row.get("pid"))
        if row and worker in signalled:  # its group's worker has its signal: one is enough
            waiting.append(run_id)
            continue
        if row:
            signalled.add(worker)
        try:
            message = stop_run(store, run_id, run_id in together)
        except ControlError as error:
            fail(str(error))
        if message is None:
            waiting.append(run_id)
        else:
            out.print(message)
    if waiting:
        _wait_stopped(store, waiting)


def _wait_stopped(store: Any, ids: list[int]) -> None:
    deadline = time.monotonic() + STOP_WAIT_S
    with out.status(f"checkpointing {len(ids)} run{'s' if len(ids) > 1 else ''}…"):
        while ids and time.monotonic() < deadline:
            for run_id in list(ids):
                run = get_run(store, run_id)
                remote = run is not None and run["backend"] == "ray"  # its pid is on another node
                if run is None or run["status"] in TERMINAL or (not remote and not pid_alive(run["pid"])):
                    reap_lost(store)
                    run = get_run(store, run_id)
                    status = run["status"] if run else "deleted"
                    step = f" at step {run['steps']:,}" if run else ""
                    out.print(f"run {run_id}: {status}{step}")
                    ids.remove(run_id)
            time.sleep(0.2)
    for run_id in ids:
        out.print(f"run {run_id}: still stopping (a large checkpoint); see offpoc ps")


def resume(
    runs: Annotated[list[str], typer.Argument(help="Run ids or names (stopped, lost or failed runs).")],
    follow_: Annotated[bool, typer.Option("--follow", help="Show progress until they end.")] = False,
    backend: Annotated[str | None, typer.Option(help="local or ray [default: where each run ran before].")] = None,
    address: AddressOption = None,
    checkpoint_dir: CheckpointDirOption = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Continue stopped, lost or failed runs from their last checkpoints to their configured length. Lanes of one
    group resumed together from checkpoints of one step train as one group again."""
    from agents import gemm
    from agents.config import ConfigError
    from offpoc_tui.runtime.stop_resume import resume_all
    from offpoc_tui.specs import UsageError

    try:
        gemm.check()  # a bad OFFPOC_GEMM: no worker would start
    except ConfigError as error:
        fail(str(error))
    store = open_db(db)
    run_ids = resolve_runs(store, runs)
    try:
        for run_id in run_ids:  # each where it ran (or --backend), checked before any is requeued
            row = get_run(store, run_id) or {}
            where = check_backend(backend or row.get("backend") or "local", address, checkpoint_dir)
            record_backend(store, where, address, checkpoint_dir)
        chosen = where if backend is not None else KEEP_BACKEND
        for line in resume_all(db, store, run_ids, chosen):  # reaps lost runs first
            out.print(line)
    except (ControlError, UsageError) as error:
        fail(str(error))
    store.close()
    if follow_:
        follow_runs(db, run_ids)


def rm(
    runs: Annotated[list[str], typer.Argument(help="Run ids or names.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Delete runs, everything they recorded and their files (asks first)."""
    store = open_db(db)
    reap_lost(store)
    ids = resolve_runs(store, runs)
    busy = [i for i in ids if (get_run(store, i) or {}).get("status") == "running"]
    if busy:
        fail(f"run {busy[0]} is running: stop it first (offpoc stop {busy[0]})")
    if not yes and not typer.confirm(f"delete run{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}?"):
        out.print("nothing deleted")
        raise typer.Exit(1)
    left: dict[int, str] = {}
    try:
        cancelled = delete_runs(store, db, ids, left)
    except RunBusy as error:
        fail(str(error), code=1)
    out.print(f"deleted {len(ids)} run{'s' if len(ids) > 1 else ''}")
    if cancelled:
        plural = "s" if len(cancelled) > 1 else ""
        out.print(
            f"their study is abandoned: its {len(cancelled)} queued run{plural} cancelled (id {id_list(cancelled)});"
            " offpoc resume RUN runs one anyway, outside the study",
            markup=False,
            highlight=False,
        )
    if left:  # its records are gone; its files are not all: said, never "deleted" alone
        run_id, why = next(iter(left.items()))
        more = f" (and {len(left) - 1} more run{'s' if len(left) > 2 else ''})" if len(left) > 1 else ""
        fail(f"run {run_id}'s files could not all be removed{more}: {why}", code=1)


def duplicates(
    run: Annotated[list[str] | None, typer.Argument(help="Runs to check, ids or names [default: every run].")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Find seeds that are the same run as another plus noise (near-identical curves), and flag them."""
    from offpoc_tui.commands.imports import warn_duplicates
    from store.duplicates import flag_duplicates

    store = open_db(db)
    ids = resolve_runs(store, run) if run else None
    found = flag_duplicates(store, ids)
    warn_duplicates(found, shown=None)
    checked = len(ids) if ids is not None else store.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    out.print(f"checked {checked:,} runs: {len(found)} flagged as copies", highlight=False)
