"""The runs table's filter: ``env=Hopper correction=acoffpoc``, or bare words.

``key=value`` keeps runs whose column contains the value (case-insensitive; ``id``,
``seed``, ``source`` and ``tag`` match exactly, ``seed=0,1`` either); ``source`` is where a run's
evaluations come from: ``offpoc`` (trained here), ``published`` (the paper's curves) or ``zoo``;
``tag=ablation`` keeps the runs carrying that tag (``offpoc tag``).
A bare word must appear in the name, algo, env or correction. Terms combine with AND.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from store.tasks import SOURCES, source_of

KEYS = {
    "id": "id", "name": "name", "algo": "algo", "env": "env", "correction": "correction", "corr": "correction",
    "divergence": "divergence", "div": "divergence", "seed": "seed", "status": "status", "source": "source",
    "tag": "tags", "tags": "tags",
}  # fmt: skip
EXACT = {"id", "seed", "source"}
BARE = ("name", "algo", "env", "correction")

Predicate = Callable[[Mapping[str, Any]], bool]


class FilterError(ValueError):
    """A term the filter does not understand; the message is one line."""


def _term(token: str) -> Predicate:
    if "=" not in token:
        word = token.lower()
        return lambda run: any(word in str(run[c] or "").lower() for c in BARE)
    key, _, value = token.partition("=")
    column = KEYS.get(key.lower())
    if column is None:
        raise FilterError(f"unknown filter key {key!r}; use one of {', '.join(sorted(set(KEYS.values())))}")
    options = [v.lower() for v in value.split(",") if v]
    if not options:
        raise FilterError(f"{key}= needs a value")
    if column == "source":
        unknown = sorted(set(options) - set(SOURCES))
        if unknown:
            raise FilterError(f"unknown source {unknown[0]!r}; use one of {', '.join(SOURCES)}")
        return lambda run: source_of(run) in options
    if column == "tags":  # tag=a,b: runs carrying a or b (exactly); tag=a tag=b: both
        return lambda run: any(tag.lower() in options for tag in run.get("tags") or ())
    if column in EXACT:
        return lambda run: str(run[column]) in options
    return lambda run: any(o in str(run[column] or "none").lower() for o in options)


def parse(text: str) -> Predicate:
    """A predicate over run rows; raises :class:`FilterError` for an unknown key."""
    terms = [_term(token) for token in text.split()]
    return lambda run: all(term(run) for term in terms)
