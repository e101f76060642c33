"""``offpoc tag`` and ``offpoc note``: what a user says of runs, to find them by and to read later."""

from __future__ import annotations

from typing import Annotated

import typer

from offpoc_tui.console import DEFAULT_DB, DbOption, fail, open_db, out, resolve_one, resolve_runs, visible
from store import StoreError
from store.tags import TagError, retag, set_note

TAG_HELP = "Runs (ids, ranges, names), then +TAG to add and -TAG to remove, e.g. 3-5 +ablation -draft."


def tag(
    ctx: typer.Context,
    words: Annotated[list[str], typer.Argument(metavar="RUN… [+TAG|-TAG]…", help=TAG_HELP)],
    db: DbOption = DEFAULT_DB,
) -> None:
    """Add (+TAG) and remove (-TAG) runs' tags; with no +/-, list their tags. Filter by them with --tag.

    -h alone (or --help) shows this help; -hard is a tag to remove.
    """
    if "-h" in words:  # -h alone asks for help; -hard is a tag to remove (click would read it as -h -a -r -d)
        out.print(ctx.get_help(), markup=False, highlight=False)
        raise typer.Exit(0)
    changes = [w for w in words if w[:1] in "+-" and len(w) > 1]
    tokens = [w for w in words if w not in changes]
    if not tokens:
        fail("name the runs first, e.g. offpoc tag 3-5 +ablation")
    add = [w[1:] for w in changes if w[0] == "+"]
    remove = [w[1:] for w in changes if w[0] == "-"]
    both = sorted(set(add) & set(remove))
    if both:
        fail(f"tag {both[0]!r} is both added and removed")
    store = open_db(db)
    run_ids = resolve_runs(store, tokens)
    try:
        after = retag(store, run_ids, add, remove)
    except TagError as error:
        fail(str(error))
    except StoreError as error:
        fail(str(error), code=1)
    for run_id in run_ids:
        out.print(f"run {run_id}: {' '.join(after.get(run_id, [])) or 'no tags'}", markup=False, highlight=False)


def note(
    run: Annotated[str, typer.Argument(help="Run id (or a name that matches one run).")],
    text: Annotated[str | None, typer.Argument(help="The note; '' clears it; none given prints it.")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Write (or print) a run's note: what it was for, what went wrong. show and exports carry it."""
    store = open_db(db)
    run_id = resolve_one(store, run)
    if text is None:
        (current,) = store.execute("SELECT note FROM runs WHERE id = ?", [run_id]).fetchone()
        out.print(visible(current) if current else f"run {run_id} has no note", markup=False, highlight=False)
        return
    try:
        set_note(store, run_id, text)
    except TagError as error:
        fail(str(error))
    except StoreError as error:
        fail(str(error), code=1)
    out.print(f"run {run_id}: note {'cleared' if not text else 'saved'}", markup=False, highlight=False)
