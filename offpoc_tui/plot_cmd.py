"""``offpoc plot -o FIG.png``: the learning-curve figure (see :mod:`offpoc_tui.plot`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from offpoc_tui.console import DEFAULT_DB, DbOption, err, fail, open_db


def plot(
    output: Annotated[Path, typer.Option("--output", "-o", help="The figure: .png, .svg or .pdf.", show_default=False)],
    algo: Annotated[list[str] | None, typer.Option(help="Only these algorithms (repeatable).")] = None,
    env: Annotated[list[str] | None, typer.Option(help="Only these environments: ids or families (Hopper).")] = None,
    correction: Annotated[list[str] | None, typer.Option(help="Only these corrections (repeatable).")] = None,
    source: Annotated[list[str] | None, typer.Option(help="offpoc, published or zoo (repeatable).")] = None,
    smooth: Annotated[int, typer.Option(help="Moving average over this many evaluations (1: none).")] = 1,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Paper-style figure: a panel per algorithm and environment, mean and 95% band per method over seeds."""
    from offpoc_tui.plot import FORMATS
    from store.summary import SOURCES, matching_runs

    suffix = output.suffix.lstrip(".").lower()
    if suffix not in FORMATS:
        fail(f"cannot tell the format of {output}: name it .png, .svg or .pdf")
    if output.is_dir() or not output.parent.is_dir():
        fail(f"cannot write {output}: not a file in an existing directory")
    if smooth < 1:
        fail(f"--smooth must be at least 1, got {smooth}")
    unknown = [s for s in source or [] if s not in SOURCES]
    if unknown:
        fail(f"unknown source {unknown[0]!r}: choose from {', '.join(SOURCES)}")
    store = open_db(db)
    from offpoc_tui.plot import figure, panels, save

    with err.status("reading evaluations…"):
        runs = matching_runs(store, algos=algo, envs=env, corrections=correction, sources=source)
        found = panels(store, runs, smooth)
    if not found:
        fail("no evaluations match these filters (see `offpoc ps --all`)")
    with err.status(f"drawing {len(found)} panel{'s' if len(found) > 1 else ''}…"):
        save(figure(found, smooth), output)
    lines = sum(len(p.series) for p in found)
    what = f"{len(found)} panel{'s' if len(found) > 1 else ''}, {lines} curve{'s' if lines > 1 else ''}"
    err.print(f"wrote {output}: {what} from {len(runs):,} runs", highlight=False)
