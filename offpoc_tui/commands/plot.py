"""``offpoc plot -o FIG.png``: the learning-curve figure (see :mod:`offpoc_tui.charts.curves`)."""

from __future__ import annotations

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
    err,
    fail,
    open_db,
    save_figure,
    stage,
    where_ids,
)
from store.reader import RunFilters


def plot(
    output: Annotated[Path, typer.Option("--output", "-o", help="The figure: .png, .svg or .pdf.", show_default=False)],
    algo: Annotated[list[str] | None, typer.Option(help="Only these algorithms (repeatable).")] = None,
    env: Annotated[list[str] | None, typer.Option(help="Only these environments: ids or families (Hopper).")] = None,
    correction: Annotated[list[str] | None, typer.Option(help="Only these corrections (repeatable).")] = None,
    source: Annotated[list[str] | None, typer.Option(help="offpoc, published or zoo (repeatable).")] = None,
    smooth: Annotated[int, typer.Option(help="Moving average over this many evaluations (1: none).")] = 1,
    kind: Annotated[
        str, typer.Option(help="curves, or across tasks: aggregate (intervals), profile, improvement.")
    ] = "curves",
    until: Annotated[
        int | None, typer.Option(help="Cut every run at this step (the curves' x axis ends there).")
    ] = None,
    normalise: Annotated[str, typer.Option(help="Across tasks: minmax or none (see export).")] = "minmax",
    bootstrap: Annotated[int, typer.Option(help="Across tasks: stratified-bootstrap resamples.")] = 2000,
    dedupe: Annotated[bool, typer.Option("--dedupe", help="Across tasks: leave out seeds flagged as copies.")] = False,
    tag: TagFilter = None,
    where: WhereFilter = None,
    group_by: Annotated[
        str | None,
        typer.Option(help="Curves: a line per value of this setting (e.g. batch_size), every method's runs pooled."),
    ] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Paper-style learning curves (a panel per algorithm and environment, mean and 95% band per method),
    or statistics across tasks: interval estimates, performance profiles, probability of improvement."""
    from offpoc_tui.charts.aggregate import KINDS
    from offpoc_tui.charts.curves import FORMATS
    from store.normalise import NORMALISATIONS
    from store.summary import matching_runs
    from store.tasks import SOURCES

    suffix = output.suffix.lstrip(".").lower()
    if suffix not in FORMATS:
        fail(f"cannot tell the format of {output}: name it .png, .svg or .pdf")
    check_output(output, db)
    if smooth < 1:
        fail(f"--smooth must be at least 1, got {smooth}")
    unknown = [s for s in source or [] if s not in SOURCES]
    if unknown:
        fail(f"unknown source {unknown[0]!r}: choose from {', '.join(SOURCES)}")
    if until is not None and until < 0:
        fail(f"--until must be a step (0 or more), got {until}")
    if group_by is not None and kind != "curves":
        fail("--group-by applies to --kind curves")
    if kind not in KINDS:
        fail(f"unknown --kind {kind!r}: choose one of {', '.join(KINDS)}")
    if normalise not in NORMALISATIONS:
        fail(f"unknown --normalise {normalise!r}: choose one of {', '.join(NORMALISATIONS)}")
    check_bootstrap(bootstrap)
    store = open_db(db)
    run_ids = where_ids(store, where)
    from offpoc_tui.charts.curves import figure, panels

    if kind != "curves":
        filters: RunFilters = {
            "run_ids": run_ids, "algos": algo, "envs": env, "corrections": correction, "sources": source, "tags": tag
        }  # fmt: skip
        across_tasks(store, output, kind, until, normalise, bootstrap, dedupe, filters)
        return

    runs = matching_runs(store, run_ids=run_ids, algos=algo, envs=env, corrections=correction, sources=source, tags=tag)
    if group_by is not None:
        check_group_by(store, runs, group_by)
    found = []
    if runs:  # no stage line before the error when nothing matches
        with stage(f"reading the evaluations of {len(runs):,} runs…"):
            found = panels(store, runs, smooth, until, group_by)
    if not found:
        fail("no evaluations match these filters (see `offpoc ps --all`)")
    with stage(f"drawing {len(found)} panel{'s' if len(found) > 1 else ''}…"):
        save_figure(figure(found, smooth), output)
    lines = sum(len(p.series) for p in found)
    what = f"{len(found)} panel{'s' if len(found) != 1 else ''}, {lines} curve{'s' if lines != 1 else ''}"
    left_out = sum(sum(p.short.values()) for p in found)
    drawn = sum(len(seeds) for p in found for seeds in p.series.values())
    unplaced = len(runs) - drawn - left_out  # runs of a task none of whose runs has an evaluation: no panel
    what += f" from {len(runs):,} run{'s' if len(runs) != 1 else ''}"
    said = [f"{left_out} short of their panel's budget or not evaluated up to it, left out"] if left_out else []
    said += [f"{unplaced} in tasks with no evaluation yet, no panel"] if unplaced else []
    what += f" ({'; '.join(said)})" if said else ""
    err.print(f"wrote {output}: {what}", highlight=False)


def across_tasks(
    store: Any,
    output: Path,
    kind: str,
    until: int | None,
    normalise: str,
    bootstrap: int,
    dedupe: bool,
    filters: RunFilters,
) -> None:
    from offpoc_tui.charts.aggregate import aggregate_figure, improvement_figure, profile_figure
    from store.aggregate_tables import method_scores, task_budgets_of, too_short_note
    from store.normalise import NormalisationError

    try:
        short: list[int] = []
        scores = method_scores(store, until=until, normalise=normalise, too_short=short, dedupe=dedupe, **filters)
    except NormalisationError as error:
        fail(str(error))
    if not scores:
        fail("no evaluations match these filters (see `offpoc ps --all`)")
    budgets = task_budgets_of(store, until, dedupe=dedupe, **filters)  # the steps each task's runs were scored at
    with stage(f"bootstrapping {len(scores)} methods…"):
        if kind == "aggregate":
            fig = aggregate_figure(scores, bootstrap, normalise != "none", budgets)
        elif kind == "profile":
            fig = profile_figure(scores, bootstrap, normalise != "none", budgets)
        else:
            fig = improvement_figure(scores, bootstrap, budgets)
        save_figure(fig, output)
    runs = sum(len(v) for tasks in scores.values() for v in tasks.values())
    left = f"; {too_short_note(len(short))}" if short else ""
    err.print(f"wrote {output}: {kind} of {len(scores)} methods from {runs:,} runs{left}", highlight=False)
