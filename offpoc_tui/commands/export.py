"""``offpoc export``: the store's tables, and the final-performance and across-task tables, as files."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from offpoc_tui.console import (
    DEFAULT_DB,
    DbOption,
    TagFilter,
    WhereFilter,
    check_bootstrap,
    check_group_by,
    check_output,
    check_sources,
    err,
    fail,
    id_list,
    open_db,
    resolve_runs,
    where_ids,
)
from offpoc_tui.outputs import written
from store.reader import RunFilters
from store.runs import reap_lost


def export(
    table: Annotated[
        str,
        typer.Option(
            help="evaluations, episodes, train, quantities (λ and the other logged values; alias: weights), runs,"
            " decisions (sequential studies); finals (each seed's final return), summary (the paper's table),"
            " aggregate or improvement (across tasks)."
        ),
    ] = "evaluations",
    format_: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="csv, json or md (summary, aggregate, improvement: also latex); tensorboard: every record of the"
            " runs as event files, a folder per run under -o DIR.",
        ),
    ] = "csv",
    last: Annotated[
        int | None,
        typer.Option(
            help="Final tables: a seed's final return over its last N evaluations, within its last 10% of steps"
            " and after learning starts [default: 10]."
        ),
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
        list[str] | None,
        typer.Option(help="Only these environments: ids or families (Hopper: every version; repeatable)."),
    ] = None,
    correction: Annotated[list[str] | None, typer.Option(help="Only these corrections (repeatable).")] = None,
    run: Annotated[list[str] | None, typer.Option(help="Only these runs, ids or names (repeatable).")] = None,
    source: Annotated[
        list[str] | None,
        typer.Option(help="Only runs from: offpoc (trained here), published (the paper's curves), zoo (repeatable)."),
    ] = None,
    tag: TagFilter = None,
    where: WhereFilter = None,
    group_by: Annotated[
        str | None,
        typer.Option(help="Summary: a row per value of this setting (e.g. batch_size), every method's runs pooled."),
    ] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow", help="TensorBoard: export what is new every --every seconds while the runs train, to their end."
        ),
    ] = False,
    every: Annotated[float, typer.Option(help="TensorBoard --follow: seconds between exports.")] = 10.0,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Tidy long tables, one row per observation led by its run's metadata; or final returns: the paper's
    summary, statistics across tasks (aggregate) and the probability of improving on the baseline."""
    from store.export import (
        FINAL_TABLES,
        FORMATS,
        LATEX_TABLES,
        SUMMARY_FORMATS,
        TABLE_ALIASES,
        TABLES,
        columns,
        rows,
        write_rows,
        write_summary,
    )
    from store.normalise import NORMALISATIONS
    from store.stats import LAST_EVALUATIONS, FinalWindow

    table = TABLE_ALIASES.get(table, table)
    if table not in TABLES:
        fail(f"unknown table {table!r}: choose one of {', '.join(TABLES)}")
    if format_ == "tensorboard":  # every record of the runs: the table and the final tables' options do not apply
        options = {"--last": last, "--last-steps": last_steps, "--until": until, "--group-by": group_by,
                   "--dedupe": dedupe or None}  # fmt: skip
        given = [flag for flag, value in options.items() if value is not None]
        if given or table != "evaluations":
            fail(f"--format tensorboard writes every record of the runs: drop {given[0] if given else '--table'}")
        check_sources(source)
        if not 0 < every <= 86_400:  # nan and inf too
            fail(f"--every must be a number of seconds from above 0 to 86400, got {every:g}")
        chosen = {"run": run, "algos": algo, "envs": env, "corrections": correction, "sources": source, "tags": tag,
                  "where": where}  # fmt: skip
        return tensorboard(db, output, chosen, every if follow else None)
    if follow:
        fail("--follow keeps a TensorBoard export current: use it with --format tensorboard -o DIR")
    formats = SUMMARY_FORMATS if table in LATEX_TABLES else FORMATS
    if format_ not in formats:
        fail(f"unknown format {format_!r} for --table {table}: choose one of {', '.join(formats)}")
    for flag, value in (("--last", last), ("--last-steps", last_steps), ("--until", until)):
        if value is not None and table not in FINAL_TABLES:
            fail(f"{flag} applies to --table {', '.join(FINAL_TABLES)} only")
    if group_by is not None and table != "summary":
        fail("--group-by applies to --table summary only")
    if dedupe and table not in FINAL_TABLES:
        fail(f"--dedupe applies to --table {', '.join(FINAL_TABLES)} only")
    if normalise not in NORMALISATIONS:
        fail(f"unknown --normalise {normalise!r}: choose one of {', '.join(NORMALISATIONS)}")
    check_bootstrap(bootstrap)
    if last is not None and last_steps is not None:
        fail("--last counts evaluations and --last-steps steps: pass one of them")
    if last is not None and last < 1:
        fail(f"--last must be at least 1, got {last}")
    if last_steps is not None and last_steps < 1:
        fail(f"--last-steps must be at least 1, got {last_steps}")
    if until is not None and until < 0:
        fail(f"--until must be a step (0 or more), got {until}")
    if output is not None:
        check_output(output, db)
    check_sources(source)
    store = open_db(db)
    reap_lost(store)  # a dead worker's run is lost, not exported as training (as `ps` says)
    run_ids = where_ids(store, where, resolve_runs(store, run) if run else None)
    filters: RunFilters = {
        "run_ids": run_ids, "algos": algo, "envs": env, "corrections": correction, "sources": source, "tags": tag,
    }  # fmt: skip

    from store.summary import matching_runs

    matched = matching_runs(store, **filters)
    if not matched and table != "decisions":  # an empty table that says nothing reads as "no data": say why
        filtered = any(value for value in filters.values()) or where is not None
        said = (
            "no runs match these filters (offpoc ps --all lists the store's)" if filtered else "the store has no runs"
        )
        err.print(f"note: {said}", highlight=False)
    if group_by is not None:
        check_group_by(store, matched, group_by)
    window = FinalWindow(last or LAST_EVALUATIONS, last_steps)
    short: list[int] = []  # aggregate, improvement: runs too short for the window, left out and said
    if table in ("aggregate", "improvement"):
        from store.aggregate_tables import method_scores
        from store.normalise import NormalisationError

        try:
            scores = method_scores(store, window, until, normalise, short, dedupe=dedupe, **filters)
        except NormalisationError as error:
            fail(str(error))

    def write_to(out: Any) -> int:
        from store.seeds import repeats_note
        from store.summary import repeated_runs

        if table == "summary":
            from store.summary import summary_rows

            described = window.describe() + (f" up to step {until:,}" if until is not None else "")
            summary = summary_rows(store, last=window, until=until, dedupe=dedupe, group_by=group_by, **filters)
            repeated = repeats_note(repeated_runs(store, dedupe=dedupe, **filters))
            said = f"{repeated[:1].upper()}{repeated[1:]}." if repeated else ""
            return write_summary(out, format_, summary, described, said)
        if table in ("aggregate", "improvement"):
            from store.aggregate_tables import final_table, task_budgets_of, too_short_note
            from store.budget import budgets_note, mixed_note

            found = task_budgets_of(store, until, dedupe=dedupe, **filters)
            budgets, mixed = budgets_note(found), mixed_note(found)
            note = f"Each task's runs at its budget (seeds short of it left out): {budgets}." if budgets else ""
            note += f" Note: {mixed}." if mixed else ""
            if repeated := repeats_note(repeated_runs(store, dedupe=dedupe, **filters)):
                note += f" {repeated[0].upper()}{repeated[1:]}."
            if short:
                note += f" {too_short_note(len(short))}."
            return final_table(out, table, format_, scores, bootstrap, found, note)
        if table == "finals":
            from store.summary import final_rows

            finals = final_rows(store, last=window, until=until, dedupe=dedupe, **filters)
            if repeated := repeats_note(repeated_runs(store, dedupe=dedupe, **filters)):
                err.print(f"note: {repeated}", highlight=False)  # rows left out, as the summary says in its note
            return write_rows(out, format_, columns(table), iter(finals))
        return write_rows(out, format_, columns(table), rows(store, table, **filters), objects=("config",))

    if output is None:
        write_to(sys.stdout)
        return
    try:
        with written(output) as f:
            count = write_to(f)
    except OSError as error:
        fail(f"cannot write {output}: {error.strerror or error}", code=1)
    err.print(f"wrote {count:,} {table + ' ' if table in FINAL_TABLES else ''}rows to {output}", highlight=False)


def tensorboard(db: Path, output: Path | None, filters: dict[str, Any], every: float | None) -> None:
    """``--format tensorboard -o DIR``: what the matching runs recorded since the last export into DIR, a folder per
    run (:mod:`store.tensorboard`); with ``every`` (``--follow``), again every that many seconds until none of
    them is queued or running, or Ctrl-C."""
    import contextlib
    import sqlite3
    import time

    from store import StoreError
    from store.db import store_id
    from store.files import part_of_store
    from store.reader import list_runs
    from store.tensorboard import ExportRefused, read_manifest

    if output is None:
        fail("--format tensorboard writes a folder: name it with -o DIR")
    part = part_of_store(output, db)
    if part is not None:
        fail(f"cannot write {output}: it is {part}; write the export elsewhere")
    if not output.parent.is_dir():
        fail(f"cannot write {output}: {output.parent} is not a folder")
    store = open_db(db)
    try:
        read_manifest(output, store_id(store))  # refused before anything is written
    except ExportRefused as error:
        fail(str(error))
    where = filters.pop("where")
    asked = filters.pop("run")
    named = resolve_runs(store, asked) if asked else None

    def matching() -> list[Any]:  # read again before each export: a tag, a result or a new run may join
        return list_runs(store, run_ids=where_ids(store, where, named), **filters)

    if not matching():
        fail("no runs match these filters (see `offpoc ps --all`)")
    try:
        while True:
            with contextlib.suppress(sqlite3.OperationalError):  # read-only store: its runs as they were left
                reap_lost(store)  # a dead worker's run is lost, not training: --follow must not wait on it
            live = _export_once(store, matching(), output)
            if every is None or not live:
                break
            time.sleep(every)
    except KeyboardInterrupt:
        err.print(f"stopped following; {output} holds what was exported (run the same command to go on)")
    except (StoreError, ExportRefused) as error:
        fail(str(error), code=1)


def _export_once(store: Any, runs: list[Any], output: Path) -> bool:
    """One export of ``runs`` into ``output``, with a progress bar and a line of what it wrote; whether any of
    the runs is still queued or running."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from store.tensorboard import TensorBoardMissing, export_runs

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("runs"))
    try:
        with Progress(*columns, console=err, transient=True, disable=not err.is_terminal) as progress:
            task = progress.add_task("writing event files", total=len(runs))
            report = export_runs(store, runs, output, lambda *_: progress.advance(task))
    except TensorBoardMissing as error:
        fail(str(error), code=1)
    except OSError as error:
        fail(f"cannot write {output}: {error.strerror or error}", code=1)
    line = f"wrote {report.events:,} new events of {report.runs:,} of {len(runs):,} runs to {output}"
    if report.rewritten:
        line += f"; runs {id_list(report.rewritten)} written again whole (records replaced, or their folder gone)"
    if report.removed:
        line += f"; runs {id_list(report.removed)} removed (deleted from the store)"
    if report.relabelled:
        line += f"; runs {id_list(report.relabelled)} written again whole (new tags, note or settings)"
    if report.live:
        at = ", ".join(f"{run_id} at step {step:,}" for run_id, step in report.live[:5])
        more = f" and {len(report.live) - 5} more" if len(report.live) > 5 else ""
        line += f"; still training: run {at}{more} (export again, or --follow, for the rest)"
    err.print(line + f" (tensorboard --logdir {output})", highlight=False, markup=False)
    return bool(report.live)
