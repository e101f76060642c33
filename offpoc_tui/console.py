"""What every command shares: the consoles, the --db option, and one-line errors."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from store import StoreError, open_store

USAGE = 2
"""Exit status of a usage error (bad arguments, a missing or foreign store)."""

out = Console(soft_wrap=True, markup=False)
"""Messages are not cut into lines at the console's width: piped, that width is a made-up 80. No markup:
messages carry user strings (run names, file names), shown as they are (:func:`literal`)."""
err = Console(stderr=True, soft_wrap=True, markup=False)

DbOption = Annotated[Path, typer.Option("--db", envvar="OFFPOC_DB", help="The store (SQLite file).", show_default=True)]
DEFAULT_DB = Path("offpoc.db")
TagFilter = Annotated[
    list[str] | None, typer.Option("--tag", help="Only runs carrying this tag (repeatable: runs carrying every one).")
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

    part = part_of_store(path, db)
    if part is not None:
        fail(f"cannot write {path}: it is {part}; write the output elsewhere")
    if path.is_dir() or not path.parent.is_dir():
        fail(f"cannot write {path}: not a file in an existing directory")
    try:
        fresh_tmp(path).unlink()
    except OSError as error:
        fail(f"cannot write {path}: {error.strerror or error}")


def fresh_tmp(path: Path) -> Path:
    """A new empty file beside ``path`` (``.NAME.XXXXXXXX.tmp``), made by this call and no one else's (O_EXCL):
    where an output is written before it is renamed into place. Removing it never removes a file of
    the user's, such as a store that happens to be named like a temporary file."""
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:  # the mode an output written in place would have (mkstemp makes it private)
        os.fchmod(handle, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
    finally:
        os.close(handle)
    return Path(name)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def resolve_runs(db: Any, tokens: list[str]) -> list[int]:
    """Run ids for ids, names, comma lists and id ranges (``1,2``, ``3-6``)."""
    from offpoc_tui.params import run_refs
    from store.runs import resolve

    try:
        return resolve(db, run_refs(tokens))
    except (LookupError, ValueError) as error:
        fail(str(error))


def resolve_one(db: Any, token: str) -> int:
    """The id of the one run ``token`` names (an id, or a name matching one run)."""
    ids = resolve_runs(db, [token])
    if len(ids) > 1:
        shown = id_list(ids) if len(ids) <= 8 or ids == list(range(ids[0], ids[-1] + 1)) else f"{ids[0]} to {ids[-1]}"
        fail(f"{token!r} names {len(ids):,} runs (ids {shown}): pass one id, e.g. {ids[0]} (offpoc ps --all lists all)")
    return ids[0]


def check_sources(sources: list[str] | None) -> None:
    from store.tasks import SOURCES

    unknown = [s for s in sources or [] if s not in SOURCES]
    if unknown:
        fail(f"unknown source {unknown[0]!r}: choose from {', '.join(SOURCES)}")


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
