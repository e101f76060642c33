"""The settings behind queued runs: ``offpoc config`` (every run field, algorithm and plug-in) and
``offpoc jobs`` (how many run at once)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Annotated

import typer

from offpoc_tui.console import (
    DEFAULT_DB,
    DbOption,
    fail,
    open_db,
    out,
    tables_out,
)
from store.reader import list_runs
from store.runs import reap_lost


def config(
    algo: Annotated[
        str | None, typer.Argument(help="An algorithm (ddpg, td3, sac): show its defaults where they differ.")
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="One object per field, for scripts.")] = False,
) -> None:
    """Every run config field --set takes (and sweep files' [set]): its default, type and meaning; then
    each registered algorithm, and each correction and sampler with the options it takes."""
    from agents import plugins
    from agents.config import TrainConfig, common_names
    from agents.config_text import field_docs, field_type
    from agents.plugins import algorithm_names

    if algo is not None and algo.lower() not in algorithm_names():
        fail(f"unknown algorithm {algo!r}: choose one of {', '.join(algorithm_names())}")
    base = TrainConfig(algo=algo.lower()) if algo else TrainConfig()
    shown_config = base.resolved() if algo else base
    defaults = {name: getattr(shown_config, name) for name in common_names()}  # every field, stored or not
    docs = field_docs()
    common = [name for name in common_names() if name not in ("algo", "env_id", "correction")]  # run's arguments
    sections: list[tuple[str, list[str]]] = [("every run", common)]
    for group in plugins.groups():
        owners = ", ".join(p.name for p in plugins.owners(group))
        defaults.update(group().flat())
        sections.append((owners, list(group.flat_names())))
    if json_:
        rows = [
            {"field": name, "default": defaults[name], "type": field_type(name), "meaning": docs.get(name, ""),
             "applies_to": applies_to}
            for applies_to, names in sections
            for name in names
        ]  # fmt: skip
        typer.echo(json.dumps(rows))
        return
    from rich.table import Table

    shown = f"{algo.lower()}'s defaults" if algo else "defaults (None: the algorithm's; offpoc config ALGO shows them)"
    table = Table(title=f"Run config fields, {shown}", title_justify="left", box=None, header_style="bold")
    for column in ("field", "default", "type", "meaning"):
        table.add_column(column, overflow="fold")
    for applies_to, names in sections:
        table.add_section()
        table.add_row(f"{applies_to}:", "", "", "", style="bold")
        for name in names:
            value = defaults[name]
            shown_value = ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
            table.add_row(name, shown_value, field_type(name), docs.get(name, ""))
    console = tables_out()
    console.print(table, markup=False, highlight=False)
    algorithms = Table(title="Algorithms (offpoc run ALGO)", title_justify="left", box=None, header_style="bold")
    for column in ("name", "what it is", "fast backend"):
        algorithms.add_column(column, overflow="fold")
    for name in algorithm_names():
        entry = plugins.algorithm(name)
        assert entry is not None
        algorithms.add_row(name, entry.summary, "covers it" if entry.fast else "no: autograd")
    console.print(algorithms, markup=False, highlight=False)
    for kind in ("correction", "sampler"):
        listing = Table(title=f"{kind.capitalize()}s (--{kind})", title_justify="left", box=None, header_style="bold")
        for column in ("name", "what it is", "its options"):
            listing.add_column(column, overflow="fold")
        for plugin in plugins.plugins(kind):
            options = ", ".join(f for group in plugin.options for f in group.flat_names()) or "–"
            listing.add_row(plugin.name, plugin.summary, options)
        console.print(listing, markup=False, highlight=False)


def jobs(
    limit: Annotated[int | None, typer.Argument(help="The new limit (omit to show it).")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Show or set how many runs the store's scheduler runs at once on this machine."""
    from store.queue import jobs_limit, jobs_problem, set_jobs

    if limit is not None and (problem := jobs_problem(limit)) is not None:
        fail(problem)
    store = open_db(db, create=limit is not None)
    reap_lost(store)
    if limit is not None:
        set_jobs(store, limit)
    active = list_runs(store, statuses=["queued", "running"])
    counts = Counter(r["status"] for r in active)
    workers = Counter(r["pid"] for r in active if r["status"] == "running" and r.get("lane_group") is not None)
    grouped = sum(n for n in workers.values() if n > 1)  # a lane resumed alone is a run of its own worker
    lanes = f" ({grouped} of them as lanes: a lane group is one job)" if grouped else ""
    out.print(
        f"at most {jobs_limit(store)} run{'s' if jobs_limit(store) > 1 else ''} at a time on this machine;"
        f" {counts['running']} running{lanes}, {counts['queued']} queued"
    )
