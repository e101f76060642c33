"""Replay samplers, registered by name: ``uniform`` (the default), ``cer``, ``per``, ``ero``.

A sampler (:class:`Sampler`) gives each update's slots and importance weights and hears the TD
errors after the critic step; no algorithm file knows which one runs. Adding one means
subclassing :class:`Sampler`, declaring its options (an :class:`~agents.options.Options` dataclass)
and calling :func:`register` with a factory ``TrainConfig -> Sampler``, a summary and the options.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents import plugins
from agents.options import Options
from agents.samplers.base import Sampler
from agents.samplers.cer import CombinedReplay
from agents.samplers.ero import EROOptions, ExperienceReplayOptimisation
from agents.samplers.per import PEROptions, Prioritised, SumTree

SamplerFactory = Callable[[Any], Sampler]

_REGISTRY: dict[str, SamplerFactory] = {}


def register(name: str, factory: SamplerFactory, *, summary: str = "", options: tuple[type[Options], ...] = ()) -> None:
    """Make a sampler available under ``name`` (config, CLI, store, help); ``options`` as a correction's."""
    if name in _REGISTRY:
        raise ValueError(f"sampler {name!r} is already registered")
    plugins.add(plugins.PlugIn("sampler", name, summary, options))
    _REGISTRY[name] = factory


def summaries() -> str:
    """``name (summary); ...`` for help texts."""
    return "; ".join(f"{p.name} ({p.summary})" for p in plugins.plugins("sampler"))


def names() -> tuple[str, ...]:
    """Registered sampler names, in registration order."""
    return tuple(_REGISTRY)


def make_sampler(name: str, config: Any) -> Sampler:
    """Build a registered sampler from the run's config; ``ValueError`` names the problem."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown sampler {name!r}: choose one of {', '.join(_REGISTRY)}") from None
    return factory(config)


def _per(config: Any) -> Sampler:
    options = config.option(PEROptions)
    return Prioritised(options.alpha, options.beta0, options.beta_increment)


def _ero(config: Any) -> Sampler:
    options = config.option(EROOptions)
    return ExperienceReplayOptimisation(options.hidden, options.lr, options.sample, options.every)


register("uniform", lambda config: Sampler(), summary="uniform over the buffer")
register("cer", lambda config: CombinedReplay(), summary="B − 1 uniform and the newest (Zhang & Sutton)")
register("per", _per, summary="prioritised by |TD error| (LAP-PAL's PER_TD3)", options=(PEROptions,))
register("ero", _ero, summary="a learned replay policy masks the buffer (Zha et al.)", options=(EROOptions,))

__all__ = [
    "CombinedReplay", "ExperienceReplayOptimisation", "Prioritised", "Sampler", "SumTree", "make_sampler", "names",
    "register", "summaries",
]  # fmt: skip
