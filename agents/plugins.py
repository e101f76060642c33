"""The plug-in catalogue: each registered algorithm, correction and sampler, what it is in one line, its
options (an algorithm: its defaults).

:func:`agents.algorithms.register`, :func:`agents.corrections.register` and :func:`agents.samplers.register`
fill it; the run config
(which options a run takes, their checks), ``offpoc config``, ``--help`` and the sweep files read
it. It imports no plug-in, so :mod:`agents.config` reads it without an import cycle: importing any
part of ``agents`` runs the package's ``__init__``, which registers the built-in plug-ins first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from agents.options import Options

__all__ = [
    "Algorithm",
    "Kind",
    "PlugIn",
    "add",
    "add_algorithm",
    "algorithm",
    "algorithm_names",
    "algorithm_titles",
    "get",
    "group_of",
    "groups",
    "methods",
    "names",
    "option_owners",
    "owned_groups",
    "owners",
    "plugins",
    "remove",
    "remove_algorithm",
]

Kind = Literal["correction", "sampler"]


@dataclass(frozen=True)
class PlugIn:
    """A registered correction or sampler, as the config and the help see it."""

    kind: Kind
    name: str
    summary: str
    """One line for the help lists."""
    options: tuple[type[Options], ...] = ()
    """Its option groups (shared groups included), in the order ``offpoc config`` lists them."""
    check: Callable[[Any], None] | None = None
    """A check against the whole resolved run config (a ``TrainConfig``), raising ``ValueError``: for
    what depends on common fields (a behaviour density needs exploration noise)."""
    own_actor_loss: bool | Callable[[Any], bool] = False
    """Corrections: whether it writes its own actor loss (so runs train with autograd), or a function
    of the run's config where an option decides."""
    paper_name: str = ""
    """Corrections: the name tables and figures give it (``AC-Off-POC``); its registered name where empty."""
    method_option: str | None = None
    """Corrections: the option (a flat name) whose values are different methods rather than settings of one
    (AC-Off-POC's ``divergence``): the store keeps it beside the correction, and a method's name shows it."""

    @property
    def title(self) -> str:
        """What tables and figures call it."""
        return self.paper_name or self.name

    def writes_actor_loss(self, config: Any) -> bool:
        """:attr:`own_actor_loss` for a run with ``config`` (a ``TrainConfig``)."""
        own = self.own_actor_loss
        return own(config) if callable(own) else own


_CATALOGUE: dict[tuple[Kind, str], PlugIn] = {}


@dataclass(frozen=True)
class Algorithm:
    """A registered algorithm, as the config and the help see it (its class is :mod:`agents.algorithms`')."""

    name: str
    summary: str
    defaults: Any
    """Its :class:`~agents.config.AlgorithmDefaults`: what a config's unset fields resolve to."""
    policy_kind: Literal["deterministic", "stochastic"]
    fast: bool
    """Whether the fast backend covers it (hand-written gradients for its losses); ``auto`` picks autograd
    where it does not."""
    critics: int = 2
    """Critic networks, each with a target copy (the memory check before a run)."""
    keeps_target_actor: bool = True
    """Whether it keeps a target copy of its actor."""
    hidden_layers: int | None = None
    """The number of hidden sizes its networks need (DDPG: 2); None = any."""
    options: tuple[type[Options], ...] = ()
    """Its own option groups (TD3's policy delay and target smoothing; DDPG's and TD3's exploration noise):
    a run of another algorithm is refused them, as a run is the options of a correction it does not use."""
    title: str = ""
    """The name tables and figures give it (``TD3``); its name in capitals where empty."""
    steps_per_second: float | None = None
    """Its class's :attr:`~agents.algorithms.base.ActorCritic.steps_per_second` (the time estimates)."""

    @property
    def shown(self) -> str:
        return self.title or self.name.upper()


_ALGORITHMS: dict[str, Algorithm] = {}


NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")
"""What a plug-in may be called: the CLI lower-cases what is typed, so a name with a capital could never be
chosen; no spaces, nothing a shell or a file name would mangle."""


def check_name(kind: str, name: str) -> None:
    if not NAME.fullmatch(name):
        raise ValueError(f"{kind} name {name!r}: use lower-case letters, digits, '-', '_' and '.'")


def add_algorithm(entry: Algorithm) -> None:
    check_name("algorithm", entry.name)
    if entry.name in _ALGORITHMS:
        raise ValueError(f"algorithm {entry.name!r} is already registered")
    _check_flat_names(entry.name, entry.options)
    _ALGORITHMS[entry.name] = entry


def _check_flat_names(name: str, options: tuple[type[Options], ...]) -> None:
    """A new plug-in's option groups must not give a flat name a second meaning."""
    for group in options:
        for flat in group.flat_names():
            other = group_of(flat)
            if other is not None and other is not group:
                raise ValueError(f"option {flat} of {name} is already {other.__name__}'s")


def remove_algorithm(name: str) -> None:
    """Forget an algorithm (tests and notebooks that register their own)."""
    _ALGORITHMS.pop(name, None)


def algorithm(name: str) -> Algorithm | None:
    return _ALGORITHMS.get(name)


def algorithm_titles() -> dict[str, str]:
    """Each registered algorithm's name → the name tables give it, JSON-ready (the store records it)."""
    return {name: entry.shown for name, entry in _ALGORITHMS.items()}


def algorithm_names() -> tuple[str, ...]:
    """The registered algorithms, in registration order."""
    return tuple(_ALGORITHMS)


def add(plugin: PlugIn) -> None:
    """Catalogue a plug-in; its groups' flat names must not mean something else already."""
    check_name(plugin.kind, plugin.name)
    if (plugin.kind, plugin.name) in _CATALOGUE:
        raise ValueError(f"{plugin.kind} {plugin.name!r} is already registered")
    flats = {flat for group in plugin.options for flat in group.flat_names()}
    if plugin.method_option is not None and plugin.method_option not in flats:
        raise ValueError(f"method_option {plugin.method_option} of {plugin.name} is none of its options")
    _check_flat_names(plugin.name, plugin.options)
    _CATALOGUE[(plugin.kind, plugin.name)] = plugin


def remove(kind: Kind, name: str) -> None:
    """Forget a plug-in (tests and notebooks that register their own)."""
    _CATALOGUE.pop((kind, name), None)


def get(kind: Kind, name: str) -> PlugIn | None:
    return _CATALOGUE.get((kind, name))


def plugins(kind: Kind) -> tuple[PlugIn, ...]:
    """The plug-ins of a kind, in registration order."""
    return tuple(p for (k, _), p in _CATALOGUE.items() if k == kind)


def names(kind: Kind) -> tuple[str, ...]:
    return tuple(p.name for p in plugins(kind))


def groups() -> tuple[type[Options], ...]:
    """Every option group of a registered algorithm, correction or sampler, once each: the algorithms' first,
    each kind in registration order."""
    seen: dict[type[Options], None] = {}
    for entry in _entries():
        seen.update(dict.fromkeys(entry.options))
    return tuple(seen)


def _entries() -> list[Algorithm | PlugIn]:
    """Every registered algorithm, then every correction and sampler."""
    return [*_ALGORITHMS.values(), *_CATALOGUE.values()]


def group_of(flat: str) -> type[Options] | None:
    """The group whose field ``flat`` names, if a registered plug-in has one."""
    return next((g for g in groups() if flat in g.flat_names()), None)


def owners(group: type[Options]) -> tuple[Algorithm | PlugIn, ...]:
    """The algorithms and plug-ins that take a group's options."""
    return tuple(p for p in _entries() if group in p.options)


def option_owners() -> dict[str, list[str]]:
    """Each option's flat name → the plug-ins that take it, by name."""
    return {flat: [p.name for p in owners(group)] for group in groups() for flat in group.flat_names()}


def methods() -> list[dict[str, Any]]:
    """The corrections as a store records them (:func:`store.methods.record_methods`), in registration order:
    ``{"correction", "paper_name", "method_option", "method_default"}``, JSON-ready."""
    defaults = {flat: value for group in groups() for flat, value in group().flat().items()}
    return [
        {"correction": p.name, "paper_name": p.title, "method_option": p.method_option,
         "method_default": defaults.get(p.method_option) if p.method_option is not None else None}
        for p in plugins("correction")
    ]  # fmt: skip


def owned_groups(algo: str, correction: str, sampler: str) -> tuple[type[Options], ...]:
    """The option groups a run of this algorithm, correction and sampler takes, each once."""
    chosen = (algorithm(algo), get("correction", correction), get("sampler", sampler))
    return tuple(dict.fromkeys(g for p in chosen if p is not None for g in p.options))
