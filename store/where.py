"""Which runs to show: one filter grammar for the dashboard's ``/``, ``ps``, ``export`` and ``plot`` (``--where``).

A filter is terms separated by spaces; a run must meet every one::

    hopper                      a bare word: in the run's name, algo, env or correction
    correction=acoffpoc,ace     a run column: contains the value (either value; case-insensitive)
    seed=0,1  id=4  tag=ablation  source=published      these match exactly
    batch_size>=128  start_steps=500  layer_norm=true   a setting of the run's config
    return>1000  steps<1e5  lambda<=0.5                 a result so far
    algo!=ddpg                  != is the negation of =

``=`` and ``!=`` compare numbers as numbers (``lr=3e-4`` matches 0.0003), other values as text, a list whole
(``hidden=256,256``); ``!=`` keeps the runs ``=`` leaves out, those without the value too; ``<``, ``<=``,
``>`` and ``>=`` need a number (``100k`` and ``1M`` read as 100,000 and 1,000,000), and a run without the value
(no evaluation yet, a setting its config lacks) meets none of them. The results are the run's latest
evaluation's mean return (``return``), its best (``best``), the steps trained (``steps``), the step budget
(``budget``), the updates done (``updates``), the mean similarity weight λ (``lambda``) and the training speed
in steps per second (``sps``).
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from store.reader import configs, list_runs
from store.runs import RunRow
from store.tasks import SOURCES, source_of

COLUMNS = {
    "id": "id", "name": "name", "algo": "algo", "env": "env", "correction": "correction", "corr": "correction",
    "divergence": "divergence", "div": "divergence", "seed": "seed", "status": "status", "source": "source",
    "sampler": "sampler", "tag": "tags", "tags": "tags", "note": "note",
}  # fmt: skip
"""Filter keys of the run's own columns (and their short forms)."""
EXACT = {"id", "seed", "source", "tags", "sampler"}
"""Columns matched whole; the others match where they contain the value."""
RESULTS = {
    "return": "last_return", "best": "best_return", "steps": "steps", "budget": "total_steps",
    "updates": "updates", "lambda": "mean_lambda", "sps": "sps",
}  # fmt: skip
"""Filter keys of what a run has done so far, and the columns holding them."""
BARE = ("name", "algo", "env", "correction")
"""The columns a bare word is looked for in."""

_TERM = re.compile(r"^([A-Za-z_][\w.-]*)(!=|>=|<=|=|>|<)(.*)$")
_SUFFIX = {"k": 1e3, "m": 1e6}

Predicate = Callable[[Mapping[str, Any]], bool]


class FilterError(ValueError):
    """A term the filter does not understand; the message is one line."""


def number(text: str) -> float | None:
    """``text`` as a number (``1e5``, ``100k``, ``1.5M``); None where it is not one."""
    text = text.strip().lower().replace("_", "")
    scale = _SUFFIX.get(text[-1:], 1.0)
    try:
        value = float(text[:-1] if scale != 1.0 else text) * scale
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    return number(str(value)) if isinstance(value, str) else None


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_text(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return "none" if value is None else str(value).lower()


def _equal(value: Any, option: str) -> bool:
    """Whether a setting or result equals what the user typed: as numbers where both are, else as text."""
    left, right = _as_number(value), number(option)
    if left is not None and right is not None:
        return math.isclose(left, right, rel_tol=1e-9, abs_tol=0.0)
    return _text(value) == option


_ORDER: dict[str, Callable[[float, float], bool]] = {
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
}  # fmt: skip


@dataclass(frozen=True)
class Filter:
    """A parsed filter: call it on a run row (with ``config`` parsed where it names a setting)."""

    text: str
    terms: tuple[Predicate, ...]
    settings: frozenset[str]
    """The settings it names: a reader gives each run its config when this is not empty."""

    def __call__(self, run: Mapping[str, Any]) -> bool:
        return all(term(run) for term in self.terms)


def parse(text: str, setting_keys: Collection[str] = (), lenient: bool = False) -> Filter:
    """``text`` as a :class:`Filter`; :class:`FilterError` (one line) for a term it cannot read, an unknown key
    among them, with the keys there are (``setting_keys``: the settings the runs' configs have). ``lenient``:
    an unknown key is a setting no run has (a filter checked once, read again over runs that changed since)."""
    terms, settings = [], set()
    for token in text.split():
        term, setting = _term(token, setting_keys, lenient)
        terms.append(term)
        if setting:
            settings.add(setting)
    return Filter(text.strip(), tuple(terms), frozenset(settings))


def _unknown(key: str, setting_keys: Collection[str]) -> FilterError:
    settings = sorted(set(setting_keys) - set(COLUMNS) - set(RESULTS))
    close = difflib.get_close_matches(key.lower(), [*COLUMNS, *RESULTS, *settings], n=1)
    known = f"a run's {', '.join(sorted(set(COLUMNS) - {'corr', 'div', 'tags'}))}; a result: {', '.join(RESULTS)}"
    known += f"; a setting: {', '.join(settings)}" if settings else ""
    return FilterError(f"unknown filter key {key!r}{f' (did you mean {close[0]}?)' if close else ''}: use {known}")


def _term(token: str, setting_keys: Collection[str], lenient: bool = False) -> tuple[Predicate, str | None]:
    match = _TERM.match(token)
    if match is None:
        if any(op in token for op in "=<>"):
            raise FilterError(f"cannot read {token!r}: write key=value, key>number or a bare word")
        word = token.lower()
        return (lambda run: any(word in str(run.get(c) or "").lower() for c in BARE)), None
    key, op, value = match[1].lower(), match[2], match[3]
    options = [v.strip().lower() for v in value.split(",") if v.strip()]
    whole = value.strip().strip("[]()").replace(" ", "").lower()  # a list setting (hidden=256,256), a text with commas
    if not options:
        raise FilterError(f"{key}{op} needs a value")
    if op in _ORDER:
        if len(options) > 1:
            raise FilterError(f"{key}{op} takes one number, not a list")
        bound = number(options[0])
        if bound is None:
            raise FilterError(f"{key}{op} needs a number, not {options[0]!r}")
    negate = op == "!="
    if key in COLUMNS:
        column = COLUMNS[key]
        if op in _ORDER:
            if column not in ("id", "seed"):
                raise FilterError(f"{key} is text: compare it with = or !=")
            return _ordered(lambda run: run.get(column), op, options[0]), None
        if column in ("id", "seed"):  # numbers as numbers: seed=0.0 is seed 0
            return _negated(lambda run: any(_equal(run.get(column), o) for o in options), negate), None
        return _negated(_column_term(key, column, options), negate), None
    if key in RESULTS:
        column = RESULTS[key]
        if op in _ORDER:
            return _ordered(lambda run: run.get(column), op, options[0]), None
        return _negated(lambda run: any(_equal(run.get(column), o) for o in options), negate), None
    if key not in setting_keys and not lenient:
        raise _unknown(match[1], setting_keys)

    def setting(run: Mapping[str, Any]) -> Any:
        return (run.get("config") or {}).get(key)

    if op in _ORDER:
        return _ordered(setting, op, options[0]), key

    def equal(run: Mapping[str, Any]) -> bool:
        value = setting(run)
        return any(_equal(value, o) for o in options) or _text(value).replace(" ", "") == whole

    return _negated(equal, negate), key


def _negated(term: Predicate, negate: bool) -> Predicate:
    return (lambda run: not term(run)) if negate else term


def _ordered(value_of: Callable[[Mapping[str, Any]], Any], op: str, text: str) -> Predicate:
    bound, compare = number(text), _ORDER[op]
    assert bound is not None  # checked by the caller

    def term(run: Mapping[str, Any]) -> bool:
        value = _as_number(value_of(run))
        return value is not None and compare(value, bound)

    return term


def _column_term(key: str, column: str, options: list[str]) -> Predicate:
    if column == "source":
        unknown = sorted(set(options) - set(SOURCES))
        if unknown:
            raise FilterError(f"unknown source {unknown[0]!r}; use one of {', '.join(SOURCES)}")
        return lambda run: source_of(run) in options
    if column == "tags":  # tag=a,b: runs carrying a or b (exactly); tag=a tag=b: both
        return lambda run: any(tag.lower() in options for tag in run.get("tags") or ())
    if column in EXACT:
        return lambda run: _text(run.get(column)) in options
    return lambda run: any(o in _text(run.get(column)) for o in options)


def setting_keys(runs: list[RunRow]) -> set[str]:
    """The settings the runs' parsed configs have."""
    return {key for run in runs for key in (run.get("config") or {})}


def with_configs(db: sqlite_utils.Database, runs: list[RunRow]) -> list[RunRow]:
    """``runs`` with each one's resolved config parsed into ``config`` (in place)."""
    found = configs(db, [r["id"] for r in runs])
    for run in runs:
        run["config"] = found.get(run["id"], {})
    return runs


class Configs:
    """:func:`with_configs` for a poller reading the same runs again and again: a run's config never changes,
    so only the configs of runs not seen before are read."""

    def __init__(self) -> None:
        self._found: dict[int, dict[str, Any]] = {}

    def attach(self, db: sqlite_utils.Database, runs: list[RunRow]) -> list[RunRow]:
        ids = {r["id"] for r in runs}
        new = sorted(ids - self._found.keys())
        if new:
            self._found.update(configs(db, new))
        if len(self._found) > len(ids):  # a run was deleted, and its id may come back
            self._found = {i: c for i, c in self._found.items() if i in ids}
        for run in runs:
            run["config"] = self._found.get(run["id"], {})
        return runs


def matching_ids(db: sqlite_utils.Database, text: str, run_ids: list[int] | None = None) -> list[int]:
    """The ids of the runs (of ``run_ids``, or all) that ``text`` keeps; :class:`FilterError` where it cannot be
    read. Setting keys are checked against the settings the store's runs have."""
    keys = {key for (key,) in db.execute("SELECT DISTINCT key FROM runs, json_each(runs.config)")}
    keep = parse(text, keys)
    runs = with_configs(db, list_runs(db, run_ids=run_ids))
    return [run["id"] for run in runs if keep(run)]
