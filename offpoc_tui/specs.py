"""From ``offpoc run``'s flags to validated run specs: every check before anything is written."""

from __future__ import annotations

import collections
import dataclasses
import functools
import importlib.util
import os
import re
import site
import sys
import sysconfig
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offpoc_tui.console import visible
from store import RunSpec

if TYPE_CHECKING:
    import sqlite_utils

MAX_SEEDS = 1000
MEMORY_SHARE = 0.8
"""The share of this machine's memory one run's networks, batch and replay buffer may need at most."""


class UsageError(ValueError):
    """Bad command-line input; the message is one line."""


def parse_seeds(text: str) -> list[int]:
    """``"0-4"``, ``"1,3,7"`` or a mix (``"0-2,10"``) → sorted distinct seeds."""
    seeds: set[int] = set()
    for part in text.replace(" ", "").split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise UsageError(f"--seeds takes ranges and lists such as 0-4 or 1,3,7, got {text!r}")
        low, high = int(match[1]), int(match[2] if match[2] is not None else match[1])
        if high < low:
            raise UsageError(f"--seeds range {part!r} runs backwards")
        if high - low + 1 + len(seeds) > MAX_SEEDS:
            raise UsageError(f"--seeds {text!r} asks for more than {MAX_SEEDS} seeds")
        seeds.update(range(low, high + 1))
    return sorted(seeds)


def parse_sets(items: list[str]) -> dict[str, str]:
    """``["key=value", ...]`` → dict; a malformed item or a repeated key is an error."""
    overrides: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--set takes KEY=VALUE, got {item!r}")
        if key in overrides and overrides[key] != value:
            raise UsageError(f"--set {key} given twice with different values")
        overrides[key] = value
    return overrides


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """What ``offpoc run`` was asked for, before validation."""

    algo: str
    env: str
    correction: str
    seeds: list[int]
    flags: dict[str, Any]
    """Config fields set by dedicated flags (--steps → total_steps, ...); None = not given."""
    sets: dict[str, str]
    compare: bool
    name: str | None
    local: bool = True
    """Trained on this machine (not on a Ray cluster): its device must exist here."""
    tags: tuple[str, ...] = ()


def build_specs(request: RunRequest) -> list[RunSpec]:
    """Validated specs, one per (correction, seed), seed by seed (with ``--compare``: seed 0's baseline,
    seed 0's correction, seed 1's baseline, ...), so a study's methods progress together; raises
    :class:`UsageError`.

    Checks the algorithm, correction, divergence, every number and ``--set`` key, that the
    correction would start within the run, and that the environment exists and has Box actions
    (it is built once).
    """
    from agents import gemm
    from agents.config import ConfigError, TrainConfig, applies, common_names, field_names
    from agents.config_text import with_overrides
    from agents.corrections import names as correction_names
    from agents.envs import EnvError
    from agents.plugins import algorithm_names, get

    try:
        gemm.check()
    except ConfigError as error:
        raise UsageError(str(error)) from None
    if request.algo not in algorithm_names():
        raise UsageError(f"unknown algorithm {request.algo!r}: choose one of {', '.join(algorithm_names())}")
    if request.correction not in correction_names():
        raise UsageError(f"unknown correction {request.correction!r}: choose one of {', '.join(correction_names())}")
    if request.compare and request.correction == "none":
        raise UsageError("--compare launches the baseline beside a correction: pass --correction acoffpoc")
    flags = {k: v for k, v in request.flags.items() if v is not None}
    env_path = locate_env_module(request.env)
    clash = sorted(set(flags) & set(request.sets))
    if clash:
        raise UsageError(f"{clash[0]} given both as a flag and with --set")
    # A flag for a plug-in's option (--divergence) is --set's spelling of it, checked as --set is: refused
    # where the run's correction does not take it.
    sets = {**request.sets, **{k: str(v) for k, v in flags.items() if k not in common_names()}}
    flags = {k: v for k, v in flags.items() if k in common_names()}
    if "seed" in request.sets:
        raise UsageError("use --seed or --seeds, not --set seed=...")
    for key in ("algo", "env_id", "correction"):
        if key in request.sets:
            raise UsageError(f"{key} is an argument of offpoc run, not a --set field")

    corrections = ["none", request.correction] if request.compare else [request.correction]
    specs = []
    try:
        for seed in request.seeds:
            for correction in corrections:
                base = TrainConfig(algo=request.algo, env_id=request.env, correction=correction, seed=seed, **flags)
                own = sets
                if correction != request.correction:  # --compare's baseline: the correction's options are not its
                    sampler = sets.get("sampler", flags.get("sampler", "uniform"))
                    takes = [request.algo, correction, sampler]
                    own = {k: v for k, v in sets.items() if k not in field_names() or applies(k, *takes)}
                config = with_overrides(base, own).resolved()
                check_correction_starts(config)
                if request.local:
                    check_device(config.device)
                    check_machine(config, check_env(request.env))
                plugin = get("correction", correction)
                option = plugin.method_option if plugin is not None else None  # AC-Off-POC's divergence
                divergence = str(config.to_dict()[option]) if option is not None else None
                label = f"{request.algo}-{request.env}-{correction}" + (f"-{divergence}" if divergence else "")
                label += f"-{config.sampler}" if config.sampler != "uniform" else ""
                specs.append(
                    RunSpec(
                        name=request.name or label,
                        algo=config.algo,
                        env=config.env_id,
                        correction=correction,
                        divergence=divergence,
                        seed=seed,
                        total_steps=config.total_steps,
                        config=config.to_dict(),
                        tags=request.tags,
                        env_path=env_path,
                    )
                )
        check_env(request.env)
    except (ConfigError, EnvError, TypeError) as error:
        raise UsageError(str(error)) from None
    return specs


def assign_lanes(specs: list[RunSpec], lanes: int, strict: bool = True) -> list[RunSpec]:
    """``specs`` with a lane group each, in order, up to ``lanes`` compatible runs a group (``--lanes K``; 1: alone).
    A run that cannot be a lane raises :class:`UsageError` naming why (``strict``), or stays alone."""
    if lanes <= 1:
        return specs
    from agents.config import TrainConfig
    from agents.lanes import lane_key, lane_refusal

    grouped: list[RunSpec] = []
    open_groups: list[tuple[dict[str, Any], int, int]] = []  # (key, group number, lanes in it)
    for spec in specs:
        config = TrainConfig.from_dict(spec.config)
        reason = lane_refusal(config)
        if reason is not None and strict:
            raise UsageError(f"--lanes: {reason}")
        if reason is not None:
            grouped.append(spec)
            continue
        key = lane_key(config)
        found = next((i for i, (k, _, n) in enumerate(open_groups) if k == key and n < lanes), None)
        if found is None:
            open_groups.append((key, len(open_groups), 0))
            found = len(open_groups) - 1
        key, number, count = open_groups[found]
        open_groups[found] = (key, number, count + 1)
        grouped.append(dataclasses.replace(spec, lane_group=number))
    sizes = collections.Counter(spec.lane_group for spec in grouped)
    return [dataclasses.replace(s, lane_group=None) if sizes[s.lane_group] == 1 else s for s in grouped]  # alone


def locate_env_module(env: str) -> str | None:
    """For ``module:Env-v0``, import the module as ``python -m`` would: from the current folder too. The folder
    the module comes from when it is not installed code (the current folder, a ``PYTHONPATH`` entry), made
    absolute, for the run's worker (which runs in the run's own folder) to import it from; None otherwise.
    A module that cannot be found is left to :func:`check_env` to say so."""
    module, colon, _ = env.rpartition(":")
    if not colon or not module:
        return None
    top = module.partition(".")[0]
    here = os.getcwd()
    try:
        if importlib.util.find_spec(top) is None and here not in sys.path:
            sys.path.insert(0, here)
            importlib.invalidate_caches()
        found = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if found is None or not found.origin or not found.has_location:
        return None
    origin = Path(found.origin).resolve()
    folder = origin.parent.parent if found.submodule_search_locations else origin.parent
    installed = {Path(p).resolve() for p in (*site.getsitepackages(), site.getusersitepackages())}
    installed |= {Path(sysconfig.get_paths()[key]).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    return None if folder in installed else str(folder)


MAX_NAME = 200
"""The longest run (or sweep) name, in characters."""


def check_name(name: str, what: str = "--name") -> None:
    """A run name is shown on terminals and files, and given back on command lines: printable text that cannot
    read as run ids (no number, no id range, no comma)."""
    if any("\udc80" <= char <= "\udcff" for char in name):
        raise UsageError(f"{what} is not valid UTF-8")
    from offpoc_tui.params import reads_as_ids

    if not name.strip():
        raise UsageError(f"{what} must be non-empty text")
    if len(name) > MAX_NAME:  # a name is a table's column and a command line's word: tags have 64, notes 10,000
        raise UsageError(f"{what} is {len(name):,} characters; at most {MAX_NAME}")
    if reads_as_ids(name):
        raise UsageError(
            f"{what} {name!r} would read as run ids: a name cannot be a number or a range (3, 1-3) or hold a comma"
        )
    if not name.isprintable():
        raise UsageError(f"{what} holds control characters: {visible(name)}")


def check_device(device: str) -> None:
    """A run on this machine needs its device here: a GPU that is not there fails now, not in the worker."""
    import torch

    kind = torch.device(device).type
    if kind == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"device {device!r}: no CUDA GPU on this machine (torch {torch.__version__})")
    if kind == "cuda" and (torch.device(device).index or 0) >= torch.cuda.device_count():
        raise UsageError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise UsageError(f"device {device!r}: MPS is not available on this machine")


def random_only(start_steps: int, total_steps: int) -> str | None:
    """What is odd about a run that never leaves its random phase (``start_steps`` ≥ its steps); None if it
    learns. ``run`` queues it with a note saying so: a short run of random play is a fair smoke test of a
    store, a scheduler or an environment, never a silent surprise."""
    if start_steps < total_steps:
        return None
    return (
        f"start_steps {start_steps:,} is not below the run's {total_steps:,} steps:"
        " it would only play randomly and never update its networks"
    )


def check_correction_starts(config: Any) -> None:
    """A run whose correction would first apply after its last step is refused: it would be its baseline
    under another name (SAC's AC-Off-POC starts at 5 × start_steps)."""
    if config.correction == "none":
        return
    first = max(config.correction_start, config.start_steps)
    if first >= config.total_steps:
        raise UsageError(
            f"{config.correction} would start at step {first:,}, after the run's last step ({config.total_steps:,}):"
            f" the run would be its baseline; lower correction_start or start_steps, or raise --steps"
        )


@functools.cache
def check_env(env_id: str) -> tuple[int, int]:
    """Build the environment once (per process): its (observation, action) sizes, or
    :class:`~agents.envs.EnvError` if it cannot serve."""
    import numpy as np

    from agents.envs import MujocoWarning, make_env

    with warnings.catch_warnings():  # gymnasium's "v4 is out of date" is noise here: v4 is the paper's
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", MujocoWarning)  # the model's, not the user's: in the worker's log
        env = make_env(env_id)
        sizes = (int(np.prod(env.observation_space.shape or ())), int(np.prod(env.action_space.shape or ())))
        env.close()
    return sizes


def check_machine(config: Any, sizes: tuple[int, int]) -> None:
    """A run on this machine must fit it: no more torch threads than cores, and :func:`memory_needed` within
    :data:`MEMORY_SHARE` of the memory."""
    cores = os.cpu_count() or 1
    if config.threads > cores:
        raise UsageError(f"threads {config.threads:,} is more than this machine's {cores} cores")
    needed = memory_needed(config, sizes)
    memory = _memory()
    if needed > MEMORY_SHARE * memory:
        slots = min(config.buffer_size, config.total_steps)
        raise UsageError(
            f"hidden {','.join(map(str, config.hidden))}, batch {config.batch_size:,} and {slots:,} replay slots"
            f" need about {needed / 2**30:,.1f} GiB, more than {MEMORY_SHARE:.0%} of this machine's"
            f" {memory / 2**30:,.1f} GiB"
        )


def _memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def memory_needed(config: Any, sizes: tuple[int, int]) -> int:
    """Bytes a run needs at most, roughly: its networks as its algorithm builds them (learned values with their
    gradients and Adam's two moments, and target copies), a batch's activations (and their gradients) through
    every network, and the replay slots it fills, all float32."""
    from agents.algorithms import parameter_counts
    from agents.plugins import algorithm

    obs, act = sizes
    learned, targets = _parameter_counts(config, sizes, parameter_counts)
    entry = algorithm(config.algo)  # registered: build_specs checked it
    critics = entry.critics if entry is not None else 2
    slots = min(config.buffer_size, config.total_steps)
    batch = config.batch_size * (2 * obs + act + 2 + 4 * (1 + critics) * sum(config.hidden))
    return 4 * (4 * learned + targets + slots * (obs + act + 2) + batch)


_COUNTED: dict[tuple[Any, ...], tuple[int, int]] = {}


def _parameter_counts(config: Any, sizes: tuple[int, int], count: Any) -> tuple[int, int]:
    """:func:`agents.algorithms.parameter_counts`, once per algorithm, networks and sizes (a submission of many
    seeds builds one agent)."""
    per_run = ("seed", "correction", "correction_start", "total_steps")
    key = (sizes, *sorted((k, repr(v)) for k, v in config.to_dict().items() if k not in per_run))
    if key not in _COUNTED:
        _COUNTED[key] = count(config, *sizes)
    return _COUNTED[key]


def check_groups(specs: list[RunSpec]) -> None:
    """Each lane group on this machine must fit it as one process: the sum of its lanes' needs within
    :data:`MEMORY_SHARE` of the memory (each lane keeps its own buffer; their networks are stacked, not
    copied)."""
    from agents.config import TrainConfig

    groups: dict[int, list[RunSpec]] = collections.defaultdict(list)
    for spec in specs:
        if spec.lane_group is not None:
            groups[spec.lane_group].append(spec)
    memory = _memory()
    sizes = {env: check_env(env) for env in {s.env for lanes in groups.values() for s in lanes}}
    for lanes in groups.values():
        needed = sum(memory_needed(TrainConfig.from_dict(s.config), sizes[s.env]) for s in lanes)
        if needed > MEMORY_SHARE * memory:
            raise UsageError(
                f"a lane group of {len(lanes)} runs needs about {needed / 2**30:,.1f} GiB, more than"
                f" {MEMORY_SHARE:.0%} of this machine's {memory / 2**30:,.1f} GiB: use a smaller --lanes"
            )


def record_plugins(store: sqlite_utils.Database) -> None:
    """Record in the store what this offpoc's plug-ins are (inside the caller's write transaction): the
    options each takes, the defaults, each correction's paper name and method option, each algorithm's title."""
    from agents.config_text import config_defaults
    from agents.plugins import algorithm_titles, methods, option_owners
    from store.methods import record_algorithms, record_methods
    from store.variants import record_catalogue

    record_catalogue(store, option_owners(), config_defaults())
    record_methods(store, methods())
    record_algorithms(store, algorithm_titles())
