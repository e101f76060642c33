"""Command-line values people type: counts such as ``1e6``, ``1_000_000`` or ``1M``, and run lists such as
``1,2,5-8``."""

from __future__ import annotations

import re

import typer

_SUFFIX = {"k": 1_000, "m": 1_000_000}
_COUNT = re.compile(r"^\s*([+-]?[0-9_]*\.?[0-9_]+(?:e[+-]?\d+)?)\s*([km]?)\s*$", re.IGNORECASE)


def parse_count(text: str) -> int:
    """A whole number written as ``1000000``, ``1_000_000``, ``1e6``, ``1M`` or ``250k``; ValueError otherwise."""
    match = _COUNT.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a whole number (1000000, 1_000_000, 1e6 and 1M are)")
    number, suffix = match.group(1).replace("_", ""), match.group(2).lower()
    value = float(number) * _SUFFIX.get(suffix, 1)
    if not value.is_integer() or abs(value) >= 2**63:
        raise ValueError(f"{text!r} is not a whole number within range")
    return int(value)


def count(text: str) -> int:
    """:func:`parse_count` for a command-line option (typer's ``parser``): a bad value is a usage error."""
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
