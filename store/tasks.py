"""What names a task and where a run comes from: environment families and versions, sources.

A task is an algorithm on an environment family: ``Hopper-v2``, ``Hopper-v4`` and ``Hopper-v5`` are one
family, so a user's Hopper-v4 runs meet the paper's published Hopper-v2 curves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

SOURCES = ("offpoc", "published", "zoo")
"""Where a run's evaluations come from: trained by offpoc, the paper's curves, an SB3 evaluations.npz."""
_VERSION = re.compile(r"-v\d+$")


def env_family(env: str) -> str:
    """The task without its version: ``Hopper-v2``, ``Hopper-v4`` and ``Hopper-v5`` are all ``Hopper``."""
    return _VERSION.sub("", env)


def env_version(env: str) -> str:
    """``v4`` for ``Hopper-v4``; the whole id when it has no version."""
    return env[len(env_family(env)) + 1 :] or env


def env_matches(env: str, wanted: Iterable[str]) -> bool:
    """Whether ``env`` is one of ``wanted``, given as exact ids or as families (``Hopper``)."""
    return any(w == env or w == env_family(env) for w in wanted)


def source_of(run: Mapping[str, Any]) -> str:
    origin = run.get("origin") or ""
    return "published" if origin.startswith("reference:") else "zoo" if origin.startswith("zoo:") else "offpoc"


Task = tuple[str, str]
"""(algo, environment family): what a comparison compares methods on."""


def task_of(run: Mapping[str, Any]) -> Task:
    return run["algo"], env_family(run["env"])
