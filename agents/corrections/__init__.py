"""Off-policy corrections, registered by name.

Adding a correction means subclassing :class:`Correction` (its hooks: weights,
an actor-loss override, the actor's states, extra per-transition fields, its own
networks, logged quantities) and calling :func:`register` with a factory
``CorrectionSettings -> Correction``; no algorithm file changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agents.corrections.ace import ACE
from agents.corrections.acoffpoc import DeterministicACOffPOC, StochasticACOffPOC
from agents.corrections.base import Collected, Correction, CorrectionSettings, NoCorrection, Weights
from agents.corrections.divergences import DIVERGENCES
from agents.corrections.geoff_pac import GeoffPAC
from agents.corrections.ipg import IPG
from agents.corrections.ris import RISOffPAC

if TYPE_CHECKING:
    from agents.config import TrainConfig

CorrectionFactory = Callable[[CorrectionSettings], Correction]
OwnActorLoss = bool | Callable[["TrainConfig"], bool]
"""Whether a correction writes its own actor loss: always, never, or as a run's config says."""

_REGISTRY: dict[str, CorrectionFactory] = {}
_OWN_ACTOR_LOSS: dict[str, OwnActorLoss] = {}


def register(name: str, factory: CorrectionFactory, *, own_actor_loss: OwnActorLoss = False) -> None:
    """Make a correction available under ``name`` (config, CLI, store).

    ``own_actor_loss``: its corrections override :meth:`Correction.actor_loss`, so runs
    with it train with autograd (``backend=auto`` resolves to ``autograd``; ``fast`` is refused);
    a function of the run's config where an option decides (ACE's ``pg_form``).
    """
    if name in _REGISTRY:
        raise ValueError(f"correction {name!r} is already registered")
    _REGISTRY[name] = factory
    _OWN_ACTOR_LOSS[name] = own_actor_loss


def unregister(name: str) -> None:
    """Forget a registered correction (tests and notebooks that register their own)."""
    _REGISTRY.pop(name, None)
    _OWN_ACTOR_LOSS.pop(name, None)


def own_actor_loss(name: str, config: TrainConfig | None = None) -> bool:
    """Whether the correction ``name`` replaces the algorithm's actor loss (in a run with ``config``;
    without one, under the correction's defaults)."""
    own = _OWN_ACTOR_LOSS.get(name, False)
    if callable(own):
        from agents.config import TrainConfig

        return own(config if config is not None else TrainConfig(correction=name))
    return own


def names() -> tuple[str, ...]:
    """Registered correction names, in registration order."""
    return tuple(_REGISTRY)


def make_correction(name: str, settings: CorrectionSettings) -> Correction:
    """Build a registered correction; ``ValueError`` names the problem."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown correction {name!r}: choose one of {', '.join(_REGISTRY)}") from None
    correction = factory(settings)
    if correction.overrides_actor_loss != own_actor_loss(name, settings.config):
        raise ValueError(f"correction {name!r}: register it with own_actor_loss={correction.overrides_actor_loss}")
    return correction


def _acoffpoc(settings: CorrectionSettings) -> Correction:
    if settings.policy_kind == "deterministic":
        return DeterministicACOffPOC(settings)
    return StochasticACOffPOC(settings)


register("none", lambda settings: NoCorrection())
register("acoffpoc", _acoffpoc)
# The paper's competitors (docs/competitors.md), under the names their published curves import as.
register("ace", ACE, own_actor_loss=lambda config: config.pg_form == "lr")
register(
    "geoff-pac",
    GeoffPAC,
    own_actor_loss=lambda config: config.pg_form == "lr" or (config.geoff_m2 != "off" and config.geoff_gamma_hat > 0),
)
register("ipg", IPG)
register("ris-off-pac", RISOffPAC)

__all__ = [
    "DIVERGENCES",
    "Collected",
    "Correction",
    "CorrectionSettings",
    "Weights",
    "make_correction",
    "names",
    "own_actor_loss",
    "register",
    "unregister",
]
