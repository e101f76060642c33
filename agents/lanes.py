"""Lane groups: K runs of one algorithm and task trained in one process, their networks stacked on a lane axis.

    group = LaneGroup([Trainer(config_1, sink_1), Trainer(config_2, sink_2), ...])
    ends = group.run()      # each lane's TrainResult, or the exception that ended it alone

Each lane stays a whole :class:`~agents.training.Trainer`: its own environment, replay buffer, sampler,
correction, generators, records, evaluations and checkpoint file, in the solo format. What the group
shares is the update. Every network parameter of the K lanes lives in one stacked tensor, (K, ...), and
each lane's own ``nn.Parameter`` is a view of its slice, so a lane acts, evaluates, computes its
correction's weights and checkpoints through its own modules exactly as a solo run does, on the values
the stacked update writes. One update of the group:

- each lane samples its batch and draws its noise from its own generator, as its solo run does;
- each lane prepares its update as its solo run does (:meth:`~agents.algorithms.base.ActorCritic.prepare`):
  its correction weighs its own batch with its own agent (λ per lane: K small actor passes) and steps its
  own networks;
- the stacked agent (an instance of the lanes' algorithm, its parameters the stacked tensors) runs the
  update body once for all lanes (:meth:`~agents.algorithms.base.ActorCritic.learn`, the solo run's own,
  on either gradient engine): batched matrix products (``bmm``: lane k's batch meets lane k's weights
  alone), each lane's loss weights, importance weights, actor states and critic decay on a leading lane
  axis, the losses summed over lanes (each lane's gradient is its own loss's), and one fused Adam step over
  the stacked parameters, which is each lane's own Adam since Adam is elementwise.

Nothing in the update reduces across lanes, so a lane whose values turn non-finite harms no other: its
records fail it alone (the sink refuses them), and the group takes it out and goes on. A lane that is
asked to stop checkpoints (with its slice of the optimiser state) and leaves the same way. The
stacked tensors are why a lane's numbers differ from its solo run's only by float rounding where the
batched products round differently from the plain ones (``docs/lanes.md`` says what is bit-identical).

What may share a group (:func:`lane_refusal`, :func:`lane_key`) is declared, not listed: the algorithm's
:meth:`~agents.algorithms.base.ActorCritic.lane_refusal` (the built-ins stack unless ``layer_norm``); every
setting equal but the seed, the correction, its options and ``correction_start``. A correction that writes
its own actor loss trains its lane's actor through the lane's own agent (:class:`LaneStates`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

import torch
from torch import Tensor

from agents import plugins
from agents.algorithms import algorithm_class, make_algorithm
from agents.algorithms.base import ActorCritic, UpdateStats
from agents.algorithms.losses import Coefficients, weighted_sum
from agents.config import ConfigError, TrainConfig
from agents.corrections.base import Correction, Weights
from agents.optim import FlushSubnormals
from agents.replay import Batch
from agents.training import Trainer, TrainResult

PER_RUN = ("seed", "correction", "correction_start")
"""Settings lanes of one group may differ in (besides the correction's options)."""


def lane_refusal(config: TrainConfig) -> str | None:
    """Why a run with ``config`` cannot be a lane (one line), or None when it can: what its algorithm and its
    correction declare."""
    c = config.resolved()
    cls = algorithm_class(c.algo)
    if cls is None:
        return f"unknown algorithm {c.algo!r}"
    reason = cls.lane_refusal(c)
    if reason is not None:
        return f"{c.algo}: {reason}"
    return None


def lane_key(config: TrainConfig) -> dict[str, Any]:
    """What lanes of one group must share: the resolved config but for the seed, the correction and its options.
    The algorithm's own options (TD3's policy delay and target smoothing) are the stacked update's, taken from
    the group's first lane: every lane must hold the same."""
    c = config.resolved()
    values = {f.name: getattr(c, f.name) for f in dataclasses.fields(c) if f.name not in (*PER_RUN, "options")}
    entry = plugins.algorithm(c.algo)
    for group in entry.options if entry is not None else ():
        values.update(c.option(group).flat())
    return values


def check_lanes(configs: Sequence[TrainConfig]) -> None:
    """Raise :class:`~agents.config.ConfigError` (one line) unless ``configs`` may train as one group."""
    if not configs:
        raise ConfigError("a lane group needs at least one run")
    for config in configs:
        reason = lane_refusal(config)
        if reason is not None:
            raise ConfigError(f"seed {config.seed} {config.correction}: {reason}")
    first = lane_key(configs[0])
    for config in configs[1:]:
        other = lane_key(config)
        differ = sorted(name for name in first if first[name] != other[name])
        if differ:
            raise ConfigError(
                f"lanes of one group share every setting but the seed and correction: {', '.join(differ)}"
            )


def _parameters(agent: ActorCritic) -> Iterator[tuple[str, Tensor]]:
    """Every learned tensor of an agent by a stable name: its modules' parameters, then its own tensors."""
    for module_name, module in agent.modules().items():
        for name, param in module.named_parameters():
            yield f"{module_name}.{name}", param
    for name, tensor in agent.tensors().items():
        yield name, tensor


class LaneGroup:
    """K trainers trained in lockstep, their update stacked (see the module's docstring): fresh runs, or runs
    resumed from checkpoints of one step (a stopped or lost group, re-formed)."""

    def __init__(
        self, trainers: Sequence[Trainer], on_end: Callable[[int, TrainResult | Exception], None] | None = None
    ) -> None:
        """``on_end(index, end)`` is called as each lane ends (its result, or the exception that ended it), while
        the others train on: a worker records that lane's end at once."""
        check_lanes([t.config for t in trainers])
        self.on_end = on_end
        at = sorted({(t.step, t.agent.updates) for t in trainers})
        if len(at) > 1:  # lockstep: every lane takes its env step and its update together
            said = ", ".join(f"{step:,}" for step, _ in at)
            raise ConfigError(
                f"lanes of one group go on from one step; these were checkpointed at steps {said}"
                " (offpoc resume of them again starts each from its own)"
            )
        self.lanes: list[Trainer] = list(trainers)
        first = self.lanes[0]
        with torch.random.fork_rng(devices=[]):  # its own initial values are replaced at once
            self.stacked = make_algorithm(first.config, first.agent.obs_dim, first.agent.action_dim, first.generator)
        self._bind()
        self.stacked.updates = first.agent.updates  # resumed: where its update schedule (TD3's delay) stands
        self._stack_optimiser_state()
        for lane in self.lanes:
            lane.before_checkpoint = lambda lane=lane: self._hand_optimiser_state(lane)

    # ---- the stacked tensors ---------------------------------------------------------
    def _bind(self) -> None:
        """Stack the lanes' values into the stacked agent's tensors and make each lane's a view of its slice."""
        self.stacked.lane_generators = [lane.generator for lane in self.lanes]
        lanes = [dict(_parameters(lane.agent)) for lane in self.lanes]
        for name, param in _parameters(self.stacked):
            stacked = torch.stack([own[name].detach() for own in lanes])
            if param.ndim == 0:  # SAC's temperature: (K, 1, 1), to broadcast over each lane's (B, 1)
                stacked = stacked.view(-1, 1, 1)
            param.data = stacked
            for k, own in enumerate(lanes):
                own[name].data = stacked[k].view(own[name].shape)

    def _remove(self, index: int) -> None:
        """Take lane ``index`` out of the stacked tensors (and its optimiser state); the others keep theirs."""
        leaving = self.lanes.pop(index)
        for _, param in _parameters(leaving.agent):
            param.data = param.data.clone()  # its own memory again, with its values
        if not self.lanes:
            return
        keep = torch.tensor([k for k in range(len(self.lanes) + 1) if k != index], device=self.stacked.device)
        for optimizer in self.stacked.optimizers().values():
            for param in optimizer.param_groups[0]["params"]:
                state = optimizer.state.get(param, {})
                for key in ("exp_avg", "exp_avg_sq"):
                    if key in state:
                        state[key] = state[key].index_select(0, keep)
        for step in self.stacked.adam_steps():
            step.regather()
        lanes = [dict(_parameters(lane.agent)) for lane in self.lanes]
        for name, param in _parameters(self.stacked):
            param.data = param.data.index_select(0, keep)
            for k, own in enumerate(lanes):
                own[name].data = param.data[k].view(own[name].shape)
        self.stacked.lane_generators = [lane.generator for lane in self.lanes]

    def _stack_optimiser_state(self) -> None:
        """Stack the lanes' own optimiser state (restored from their checkpoints) into the stacked optimisers:
        the inverse of :meth:`_hand_optimiser_state`. Fresh lanes have none, and nothing is stacked."""
        own = [lane.agent.optimizers() for lane in self.lanes]
        for name, optimizer in self.stacked.optimizers().items():
            lanes = [o[name].param_groups[0]["params"] for o in own]
            for i, param in enumerate(optimizer.param_groups[0]["params"]):
                found = [o[name].state.get(params[i]) for o, params in zip(own, lanes, strict=True)]
                states = [st for st in found if st]
                if len(states) < len(found):
                    continue
                optimizer.state[param] = {
                    "step": states[0]["step"].clone(),  # the same count in every lane: they stepped together
                    "exp_avg": torch.stack([st["exp_avg"] for st in states]).reshape(param.shape).clone(),
                    "exp_avg_sq": torch.stack([st["exp_avg_sq"] for st in states]).reshape(param.shape).clone(),
                }

    def _hand_optimiser_state(self, lane: Trainer) -> None:
        """Put the lane's slice of the stacked optimisers' state into its own optimisers (its checkpoint's)."""
        if lane not in self.lanes:
            return
        k = self.lanes.index(lane)
        own = lane.agent.optimizers()
        for name, optimizer in self.stacked.optimizers().items():
            params = optimizer.param_groups[0]["params"]
            for param, mine in zip(params, own[name].param_groups[0]["params"], strict=True):
                state = optimizer.state.get(param)
                if not state:
                    continue
                own[name].state[mine] = {
                    "step": state["step"].clone(),
                    "exp_avg": state["exp_avg"][k].reshape(mine.shape).clone(),
                    "exp_avg_sq": state["exp_avg_sq"][k].reshape(mine.shape).clone(),
                }

    # ---- the loop --------------------------------------------------------------------
    def run(self) -> dict[int, TrainResult | Exception]:
        """Train every lane to its end; each lane's result by its index in the group, or the exception that
        ended it (raised by its own records, checkpoint or environment: the other lanes go on)."""
        ends: dict[int, TrainResult | Exception] = {}
        if len(self.lanes) == 1:  # a group of one is its solo run: nothing to stack, so the solo loop
            alone = self.lanes[0]
            self._remove(0)
            try:
                self._record(ends, 0, alone.run())
            except Exception as error:
                self._record(ends, 0, error)
            return ends
        index = {id(lane): k for k, lane in enumerate(self.lanes)}
        clock = time.perf_counter()
        self._each(ends, index, lambda lane: lane.begin())
        while self.lanes:
            for lane in list(self.lanes):
                self._guard(ends, index, lane, lambda lane=lane: self._stop_if_asked(ends, index, lane, clock))
            if not self.lanes:
                break
            first = self.lanes[0]
            if first.step >= first.config.total_steps:
                for lane in list(self.lanes):
                    self._guard(ends, index, lane, lambda lane=lane: self._end(ends, index, lane, "finished", clock))
                break
            learning = first.learning
            self._each(ends, index, lambda lane: lane.env_step())
            if learning and self.lanes:
                self._update(ends, index)
            self._each(ends, index, lambda lane: lane.end_step(clock))
        return ends

    def _stop_if_asked(self, ends: dict[int, Any], index: dict[int, int], lane: Trainer, clock: float) -> None:
        if lane.should_stop():
            self._end(ends, index, lane, "stopped", clock)

    def _end(
        self,
        ends: dict[int, Any],
        index: dict[int, int],
        lane: Trainer,
        status: Literal["finished", "stopped"],
        clock: float,
    ) -> None:
        result = lane.finish(status, clock)
        self._remove(self.lanes.index(lane))
        self._record(ends, index[id(lane)], result)

    def _record(self, ends: dict[int, Any], k: int, end: TrainResult | Exception) -> None:
        """Lane ``k``'s end, kept and handed to ``on_end`` at once (an exception there ends no other lane)."""
        ends[k] = end
        if self.on_end is not None:
            self.on_end(k, end)

    def _each(self, ends: dict[int, Any], index: dict[int, int], work: Any) -> None:
        for lane in list(self.lanes):
            self._guard(ends, index, lane, lambda lane=lane: work(lane))

    def _guard(self, ends: dict[int, Any], index: dict[int, int], lane: Trainer, work: Any) -> None:
        """Run one lane's part; an exception ends that lane alone."""
        try:
            work()
        except Exception as error:
            if lane in self.lanes:
                self._remove(self.lanes.index(lane))
            if index[id(lane)] not in ends:  # not a failure in on_end for a lane already ended
                self._record(ends, index[id(lane)], error)

    def _update(self, ends: dict[int, Any], index: dict[int, int]) -> None:
        """One update of every lane: each lane prepares its own (batch, weights, its correction's networks), the
        stacked agent runs the update body once, and each lane records its own statistics."""
        prepared: list[tuple[Batch, Weights, Correction | None, ActorCritic]] = []
        for lane in list(self.lanes):

            def prepare(lane: Trainer = lane) -> None:
                batch, correction = lane.sample()
                with FlushSubnormals():
                    weights, correction = lane.agent.prepare(batch, correction)
                prepared.append((batch, weights, correction, lane.agent))

            self._guard(ends, index, lane, prepare)
        if not self.lanes:
            return
        try:
            stats, td_errors = lane_update(
                self.stacked, prepared, [lane.sampler.hears_td_errors for lane in self.lanes]
            )
        except Exception as error:  # no lane's own doing: each lane still in the group ends with it
            for lane in list(self.lanes):
                self._guard(ends, index, lane, functools.partial(_raise, error))
            return
        for lane, (batch, _, _, _), lane_stats, td_error in zip(
            list(self.lanes), prepared, stats, td_errors, strict=True
        ):
            self._guard(
                ends, index, lane, lambda lane=lane, b=batch, s=lane_stats, e=td_error: lane.record_update(b, s, e)
            )


def _raise(error: Exception) -> None:
    raise error


class LaneStates(Correction):
    """The lanes' corrections as the update body sees them: each lane's actor states, stacked (a correction
    may draw them from its own replay, with its lane's generator, at the point its solo run does); and, where
    a lane's correction writes its own actor loss, each lane's actor gradient through its own agent."""

    def __init__(self, lanes: Sequence[tuple[Batch, Correction | None, ActorCritic]]) -> None:
        super().__init__()
        self.lanes = lanes
        self.own_loss = any(c is not None and c.overrides_actor_loss for _, c, _ in lanes)
        self.logged: list[Mapping[str, Tensor]] = [{} for _ in lanes]
        """Each lane's logged quantities of its own actor step (:meth:`actor_gradient`: what its own agent
        logs, as its solo run's does), where that step ran on the lane's agent."""

    def actor_states(self, batch: Batch) -> Tensor:
        return torch.stack([c.actor_states(b) if c is not None else b.obs for b, c, _ in self.lanes])

    def actor_gradient(self, agent: Any, obs: Tensor, coefficients: Tensor | float, batch: Batch) -> Tensor | None:
        """Where a lane's correction writes its own actor loss (autograd alone): each lane's loss on its own agent
        (whose parameters are views of the stacked ones; a correction's loss may reuse a graph its weights
        built there), its gradient put in the stacked actor's slice k, and what the loss left for the
        temperature step stacked into ``agent`` (each lane's logged quantities kept in :attr:`logged`). None
        otherwise: the stacked loss."""
        if not self.own_loss:
            return None
        stacked: ActorCritic = agent
        params = list(stacked.actor.parameters())
        grads: list[list[Tensor]] = [[] for _ in params]
        losses, states = [], []
        for k, (lane_batch, correction, lane) in enumerate(self.lanes):
            lane.last_target = None if stacked.last_target is None else stacked.last_target[k]
            c = coefficients[k] if isinstance(coefficients, Tensor) else coefficients
            own = correction is not None and correction.overrides_actor_loss
            per_sample = correction.actor_loss(lane, obs[k], lane_batch) if own else lane.actor_loss(obs[k])  # type: ignore[union-attr]
            loss = weighted_sum(per_sample, c)
            for i, grad in enumerate(torch.autograd.grad(loss, list(lane.actor.parameters()))):
                grads[i].append(grad)
            losses.append(loss.detach())
            states.append(lane.actor_step_state())
            self.logged[k] = lane.logged() if lane.quantities else {}
        for param, lane_grads in zip(params, grads, strict=True):
            param.grad = torch.stack(lane_grads).reshape(param.shape)
        names = set.intersection(*(set(state) for state in states))
        stacked.set_actor_step_state({name: torch.stack([state[name] for state in states]) for name in names})
        return torch.stack(losses)


def _stack(batches: Sequence[Batch]) -> Batch:
    """The lanes' batches on a leading lane axis; importance weights of 1 for a lane whose sampler has none."""
    importance = None
    if any(b.importance is not None for b in batches):
        importance = torch.stack([torch.ones_like(b.reward) if b.importance is None else b.importance for b in batches])
    return Batch(
        obs=torch.stack([b.obs for b in batches]),
        action=torch.stack([b.action for b in batches]),
        reward=torch.stack([b.reward for b in batches]),
        next_obs=torch.stack([b.next_obs for b in batches]),
        not_terminated=torch.stack([b.not_terminated for b in batches]),
        importance=importance,
    )


def lane_update(
    stacked: ActorCritic,
    prepared: Sequence[tuple[Batch, Weights, Correction | None, ActorCritic]],
    td_errors: Sequence[bool],
) -> tuple[list[UpdateStats], list[Tensor | None]]:
    """The update body (:meth:`~agents.algorithms.base.ActorCritic.learn`) once for every lane, each on its
    prepared batch, weights and correction; each lane's stats, and its TD errors where ``td_errors`` asks
    (a prioritised sampler's)."""
    stacked.updates += 1
    batches = [batch for batch, _, _, _ in prepared]
    weights = [w for _, w, _, _ in prepared]
    with FlushSubnormals():
        batch = _stack(batches)
        coefficients = Coefficients(weights, batch.obs.shape[1], lanes_like=batch.reward)
        per_lane = any(c is not None and (c.picks_actor_states or c.overrides_actor_loss) for _, _, c, _ in prepared)
        correction = LaneStates([(b, c, agent) for b, _, c, agent in prepared]) if per_lane else None
        critic_loss, actor_loss, q_mean, logged = stacked.learn(batch, coefficients, correction)
        own = correction.logged if correction is not None else [{} for _ in prepared]
        errors = stacked.last_td_error() if any(td_errors) else None
        alpha = stacked.alpha_value()
    stats = [
        UpdateStats(
            critic_loss[k],
            None if actor_loss is None else actor_loss[k],
            q_mean[k],
            alpha=None if alpha is None else alpha[k].reshape(()),
            logged={**w.logged, **own[k], **{name: value[k] for name, value in logged.items()}},
        )
        for k, w in enumerate(weights)
    ]
    return stats, [errors[k] if errors is not None and asks else None for k, asks in enumerate(td_errors)]
