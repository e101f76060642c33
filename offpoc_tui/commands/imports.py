"""``offpoc import``: published learning curves and Stable-Baselines3 evaluations into the store.

    offpoc import reference "../shared/reference-curves"        # the paper's 1,440 curves
    offpoc import zoo logs/td3/Hopper-v3_1/evaluations.npz       # or a folder of them

Each file becomes one finished run (see :mod:`store.curve_imports`); files that cannot be read
are listed and skipped, and the command then exits with status 1.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from offpoc_tui.console import DEFAULT_DB, DbOption, WholeSummaries, err, fail, open_db, out, stage
from store import StoreError
from store.curve_imports import (
    Curve,
    ImportProblem,
    ImportReport,
    import_curves,
    reference_curves,
    reference_files,
    reference_root,
    zoo_curves,
    zoo_files,
)
from store.db import check_writable
from store.duplicates import Duplicate, flag_duplicates

import_app = typer.Typer(
    cls=WholeSummaries,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Bring in evaluation curves recorded elsewhere: the paper's published curves, SB3/zoo runs.",
    no_args_is_help=True,
)

PathArgument = Annotated[Path, typer.Argument(help="A file or folder.", show_default=False)]


def _outside_store(files: list[Path], db_path: Path) -> tuple[list[Path], list[ImportProblem]]:
    """``files`` less those that are the store's own (the store, its WAL, its run files): reading one in a
    process that holds a connection would drop SQLite's locks (conventions, rule 11), and it is no curve."""
    from store.files import part_of_store

    kept, refused = [], []
    for file in files:
        part = part_of_store(file, db_path)
        if part is None:
            kept.append(file)
        else:
            refused.append(ImportProblem(f"{file}: it is {part}, not a curve"))
    return kept, refused


def _run(db_path: Path, what: str, count: int, curves: Iterator[Curve | ImportProblem]) -> None:
    """Import with a progress bar, then say what happened; exit 1 if any file was skipped."""
    try:
        check_writable(db_path)
    except StoreError as error:
        fail(str(error))
    db = open_db(db_path, create=True)
    with _progress(f"importing {what}", count, "files") as advance:
        report = import_curves(db, curves, advance=lambda: advance(1))
    imported = [
        row[0] for row in db.execute("SELECT id FROM runs WHERE origin LIKE 'reference:%' OR origin LIKE 'zoo:%'")
    ]
    with _progress("checking imported runs for copied seeds", len(imported), "runs") as advance:
        duplicates = flag_duplicates(db, imported, advance=advance)
    db.close()
    _say(report, db_path, len(duplicates))
    warn_duplicates(duplicates)
    if report.problems:
        raise typer.Exit(1)


@contextmanager
def _progress(what: str, total: int, unit: str) -> Iterator[Callable[[int], None]]:
    """A progress bar on a terminal, a line per stage otherwise (piped, or in a log); yields ``advance(n)``."""
    if not err.is_terminal:
        with stage(f"{what}: {total:,} {unit if total != 1 else unit.removesuffix('s')}…"):
            yield lambda n: None
        return
    columns = [TextColumn(what), BarColumn(bar_width=30), MofNCompleteColumn(), TextColumn(unit)]
    with Progress(*columns, TimeElapsedColumn(), console=err, transient=True) as progress:
        task = progress.add_task(what, total=total)
        yield lambda n: progress.advance(task, n)


def warn_duplicates(duplicates: list[Duplicate], shown: int | None = 20) -> None:
    """List seeds flagged as another's copy (statistics with --dedupe leave them out): the first ``shown``
    (None: all), then how many more and the command that lists them."""
    if not duplicates:
        return
    err.print(
        f"warning: {len(duplicates)} seed{'s are' if len(duplicates) != 1 else ' is'} the same run as another plus"
        " noise (near-identical curves), flagged; --dedupe leaves them out of the statistics:",
        markup=False,
        highlight=False,
    )
    for duplicate in duplicates[:shown]:
        err.print(f"  {duplicate.label}", markup=False, highlight=False)
    if shown is not None and len(duplicates) > shown:
        err.print(f"  … and {len(duplicates) - shown:,} more (offpoc duplicates lists them all)", highlight=False)


def _say(report: ImportReport, db_path: Path, copies: int) -> None:
    for problem in report.problems:
        err.print(f"skipped {problem}", markup=False, highlight=False)
    parts = [f"imported {report.imported:,} run{'s' if report.imported != 1 else ''}"]
    if report.updated:
        parts.append(f"extended {report.updated:,} already imported")
    if report.unchanged:
        parts.append(f"{report.unchanged:,} already present")
    if report.problems:
        parts.append(f"skipped {len(report.problems):,} file{'s' if len(report.problems) != 1 else ''}")
    if copies:
        parts.append(f"{copies:,} imported seed{'s' if copies != 1 else ''} flagged as copies")
    out.print(f"{', '.join(parts)} in {db_path}", highlight=False)


@import_app.command()
def reference(path: PathArgument, db: DbOption = DEFAULT_DB) -> None:
    """The paper's published curves: the `Learning Curves` folder, its parent, or one file in it
    (Learning Curves/ALGO/ENV/[METHOD_]ALGO_ENV_SEED.npy)."""
    try:
        files = reference_files(path)
    except ImportProblem as problem:
        fail(str(problem))
    if not files:
        fail(f"no files in {reference_root(path)}")
    files, refused = _outside_store(files, db)
    _run(db, "published curves", len(files) + len(refused), chain(refused, reference_curves(path, files)))


LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}")
"""An algorithm, environment or correction named on the command line for imported curves (``ALE/Pong-v5``)."""


@import_app.command()
def zoo(
    path: PathArgument,
    algo: Annotated[str | None, typer.Option(help="The algorithm [default: the zoo folder, logs/ALGO/].")] = None,
    env: Annotated[str | None, typer.Option(help="The environment [default: the folder, ENV_N/].")] = None,
    seed: Annotated[int | None, typer.Option(help="The seed [default: the experiment number N].")] = None,
    correction: Annotated[str, typer.Option(help="What correction these runs used.")] = "none",
    db: DbOption = DEFAULT_DB,
) -> None:
    """rl-baselines3-zoo / Stable-Baselines3 EvalCallback `evaluations.npz` files (one, or all under a folder)."""
    if seed is not None and not 0 <= seed < 2**63:
        fail(f"--seed must be in 0 to 2^63 - 1, got {seed}")
    for option, value in (("--algo", algo), ("--env", env), ("--correction", correction)):
        if value is not None and not LABEL.fullmatch(value):  # a label the tables and filters show and take back
            fail(f"{option} {value!r}: letters, digits and _ . : / - only, starting with a letter or digit")
    try:
        files = zoo_files(path)
    except ImportProblem as problem:
        fail(str(problem))
    overrides = {"algo": algo.lower() if algo else None, "env": env, "seed": seed, "correction": correction.lower()}
    files, refused = _outside_store(files, db)
    _run(db, "evaluations.npz", len(files) + len(refused), chain(refused, zoo_curves(path, files, **overrides)))
