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


def expand_runs(tokens: list[str]) -> list[str]:
    """``["1,2", "5-7", "exp"]`` → ``["1", "2", "5", "6", "7", "exp"]``: ids by commas and ranges, names as they are."""
    expanded: list[str] = []
    for token in tokens:
        for part in (p for p in token.split(",") if p):
            low, dash, high = part.partition("-")
            if dash and low.isdigit() and high.isdigit() and int(low) <= int(high):
                expanded.extend(str(i) for i in range(int(low), int(high) + 1))
            else:
                expanded.append(part)
    return expanded
