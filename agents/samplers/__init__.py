"""Replay samplers, registered by name: ``uniform`` (the default), ``cer``, ``per``, ``ero``.

A sampler (:class:`Sampler`) gives each update's slots and importance weights and hears the TD
errors after the critic step; no algorithm file knows which one runs. Adding one means
subclassing :class:`Sampler` and calling :func:`register` with a factory ``TrainConfig -> Sampler``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents.samplers.base import Sampler
from agents.samplers.cer import CombinedReplay
from agents.samplers.ero import ExperienceReplayOptimisation
from agents.samplers.per import Prioritised, SumTree

SamplerFactory = Callable[[Any], Sampler]

_REGISTRY: dict[str, SamplerFactory] = {}


def register(name: str, factory: SamplerFactory) -> None:
    """Make a sampler available under ``name`` (config, CLI, store)."""
    if name in _REGISTRY:
        raise ValueError(f"sampler {name!r} is already registered")
    _REGISTRY[name] = factory


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


register("uniform", lambda config: Sampler())
register("cer", lambda config: CombinedReplay())
register("per", lambda config: Prioritised(config.per_alpha, config.per_beta0, config.per_beta_increment))
register("ero", lambda c: ExperienceReplayOptimisation(c.ero_hidden, c.ero_lr, c.ero_sample, c.ero_every))

__all__ = [
    "CombinedReplay", "ExperienceReplayOptimisation", "Prioritised", "Sampler", "SumTree", "make_sampler", "names",
    "register",
]  # fmt: skip
