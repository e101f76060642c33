"""``offpoc dashboard``: the live TUI, or (``--once``) its tables as text."""

from __future__ import annotations

from typing import Annotated

import typer

from offpoc_tui.console import (
    DEFAULT_DB,
    DbOption,
    TagFilter,
    check_sources,
    fail,
    open_db,
    stage,
    tables_out,
)


def dashboard(
    once: Annotated[bool, typer.Option("--once", help="Print the runs and compare tables, then exit.")] = False,
    refresh: Annotated[float, typer.Option(help="Seconds between polls of the store.", min=0.1)] = 1.0,
    last: Annotated[
        int | None,
        typer.Option(
            help="Compare: final return over each seed's last N evaluations, within its last 10% of steps and"
            " after learning starts [default: 10]."
        ),
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
    source: Annotated[
        list[str] | None, typer.Option(help="--once: only runs from offpoc, published or zoo (repeatable).")
    ] = None,
    tag: TagFilter = None,
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
    check_sources(source)
    if tag and not once:
        fail("--tag goes with --once; in the live dashboard, filter with / and tag=NAME")
    window = FinalWindow(last or LAST_EVALUATIONS, last_steps)
    if not db.exists():
        fail(f"no store at {db}: start runs with `offpoc run`, or pass --db")
    if once:
        from offpoc_tui.dashboard.summary import summary

        store = open_db(db)
        with stage("reading the runs and comparing them…"):
            shown = summary(store, window, until, source, tag)
        tables_out().print(shown)
        return
    open_db(db).close()  # a corrupt or foreign file fails here, with one line
    from offpoc_tui.dashboard.app import Dashboard

    Dashboard(db, poll_s=refresh, window=window, until=until).run()
