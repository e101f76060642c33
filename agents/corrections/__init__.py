"""Off-policy corrections, registered by name.

Adding a correction (ACE, Geoff-PAC, IPG, RIS-Off-PAC, ...) means writing a
factory ``CorrectionSettings -> Correction`` and calling :func:`register`; no
algorithm file changes.
"""

from __future__ import annotations

from collections.abc import Callable

from agents.corrections.acoffpoc import DeterministicACOffPOC, StochasticACOffPOC
from agents.corrections.base import Correction, CorrectionSettings, NoCorrection
from agents.corrections.divergences import DIVERGENCES

CorrectionFactory = Callable[[CorrectionSettings], Correction]

_REGISTRY: dict[str, CorrectionFactory] = {}


def register(name: str, factory: CorrectionFactory) -> None:
    """Make a correction available under ``name`` (config, CLI, store)."""
    if name in _REGISTRY:
        raise ValueError(f"correction {name!r} is already registered")
    _REGISTRY[name] = factory


def names() -> tuple[str, ...]:
    """Registered correction names, in registration order."""
    return tuple(_REGISTRY)


def make_correction(name: str, settings: CorrectionSettings) -> Correction:
    """Build a registered correction; ``ValueError`` names the problem."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown correction {name!r}: choose one of {', '.join(_REGISTRY)}") from None
    return factory(settings)


def _acoffpoc(settings: CorrectionSettings) -> Correction:
    if settings.policy_kind == "deterministic":
        return DeterministicACOffPOC(settings)
    return StochasticACOffPOC(settings)


register("none", lambda settings: NoCorrection())
register("acoffpoc", _acoffpoc)

__all__ = [
    "DIVERGENCES",
    "Correction",
    "CorrectionSettings",
    "make_correction",
    "names",
    "register",
]
