"""What each correction is called, and in which order tables list them, as the store records it.

The store imports no plug-in, so it cannot ask the catalogue: each submission records the corrections its
offpoc knew (:func:`record_methods`, in ``meta``), and opening a store teaches this process what the store
recorded (:func:`learn`). A correction's record holds its paper name (``AC-Off-POC``) and the option whose
values are different methods (``divergence``, kept in the runs table's ``divergence`` column). Tables and
figures list corrections in registration order (the built-in ones: the paper's), the baseline first.

A store from before schema 12 gets the built-in corrections' record by its migration; a correction no
store opened here recorded is shown by its registered name, after the recorded ones.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import sqlite_utils

__all__ = ["ALGORITHMS", "METHODS", "algorithm_title", "is_default", "learn", "method_option", "method_options"]
__all__ += ["rank", "read_methods", "record_algorithms", "record_methods", "title"]

METHODS = "methods"
"""``meta`` key: a JSON list of ``{"correction", "paper_name", "method_option", "method_default"}``, in
registration order."""

ALGORITHMS = "algorithms"
"""``meta`` key: a JSON object of each algorithm's registered name → the name tables give it (``TD3``)."""

_ALGORITHM_TITLES: dict[str, str] = {}
_TITLES: dict[str, str] = {}
_OPTIONS: dict[str, str | None] = {}
_DEFAULTS: dict[str, Any] = {}
_ORDER: tuple[str, ...] = ()
_LOCK = threading.Lock()
"""Stores are opened from several threads (the dashboard's poller and its stop/resume worker): what is learnt
is built apart and swapped in, so a reader never sees a table change under it."""


def read_methods(db: sqlite_utils.Database | Any) -> list[dict[str, Any]]:
    """The store's record (``db``: a store or an sqlite3 connection to one); empty where it has none."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", [METHODS]).fetchone()
    try:
        entries = json.loads(row[0]) if row else []
    except (TypeError, ValueError):
        return []  # a damaged record names nothing; the corrections show by their registered names
    return (
        [e for e in entries if isinstance(e, dict) and isinstance(e.get("correction"), str)]
        if isinstance(entries, list)
        else []
    )


def _merge(entries: Iterable[Mapping[str, Any]]) -> None:
    global _TITLES, _OPTIONS, _DEFAULTS, _ORDER
    with _LOCK:
        titles, options, defaults, order = dict(_TITLES), dict(_OPTIONS), dict(_DEFAULTS), list(_ORDER)
        for entry in entries:
            name = entry["correction"]
            if name not in titles:
                order.append(name)
            titles[name] = str(entry.get("paper_name") or name)
            option = entry.get("method_option")
            options[name] = option if isinstance(option, str) else None
            defaults[name] = entry.get("method_default")
        _TITLES, _OPTIONS, _DEFAULTS, _ORDER = titles, options, defaults, tuple(order)


def learn(db: sqlite_utils.Database) -> None:
    """Take in what the store at ``db`` records (called when a store is opened)."""
    _merge(read_methods(db))
    _merge_algorithms(read_algorithms(db))


def read_algorithms(db: sqlite_utils.Database | Any) -> dict[str, str]:
    """The store's algorithm names → titles; empty where it has none (a store from before they were kept)."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", [ALGORITHMS]).fetchone()
    try:
        found = json.loads(row[0]) if row else {}
    except (TypeError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str) and v}


def _merge_algorithms(titles: Mapping[str, str]) -> None:
    global _ALGORITHM_TITLES
    with _LOCK:
        _ALGORITHM_TITLES = {**_ALGORITHM_TITLES, **titles}


def record_algorithms(db: sqlite_utils.Database, titles: Mapping[str, str]) -> None:
    """Record each algorithm's title (:func:`agents.plugins.algorithm_titles`) inside the caller's write
    transaction, keeping those of algorithms this offpoc lacks (registered by another script)."""
    kept = {**read_algorithms(db), **titles}
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [ALGORITHMS, json.dumps(kept)])
    _merge_algorithms(titles)


def algorithm_title(algo: str) -> str:
    """``TD3``: the name tables and figures give an algorithm: its declared title, else its name in capitals."""
    return _ALGORITHM_TITLES.get(algo, algo.upper())


def record_methods(db: sqlite_utils.Database, entries: list[dict[str, Any]], replace: bool = True) -> None:
    """Record ``entries`` (:func:`agents.plugins.methods`) inside the caller's write transaction: each
    correction's record is replaced (with ``replace`` false, only added where missing: a merge), corrections
    the store knew and ``entries`` lack are kept (a plug-in registered by another script), new ones follow in
    their order."""
    kept = {e["correction"]: e for e in read_methods(db)}
    for entry in entries:
        if replace or entry["correction"] not in kept:
            kept[entry["correction"]] = entry
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [METHODS, json.dumps(list(kept.values()))])
    _merge(entries)


def title(correction: str) -> str:
    """``AC-Off-POC``: the correction's paper name, else its registered name."""
    return _TITLES.get(correction, correction)


def method_option(correction: str) -> str | None:
    """The option whose values are the correction's different methods (``divergence``), if it has one."""
    return _OPTIONS.get(correction)


def method_options() -> frozenset[str]:
    """Every recorded correction's method option: part of a method's name, never a setting of one."""
    return frozenset(o for o in _OPTIONS.values() if o is not None)


def is_default(correction: str, value: Any) -> bool:
    """Whether ``value`` of the correction's method option is its default (a method's name leaves it out:
    ``AC-Off-POC`` is the paper's, with the Jensen-Shannon divergence); true for no value."""
    return value is None or str(value) == str(_DEFAULTS.get(correction))  # the runs table keeps it as text


def rank(correction: str) -> tuple[int, str]:
    """Where tables list the correction (its first element also picks a method's colour): registration order,
    the baseline first, then the ones no store recorded by name."""
    order = _ORDER
    if correction in order:
        return order.index(correction), correction
    return (0 if correction == "none" else max(len(order), 1)), correction  # the baseline first, even unregistered
