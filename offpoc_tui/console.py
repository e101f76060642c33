"""What every command shares: the consoles, the --db option, and one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from store import StoreError, open_store

USAGE = 2
"""Exit status of a usage error (bad arguments, a missing or foreign store)."""

out = Console()
err = Console(stderr=True, soft_wrap=True)

DbOption = Annotated[Path, typer.Option("--db", envvar="OFFPOC_DB", help="The store (SQLite file).", show_default=True)]
DEFAULT_DB = Path("offpoc.db")


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
    return out if out.is_terminal else Console(width=240)
