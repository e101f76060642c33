"""The ``offpoc`` command line: launch background training runs, watch, control and export them.

    offpoc run td3 Hopper-v4 --correction acoffpoc --compare --seeds 0-4
    offpoc ps            offpoc show 3          offpoc follow
    offpoc stop 3        offpoc resume 3        offpoc rm 3        offpoc jobs 4
    offpoc sweep sweeps/quick.toml [--backend ray]
    offpoc export --table evaluations --format csv -o returns.csv
    offpoc dashboard     offpoc dashboard --once

Bad input prints one line and exits with status 2, before anything is written.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup
from typer.exceptions import Abort

try:  # typer ≥ 0.20 vendors click; its exceptions are not click's
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer on plain click
    from click import ClickException  # type: ignore[assignment]

from offpoc_tui.analyze_cmd import analyze_app
from offpoc_tui.backends import AddressOption, BackendOption, CheckpointDirOption, check_backend, record_backend
from offpoc_tui.console import DEFAULT_DB, DbOption, err, fail, out
from offpoc_tui.console import open_db as _open
from offpoc_tui.console import tables_out as _tables_out
from offpoc_tui.control import ControlError, request_stop
from offpoc_tui.control import resume as resume_run
from offpoc_tui.import_cmd import import_app
from offpoc_tui.plot_cmd import plot
from store import TERMINAL, StoreError
from store.db import check_writable
from store.files import RunFiles
from store.files import check_usable as check_run_files
from store.reader import PS_COLUMNS, list_runs, run_detail
from store.runs import create_runs, delete_runs, get_run, pid_alive, reap_lost

STOP_WAIT_S = 300.0
JobsOption = Annotated[
    int | None,
    typer.Option(help="Runs at once on this machine, for the whole store [default: as set, else the CPU cores]."),
]


class OneLineErrors(TyperGroup):
    """Click's usage errors as one ``error: ...`` line with exit status 2."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except ClickException as error:
            typer.echo(f"error: {error.format_message()}", err=True)
            sys.exit(error.exit_code)
        except Abort:
            typer.echo("aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=OneLineErrors,
    help="AC-Off-POC experiments: background training runs in SQLite, and the tools to watch them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _resolve(db: Any, tokens: list[str]) -> list[int]:
    from store.runs import resolve

    try:
        return resolve(db, tokens)
    except LookupError as error:
        fail(str(error))


def _resolve_one(db: Any, token: str) -> int:
    """The id of the one run ``token`` names (an id, or a name matching one run)."""
    ids = _resolve(db, [token])
    if len(ids) > 1:
        fail(f"{token!r} names {len(ids)} runs ({', '.join(map(str, ids))}): pass an id")
    return ids[0]


# ---- run -----------------------------------------------------------------------------------
@app.command()
def run(
    algo: Annotated[str, typer.Argument(help="ddpg, td3 or sac.")],
    env: Annotated[str, typer.Argument(help="A gymnasium id with a Box action space, e.g. Hopper-v4.")],
    correction: Annotated[
        str, typer.Option(help="none, acoffpoc, or a competitor: ace, geoff-pac, ipg, ris-off-pac.")
    ] = "none",
    divergence: Annotated[str | None, typer.Option(help="jsd (default), symkl or kl.")] = None,
    ref_std: Annotated[float | None, typer.Option(help="Reference std (default: exploration std, 0.1).")] = None,
    seed: Annotated[int | None, typer.Option(help="One seed (default 0).")] = None,
    seeds: Annotated[str | None, typer.Option(help="Several seeds: 0-4, 1,3,7 or 0-2,10.")] = None,
    steps: Annotated[int | None, typer.Option(help="Environment steps per run [default: 1000000].")] = None,
    eval_freq: Annotated[int | None, typer.Option(help="Steps between evaluations [default: 1000].")] = None,
    eval_episodes: Annotated[int | None, typer.Option(help="Episodes per evaluation [default: 10].")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Transitions per update [default: 256].")] = None,
    buffer_size: Annotated[int | None, typer.Option(help="Replay capacity [default: 1000000].")] = None,
    sampler: Annotated[str | None, typer.Option(help="Replay sampler: uniform (default), cer, per or ero.")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="KEY=VALUE for any config field (repeatable).")
    ] = None,
    compare: Annotated[bool, typer.Option(help="Also launch the baseline (none), same seeds and settings.")] = False,
    jobs: JobsOption = None,
    threads: Annotated[int, typer.Option(help="torch threads per worker.")] = 1,
    backend: BackendOption = "local",
    address: AddressOption = None,
    checkpoint_dir: CheckpointDirOption = None,
    name: Annotated[str | None, typer.Option(help="A name for these runs.")] = None,
    follow_: Annotated[bool, typer.Option("--follow", help="Show progress bars until they finish.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Queue training runs; the store's scheduler runs them in the background (at most --jobs at a time)."""
    from offpoc_tui.specs import RunRequest, UsageError, build_specs, parse_seeds, parse_sets

    try:
        if seed is not None and seeds is not None:
            raise UsageError("use --seed or --seeds, not both")
        if seed is not None and seed < 0:
            raise UsageError(f"--seed must be at least 0, got {seed}")
        if (jobs is not None and jobs < 1) or threads < 1:
            raise UsageError(f"--{'threads' if threads < 1 else 'jobs'} must be at least 1")
        where = check_backend(backend, address, checkpoint_dir)
        if name is not None and (not name.strip() or name.isdigit()):
            raise UsageError("--name must be non-empty text that is not a number (numbers are run ids)")
        flags = {
            "total_steps": steps,
            "eval_freq": eval_freq,
            "eval_episodes": eval_episodes,
            "batch_size": batch_size,
            "buffer_size": buffer_size,
            "sampler": sampler,
            "divergence": divergence,
            "ref_std": ref_std,
            "threads": threads if threads != 1 else None,
        }
        request = RunRequest(
            algo=algo.lower(),
            env=env,
            correction=correction.lower(),
            seeds=parse_seeds(seeds) if seeds is not None else [seed or 0],
            flags=flags,
            sets=parse_sets(set_ or []),
            compare=compare,
            name=name,
        )
        specs = build_specs(request)
        check_writable(db)
        check_run_files(db)
    except (UsageError, StoreError) as error:
        fail(str(error))

    store = _open(db, create=True)
    _configure(store, jobs, where, address, checkpoint_dir)
    ids = create_runs(store, specs, where)
    files = RunFiles.of(store, db)
    stale = files.ensure()
    if stale is not None:
        out.print(
            f"note: {files.display(files.root)} held another store's run files"
            f" (a store of this name deleted or replaced): set aside as {files.display(stale)}",
            markup=False,
            highlight=False,
        )
    limit = _start(db, store, where)
    listed = ", ".join(str(i) for i in ids)
    out.print(f"queued {len(ids)} run{'s' if len(ids) > 1 else ''} (id {listed}) in {db}; {limit}")
    if follow_:
        _follow(db, ids)
    else:
        out.print(f"watch: offpoc follow {listed}  ·  offpoc ps  ·  offpoc show {ids[0]}")


@app.command()
def sweep(
    file: Annotated[Path, typer.Argument(help="A sweep file (TOML): algos, envs, methods, seeds, steps, set.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say how many runs and CPU-hours, write nothing.")] = False,
    jobs: JobsOption = None,
    backend: BackendOption = "local",
    address: AddressOption = None,
    checkpoint_dir: CheckpointDirOption = None,
    follow_: Annotated[bool, typer.Option("--follow", help="Show progress bars until they finish.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Queue a study's grid (algorithms × environments × methods × seeds); again, only what is missing."""
    from offpoc_tui.specs import UsageError
    from offpoc_tui.sweep import cpu_hours, load_sweep, missing
    from store.reader import configs

    try:
        if jobs is not None and jobs < 1:
            raise UsageError(f"--jobs must be at least 1, got {jobs}")
        where = check_backend(backend, address, checkpoint_dir)
        grid = load_sweep(file)
        if not dry_run:
            check_writable(db)
            check_run_files(db)
    except (UsageError, StoreError) as error:
        fail(str(error))
    store = _open(db, create=True) if not dry_run or db.exists() else None
    named = [] if store is None else [r["id"] for r in list_runs(store) if r["name"] == grid.name]
    new = missing(configs(store, named).values() if store is not None else [], grid.specs)
    hours, basis = cpu_hours(store, new)
    summary = (
        f"sweep {grid.name}: {len(grid.specs):,} run{'s' if len(grid.specs) != 1 else ''}, "
        f"{len(new):,} not yet in {db}; "
        f"{sum(s.total_steps for s in new):,} env steps, about "
        + (f"{hours:,.1f} CPU-hours" if hours >= 1 else f"{hours * 60:.0f} CPU-minutes")
        + f" ({basis})"
    )
    if dry_run or not new:
        out.print(summary, highlight=False)
        if store is not None:
            store.close()
        return
    assert store is not None
    _configure(store, jobs, where, address, checkpoint_dir)
    ids = create_runs(store, new, where)
    RunFiles.of(store, db).ensure()
    limit = _start(db, store, where)
    out.print(summary, highlight=False)
    span = f"{ids[0]}-{ids[-1]}" if len(ids) > 1 else str(ids[0])
    plural = "s" if len(ids) > 1 else ""
    out.print(f"queued {len(ids)} run{plural} (id {span}); {limit}")
    if follow_:
        _follow(db, ids)


def _configure(store: Any, jobs: int | None, where: str | None, address: str | None, path: Path | None) -> None:
    """Before the runs are recorded: the store's limit and its Ray settings, when given."""
    from store.queue import set_jobs

    if jobs is not None:
        set_jobs(store, jobs)
    record_backend(store, where, address, path)


def _start(db: Path, store: Any, where: str | None) -> str:
    """Close the store and start its scheduler (if it is not running); a line saying what happens next."""
    from offpoc_tui.launcher import start_scheduler
    from store.queue import jobs_limit

    limit = jobs_limit(store)
    store.close()
    start_scheduler(db)
    if where == "ray":
        return "the store's scheduler sends them to Ray as tasks (one CPU each)"
    return f"the store's scheduler runs at most {limit} at a time (offpoc jobs N changes it)"


@app.command()
def jobs(
    limit: Annotated[int | None, typer.Argument(help="The new limit (omit to show it).")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Show or set how many runs the store's scheduler runs at once on this machine."""
    from store.queue import jobs_limit, set_jobs

    if limit is not None and limit < 1:
        fail(f"jobs must be at least 1, got {limit}")
    store = _open(db, create=limit is not None)
    reap_lost(store)
    if limit is not None:
        set_jobs(store, limit)
    counts = Counter(r["status"] for r in list_runs(store, statuses=["queued", "running"]))
    out.print(
        f"at most {jobs_limit(store)} run{'s' if jobs_limit(store) > 1 else ''} at a time on this machine;"
        f" {counts['running']} running, {counts['queued']} queued"
    )


def _follow(db_path: Path, ids: list[int]) -> None:
    from offpoc_tui.follow import follow as show_progress

    try:
        statuses = show_progress(db_path, ids, out)
    except KeyboardInterrupt:
        out.print("detached: the runs keep going in the background (offpoc ps, offpoc follow)")
        return
    except StoreError as error:
        fail(str(error))
    counts = Counter(statuses.values())
    out.print("done: " + ", ".join(f"{counts[status]} {status}" for status in sorted(counts)))
    if any(s in ("failed", "lost") for s in statuses.values()):
        raise typer.Exit(1)


@app.command()
def follow(
    runs: Annotated[list[str] | None, typer.Argument(help="Run ids or names [default: all active runs].")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Progress bars for runs until they end (Ctrl-C detaches; the runs keep going)."""
    store = _open(db)
    reap_lost(store)
    ids = _resolve(store, runs) if runs else [r["id"] for r in list_runs(store, statuses=["queued", "running"])]
    store.close()
    if not ids:
        out.print("no active runs")
        return
    _follow(db, ids)


# ---- ps / show -----------------------------------------------------------------------------
@app.command()
def ps(
    json_: Annotated[bool, typer.Option("--json", help="A JSON list instead of a table.")] = False,
    all_: Annotated[bool, typer.Option("--all", "-a", help="Also finished, stopped and failed runs.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """List runs: queued, running and lost ones (--all: every run)."""
    if not db.exists():
        print("[]") if json_ else out.print(f"no runs yet ({db} does not exist)")
        return
    store = _open(db)
    reap_lost(store)
    runs = list_runs(store)
    shown = runs if all_ else [r for r in runs if r["status"] in ("queued", "running", "lost")]
    if json_:
        print(json.dumps([{key: run[key] for key in PS_COLUMNS} for run in shown], indent=1))
        return
    from offpoc_tui.views import runs_table

    if shown:
        _tables_out().print(runs_table(shown))
    hidden = len(runs) - len(shown)
    if not shown:
        out.print("no active runs" + (f"; {hidden} ended (offpoc ps --all)" if hidden else ""))
    elif hidden:
        out.print(f"[dim]{hidden} ended run{'s' if hidden > 1 else ''} not shown: offpoc ps --all[/dim]")


@app.command()
def show(
    run: Annotated[str, typer.Argument(help="Run id (or a name that matches one run).")],
    json_: Annotated[bool, typer.Option("--json", help="JSON instead of panels.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """One run: resolved config, status, timings, summary; the traceback of a failed run."""
    store = _open(db)
    reap_lost(store)
    detail = run_detail(store, _resolve_one(store, run))
    assert detail is not None
    if not detail["source"]:  # trained here: its checkpoint and log are in the store's run files
        detail["files"] = str(RunFiles.of(store, db).run_dir(detail["id"]))
    if json_:
        print(json.dumps(detail, indent=1))
        return
    from offpoc_tui.views import run_view

    out.print(run_view(detail))


# ---- stop / resume / rm --------------------------------------------------------------------
@app.command()
def stop(
    runs: Annotated[list[str] | None, typer.Argument(help="Run ids or names.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every queued or running run.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Stop runs gracefully: each checkpoints, then becomes `stopped` (resume continues it)."""
    if bool(runs) == all_:
        fail("name the runs to stop, or pass --all")
    store = _open(db)
    reap_lost(store)
    ids = [r["id"] for r in list_runs(store, statuses=["queued", "running"])] if all_ else _resolve(store, runs or [])
    waiting = []
    for run_id in ids:
        try:
            message = request_stop(store, run_id)
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


@app.command()
def resume(
    run: Annotated[str, typer.Argument(help="Run id (a stopped or lost run).")],
    follow_: Annotated[bool, typer.Option("--follow", help="Show progress until it ends.")] = False,
    backend: Annotated[str | None, typer.Option(help="local or ray [default: where the run ran before].")] = None,
    address: AddressOption = None,
    checkpoint_dir: CheckpointDirOption = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Continue a stopped or lost run from its last checkpoint to its configured length."""
    from offpoc_tui.specs import UsageError

    store = _open(db)
    run_id = _resolve_one(store, run)
    try:
        row = get_run(store, run_id) or {}
        where = check_backend(backend or row.get("backend") or "local", address, checkpoint_dir)
        record_backend(store, where, address, checkpoint_dir)
        out.print(resume_run(db, store, run_id, where))  # reaps lost runs first
    except (ControlError, UsageError) as error:
        fail(str(error))
    store.close()
    if follow_:
        _follow(db, [run_id])


@app.command()
def rm(
    runs: Annotated[list[str], typer.Argument(help="Run ids or names.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Delete runs, everything they recorded and their files (asks first)."""
    store = _open(db)
    reap_lost(store)
    ids = _resolve(store, runs)
    busy = [i for i in ids if (get_run(store, i) or {}).get("status") == "running"]
    if busy:
        fail(f"run {busy[0]} is running: stop it first (offpoc stop {busy[0]})")
    if not yes and not typer.confirm(f"delete run{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}?"):
        out.print("nothing deleted")
        raise typer.Exit(1)
    delete_runs(store, db, ids)
    out.print(f"deleted {len(ids)} run{'s' if len(ids) > 1 else ''}")


@app.command()
def duplicates(
    run: Annotated[list[str] | None, typer.Argument(help="Runs to check, ids or names [default: every run].")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Find seeds that are the same run as another plus noise (near-identical curves), and flag them."""
    from offpoc_tui.import_cmd import warn_duplicates
    from store.duplicates import flag_duplicates

    store = _open(db)
    ids = _resolve(store, run) if run else None
    found = flag_duplicates(store, ids)
    warn_duplicates(found)
    checked = len(ids) if ids is not None else store.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    out.print(f"checked {checked:,} runs: {len(found)} flagged as copies", highlight=False)


# ---- export --------------------------------------------------------------------------------
@app.command()
def export(
    table: Annotated[
        str,
        typer.Option(
            help="evaluations, episodes, train, weights, runs; summary (the paper's table), aggregate or improvement"
            " (across tasks)."
        ),
    ] = "evaluations",
    format_: Annotated[
        str, typer.Option("--format", "-f", help="csv, json or md (summary, aggregate, improvement: also latex).")
    ] = "csv",
    last: Annotated[
        int | None, typer.Option(help="Final tables: a seed's final return over its last N evaluations [default: 10].")
    ] = None,
    last_steps: Annotated[
        int | None,
        typer.Option(help="Final tables: over each seed's last N steps instead (differing eval frequencies)."),
    ] = None,
    until: Annotated[
        int | None,
        typer.Option(help="Final tables: cut every run (trained or imported) at this step, to compare at one budget."),
    ] = None,
    normalise: Annotated[
        str, typer.Option(help="Aggregate, improvement: minmax (random policy 0, TD3 as published 1) or none.")
    ] = "minmax",
    bootstrap: Annotated[
        int, typer.Option(help="Aggregate, improvement: stratified-bootstrap resamples (seeded: results reproduce).")
    ] = 2000,
    dedupe: Annotated[
        bool, typer.Option("--dedupe", help="Final tables: leave out seeds flagged as copies of another.")
    ] = False,
    algo: Annotated[list[str] | None, typer.Option(help="Only these algorithms (repeatable).")] = None,
    env: Annotated[
        list[str] | None, typer.Option(help="Only these environments (repeatable; summary: Hopper = every version).")
    ] = None,
    correction: Annotated[list[str] | None, typer.Option(help="Only these corrections (repeatable).")] = None,
    run: Annotated[list[str] | None, typer.Option(help="Only these runs, ids or names (repeatable).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Tidy long tables, one row per observation led by its run's metadata; or final returns: the paper's
    summary, statistics across tasks (aggregate) and the probability of improving on the baseline."""
    from store.export import FINAL_TABLES, FORMATS, SUMMARY_FORMATS, TABLES, columns, rows, write_rows, write_summary
    from store.normalise import NORMALISATIONS
    from store.stats import LAST_EVALUATIONS, FinalWindow

    if table not in TABLES:
        fail(f"unknown table {table!r}: choose one of {', '.join(TABLES)}")
    formats = SUMMARY_FORMATS if table in FINAL_TABLES else FORMATS
    if format_ not in formats:
        fail(f"unknown format {format_!r} for --table {table}: choose one of {', '.join(formats)}")
    for flag, value in (("--last", last), ("--last-steps", last_steps), ("--until", until)):
        if value is not None and table not in FINAL_TABLES:
            fail(f"{flag} applies to --table {', '.join(FINAL_TABLES)} only")
    if dedupe and table not in FINAL_TABLES:
        fail(f"--dedupe applies to --table {', '.join(FINAL_TABLES)} only")
    if normalise not in NORMALISATIONS:
        fail(f"unknown --normalise {normalise!r}: choose one of {', '.join(NORMALISATIONS)}")
    if bootstrap < 1:
        fail(f"--bootstrap must be at least 1, got {bootstrap}")
    if last is not None and last_steps is not None:
        fail("--last counts evaluations and --last-steps steps: pass one of them")
    if last is not None and last < 1:
        fail(f"--last must be at least 1, got {last}")
    if last_steps is not None and last_steps < 1:
        fail(f"--last-steps must be at least 1, got {last_steps}")
    if until is not None and until < 0:
        fail(f"--until must be a step (0 or more), got {until}")
    if output is not None and (output.is_dir() or not output.parent.is_dir()):
        fail(f"cannot write {output}: not a file in an existing directory")
    store = _open(db)
    run_ids = _resolve(store, run) if run else None
    filters = {"run_ids": run_ids, "algos": algo, "envs": env, "corrections": correction}

    window = FinalWindow(last or LAST_EVALUATIONS, last_steps)
    if table in ("aggregate", "improvement"):
        from store.aggregate_tables import method_scores
        from store.normalise import NormalisationError

        try:
            scores = method_scores(store, window, until, normalise, dedupe=dedupe, **filters)
        except NormalisationError as error:
            fail(str(error))

    def write_to(out: Any) -> int:
        if table == "summary":
            from store.summary import summary_rows

            described = window.describe() + (f" up to step {until:,}" if until is not None else "")
            summary = summary_rows(store, last=window, until=until, dedupe=dedupe, **filters)
            return write_summary(out, format_, summary, described)
        if table in ("aggregate", "improvement"):
            from store.aggregate_tables import final_table, task_budgets_of
            from store.budget import budgets_note

            budgets = budgets_note(task_budgets_of(store, until, dedupe=dedupe, **filters))
            note = f"Each task's runs at its budget (seeds short of it left out): {budgets}." if budgets else ""
            return final_table(out, table, format_, scores, bootstrap, note)
        return write_rows(out, format_, columns(table), rows(store, table, **filters))

    if output is None:
        write_to(sys.stdout)
        return
    tmp = output.with_name(output.name + ".tmp")
    with tmp.open("w", newline="") as f:
        count = write_to(f)
    tmp.replace(output)
    err.print(f"wrote {count:,} {table + ' ' if table in FINAL_TABLES else ''}rows to {output}", highlight=False)


# ---- dashboard -------------------------------------------------------------------------------
@app.command()
def dashboard(
    once: Annotated[bool, typer.Option("--once", help="Print the runs and compare tables, then exit.")] = False,
    refresh: Annotated[float, typer.Option(help="Seconds between polls of the store.", min=0.1)] = 1.0,
    last: Annotated[
        int | None, typer.Option(help="Compare: final return over each seed's last N evaluations [default: 10].")
    ] = None,
    last_steps: Annotated[
        int | None,
        typer.Option(
            help="Compare: final return over each seed's last N steps instead (for differing eval frequencies)."
        ),
    ] = None,
    until: Annotated[
        int | None,
        typer.Option(
            help="Compare every task at this step (seeds short of it left out) [default: each task's budget, the"
            " largest step all its runs have reached]."
        ),
    ] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """The live dashboard: runs, return curves, λ histograms, baseline-vs-correction comparisons."""
    from store.stats import LAST_EVALUATIONS, FinalWindow

    if last is not None and last_steps is not None:
        fail("--last counts evaluations and --last-steps steps: pass one of them")
    if (last is not None and last < 1) or (last_steps is not None and last_steps < 1):
        fail(f"--{'last' if last_steps is None else 'last-steps'} must be at least 1")
    if until is not None and until < 0:
        fail(f"--until must be a step (0 or more), got {until}")
    window = FinalWindow(last or LAST_EVALUATIONS, last_steps)
    if not db.exists():
        fail(f"no store at {db}: start runs with `offpoc run`, or pass --db")
    if once:
        from offpoc_tui.dashboard.summary import summary

        store = _open(db)
        _tables_out().print(summary(store, window, until))
        return
    _open(db).close()  # a corrupt or foreign file fails here, with one line
    from offpoc_tui.dashboard.app import Dashboard

    Dashboard(db, poll_s=refresh, window=window, until=until).run()


app.add_typer(import_app, name="import")
app.add_typer(analyze_app, name="analyze")
app.command()(plot)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
