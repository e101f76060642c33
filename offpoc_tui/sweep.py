"""``offpoc sweep FILE``: a study as a TOML file, expanded into validated run specs.

    name = "quick"
    algos = ["td3", "sac"]
    envs = ["Hopper-v4"]
    seeds = "0-1"                  # ranges and lists, as --seeds; or a TOML list of integers
    steps = 20000
    [[methods]]
    correction = "none"
    [[methods]]
    correction = "acoffpoc"
    divergence = ["jsd", "kl"]     # a list expands: one method per value (several lists: every combination)
    [set]                          # any config field, every run (a plug-in's option: the runs that take it)
    start_steps = 1000
    [[override]]                   # optional: runs matching every key get these settings last
    match = { envs = ["Humanoid-v4"] }   # algos, envs, corrections
    set = { checkpoint_buffer = false }
    [[override]]
    match = { algos = ["sac"] }
    seeds = "0"                    # and/or their own seeds instead of the file's (the last match's)

Every cell (algorithm × environment × method) is validated as ``offpoc run`` validates its flags
before anything is written; the runs, named after the sweep, come seed-major (every cell's seed 0,
then seed 1, ...). A run already in the store under the sweep's name with the same resolved config
is not added again, so submitting a file twice, or again after adding seeds, adds only what is missing.
"""

from __future__ import annotations

import itertools
import json
import math
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils

from agents.config import TrainConfig, applies, field_names, owner_text, unknown_field
from agents.plugins import get, group_of
from offpoc_tui.specs import (
    MAX_SEEDS,
    RunRequest,
    UsageError,
    assign_lanes,
    build_specs,
    check_name,
    parse_seeds,
    record_plugins,
)
from store import RunSpec
from store.db import write
from store.runs import insert_runs

MAX_SWEEP_RUNS = 100_000
"""Runs one sweep may queue at most (algorithms × environments × methods × seeds)."""
MAX_SWEEP_BYTES = 1_000_000
"""A sweep file's size at most (the paper's whole study is a page)."""
TOP_KEYS = {"name", "algos", "envs", "seeds", "steps", "methods", "set", "override", "tags"}
MATCH_KEYS = {"algos": "algo", "envs": "env", "corrections": "correction"}


@dataclass(frozen=True)
class Cell:
    """One algorithm × environment × method of a sweep: its runs, one per seed."""

    algo: str
    env: str
    method: str
    """The method as the file gives it: ``acoffpoc``, ``acoffpoc/kl``, ``none, batch_size=64``."""
    specs: list[RunSpec]


@dataclass(frozen=True)
class Sweep:
    name: str
    specs: list[RunSpec]
    """Every run of the grid, seed-major."""
    cells: list[Cell]

    @property
    def seeds(self) -> list[int]:
        """Every seed some cell runs, in order (an [[override]] may give its cells their own)."""
        return sorted({spec.seed for cell in self.cells for spec in cell.specs})

    def tasks(self) -> dict[tuple[str, str], dict[str, RunSpec]]:
        """(algorithm, environment) → its methods, each as its first seed's run: ``sweep --decide``'s studies."""
        found: dict[tuple[str, str], dict[str, RunSpec]] = {}
        for cell in self.cells:
            found.setdefault((cell.algo, cell.env), {})[cell.method] = cell.specs[0]
        return found


def _text(value: Any) -> str:
    """A TOML value as ``--set`` text (the config parses it by the field's type)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _strings(sweep: dict[str, Any], key: str) -> list[str]:
    values = sweep.get(key)
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
        raise UsageError(f"{key} must be a non-empty list of names, got {values!r}")
    return values


def _tags(value: Any, given: tuple[str, ...]) -> tuple[str, ...]:
    """The file's ``tags`` and those given with ``--tag``, each once; :class:`UsageError` for a bad one."""
    from store.tags import TagError, check_tag

    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise UsageError(f"tags must be a list of text, got {_clipped(value)}")
    try:
        return tuple(dict.fromkeys(check_tag(tag) for tag in (*value, *given)))
    except TagError as error:
        raise UsageError(str(error)) from None


def _seeds(value: Any) -> list[int]:
    if isinstance(value, str):
        try:
            return parse_seeds(value)
        except UsageError as error:  # said of --seeds; here it is the file's seeds
            raise UsageError(str(error).replace("--seeds", "seeds", 1)) from None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if min(value) < 0 or max(value) >= 2**63:
            raise UsageError(f"seeds must be from 0 to 2^63 - 1, got {_clipped(value)}")
        if len(set(value)) > MAX_SEEDS:  # the cap "0-999999" meets as text
            raise UsageError(f"seeds lists {len(set(value)):,} seeds, more than {MAX_SEEDS}")
        return sorted(set(value))
    raise UsageError(f'seeds takes ranges and lists such as "0-4" or [1, 3, 7], got {_clipped(value)}')


def _clipped(value: Any) -> str:
    """``value``'s repr, at most 60 characters (a million-seed list is not echoed whole)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _methods(entries: Any) -> list[dict[str, Any]]:
    """Each ``[[methods]]`` table, its list values expanded into one method per combination."""
    if not isinstance(entries, list) or not entries or not all(isinstance(m, dict) for m in entries):
        raise UsageError("a sweep needs at least one [[methods]] table")
    methods: list[dict[str, Any]] = []
    for entry in entries:
        correction = entry.get("correction")
        named = isinstance(correction, str) or (
            isinstance(correction, list) and all(isinstance(c, str) for c in correction)
        )
        if not named:
            raise UsageError(f"every [[methods]] table names its correction (or a list of them), got {entry!r}")
        keys = sorted(entry)
        choices = [entry[k] if isinstance(entry[k], list) else [entry[k]] for k in keys]
        if any(not c for c in choices):
            raise UsageError(f"an empty list in [[methods]] {entry!r}")
        combinations = math.prod(len(c) for c in choices)
        if len(methods) + combinations > MAX_SWEEP_RUNS:  # checked before anything is expanded
            raise UsageError(f"[[methods]] lists expand to more than {MAX_SWEEP_RUNS:,} methods")
        methods += [dict(zip(keys, combination, strict=True)) for combination in itertools.product(*choices)]
    return methods


@dataclass(frozen=True)
class Override:
    """An ``[[override]]`` table: the cells it matches get its settings last and, if it has them, its seeds."""

    match: dict[str, list[str]]
    settings: dict[str, Any]
    seeds: list[int] | None

    def matches(self, algo: str, env: str, correction: str) -> bool:
        cell = {"algo": algo, "env": env, "correction": correction}
        return all(cell[MATCH_KEYS[k]] in values for k, values in self.match.items())


def _overrides(entries: Any) -> list[Override]:
    if entries is None:
        return []
    if not isinstance(entries, list) or not all(isinstance(o, dict) for o in entries):
        raise UsageError("[[override]] tables need a match and a set or seeds")
    found = []
    for entry in entries:
        match, settings = entry.get("match"), entry.get("set", {})
        shape = isinstance(match, dict) and isinstance(settings, dict) and not set(entry) - {"match", "set", "seeds"}
        if not shape or not {"set", "seeds"} & set(entry):
            raise UsageError(f"an [[override]] takes match = {{...}} and set = {{...}} or seeds, got {_clipped(entry)}")
        unknown = set(match) - set(MATCH_KEYS)
        if unknown:
            raise UsageError(f"an [[override]] matches on {', '.join(MATCH_KEYS)}, not {', '.join(sorted(unknown))}")
        seeds = _seeds(entry["seeds"]) if "seeds" in entry else None
        found.append(Override({k: _strings(match, k) for k in match}, settings, seeds))
    return found


def load_sweep(path: Path, tags: tuple[str, ...] = ()) -> Sweep:
    """Read, expand and validate a sweep file, its runs to carry ``tags``; :class:`UsageError` names the first
    problem (and its cell)."""
    if path.exists() and not path.is_file():  # reading a FIFO would wait forever
        raise UsageError(f"{path} is not a regular file (a sweep is a TOML file)")
    try:
        if path.stat().st_size > MAX_SWEEP_BYTES:
            raise UsageError(f"{path} is {path.stat().st_size:,} bytes: a sweep file is at most {MAX_SWEEP_BYTES:,}")
        sweep = tomllib.loads(path.read_text())
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise UsageError(f"{path} is not valid TOML: {error}") from None
    except RecursionError:
        raise UsageError(f"{path} nests its tables or lists too deeply to read") from None
    unknown = set(sweep) - TOP_KEYS
    if unknown:
        raise UsageError(f"{path}: unknown key {sorted(unknown)[0]!r} (a sweep has {', '.join(sorted(TOP_KEYS))})")
    name = sweep.get("name")
    if not isinstance(name, str):
        raise UsageError(f"{path}: name must be text, got {name!r}")
    check_name(name, f"{path}: name")
    tags = _tags(sweep.get("tags", []), tags)
    algos, envs = [a.lower() for a in _strings(sweep, "algos")], _strings(sweep, "envs")
    seeds = _seeds(sweep.get("seeds", [0]))
    steps = sweep.get("steps")
    if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool)):
        raise UsageError(f"steps must be an integer, got {steps!r}")
    common = sweep.get("set", {})
    if not isinstance(common, dict):
        raise UsageError("[set] must be a table of config fields")
    overrides = _overrides(sweep.get("override"))
    shared = [*common, *(k for o in overrides for k in o.settings)]
    misspelt = [k for k in shared if k not in field_names()]
    if misspelt:
        raise UsageError(f"sweep {name}: {unknown_field(misspelt[0])}")
    methods = _methods(sweep.get("methods"))
    most = max([len(seeds), *(len(o.seeds) for o in overrides if o.seeds is not None)])
    runs = len(algos) * len(envs) * len(methods) * most
    if runs > MAX_SWEEP_RUNS:
        raise UsageError(f"sweep {name}: {runs:,} runs, more than {MAX_SWEEP_RUNS:,} (the paper's study is 1,440)")
    used: set[str] = set()
    cells: list[Cell] = []
    keys: set[tuple[str, str, str]] = set()
    configs: dict[tuple[str, str, str], Cell] = {}  # a cell's first config (as JSON) → the cell
    for algo, env, method in itertools.product(algos, envs, methods):
        correction = method["correction"].lower()
        plugin = get("correction", correction)
        key_option = plugin.method_option if plugin is not None else None  # AC-Off-POC's divergence
        own = {k: v for k, v in method.items() if k != "correction"}
        shared_settings, cell_seeds = dict(common), seeds
        for override in overrides:
            if override.matches(algo, env, correction):
                shared_settings.update(override.settings)
                cell_seeds = override.seeds if override.seeds is not None else cell_seeds
        # [set] and [[override]] reach the runs whose correction and sampler take them; a method's own keys
        # are its own, checked as given.
        sampler = str(own.get("sampler", shared_settings.get("sampler", "uniform")))
        kept = {k: v for k, v in shared_settings.items() if applies(k, algo, correction, sampler)}
        used |= set(kept)
        settings = {**kept, **own}
        label = f"{algo} × {env} × {correction}" + "".join(f", {k}={v}" for k, v in sorted(method.items())[1:])
        key = correction + (f"/{method[key_option]}" if key_option in method else "")
        key += "".join(f", {k}={_text(v)}" for k, v in sorted(own.items()) if k != key_option)
        if (algo, env, key) in keys:
            raise UsageError(f"sweep {name}: the method {key} is listed twice in [[methods]]")
        keys.add((algo, env, key))
        request = RunRequest(
            algo=algo,
            env=env,
            correction=correction,
            seeds=cell_seeds,
            flags={"total_steps": steps},
            sets={k: _text(v) for k, v in settings.items()},
            compare=False,
            name=name,
            tags=tags,
        )
        try:
            built = build_specs(request)
        except UsageError as error:
            raise UsageError(f"sweep {name}, cell {label}: {error}") from None
        same = (algo, env, json.dumps(built[0].config, sort_keys=True))
        twin = configs.get(same)
        if twin is not None:
            raise UsageError(f"sweep {name}: the methods {twin.method} and {key} are the same runs (listed twice)")
        cells.append(Cell(algo, env, key, built))
        configs[same] = cells[-1]
    unused = [k for k in shared if k not in used]
    if unused and cells:
        group = group_of(unused[0])
        owner = owner_text(group) if group is not None else "is a plug-in's option"
        raise UsageError(f"sweep {name}: {unused[0]} {owner}, and no run of the sweep uses it")
    longest = max((len(cell.specs) for cell in cells), default=0)
    ordered = [cell.specs[i] for i in range(longest) for cell in cells if i < len(cell.specs)]  # seed-major
    return Sweep(name, ordered, cells)


def missing(existing: Iterable[dict[str, Any]], specs: list[RunSpec]) -> list[RunSpec]:
    """The specs whose resolved config no existing run of the sweep (its ``existing`` configs) has.

    A stored config is read as :meth:`TrainConfig.from_dict` reads it: one stored before a field existed
    has the value it ran with, so a run of a form since replaced (a new default) counts as missing.
    """
    present = {json.dumps(TrainConfig.from_dict(config).to_dict(), sort_keys=True) for config in existing}
    return [s for s in specs if json.dumps(s.config, sort_keys=True) not in present]


UNMEASURED_SPS = 220.0
"""Env steps per second of one worker on Hopper-v4 for an algorithm that declares none (TD3's, measured)."""


def declared_sps(algo: str) -> float | None:
    """What the algorithm declares of its speed (:attr:`~agents.algorithms.base.ActorCritic.steps_per_second`)."""
    from agents.plugins import algorithm

    entry = algorithm(algo)
    return entry.steps_per_second if entry is not None else None


def cpu_hours(db: Any, specs: list[RunSpec]) -> tuple[float, str]:
    """CPU-hours for ``specs`` at the SPS the store's runs measured (the median of the same algo, env and
    correction, else the same algo and correction, else what the algorithm declares, else
    :data:`UNMEASURED_SPS`), and what it went by."""
    measured: dict[tuple[str, ...], list[float]] = {}
    if db is not None:
        for algo, env, correction, sps in db.execute(
            "SELECT algo, env, correction, sps FROM runs WHERE sps > 0 AND origin IS NULL"
        ):
            measured.setdefault((algo, env, correction), []).append(sps)
            measured.setdefault((algo, correction), []).append(sps)
    seconds, from_store = 0.0, 0
    for spec in specs:
        found = measured.get((spec.algo, spec.env, spec.correction)) or measured.get((spec.algo, spec.correction))
        sps = float(np.median(found)) if found else declared_sps(spec.algo) or UNMEASURED_SPS
        from_store += bool(found)
        seconds += spec.total_steps / sps
    basis = f"SPS measured in the store for {from_store} of {len(specs)} runs, the rest at Hopper-v4's"
    return seconds / 3600, basis if specs else "nothing to run"


def queue_missing(store: sqlite_utils.Database, grid: Sweep, backend: str | None, lanes: int = 1) -> list[int]:
    """Queue the grid's runs the store lacks; the new ids. What is missing and its insert are one write
    transaction, so two sweeps of one file at once queue the grid once. With ``lanes`` > 1, compatible runs
    train in lane groups of up to ``lanes`` (:func:`~offpoc_tui.specs.assign_lanes`); the others alone."""
    from store.reader import configs

    with write(store):
        named = [row[0] for row in store.execute("SELECT id FROM runs WHERE name = ?", [grid.name])]
        record_plugins(store)
        new = assign_lanes(missing(configs(store, named).values(), grid.specs), lanes, strict=False)
        return insert_runs(store, new, backend)
