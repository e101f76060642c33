"""What a correction is: hooks into the shared update, each defaulting to the plain algorithm.

The update (:meth:`agents.algorithms.base.ActorCritic.update`) calls, in order:

    weights = correction.weights(batch, agent)        # no gradient, before any step
    correction.auxiliary_update(batch, agent)         # its own networks, if any
    critic step on L = Σ_i c_i ℓ_i, c from weights.critic
    actor step (when due) on the states correction.actor_states(batch), with
        ℓ_i = correction.actor_loss(...) if the correction writes one, else the algorithm's,
        and c from weights.actor

A correction whose work serves the actor step alone (``actor_only``) sits out the updates
without one (TD3's delayed actor): they are the plain ones.

A weight becomes the coefficients c_i at one reduction point
(:func:`agents.algorithms.losses.loss_coefficients`):

- ``None``: no correction, the plain mean;
- a 0-d tensor λ (per batch): ``λ · mean_i(ℓ_i)``;
- a (B, 1) tensor λ_i (per transition): ``Σ λ_i ℓ_i / Σ λ_i``.

Besides weights, a correction may store extra fields with every transition
(``fields`` and :meth:`Correction.collect`), read the replay buffer
(:meth:`Correction.attach`: recent states, predecessor windows), own networks and
optimisers (saved in checkpoints), and log per-update quantities (``quantities``,
returned in ``Weights.logged``: they reach the store and the Quantities view with no
other change). Targets, target networks and exploration stay the algorithm's.

A correction that writes its own actor loss is differentiated by autograd: the run's
backend ``auto`` resolves to ``autograd`` for it (see ``register(..., own_actor_loss=True)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypeVar

import numpy as np
import torch
from torch import Tensor, nn

from agents.options import Options
from agents.quantities import LAMBDA, Quantity
from agents.replay import Batch

if TYPE_CHECKING:
    from agents.config import TrainConfig
    from agents.replay import ReplayBuffer

OptionsT = TypeVar("OptionsT", bound=Options)

PolicyKind = Literal["deterministic", "stochastic"]

_NOTHING: Mapping[str, Any] = MappingProxyType({})


class Weights(NamedTuple):
    """A correction's weights for one update, detached."""

    critic: Tensor | None = None
    """0-d λ, (B, 1) λ_i, or None (plain mean) for the critic loss."""
    actor: Tensor | None = None
    """The same for the actor loss, over the actor's states."""
    logged: Mapping[str, Tensor] = _NOTHING
    """Per-update values of the correction's ``quantities``, by name (0-d or (B, 1))."""
    normalised: bool = True
    """Per-transition weights: L = Σ λ_i ℓ_i / Σ λ_i (true) or mean_i λ_i ℓ_i (false, importance weights)."""

    @classmethod
    def both(cls, weight: Tensor, quantity: Quantity = LAMBDA) -> Weights:
        """One weight for both losses, logged as ``quantity`` (AC-Off-POC's λ)."""
        return cls(weight, weight, {quantity.name: weight})


NO_WEIGHTS = Weights()


@dataclass(frozen=True)
class Collected:
    """What is known about a transition as it is stored (for :meth:`Correction.collect`)."""

    step: int
    """Environment steps taken before this transition (0 for the run's first)."""
    episode_start: bool
    """The transition's observation came from a reset."""
    random_phase: bool
    """The action was drawn by the uniform-random start phase."""
    action: np.ndarray
    """(d,) the executed action, normalised to [-1, 1]."""
    behaviour: tuple[np.ndarray, np.ndarray] | None
    """Stochastic policies: the pre-tanh (mean, log_std) it was drawn from."""


@dataclass(frozen=True)
class CorrectionSettings:
    """Everything a correction factory may use; filled from the run's config."""

    policy_kind: PolicyKind
    start_step: int = 0
    """First environment step at which the correction applies."""
    config: TrainConfig | None = None
    """The run's resolved config, where a correction finds its own options."""

    @property
    def run_config(self) -> TrainConfig:
        """The run's config, or the defaults where none was given (a correction built by hand)."""
        if self.config is not None:
            return self.config
        from agents.config import TrainConfig

        return TrainConfig()

    def option(self, group: type[OptionsT]) -> OptionsT:
        """The run's options of ``group``, or its defaults where none was given."""
        return self.config.option(group) if self.config is not None else group()


class AgentView(Protocol):
    """What a correction may read of, and ask of, the agent it corrects (an
    :class:`~agents.algorithms.base.ActorCritic` is one): its networks, its random stream and the values
    the update computed. Corrections see the agent through this and nothing else."""

    @property
    def obs_dim(self) -> int: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def generator(self) -> torch.Generator:
        """The run's torch generator: draws a correction makes come from the run's seed."""
        ...

    @property
    def actor(self) -> nn.Module: ...

    @property
    def critic(self) -> nn.Module: ...

    @property
    def last_target(self) -> Tensor | None:
        """This update's critic target y, (B, 1), detached (None before the first update)."""
        ...

    def actor_loss(self, obs: Tensor) -> Tensor:
        """The algorithm's own per-sample actor loss ℓ_i, (B, 1), differentiable."""
        ...

    def alpha_value(self) -> Tensor | None:
        """The entropy temperature (stochastic policies), else None."""
        ...

    def state_value(self, obs: Tensor, output: Any = None) -> Tensor:
        """V(s), (B, 1), without gradient; ``output``: the actor's output on ``obs`` where already known."""
        ...

    def greedy_action(self, obs: Tensor) -> Tensor:
        """A deterministic policy's action π(s), (B, d), without exploration."""
        ...

    def policy_distribution(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """A stochastic policy's pre-tanh Gaussian (mean, log_std) on ``obs``."""
        ...


class Correction:
    """An off-policy correction, registered by name in ``agents.corrections``.

    Every hook defaults to the plain algorithm; a correction overrides what it changes.
    """

    name: str = "none"
    quantities: tuple[Quantity, ...] = ()
    """What :meth:`weights` logs in ``Weights.logged``."""
    fields: Mapping[str, int] = _NOTHING
    """Extra float32 columns stored per transition, name → width; :meth:`collect` fills them."""
    needs_behaviour_params: bool = False
    """The buffer stores the stochastic behaviour policy's pre-tanh (mean, log_std)."""
    excludes_random_phase: bool = False
    """While active, batches never hold transitions of the uniform-random start phase."""
    actor_only: bool = False
    """Its weights and its own networks serve the actor step alone: on an update without one (TD3's
    delayed actor) the update skips it, weights and logging included."""

    def __init__(self, settings: CorrectionSettings | None = None) -> None:
        self.start_step = settings.start_step if settings is not None else 0

    def active(self, step: int) -> bool:
        """Whether the correction applies at this environment step (False: the plain update)."""
        return step >= self.start_step

    def attach(self, agent: AgentView, replay: ReplayBuffer) -> None:
        """Called once by the trainer with the run's agent and replay buffer."""

    def collect(self, transition: Collected) -> Mapping[str, np.ndarray | float]:
        """The values of ``fields`` for a transition being stored."""
        return _NOTHING

    def weights(self, batch: Batch, agent: AgentView) -> Weights:
        """The loss weights for this batch under the current policy (called without gradient)."""
        return NO_WEIGHTS

    def auxiliary_update(self, batch: Batch, agent: AgentView) -> None:
        """Step the correction's own networks on this batch (after :meth:`weights`)."""

    def actor_states(self, batch: Batch) -> Tensor:
        """The states the actor loss is evaluated on."""
        return batch.obs

    def actor_loss(self, agent: AgentView, obs: Tensor, batch: Batch) -> Tensor:
        """The per-sample actor loss ℓ_i, (n, 1), differentiable in the actor's parameters.

        Override it to replace the algorithm's (and register with ``own_actor_loss=True``);
        ``agent.actor_loss(obs)`` is the algorithm's own, to build on.
        """
        raise NotImplementedError

    @property
    def overrides_actor_loss(self) -> bool:
        return type(self).actor_loss is not Correction.actor_loss

    def actor_gradient(self, agent: Any, obs: Tensor, coefficients: Tensor | float, batch: Batch) -> Tensor | None:
        """Set the actor's ``.grad`` itself and return L = Σ_i c_i ℓ_i, detached; None (the default): the update
        differentiates the actor loss (:meth:`actor_loss` or the algorithm's). A lane group
        (:mod:`agents.lanes`) uses it where its lanes' actor losses run through each lane's own agent."""
        return None

    @property
    def picks_actor_states(self) -> bool:
        """Whether :meth:`actor_states` gives other states than the batch's."""
        return type(self).actor_states is not Correction.actor_states

    def modules(self) -> dict[str, nn.Module]:
        """The correction's networks, by name (checkpoints)."""
        return {}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """The correction's optimisers, by name (checkpoints)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """Any other state a resumed run needs (counters), picklable."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""


class NoCorrection(Correction):
    """The plain algorithm: no weights, ever."""

    name = "none"

    def active(self, step: int) -> bool:
        return False
