"""The update every algorithm shares; weights enter it in one place (:mod:`agents.algorithms.losses`).

An algorithm supplies its networks, its critic target, its actor loss and its
schedule; :meth:`ActorCritic.update` does the rest, identically for DDPG, TD3
and SAC:

    w  = correction.weights(batch, current policy)     # once, before any step
    c  = loss_coefficients(w.critic, B)                # L = Σ_i c_i ℓ_i: where weights enter
    y  = target(batch)
    critic: ℓ_i = Σ_critics (Q(s_i, a_i) − y_i)², step on L
    actor (when due): ℓ_i = the algorithm's actor loss (or the correction's) on the
        correction's actor states, c from w.actor, step on L
    after_actor_step(); soft-update targets (when due)

Each algorithm states its actor loss per sample (``actor_loss``, differentiable);
the critic's is shared. Two backends turn them into gradients, with the same
results (``tests/agents/test_backends.py``):

- ``autograd``: L = Σ_i c_i ℓ_i, then ``torch.autograd.grad``: any network built
  from torch modules, any loss;
- ``fast``: the gradients written out, ∂L/∂Q = 2 c (Q − y) for the critic and each
  algorithm's ``actor_backward`` for its actor loss, back-propagated by hand
  (:mod:`agents.backprop`), for Linear/ReLU/Tanh networks. It skips autograd's
  graph and bookkeeping; ``tests/agents/test_gradients.py`` checks it against autograd.

``config.backend`` (resolved: ``auto`` becomes ``fast`` wherever it applies) picks one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

from agents.algorithms.losses import (
    Coefficients,
    SoftUpdate,
    adam,
    grad_norm,
    set_grads,
    weighted_sum,
)
from agents.algorithms.memo import PolicyMemo
from agents.config import ConfigError, TrainConfig
from agents.corrections.base import NO_WEIGHTS, Correction, PolicyKind, Weights
from agents.host_forward import HostForward
from agents.networks import DDPGCritic, DeterministicActor, GaussianPolicy, TwinCritic
from agents.optim import AdamStep, FlushSubnormals
from agents.quantities import Quantity
from agents.replay import Batch

DECAY_SHARE = Quantity("decay_share", "decay's share of the critic's gradient")
"""Per update with a critic weight decay, ‖d‖ / (‖g‖ + ‖d‖) of the gradient the critic's Adam receives, g
the TD term's part and d the decay's (in whichever ``critic_decay_form``): 0 without decay, near 1 when
the decay drives the critic. With the decay in Adam, a λ < 1 shrinks g alone and raises it (issue 49)."""


class UpdateStats(NamedTuple):
    """What one update reports; tensors stay on device (no host sync per step)."""

    critic_loss: Tensor
    actor_loss: Tensor | None
    q_mean: Tensor
    alpha: Tensor | None
    logged: Mapping[str, Tensor]
    """Per-update quantities by name (the correction's λ, ...), 0-d or (B, 1); see :mod:`agents.quantities`."""


class Action(NamedTuple):
    """An action to send to the (normalised) environment."""

    action: np.ndarray
    """(d,) in [-1, 1]"""
    behaviour: tuple[np.ndarray, np.ndarray] | None = None
    """An explored action's Gaussian (mean, log_std): SAC's pre-tanh one; DDPG's and TD3's N(π(s), σ²I)."""


def _definer(cls: type, name: str) -> type:
    return next(k for k in cls.__mro__ if name in vars(k))


def hand_written(cls: type[ActorCritic]) -> bool:
    """Whether the fast backend's gradients are ``cls``'s losses': an ``actor_backward`` written for its own
    ``actor_loss`` (defined by the same class or one below it, so a subclass that changes the loss and
    inherits the gradient is not), and the built-in critic loss, whose gradient the update writes out."""
    backward, loss = _definer(cls, "actor_backward"), _definer(cls, "actor_loss")
    own_critic_loss = _definer(cls, "critic_loss") is not ActorCritic
    return backward is not ActorCritic and issubclass(backward, loss) and not own_critic_loss


class ActorCritic(ABC):
    """Shared state and update of an off-policy actor-critic agent."""

    policy_kind: PolicyKind
    critics: ClassVar[int] = 2
    """Critic networks (each with a target copy): what the memory check counts before a run starts."""
    keeps_target_actor: ClassVar[bool] = True
    """Whether it keeps a target copy of its actor (DDPG and TD3 do; SAC does not)."""
    hidden_layers: ClassVar[int | None] = None
    """The number of hidden sizes its networks need, where they need one (DDPG's critic: two); None = any."""
    steps_per_second: ClassVar[float | None] = None
    """Environment steps a second of one worker on Hopper-v4 in its default settings, as measured
    (``benchmarks/throughput.py``): the time estimate's figure where a store has no run of it to go by;
    None: unmeasured (the estimate goes by TD3's)."""
    actor: DeterministicActor | GaussianPolicy
    critic: TwinCritic | DDPGCritic
    critic_target: TwinCritic | DDPGCritic
    actor_target: nn.Module | None = None
    """DDPG and TD3 keep a target actor; SAC has none."""
    last_target: Tensor | None = None
    """This update's critic target y, (B, 1), detached: a correction's actor loss may read it (TD errors)."""
    _last_q: Tensor | None = None
    quantities: tuple[Quantity, ...] = ()
    """Per-update quantities the algorithm logs besides its losses (:meth:`logged` gives their values)."""
    lane_generators: list[torch.Generator] | None = None
    """Set on a lane group's stacked agent only (:mod:`agents.lanes`): each lane's own generator."""

    @property
    def stacked(self) -> bool:
        """Whether this is a lane group's stacked agent: its tensors carry a leading lane axis."""
        return self.lane_generators is not None

    def __init__(self, config: TrainConfig, obs_dim: int, action_dim: int, generator: torch.Generator) -> None:
        self.config = config
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.device = torch.device(config.device)
        self.generator = generator
        self.updates = 0
        self.build()
        self.fast = config.backend == "fast"
        networks = all(getattr(m, "fast", False) for m in (self.actor, self.critic))
        if self.fast and not (hand_written(type(self)) and networks):
            raise ConfigError(
                "backend fast cannot train this agent (a layer it does not cover, its own critic loss, or no"
                " hand-written actor gradient): use backend=auto or autograd"
            )
        self.pi = PolicyMemo(self.actor, taped=self.fast)
        chain = self.actor.chain
        self.host_forward = HostForward(chain) if self.device.type == "cpu" and chain is not None else None
        self.soft_updates = [
            SoftUpdate(target, source, config.tau)  # type: ignore[arg-type]
            for target, source in self.target_pairs()
        ]
        self._critic_params: list[Tensor] = list(self.critic.parameters())
        self.critic_optimizer = adam(self._critic_params, config.critic_lr)  # type: ignore[arg-type]
        self._decay_share: Tensor | None = None
        self.set_critic_decay(float(config.critic_weight_decay or 0.0), config.critic_decay_form)
        if config.critic_weight_decay:
            self.quantities = (*self.quantities, DECAY_SHARE)
        self.actor_optimizer = adam(self.actor.parameters(), config.actor_lr)  # type: ignore[arg-type]
        self.critic_step, self.actor_step = AdamStep(self.critic_optimizer), AdamStep(self.actor_optimizer)
        """One Adam step of each network from its gradients (the update's, or a lane group's stacked one)."""

    @classmethod
    def lane_refusal(cls, config: TrainConfig) -> str | None:
        """Why a lane group cannot stack this algorithm's update for a run with ``config`` (one line), or None.

        A lane group runs :meth:`learn` once on networks whose parameters carry a leading lane axis
        (:mod:`agents.lanes`); the built-in networks stack where their layers are Linear, ReLU and Tanh.
        An algorithm whose target or losses reduce across the batch other than per lane (the last two
        axes) declares so here."""
        if config.layer_norm:
            return "a lane group stacks Linear, ReLU and Tanh layers, not layer_norm's LayerNorm"
        return None

    # ---- what an algorithm defines -------------------------------------------------
    @abstractmethod
    def build(self) -> None:
        """Create actor, critic, critic_target (and any other networks)."""

    @abstractmethod
    def target(self, batch: Batch) -> Tensor:
        """The critic target y, (B, 1), computed without gradient."""

    @abstractmethod
    def actor_loss(self, obs: Tensor) -> Tensor:
        """The per-sample actor loss ℓ_i, (B, 1), differentiable: the specification (autograd backend)."""

    def critic_loss(self, q: Tensor, y: Tensor) -> Tensor:
        """The per-sample critic loss ℓ_i, (B, 1), from the critics' Q(s_i, a_i), (E, B, 1), and the target y,
        (B, 1): Σ_critics (Q − y)². An algorithm with another loss overrides it; the fast backend, whose critic
        gradient is this loss's, then refuses it and ``auto`` trains it with autograd."""
        return (q - y).square().sum(0)

    def actor_backward(self, obs: Tensor, coefficients: Tensor | float) -> Tensor:
        """The fast backend's :meth:`actor_loss`: returns ℓ_i and sets the actor's ``.grad`` to ∂(Σ_i c_i ℓ_i)/∂θ."""
        raise TypeError(f"{type(self).__name__} has no hand-written actor gradient: use backend=autograd")

    @abstractmethod
    def act(self, obs: np.ndarray, explore: bool, rng: np.random.Generator) -> Action:
        """An action for one observation; ``explore`` adds the algorithm's exploration."""

    def greedy_actions(self, obs: np.ndarray) -> np.ndarray | None:
        """``act(o, explore=False).action`` for each row ``o`` of an (n, obs_dim) batch, bit for bit, as
        (n, action_dim); None where the algorithm cannot promise the bits (the evaluation then steps its
        episodes one at a time). Stepping an evaluation's episodes together rests on it
        (:class:`agents.evaluation.Evaluator`)."""
        return None

    def actor_due(self) -> bool:
        """Whether this update (``self.updates`` counts from 1) steps the actor."""
        return True

    def after_actor_step(self) -> None:
        """Extra work after the actor step (SAC's temperature)."""

    def update_targets(self, actor_stepped: bool) -> None:
        """Soft-update the target networks (every update unless overridden)."""
        for soft_update in self.soft_updates:
            soft_update()

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """(target, online) network pairs that soft updates track."""
        pairs: list[tuple[nn.Module, nn.Module]] = [(self.critic_target, self.critic)]
        return [*pairs, (self.actor_target, self.actor)] if self.actor_target is not None else pairs

    def actor_step_state(self) -> dict[str, Tensor]:
        """What this update's actor loss left for :meth:`after_actor_step`, by name (detached): a lane group
        whose lanes' actor losses ran on their own agents stacks it into its stacked agent
        (:meth:`set_actor_step_state`). Nothing, unless an algorithm's step needs it (SAC's log π)."""
        return {}

    def set_actor_step_state(self, state: Mapping[str, Tensor]) -> None:
        """Put :meth:`actor_step_state`'s values in place (a lane group's, stacked)."""

    def alpha_value(self) -> Tensor | None:
        """The entropy temperature, for stochastic policies."""
        return None

    def greedy_action(self, obs: Tensor) -> Tensor:
        """A deterministic policy's action π(s) on a batch, without exploration (DDPG, TD3)."""
        raise TypeError(f"{type(self).__name__} has a stochastic policy: ask for policy_distribution")

    def policy_distribution(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """A stochastic policy's pre-tanh Gaussian (mean, log_std) on a batch (SAC)."""
        raise TypeError(f"{type(self).__name__} has a deterministic policy: ask for greedy_action")

    def last_td_error(self) -> Tensor:
        """This update's max over the critics of |Q(s_i, a_i) − y_i|, (B, 1), detached (a prioritised
        sampler's priorities); computed only when asked."""
        assert self._last_q is not None and self.last_target is not None, "no update yet"
        return (self._last_q - self.last_target).abs().amax(0)

    def state_value(self, obs: Tensor, output: Any = None) -> Tensor:
        """V(s) from the critics, (B, 1), without gradient, for corrections' learning signals:
        Q₁(s, π(s)) for a deterministic policy (SAC: its soft value). ``output``: the actor's
        output on ``obs`` when the caller already has it (saves a forward pass)."""
        with torch.no_grad():
            action = self.actor(obs) if output is None else output.detach()
            return self.critic(obs, action, first_only=True)[0]

    def logged(self) -> Mapping[str, Tensor]:
        """This update's values of ``quantities``, by name (0-d or (B, 1), detached)."""
        return {}

    def modules(self) -> dict[str, nn.Module]:
        """Every network, by name (checkpoints)."""
        modules: dict[str, nn.Module] = {
            "actor": self.actor,
            "critic": self.critic,
            "critic_target": self.critic_target,
        }
        return modules | {"actor_target": self.actor_target} if self.actor_target is not None else modules

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Every optimiser, by name (checkpoints)."""
        return {"actor": self.actor_optimizer, "critic": self.critic_optimizer}

    def adam_steps(self) -> list[AdamStep]:
        """Every optimiser's fast step (:class:`~agents.optim.AdamStep`): what must gather its state again when
        the optimisers' state is changed from outside (a lane leaving its group)."""
        return [self.critic_step, self.actor_step]

    def tensors(self) -> dict[str, Tensor]:
        """Learned tensors outside any module, by name (checkpoints)."""
        return {}

    def _noise(self, shape: Sequence[int]) -> Tensor:
        """Standard normal noise of ``shape`` from the run's generator; in a lane group's stacked agent
        (``lane_generators`` set, ``shape`` (K, ...)), lane k's slice from lane k's generator, as its solo
        run draws it."""
        if self.lane_generators is not None:
            noise = torch.stack([torch.randn(shape[1:], generator=g) for g in self.lane_generators])
        else:
            noise = torch.randn(shape, generator=self.generator)
        return noise.to(self.device)  # drawn on the CPU (the run's generator is there), moved once

    # ---- the shared update ---------------------------------------------------------
    def update(self, batch: Batch, correction: Correction | None = None) -> UpdateStats:
        """One gradient update on a batch; ``correction`` None means plain losses: :meth:`prepare`, then
        :meth:`learn`, the one update body (a lane group's stacked agent runs the same, :mod:`agents.lanes`).

        The whole update flushes subnormal floats to zero (:class:`~agents.optim.FlushSubnormals`):
        a correction's tiny weights (a density ratio of e⁻⁸⁰) carried through the backward passes
        make subnormal products, which CPUs compute through slow microcode assists (measured: TD3's
        backward matrix products 2.5 times slower under RIS-Off-PAC). Flushed, those contributions
        below 1.2e-38 become the zero they round towards; nothing larger changes.
        """
        with FlushSubnormals():
            weights, correction = self.prepare(batch, correction)
            critic_loss, actor_loss, q_mean, logged = self.learn(
                batch, Coefficients([weights], batch.obs.shape[0]), correction
            )
        logged = {**weights.logged, **logged} if logged else weights.logged
        return UpdateStats(critic_loss, actor_loss, q_mean, alpha=self.alpha_value(), logged=logged)

    def prepare(self, batch: Batch, correction: Correction | None) -> tuple[Weights, Correction | None]:
        """What comes before the gradient steps of an update, counted in ``updates``: the correction's weights,
        from the policy before any step, and its own networks' step; the correction this update applies (none
        where it serves the actor alone and the actor does not step)."""
        self.updates += 1
        if correction is not None and correction.actor_only and not self.actor_due():
            correction = None  # an update without an actor step is the plain one for such a correction
        with torch.no_grad():
            weights = correction.weights(batch, self) if correction is not None else NO_WEIGHTS
        if correction is not None:
            correction.auxiliary_update(batch, self)
        return weights, correction

    def learn(
        self, batch: Batch, coefficients: Coefficients, correction: Correction | None
    ) -> tuple[Tensor, Tensor | None, Tensor, Mapping[str, Tensor]]:
        """The update body, for a solo run and a lane group alike (whose tensors carry a leading lane axis and
        whose losses come out per lane): the critic's step on L = Σ_i c_i w_i ℓ_i (w_i a sampler's importance
        weights, or 1), the actor's (when due) on the correction's actor states, the targets' soft update.
        Returns the critic and actor losses, the mean Q and the algorithm's logged quantities."""
        if self.fast and correction is not None and correction.overrides_actor_loss:
            raise ConfigError(f"correction {correction.name!r} writes its own actor loss: use backend=auto or autograd")
        with torch.no_grad():
            y = self.last_target = self.target(batch)
        c = coefficients.critic
        critic_c = c if batch.importance is None else c * batch.importance
        critic_loss, self._last_q = self._critic_gradient(batch, y, critic_c)
        with torch.no_grad():
            self._add_critic_decay(coefficients)
        self.critic_step()

        actor_loss = None
        stepped = self.actor_due()
        if stepped:  # delayed for TD3; gradients reach the actor's parameters only
            obs = correction.actor_states(batch) if correction is not None else batch.obs
            actor_loss = self._actor_gradient(obs, coefficients.actor(obs.shape[-2]), batch, correction)
            self.actor_step()
            self.after_actor_step()

        with torch.no_grad():
            self.update_targets(stepped)
        q = self._last_q
        q_mean = q.mean((0, -2, -1)) if self.stacked else q.mean()
        logged = self.logged() if self.quantities else {}
        if self._decay_share is not None:
            logged = {**logged, DECAY_SHARE.name: self._decay_share}
        return critic_loss, actor_loss, q_mean, logged

    def _critic_gradient(self, batch: Batch, y: Tensor, c: Tensor | float) -> tuple[Tensor, Tensor]:
        """Set the critic's ``.grad`` to ∂L/∂θ, L = Σ_i c_i ℓ_i; return L and Q(s_i, a_i), (E, B, 1), detached.
        Hand-written (``fast``): ℓ_i = Σ_critics (Q − y)², so ∂L/∂Q = 2 c (Q − y); else autograd's."""
        if self.fast:
            with torch.no_grad():
                q, tapes = self.critic.forward_tape(batch.obs, batch.action)
                td_error = q - y
                loss = weighted_sum(td_error.square().sum(0), c)
                self.critic.backward(tapes, td_error * (2 * c))
                return loss, q
        q = self.critic(batch.obs, batch.action)
        loss = weighted_sum(self.critic_loss(q, y), c)
        set_grads(self.critic, loss.sum())  # a lane group's: Σ_k L_k, so lane k's parameters get ∂L_k/∂θ_k
        return loss.detach(), q.detach()

    def _actor_gradient(self, obs: Tensor, c: Tensor | float, batch: Batch, correction: Correction | None) -> Tensor:
        """Set the actor's ``.grad`` to ∂L/∂φ, L = Σ_i c_i ℓ_i (the algorithm's ℓ_i, or the correction's own);
        return L, detached."""
        if self.fast:
            with torch.no_grad():
                return weighted_sum(self.actor_backward(obs, c), c)
        if correction is not None and (loss := correction.actor_gradient(self, obs, c, batch)) is not None:
            return loss
        own = correction is not None and correction.overrides_actor_loss
        per_sample = correction.actor_loss(self, obs, batch) if own else self.actor_loss(obs)  # type: ignore[union-attr]
        loss = weighted_sum(per_sample, c)
        set_grads(self.actor, loss.sum())
        return loss.detach()

    def set_critic_decay(self, decay: float, form: str) -> None:
        """The critic's weight decay ``decay`` and where it enters (``critic_decay_form``: loss or adam)."""
        self.critic_decay = decay if form == "loss" else 0.0  # the update adds it to the loss
        self._adam_decay = decay if form == "adam" else 0.0  # Adam's L2 adds it
        self.critic_optimizer.param_groups[0]["weight_decay"] = self._adam_decay

    def _add_critic_decay(self, coefficients: Coefficients) -> None:
        """The decay term's gradient, with ``critic_decay_form`` loss: L = Σ_i c_i (ℓ_i + wd/2·‖θ‖²), so the
        critic's gradient gains (Σ_i c_i)·wd·θ and a correction's weight scales the decay as it scales the
        TD term (a sampler's importance weights do not: they reweight transitions, and the decay is no
        transition's). With the plain mean, Σ_i c_i = 1: Adam's L2 exactly. Either form, it also measures
        :data:`DECAY_SHARE` (a lane group: each lane's, over its own parameters)."""
        if not (self.critic_decay or self._adam_decay):
            self._decay_share = None
            return
        lanes = self.stacked
        grads: list[Tensor] = [p.grad for p in self._critic_params]  # type: ignore[misc]
        td = grad_norm(grads, lanes)
        if self._adam_decay:  # Adam adds wd·θ to the gradient itself
            decay = grad_norm(self._critic_params, lanes) * self._adam_decay
        else:
            scale = coefficients.total()
            if isinstance(scale, Tensor) and scale.device.type == "cpu" and not lanes:
                scale = float(scale)  # no sync to pay for here; as a number, λ = 1 is Adam's L2 to the bit
            if isinstance(scale, Tensor):  # on a GPU (no host sync per update), or each lane's
                factor = scale * self.critic_decay
                terms = [p * (factor.view(-1, *(1,) * (p.ndim - 1)) if lanes else factor) for p in self._critic_params]
                torch._foreach_add_(grads, terms)
            else:
                torch._foreach_add_(grads, self._critic_params, alpha=scale * self.critic_decay)
            decay = grad_norm(self._critic_params, lanes) * (scale * self.critic_decay)
        self._decay_share = decay / (td + decay).clamp_min(torch.finfo(td.dtype).tiny)

    # ---- helpers shared by algorithms ----------------------------------------------
    def actor_outputs(self, obs: np.ndarray) -> np.ndarray | None:
        """:meth:`actor_output` of each row of an (n, obs_dim) batch, bit for bit, as (n, out); None off the
        CPU, where a batched product on the device may round otherwise than one row."""
        return self.host_forward.rows(obs) if self.host_forward is not None else None

    def actor_output(self, obs: np.ndarray) -> np.ndarray:
        """The actor's last layer on one observation, (out,) float32, without gradient.

        On a CPU in NumPy on the parameters' memory (see :mod:`agents.host_forward`),
        elsewhere through torch.
        """
        if self.host_forward is not None:
            return self.host_forward(obs)
        with torch.no_grad():
            x = torch.as_tensor(obs, dtype=torch.float32, device=self.device).unsqueeze(0)
            return self.actor.output(x)[0].cpu().numpy()
