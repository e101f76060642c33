"""Command-line values people type: counts such as ``1e6``, ``1_000_000`` or ``1M`` (read by
:func:`agents.config_text.parse_count`, as ``--set`` reads them), and run lists such as ``1,2,5-8``."""

from __future__ import annotations

import re

import typer


def count(text: str) -> int:
    """:func:`agents.config_text.parse_count` for a command-line option (typer's ``parser``): a bad value is a
    usage error. Only the commands that queue training take counts, and they load :mod:`agents` anyway."""
    from agents.config_text import parse_count  # here, not above: the CLI starts without torch

    try:
        return parse_count(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


RunRef = int | tuple[int, int] | str
"""One run token: an id, an id range ``(low, high)`` or a name."""

_ID = re.compile(r"[0-9]+")
_RANGE = re.compile(r"([0-9]+)-([0-9]+)")


def run_refs(tokens: list[str]) -> list[RunRef]:
    """``["1,2", "5-7", "exp"]`` → ``[1, 2, (5, 7), "exp"]``: ids and ranges (ASCII digits only), names as they are.

    Ranges stay ranges: the store checks them against the ids it holds, so ``1-10000000000`` costs no memory.
    ValueError for a range that runs backwards, or a token that names nothing (``","``, ``""``)."""
    refs: list[RunRef] = []
    for token in tokens:
        parts = [p for p in token.split(",") if p]
        if not parts:
            raise ValueError(f"{token!r} names no run: give ids (3, 1-5, 2,4) or names")
        for part in parts:
            if _ID.fullmatch(part):
                refs.append(int(part))
            elif (match := _RANGE.fullmatch(part)) is not None:
                low, high = int(match[1]), int(match[2])
                if low > high:
                    raise ValueError(f"run range {part!r} runs backwards: write {high}-{low}")
                refs.append((low, high))
            else:
                refs.append(part)
    return refs


def reads_as_ids(name: str) -> bool:
    """Whether a run name would be read as ids on a command line (``3``, ``1-3``, ``1,2``): names cannot be."""
    return "," in name or bool(_ID.fullmatch(name) or _RANGE.fullmatch(name))
