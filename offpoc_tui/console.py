"""What every command shares: the consoles, the --db option, and one-line errors."""

from __future__ import annotations

import inspect
import os
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from offpoc_tui.outputs import fresh_tmp, is_special, output_place
from store import StoreError, open_store

USAGE = 2
"""Exit status of a usage error (bad arguments, a missing or foreign store)."""

out = Console(soft_wrap=True, markup=False)
"""Messages are not cut into lines at the console's width: piped, that width is a made-up 80. No markup:
messages carry user strings (run names, file names), shown as they are (:func:`literal`)."""
err = Console(stderr=True, soft_wrap=True, markup=False)

DbOption = Annotated[Path, typer.Option("--db", envvar="OFFPOC_DB", help="The store (SQLite file).", show_default=True)]
DEFAULT_DB = Path("offpoc.db")


def _tags(values: list[str] | None) -> list[str] | None:
    """A filter's tags as stored (lower case); a tag no run could carry (empty, malformed) is a usage error."""
    from store.tags import TagError, check_tag

    try:
        return None if values is None else [check_tag(value) for value in values]
    except TagError as error:
        raise typer.BadParameter(str(error)) from None


TagFilter = Annotated[
    list[str] | None,
    typer.Option("--tag", help="Only runs carrying this tag (repeatable: runs carrying every one).", callback=_tags),
]
WhereFilter = Annotated[
    str | None,
    typer.Option(
        "--where",
        "-w",
        metavar="FILTER",
        help="Only runs this filter keeps, the dashboard's / grammar: 'start_steps=500 return>1000 hopper'.",
    ),
]


def fail(message: str, code: int = USAGE) -> NoReturn:
    """One line on stderr, then exit (2 = usage error)."""
    err.print(f"error: {message}", markup=False, highlight=False)
    raise typer.Exit(code)


def open_db(db_path: Path, create: bool = False) -> Any:
    try:
        return open_store(db_path, create=create)
    except StoreError as error:
        fail(str(error))


def tables_out() -> Console:
    """Where tables go: piped output has no width to fit, so keep every column whole rather than cut to 80."""
    return out if out.is_terminal else Console(width=240, markup=False)


def visible(value: object) -> str:
    """``value`` as text with every control character spelled out (``\\x1b``), so that a name holding a
    terminal escape shows as one instead of acting on the terminal."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def literal(value: object, style: str = "") -> Text:
    """A user-provided string for rich (table cells, titles): never markup, control characters visible."""
    return Text(visible(value), style=style)


@contextmanager
def stage(text: str) -> Iterator[None]:
    """A step of long work: a spinner on a terminal; piped or in a log, the line itself (on stderr, so that
    stdout keeps only the result)."""
    if err.is_terminal:
        with err.status(text):
            yield
    else:
        err.print(text, markup=False, highlight=False)
        yield


def check_output(path: Path, db: Path) -> None:
    """Fail (one line, exit 2) unless a file can be written at ``path``: tried, not guessed; and never over the
    store ``db``, its WAL or its run files (an export written there would destroy what it reads)."""
    from store.files import part_of_store

    try:
        path.resolve()
    except (RuntimeError, OSError):  # links in a loop (Path.resolve raises RuntimeError for those in 3.11)
        fail(f"cannot write {path}: too many levels of symbolic links")
    try:
        part = part_of_store(path, db)
    except (RuntimeError, OSError):  # the store's own paths loop: nothing that resolves, as ``path`` does, is in them
        part = None
    if part is not None:
        fail(f"cannot write {path}: it is {part}; write the output elsewhere")
    if path.is_dir() or not output_place(path).parent.is_dir():
        fail(f"cannot write {path}: not a file in an existing directory")
    if is_special(path):  # a FIFO, a terminal, /dev/stdout: written straight into; asked, not tried (a FIFO would wait)
        if not os.access(path, os.W_OK):
            fail(f"cannot write {path}: permission denied")
        return
    try:
        fresh_tmp(output_place(path)).unlink()
    except OSError as error:
        fail(f"cannot write {path}: {error.strerror or error}")


def save_figure(fig: Any, output: Path) -> None:
    """:func:`offpoc_tui.charts.curves.save`, a failure (a full disk, an immutable file) one line, exit 1."""
    from offpoc_tui.charts.curves import save

    try:
        save(fig, output)
    except OSError as error:
        fail(f"cannot write {output}: {error.strerror or error}", code=1)


def resolve_runs(db: Any, tokens: list[str]) -> list[int]:
    """Run ids for ids, names, comma lists and id ranges (``1,2``, ``3-6``)."""
    from offpoc_tui.params import run_refs
    from store.runs import resolve

    try:
        return resolve(db, run_refs(tokens))
    except (LookupError, ValueError) as error:
        fail(str(error))


def where_ids(db: Any, text: str | None, run_ids: list[int] | None = None) -> list[int] | None:
    """The ids of the runs (of ``run_ids``, or all) the ``--where`` filter keeps: None without one; fails in one
    line where it cannot be read, or keeps no run."""
    if text is None:
        return run_ids
    from store.where import FilterError, matching_ids

    try:
        ids = matching_ids(db, text, run_ids)
    except FilterError as error:
        fail(str(error))
    if not ids:
        fail(f"no run matches --where {text!r} (offpoc ps --all lists the runs)", code=1)
    return ids


def resolve_one(db: Any, token: str) -> int:
    """The id of the one run ``token`` names (an id, or a name matching one run)."""
    ids = resolve_runs(db, [token])
    if len(ids) > 1:
        shown = id_list(ids) if len(ids) <= 8 or ids == list(range(ids[0], ids[-1] + 1)) else f"{ids[0]} to {ids[-1]}"
        fail(f"{token!r} names {len(ids):,} runs (ids {shown}): pass one id, e.g. {ids[0]} (offpoc ps --all lists all)")
    return ids[0]


def check_bootstrap(bootstrap: int) -> None:
    """``--bootstrap``: from 1 to :data:`~store.aggregate.MAX_BOOTSTRAP` resamples, or one line, exit 2."""
    from store.aggregate import MAX_BOOTSTRAP

    if not 1 <= bootstrap <= MAX_BOOTSTRAP:
        fail(f"--bootstrap must be from 1 to {MAX_BOOTSTRAP:,} resamples, got {bootstrap:,}")


def check_sources(sources: list[str] | None) -> None:
    from store.tasks import SOURCES

    unknown = [s for s in sources or [] if s not in SOURCES]
    if unknown:
        fail(f"unknown source {unknown[0]!r}: choose from {', '.join(SOURCES)}")


def check_group_by(db: Any, runs: list[Any], setting: str) -> None:
    """``--group-by SETTING`` must name a setting some of ``runs`` have in their config: otherwise one line, exit 2
    (a name nothing has would group every run under "unset")."""
    if not setting.strip():
        fail("--group-by needs a setting's name (offpoc config lists the settings)")
    if not runs:
        return
    from store.reader import configs

    if not any(setting in config for config in configs(db, [r["id"] for r in runs]).values()):
        fail(f"no run here has the setting {setting!r} in its config (offpoc config lists the settings)")


def id_list(ids: list[int]) -> str:
    """Ids as a command line takes them: ``1 2 3``, or a range ``1-40`` when they run on."""
    if len(ids) > 3 and ids == list(range(ids[0], ids[-1] + 1)):
        return f"{ids[0]}-{ids[-1]}"
    return " ".join(map(str, ids))


def db_flag(db: Path) -> str:
    """`` --db PATH`` where the store is not the one a command finds by itself (``./offpoc.db`` or $OFFPOC_DB)."""
    import os
    import shlex

    found = Path(os.environ.get("OFFPOC_DB", DEFAULT_DB))
    return "" if db.resolve() == found.resolve() else f" --db {shlex.quote(str(db))}"


class WholeSummaries(TyperGroup):
    """A command group whose help lists each command with its whole summary, and shows each value an option or
    argument takes as a word (``--algo ALGO``, ``--tail N``, ``RUNS``), not as a type (``<list[str]>``).

    It reads typer's parameters as typer 0.29 builds them (``type_descriptor``, ``display_type_rich``): a typer
    upgrade that renames them shows the types again, which a test of every command's help catches
    (``test_help_names_what_each_option_takes_in_words_not_types``)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        for param in getattr(command, "params", ()):
            if param.metavar is None and not getattr(param, "is_flag", False) and not getattr(param, "count", False):
                param.metavar = metavar_of(param)
            if param.param_type_name == "argument":  # typer prints an argument's type beside its name too
                param.display_type_rich = _no_type
        return command

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Each command with its whole summary (its help's first sentence), wrapped, never cut with "...":
        click cuts them to fit one line."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.short_help or summary_of(command.help or "")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def summary_of(text: str) -> str:
    """A help text's first sentence, whole, on one line."""
    first = " ".join(inspect.cleandoc(text).split("\n\n")[0].split())
    end = first.find(". ")
    return first if end < 0 else first[: end + 1]


def _no_type(ctx: Any) -> None:
    return None


def metavar_of(param: Any) -> str:
    """The word help shows for what ``param`` takes: N (a whole number), NUMBER, PATH, or its name in capitals
    (usage adds ``...`` after an argument that takes several)."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", str)
    several = typing.get_origin(annotation) is list
    kind = typing.get_args(annotation)[0] if several else annotation
    words = {int: "N", float: "NUMBER", Path: "PATH"}
    word = words.get(kind) or str(param.name).rstrip("_").upper().replace("_", "-")
    return word
