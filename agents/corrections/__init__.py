"""Off-policy corrections, registered by name.

Adding a correction means subclassing :class:`Correction` (its hooks: weights,
an actor-loss override, the actor's states, extra per-transition fields, its own
networks, logged quantities), declaring its options (an :class:`~agents.options.Options`
dataclass, read with ``settings.option(...)``) and calling :func:`register` with a factory
``CorrectionSettings -> Correction``, a one-line summary and the options; no algorithm file,
config field or help text changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agents import plugins
from agents.corrections.ace import ACE, ACEOptions, PolicyGradientOptions
from agents.corrections.acoffpoc import ACOffPOCOptions, DeterministicACOffPOC, StochasticACOffPOC
from agents.corrections.base import Collected, Correction, CorrectionSettings, NoCorrection, Weights
from agents.corrections.behaviour import check_behaviour_noise
from agents.corrections.divergences import DIVERGENCES
from agents.corrections.geoff_pac import GeoffOptions, GeoffPAC
from agents.corrections.ipg import IPG, IPGOptions
from agents.corrections.ris import RISOffPAC, RISOptions
from agents.corrections.traces import TraceOptions
from agents.options import Options

if TYPE_CHECKING:
    from agents.config import TrainConfig

CorrectionFactory = Callable[[CorrectionSettings], Correction]
OwnActorLoss = bool | Callable[["TrainConfig"], bool]
"""Whether a correction writes its own actor loss: always, never, or as a run's config says."""

_REGISTRY: dict[str, CorrectionFactory] = {}


def register(
    name: str,
    factory: CorrectionFactory,
    *,
    summary: str = "",
    options: tuple[type[Options], ...] = (),
    own_actor_loss: OwnActorLoss = False,
    check: Callable[[TrainConfig], None] | None = None,
    paper_name: str = "",
    method_option: str | None = None,
) -> None:
    """Make a correction available under ``name`` (config, CLI, store, help).

    ``summary``: one line for the help lists. ``options``: its option groups; a run with it takes
    their fields by flat name (``--set ris_beta=0.3``), checked by each group's ``validate()``.
    ``own_actor_loss``: its corrections override :meth:`Correction.actor_loss`, so runs
    with it train with autograd (``backend=auto`` resolves to ``autograd``; ``fast`` is refused);
    a function of the run's config where an option decides (ACE's ``pg_form``). ``check``: a check
    of the whole run config, raising ``ValueError``. ``paper_name``: what tables and figures call it
    (``AC-Off-POC``; the name where empty). ``method_option``: the option whose values are different
    methods, not settings of one (AC-Off-POC's ``divergence``): the store keeps its value beside the correction.
    """
    if name in _REGISTRY:
        raise ValueError(f"correction {name!r} is already registered")
    plugins.add(plugins.PlugIn("correction", name, summary, options, check, own_actor_loss, paper_name, method_option))
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    """Forget a registered correction (tests and notebooks that register their own)."""
    _REGISTRY.pop(name, None)
    plugins.remove("correction", name)


def own_actor_loss(name: str, config: TrainConfig | None = None) -> bool:
    """Whether the correction ``name`` replaces the algorithm's actor loss (in a run with ``config``;
    without one, under the correction's defaults)."""
    plugin = plugins.get("correction", name)
    if plugin is None:
        return False
    from agents.config import TrainConfig

    return plugin.writes_actor_loss(config if config is not None else TrainConfig(correction=name))


def names() -> tuple[str, ...]:
    """Registered correction names, in registration order."""
    return tuple(_REGISTRY)


def summaries() -> str:
    """``name (summary); ...`` for help texts."""
    return "; ".join(f"{p.name} ({p.summary})" for p in plugins.plugins("correction"))


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


def _likelihood_ratio(config: TrainConfig) -> bool:
    return config.option(PolicyGradientOptions).form == "lr"


def _geoff_own_loss(config: TrainConfig) -> bool:
    geoff = config.option(GeoffOptions)
    return _likelihood_ratio(config) or (geoff.m2 != "off" and geoff.gamma_hat > 0)


register("none", lambda settings: NoCorrection(), summary="the plain algorithm")
register(
    "acoffpoc",
    _acoffpoc,
    summary="AC-Off-POC: a similarity weight λ on the critic's and the actor's losses",
    options=(ACOffPOCOptions,),
    paper_name="AC-Off-POC",
    method_option="divergence",
)
# The paper's competitors (docs/competitors.md), under the names their published curves import as.
register(
    "ace",
    ACE,
    summary="ACE (Imani et al.): the actor's gradient weighted by an emphasis",
    options=(ACEOptions, PolicyGradientOptions, TraceOptions),
    own_actor_loss=_likelihood_ratio,
    check=check_behaviour_noise,
    paper_name="ACE",
)
register(
    "geoff-pac",
    GeoffPAC,
    summary="Geoff-PAC (Zhang et al.): the actor's gradient weighted by M1 (and M2)",
    options=(GeoffOptions, PolicyGradientOptions, TraceOptions),
    own_actor_loss=_geoff_own_loss,
    check=check_behaviour_noise,
    paper_name="Geoff-PAC",
)
register(
    "ipg",
    IPG,
    summary="IPG (Gu et al.) at ν = 1: the actor on recent states",
    options=(IPGOptions,),
    paper_name="IPG",
)
register(
    "ris-off-pac",
    RISOffPAC,
    summary="RIS-Off-PAC (Humayoo & Cheng): relative importance weights on the actor's loss",
    options=(RISOptions,),
    check=check_behaviour_noise,
    paper_name="RIS-Off-PAC",
)

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
    "summaries",
    "unregister",
]
