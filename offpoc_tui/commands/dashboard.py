"""``offpoc dashboard``: the live TUI, or (``--once``) its tables as text."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from offpoc_tui.console import (
    DEFAULT_DB,
    DbOption,
    TagFilter,
    check_sources,
    err,
    fail,
    open_db,
    stage,
    tables_out,
)
from offpoc_tui.dashboard.web import DEFAULT_HOST, DEFAULT_PORT


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
    web: Annotated[
        bool, typer.Option("--web", help="Serve the dashboard to a browser (one dashboard per tab) until Ctrl+C.")
    ] = False,
    host: Annotated[
        str | None,
        typer.Option(
            help="--web: the address to listen on [default: 127.0.0.1]. Any address but loopback serves a"
            " read-only view unless --allow-control."
        ),
    ] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="--web: the port [default: 8000].")] = None,
    allow_control: Annotated[
        bool, typer.Option("--allow-control", help="--web --host: keep the stop (x x) and resume (r) keys.")
    ] = False,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="No stop or resume keys (what --web --host serves by default).")
    ] = False,
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
    if not web and (host is not None or port is not None or allow_control):
        fail("--host, --port and --allow-control go with --web")
    if web and once:
        fail("--web serves the live dashboard; --once prints its tables: pass one of them")
    if once and read_only:
        fail("--read-only goes with the live dashboard (or --web); --once has no keys")
    if allow_control and read_only:
        fail("--allow-control keeps the stop and resume keys, --read-only removes them: pass one of them")
    window = FinalWindow(last or LAST_EVALUATIONS, last_steps)
    if not db.exists():
        fail(f"no store at {db}: start runs with `offpoc run`, or pass --db")
    if once:
        from offpoc_tui.dashboard.summary import summary
        from store.runs import reap_lost

        store = open_db(db)
        reap_lost(store)  # a dead worker's run is lost, not shown as training (as `ps` and the live dashboard do)
        with stage("reading the runs and comparing them…"):
            shown = summary(store, window, until, source, tag)
        tables_out().print(shown)
        return
    open_db(db).close()  # a corrupt or foreign file fails here, with one line
    if web:
        address = (host or DEFAULT_HOST, port or DEFAULT_PORT)
        _serve(db, *address, allow_control, read_only, refresh, until, last, last_steps)
        return
    from offpoc_tui.dashboard.app import Dashboard

    Dashboard(db, poll_s=refresh, window=window, until=until, read_only=read_only).run()


def _serve(
    db: Path, host: str, port: int, allow_control: bool, read_only: bool, refresh: float, until: int | None,
    last: int | None, last_steps: int | None,
) -> None:  # fmt: skip
    """``--web``: serve the dashboard until Ctrl+C; an address that cannot be listened on is one line, exit 1."""
    from offpoc_tui.dashboard import web

    locked = web.read_only_for(host, allow_control, read_only)
    window = (["--last", str(last)] if last is not None else []) + (
        ["--last-steps", str(last_steps)] if last_steps is not None else []
    )
    command = web.app_command(db, refresh, locked, until, window)
    try:
        web.serve(db, host, port, command, locked, lambda line: err.print(line, highlight=False))
    except OSError as error:
        fail(f"cannot serve on {web.url(host, port)}: {error.strerror or error}", code=1)
    except KeyboardInterrupt:
        pass
