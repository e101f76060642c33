"""What sets apart runs of one method: the settings that differ between runs sharing an algorithm,
environment, correction, divergence, source and replay sampler.

Tables and figures group runs into methods, one row or line per method, seeds pooled. Runs of one
correction trained with different settings (a batch-size sweep, RIS-Off-PAC's two weightings) are
different methods: pooling them would mix their seeds. Each run gets a *variant*, the text of the
settings that vary within its method's runs in the set shown (``batch_size=64``, or ``""`` where none
vary), and the variant is part of the group. Settings that only say how a run is measured or carried
out (its budget, evaluation schedule, logging, checkpoints, threads, device and backend, which give
the same results) never split a method. A setting a run lacks (stored before the setting existed)
sets it apart from the runs that hold it, and is left out of its variant's text: such a run may stand
apart from newer runs that trained as it did, never pooled with runs that trained otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import sqlite_utils

from store import methods
from store.reader import DEFAULT_SAMPLER, configs
from store.runs import RunRow
from store.tasks import source_of

__all__ = [
    "CONFIG_DEFAULTS",
    "CORRECTION_ONLY",
    "NOT_A_VARIANT",
    "OPTION_OWNERS",
    "VariantLabels",
    "baseline_variant",
    "default_text",
    "label_variants",
    "method_of",
    "record_catalogue",
    "variants",
]  # fmt: skip

NOT_A_VARIANT = frozenset(
    {"algo", "env_id", "correction", "sampler", "seed", "total_steps", "eval_freq", "eval_episodes",
     "stats_every", "weights_block", "histogram_bins", "checkpoint_every", "checkpoint_buffer", "threads", "device",
     "backend"}
)  # fmt: skip
"""Config entries that are part of the method's key already, or say how a run is measured or carried out.
A correction's method option (AC-Off-POC's ``divergence``, :func:`store.methods.method_options`) is part of
the key too."""

OPTION_OWNERS = "option_owners"
"""``meta`` key: each plug-in option's flat name → the algorithms, corrections and samplers that take it, as
the last submission's offpoc knew them. Configs stored before options moved to their plug-ins hold every
plug-in's options (TD3's ``policy_delay`` on a SAC run); with it, a run's variant considers only its own
plug-ins' options."""

CONFIG_DEFAULTS = "config_defaults"
"""``meta`` key: the defaults the last submission's offpoc resolved, ``{"algorithms": {algo: {field:
value}}, "options": {flat name: value}}``: a setting a run holds at another value is part of its
variant even where no other run of its method differs."""

CORRECTION_ONLY = frozenset({"ref_std", "correction_start"})
"""Config entries every run holds that only a correction reads: never part of a baseline's (``none``)
variant, and left out when a method looks for its baseline's. ``ref_std`` is AC-Off-POC's option now, but
configs stored before schema 12 hold it on every run."""

MethodKey = tuple[str, str, str, str | None, str, str]
ABSENT = "\x00absent"


def method_of(run: Mapping[str, Any]) -> MethodKey:
    """(algo, env, correction, divergence, source, sampler)."""
    sampler = run.get("sampler") or DEFAULT_SAMPLER
    return run["algo"], run["env"], run["correction"], run["divergence"], source_of(run), sampler


def _same(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    return str(value)


def variants(
    runs: Iterable[Mapping[str, Any]],
    found: Mapping[int, Mapping[str, Any]],
    owners: Mapping[str, list[str]] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> dict[int, str]:
    """Each run's variant (by id) among ``runs``, from their configs ``found`` (by id; a run without one
    counts as having none of the settings): the settings that vary within its method, and those it holds
    at a value other than ``defaults``' (:data:`CONFIG_DEFAULTS`). ``owners``: :data:`OPTION_OWNERS`; an
    option no plug-in of the method takes is not one of its settings."""
    groups: dict[MethodKey, list[int]] = {}
    for run in runs:
        groups.setdefault(method_of(run), []).append(run["id"])
    owners = owners or {}
    defaults = defaults or {}
    labelled: dict[int, str] = {}
    for key, ids in groups.items():
        plugins = {key[0], key[2], key[5]}  # its algorithm, correction and sampler
        idle = CORRECTION_ONLY if key[2] == "none" else frozenset()
        members = [
            {
                k: v
                for k, v in found.get(run_id, {}).items()
                if (k not in owners or plugins & set(owners[k])) and k not in idle
            }
            for run_id in ids
        ]
        named = NOT_A_VARIANT | methods.method_options()
        keys = list(dict.fromkeys(k for config in members for k in config if k not in named))
        # A run stored before a setting existed lacks it: it counts as a value of its own (it may have run
        # another default), so such runs are kept apart from runs that hold it.
        varying = [k for k in keys if len({_same(c.get(k, ABSENT)) for c in members}) > 1]
        usual = {**defaults.get("algorithms", {}).get(key[0], {}), **defaults.get("options", {})}
        unusual = [k for k in keys if k in usual and any(k in c and _same(c[k]) != _same(usual[k]) for c in members)]
        shown = [k for k in keys if k in varying or k in unusual]
        for run_id, config in zip(ids, members, strict=True):
            labelled[run_id] = ", ".join(f"{k}={_text(config[k])}" for k in shown if k in config)
    return labelled


def baseline_variant(variant: str) -> str:
    """The variant a method's baseline would have: ``variant`` without :data:`CORRECTION_ONLY` settings
    (``correction_start=2000, start_steps=1000`` → ``start_steps=1000``)."""
    return ", ".join(p for p in variant.split(", ") if p and p.split("=", 1)[0] not in CORRECTION_ONLY)


def label_variants(db: sqlite_utils.Database, runs: list[RunRow]) -> list[RunRow]:
    """``runs`` with ``variant`` set on each (in place), read from their stored configs."""
    found = configs(db, [r["id"] for r in runs])
    meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN (?, ?)", [OPTION_OWNERS, CONFIG_DEFAULTS]))
    owners, defaults = (json.loads(meta[k]) if k in meta else None for k in (OPTION_OWNERS, CONFIG_DEFAULTS))
    labelled = variants(runs, found, owners, defaults)
    for run in runs:
        run["variant"] = labelled.get(run["id"], "")
    return runs


def default_text(db: sqlite_utils.Database, algo: str, setting: str) -> str | None:
    """The value ``setting`` defaults to for ``algo`` as the last submission's offpoc knew it (:data:`CONFIG_DEFAULTS`),
    as a variant writes it; None where no default is recorded."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", [CONFIG_DEFAULTS]).fetchone()
    defaults = json.loads(row[0]) if row else {}
    usual = {**defaults.get("algorithms", {}).get(algo, {}), **defaults.get("options", {})}
    return _text(usual[setting]) if setting in usual else None


class VariantLabels:
    """:func:`label_variants` for a poller that reads the same runs again and again: a run's variant depends on
    the configs of the runs read with it, which never change, so it is worked out again only when the set
    of runs changes (a run added or deleted)."""

    def __init__(self) -> None:
        self._ids: tuple[int, ...] | None = None
        self._labels: dict[int, str] = {}

    def label(self, db: sqlite_utils.Database, runs: list[RunRow]) -> list[RunRow]:
        ids = tuple(r["id"] for r in runs)
        if ids != self._ids:
            label_variants(db, runs)
            self._ids, self._labels = ids, {r["id"]: r["variant"] for r in runs}
        for run in runs:
            run["variant"] = self._labels[run["id"]]
        return runs


def record_catalogue(db: sqlite_utils.Database, owners: Mapping[str, list[str]], defaults: Mapping[str, Any]) -> None:
    """Keep :data:`OPTION_OWNERS` and :data:`CONFIG_DEFAULTS` (inside the caller's write transaction)."""
    for key, value in ((OPTION_OWNERS, owners), (CONFIG_DEFAULTS, defaults)):
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [key, json.dumps(value)])
