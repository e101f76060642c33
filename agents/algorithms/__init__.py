"""The algorithms, registered by name and built from a resolved ``TrainConfig``.

An algorithm is a subclass of :class:`ActorCritic` (its networks, critic target, per-sample actor loss
and action; optionally its own per-sample critic loss, :meth:`ActorCritic.critic_loss`) and one
:func:`register` call with its defaults. The config, ``--set``, ``offpoc config``, the store and the
dashboard take it from the registry: nothing else names it.
"""

from __future__ import annotations

import dataclasses

import torch

from agents import plugins
from agents.algorithms import ddpg, sac, td3
from agents.algorithms.base import ActorCritic, UpdateStats, hand_written
from agents.algorithms.ddpg import DDPG
from agents.algorithms.losses import SoftUpdate, reduce_loss
from agents.algorithms.sac import SAC
from agents.algorithms.td3 import TD3, TD3Options
from agents.config import AlgorithmDefaults, ConfigError, TrainConfig
from agents.exploration import ExplorationOptions
from agents.options import Options

_CLASSES: dict[str, type[ActorCritic]] = {}


def register(
    name: str,
    cls: type[ActorCritic],
    *,
    summary: str,
    defaults: AlgorithmDefaults,
    options: tuple[type[Options], ...] = (),
    title: str = "",
) -> None:
    """Make ``cls`` the algorithm ``name`` (``--algo``/``offpoc run NAME``) with ``defaults`` for the settings a
    config leaves unset and ``options``, its own option groups (``--set``, sweep files and stored configs name
    their fields; a run of another algorithm is refused them; ``config.option(Group)`` reads them) and
    ``title``, the name tables and figures give it (default: ``name`` in capitals). The fast
    backend trains it where it has hand-written gradients for both losses (:meth:`ActorCritic.actor_backward`,
    and the built-in critic loss); elsewhere runs use autograd."""
    plugins.add_algorithm(
        plugins.Algorithm(
            name,
            summary,
            defaults,
            cls.policy_kind,
            hand_written(cls),
            cls.critics,
            cls.keeps_target_actor,
            cls.hidden_layers,
            options,
            title,
            cls.steps_per_second,
        )
    )
    _CLASSES[name] = cls


def unregister(name: str) -> None:
    """Forget an algorithm (tests and notebooks that register their own)."""
    plugins.remove_algorithm(name)
    _CLASSES.pop(name, None)


def algorithm_class(name: str) -> type[ActorCritic] | None:
    """The class registered as ``name``, or None."""
    return _CLASSES.get(name)


def parameter_counts(config: TrainConfig, obs_dim: int, action_dim: int) -> tuple[int, int]:
    """(learned, target) numbers of values in the networks a run with ``config`` builds: counted on the agent
    itself, built on PyTorch's meta device (shapes alone: nothing allocated, however wide; no random draw of
    the caller's taken), so a plug-in's networks count as they are. Learned values each have a gradient and
    Adam's two moments."""
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        agent = make_algorithm(dataclasses.replace(config, device="meta"), obs_dim, action_dim, torch.Generator())
    targets = {id(p) for target, _ in agent.target_pairs() for p in target.parameters()}
    values = {id(p): p.numel() for module in agent.modules().values() for p in module.parameters()}
    values |= {id(t): t.numel() for t in agent.tensors().values()}
    target = sum(n for key, n in values.items() if key in targets)
    return sum(values.values()) - target, target


def make_algorithm(config: TrainConfig, obs_dim: int, action_dim: int, generator: torch.Generator) -> ActorCritic:
    """The algorithm named by ``config.algo``, with freshly initialised networks."""
    if config.algo not in _CLASSES:
        raise ConfigError(f"unknown algorithm {config.algo!r}: choose one of {', '.join(_CLASSES)}")
    return _CLASSES[config.algo](config, obs_dim, action_dim, generator)


register("ddpg", DDPG, summary="DDPG (Lillicrap et al.), as the paper's baseline trains it", defaults=ddpg.DEFAULTS,
         options=(ExplorationOptions,))  # fmt: skip
register("td3", TD3, summary="TD3 (Fujimoto et al.): twin critics, delayed actor, target smoothing",
         defaults=td3.DEFAULTS, options=td3.OPTIONS)  # fmt: skip
register("sac", SAC, summary="SAC (Haarnoja et al.): a stochastic policy with a learned temperature",
         defaults=sac.DEFAULTS)  # fmt: skip

__all__ = [
    "DDPG",
    "SAC",
    "TD3",
    "ActorCritic",
    "SoftUpdate",
    "TD3Options",
    "UpdateStats",
    "make_algorithm",
    "reduce_loss",
    "register",
    "unregister",
]
