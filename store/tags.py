"""What a user says of runs: tags (``ablation``, ``v2-buffer``) to find them by, and a note to read.

A tag is 1 to :data:`MAX_TAG` characters from letters, digits and ``_ . : / @ -`` (it starts with a letter
or digit): it is typed on command lines (``--tag x``, ``offpoc tag 3 +x -y``) and in the dashboard's
filter (``tag=x``), so it holds nothing a shell, a ``+``/``-`` or a comma would read otherwise. A note is
free text up to :data:`MAX_NOTE` characters; where it is shown its control characters are spelled out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import sqlite_utils

from store.db import write

MAX_TAG = 64
MAX_TAGS = 32
"""Tags a run may carry."""
MAX_NOTE = 10_000
TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@-]*")


class TagError(ValueError):
    """A malformed tag or note; the message is one line."""


def check_tag(tag: str) -> str:
    """``tag`` as stored, in lower case (``Ablation`` and ``ablation`` are one tag, as the dashboard's filter
    reads them); raises :class:`TagError` saying what is wrong."""
    if not tag:
        raise TagError("a tag cannot be empty")
    if len(tag) > MAX_TAG:
        raise TagError(f"tag {tag[:20]!r}… is {len(tag):,} characters; at most {MAX_TAG}")
    if not TAG.fullmatch(tag):
        raise TagError(f"tag {tag!r}: letters, digits and _ . : / @ - only, starting with a letter or digit")
    return tag.lower()


def check_note(note: str) -> str:
    if len(note) > MAX_NOTE:
        raise TagError(f"the note is {len(note):,} characters; at most {MAX_NOTE:,}")
    if "\x00" in note:
        raise TagError("the note holds a NUL character")
    return note


def add_tags(db: sqlite_utils.Database, run_ids: Iterable[int], tags: Iterable[str]) -> None:
    """Inside the caller's write transaction: tag the runs (a tag they carry already stays once)."""
    rows = [(run_id, check_tag(tag)) for run_id in run_ids for tag in tags]
    db.conn.executemany("INSERT OR IGNORE INTO tags (run_id, tag) VALUES (?, ?)", rows)


def retag(db: sqlite_utils.Database, run_ids: list[int], add: list[str], remove: list[str]) -> dict[int, list[str]]:
    """Add and remove tags of the runs in one transaction; each run's tags after. Raises :class:`TagError`
    (nothing changed) for a malformed tag or a run that would carry more than :data:`MAX_TAGS`."""
    add, remove = [check_tag(tag) for tag in add], [check_tag(tag) for tag in remove]
    with write(db):
        _check_present(db, run_ids)  # resolved before this transaction: another command may have removed one
        marks = ", ".join("?" for _ in remove)
        for run_id in run_ids:
            if remove:
                db.execute(f"DELETE FROM tags WHERE run_id = ? AND tag IN ({marks})", [run_id, *remove])
        add_tags(db, run_ids, add)
        after = tags_of(db, run_ids)
        crowded = next((run_id for run_id in run_ids if len(after.get(run_id, [])) > MAX_TAGS), None)
        if crowded is not None:
            raise TagError(f"run {crowded} would carry {len(after[crowded])} tags; at most {MAX_TAGS}")
    return after


def _check_present(db: sqlite_utils.Database, run_ids: list[int]) -> None:
    """Raise :class:`TagError` (nothing changed) when one of the runs is not in the store (any more)."""
    if not run_ids:
        return
    marks = ", ".join("?" for _ in run_ids)
    present = {row[0] for row in db.execute(f"SELECT id FROM runs WHERE id IN ({marks})", run_ids)}
    gone = [run_id for run_id in run_ids if run_id not in present]
    if gone:
        raise TagError(f"run {gone[0]} is no longer in the store (removed meanwhile): nothing changed")


def tags_of(db: sqlite_utils.Database, run_ids: Iterable[int] | None = None) -> dict[int, list[str]]:
    """Each run's tags, sorted; runs without tags are left out."""
    ids = None if run_ids is None else list(run_ids)
    if ids == []:
        return {}
    where = "" if ids is None else f" WHERE run_id IN ({', '.join('?' for _ in ids)})"
    found: dict[int, list[str]] = {}
    for run_id, tag in db.execute(f"SELECT run_id, tag FROM tags{where} ORDER BY run_id, tag", ids or []):
        found.setdefault(run_id, []).append(tag)
    return found


def set_note(db: sqlite_utils.Database, run_id: int, note: str) -> None:
    """The run's note; an empty one clears it."""
    check_note(note)
    with write(db):
        _check_present(db, [run_id])
        db.execute("UPDATE runs SET note = ? WHERE id = ?", [note or None, run_id])
