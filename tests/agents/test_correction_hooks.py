"""The correction interface's hooks, each through the real update and trainer, without touching an algorithm file.

- an actor-loss override in a dozen lines (TD3 and SAC): autograd chosen, fast refused;
- separate critic and actor weights;
- the actor's states;
- extra fields stored per transition;
- an auxiliary network with its optimiser: trained, checkpointed, resumed exactly;
- a new logged quantity reaching the store, the export and the Quantities view with no other edit.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from agents import ConfigError, RecordingSink, TrainConfig, Trainer
from agents.algorithms import TD3, ActorCritic, TD3Options
from agents.algorithms.deterministic import AT_BOUND
from agents.corrections import Collected, Correction, Weights, register, unregister
from agents.evaluation import EVAL_AT_BOUND
from agents.quantities import Quantity
from agents.replay import Batch, ReplayBuffer
from tests.support.batches import ACT, agent, batch, params, same

SMALL = dict(
    env_id="Pendulum-v1", hidden=(32, 32), total_steps=400, start_steps=200, correction_start=200, batch_size=32,
    buffer_size=2000, eval_freq=400, eval_episodes=1, stats_every=200, weights_block=50, histogram_bins=10,
)  # fmt: skip


# ---- an actor-loss override, as a user would write it --------------------------------------------
class BehaviourCloning(Correction):
    """TD3+BC's actor loss: the algorithm's own plus ‖π(s) − a‖² towards the stored action."""

    name = "test-bc"

    def actor_loss(self, agent: ActorCritic, obs: Tensor, batch: Batch) -> Tensor:
        output = agent.actor(obs)
        action = output if agent.policy_kind == "deterministic" else torch.tanh(output[0])
        return agent.actor_loss(obs) + (action - batch.action).square().sum(-1, keepdim=True)


@pytest.fixture
def registered() -> Iterator[None]:
    register("test-bc", lambda settings: BehaviourCloning(settings), own_actor_loss=True)
    register("test-aux", lambda settings: RewardModel(settings))
    yield
    unregister("test-bc")
    unregister("test-aux")


@pytest.mark.parametrize("algo", ["td3", "sac"])
def test_a_correction_overriding_the_actor_loss_trains_with_autograd(algo: str, registered: None) -> None:
    config = TrainConfig.make(algo=algo, correction="test-bc", **SMALL)  # type: ignore[arg-type]
    assert config.resolved().backend == "autograd"  # auto: the fast path does not cover its loss
    with pytest.raises(ConfigError, match="writes its own actor loss"):
        TrainConfig.make(algo=algo, correction="test-bc", backend="fast").resolved()

    # One update: exactly the step autograd takes on the plain mean of the new loss.
    a, reference = agent(algo, backend="autograd"), agent(algo, backend="autograd")
    b, correction = batch(), BehaviourCloning()
    a.updates = reference.updates = 1  # TD3: the actor steps on even updates
    reference.update(b)  # critic step, identical in both
    a.update(b, correction)
    actor_before = params(agent(algo, backend="autograd").actor)
    assert same(params(a.critic), params(reference.critic))
    assert not same(params(a.actor), params(reference.actor)) and not same(params(a.actor), actor_before)

    sink = RecordingSink()
    result = Trainer(config, sink).run()
    assert result.updates == 200 and all(np.isfinite(s.actor_loss) for s in sink.stats if s.actor_loss is not None)


def test_the_overriding_loss_is_the_one_differentiated() -> None:
    """The actor step equals Adam's step on autograd's gradient of Σ_i c_i ℓ_i for the correction's ℓ_i."""
    a = agent("td3", backend="autograd")
    a.updates = 1  # the next update steps the actor
    b, correction = batch(), BehaviourCloning()
    expected_actor = agent("td3", backend="autograd").actor
    expected_actor.load_state_dict(a.actor.state_dict())
    optimiser = torch.optim.Adam(expected_actor.parameters(), lr=a.config.actor_lr)
    a.update(b, correction)  # the critic steps first: the actor loss reads the new critic
    loss = (-a.critic(b.obs, expected_actor(b.obs))[0] + (expected_actor(b.obs) - b.action).square().sum(-1)).mean()
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()
    for x, y in zip(a.actor.parameters(), expected_actor.parameters(), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


# ---- separate weights, the actor's states ----------------------------------------------------------
class Split(Correction):
    """Given critic and actor weights, and optionally the actor's states."""

    def __init__(self, critic: Tensor | None, actor: Tensor | None, states: Tensor | None = None) -> None:
        super().__init__()
        self.critic, self.actor, self.states = critic, actor, states

    def weights(self, batch: Batch, agent: Any) -> Weights:
        return Weights(self.critic, self.actor)

    def actor_states(self, batch: Batch) -> Tensor:
        return batch.obs if self.states is None else self.states


@pytest.mark.parametrize("backend", ["fast", "autograd"])
@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_critic_and_actor_weights_are_separate(algo: str, backend: str) -> None:
    zero = torch.tensor(0.0)
    for critic_weight, actor_weight in ((zero, None), (None, zero)):
        # (no weight decay: DDPG's L2 term would move a critic whose loss has weight 0)
        a, plain = (agent(algo, backend=backend, critic_weight_decay=0.0) for _ in range(2))
        a.updates = plain.updates = 1
        critic0, actor0 = params(a.critic), params(a.actor)
        a.update(batch(), Split(critic_weight, actor_weight))
        plain.update(batch())
        critic_moved, actor_moved = not same(params(a.critic), critic0), not same(params(a.actor), actor0)
        assert (critic_moved, actor_moved) == (critic_weight is None, actor_weight is None)
        if critic_weight is None:  # the unweighted loss is the plain one
            torch.testing.assert_close(params(a.critic), params(plain.critic))


def inputs_of(agent: ActorCritic, method: str) -> list[Tensor]:
    """Wraps an agent's method so that the states it is called with are kept (the actor loss's input)."""
    seen: list[Tensor] = []
    own = getattr(agent, method)

    def spy(obs: Tensor, *rest: Any) -> Any:
        seen.append(obs)
        return own(obs, *rest)

    setattr(agent, method, spy)
    return seen


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_the_actor_steps_on_the_states_a_correction_chooses(algo: str) -> None:
    b = batch()
    other = torch.randn(b.obs.shape, generator=torch.Generator().manual_seed(11))
    results = []
    for backend, loss in (("fast", "actor_backward"), ("autograd", "actor_loss")):
        chosen, plain = agent(algo, backend=backend), agent(algo, backend=backend)
        chosen.updates = plain.updates = 1
        seen = inputs_of(chosen, loss)
        chosen.update(b, Split(None, None, states=other))
        plain.update(b)
        assert len(seen) == 1 and seen[0] is other
        torch.testing.assert_close(params(chosen.critic), params(plain.critic))  # the critic keeps the batch
        assert not same(params(chosen.actor), params(plain.actor))
        results.append(params(chosen.actor))
    torch.testing.assert_close(results[0], results[1], rtol=1e-4, atol=1e-5)  # both backends agree


def test_recent_transitions_follow_the_fifo_across_episode_ends_and_wrap_around() -> None:
    buffer = ReplayBuffer(7, 1, ACT)
    for t in range(12):
        end = t % 4 == 3  # an episode end takes an extra slot for its final observation
        buffer.add(np.array([t], np.float32), np.zeros(ACT), float(t), np.array([t + 1], np.float32), False, end)
    recent = buffer.recent(4)
    assert recent.reward[:, 0].tolist() == [8.0, 9.0, 10.0, 11.0]  # oldest first
    np.testing.assert_array_equal(recent.next_obs[:, 0], recent.obs[:, 0] + 1)
    # Asked for more than it holds: every stored transition, oldest first (7 slots, two of them final observations).
    assert buffer.recent(50).reward[:, 0].tolist() == [7.0, 8.0, 9.0, 10.0, 11.0] and len(buffer) == 5


# ---- extra fields, an auxiliary network, a new quantity --------------------------------------------
LOSS = Quantity("reward_model_loss", "reward-model loss", 0.0, 50.0)
ERROR = Quantity("reward_error", "|r̂ − r|", 0.0, 20.0)


class RewardModel(Correction):
    """Learns r(s, a) on the side, stores each transition's step, logs its loss and per-transition error."""

    quantities = (LOSS, ERROR)
    fields: ClassVar[dict[str, int]] = {"step": 1}

    def attach(self, agent: ActorCritic, replay: ReplayBuffer) -> None:
        generator = torch.Generator().manual_seed(1)
        self.model = nn.Sequential(nn.Linear(agent.obs_dim + agent.action_dim, 16), nn.ReLU(), nn.Linear(16, 1))
        for p in self.model.parameters():
            p.data.normal_(0.0, 0.3, generator=generator)
        self.optimiser = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.fits = 0

    def collect(self, transition: Collected) -> dict[str, float]:
        return {"step": float(transition.step)}

    def _error(self, batch: Batch) -> Tensor:
        return self.model(torch.cat([batch.obs, batch.action], -1)) - batch.reward

    def weights(self, batch: Batch, agent: Any) -> Weights:
        error = self._error(batch)
        return Weights(logged={LOSS.name: error.square().mean(), ERROR.name: error.abs()})

    def auxiliary_update(self, batch: Batch, agent: Any) -> None:
        self.optimiser.zero_grad()
        self._error(batch).square().mean().backward()
        self.optimiser.step()
        self.fits += 1

    def modules(self) -> dict[str, nn.Module]:
        return {"reward_model": self.model}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"reward_model": self.optimiser}

    def state_dict(self) -> dict[str, Any]:
        return {"fits": self.fits}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.fits = state["fits"]


def test_extra_fields_are_stored_with_each_transition(registered: None) -> None:
    trainer = Trainer(TrainConfig.make(algo="td3", correction="test-aux", backend="fast", **SMALL))  # type: ignore[arg-type]
    trainer.run()
    buffer = trainer.buffer
    starts = buffer.starts_transition[: buffer.filled]
    np.testing.assert_array_equal(buffer.extra["step"][: buffer.filled][starts, 0], np.arange(400))
    sampled = buffer.sample(64, torch.Generator().manual_seed(0))
    assert sampled.extra["step"].shape == (64, 1)
    # Each sampled transition carries its own step: the transition stored at that step is the one sampled.
    slot = np.flatnonzero(starts)[sampled.extra["step"][:, 0].long().numpy()]
    np.testing.assert_array_equal(buffer.obs[slot], sampled.obs.numpy())
    np.testing.assert_array_equal(buffer.action[slot], sampled.action.numpy())


@pytest.mark.parametrize("algo", ["td3", "sac"])
def test_an_auxiliary_network_trains_logs_and_resumes_exactly(algo: str, registered: None, tmp_path: Path) -> None:
    path = tmp_path / "run.pt"
    config = TrainConfig.make(algo=algo, correction="test-aux", checkpoint_every=0, **SMALL)  # type: ignore[arg-type]
    first_sink = RecordingSink()
    first = Trainer(config, first_sink, checkpoint_path=path)
    model0 = params(first.correction.model)  # type: ignore[attr-defined]
    first.run()
    assert first.correction.fits == 200 and not same(params(first.correction.model), model0)  # type: ignore[attr-defined]
    assert first_sink.quantity_values(LOSS.name).shape == (200, 1)
    assert first_sink.quantity_values(ERROR.name).shape == (200, 8)  # per transition: mean, min, max, quantiles
    own = {AT_BOUND} if algo == "td3" else set()  # TD3 logs its actor's share at the bounds
    assert {h.quantity for h in first_sink.histograms} == {LOSS, ERROR, EVAL_AT_BOUND, *own}

    # The run's last checkpoint (step 400) restores the reward model, its optimiser and its counter;
    # two resumes from it continue identically.
    shutil.copy(path, tmp_path / "b.pt")
    resumed = [Trainer.resume(p, RecordingSink(), total_steps=600) for p in (path, tmp_path / "b.pt")]
    restored = resumed[0].correction
    assert restored.fits == 200 and same(params(restored.model), params(first.correction.model))  # type: ignore[attr-defined]
    assert restored.optimiser.state_dict()["state"][0]["step"] == 200  # type: ignore[attr-defined]
    for trainer in resumed:
        trainer.run()
    a, b = (t.correction for t in resumed)
    assert a.fits == b.fits == 400  # type: ignore[attr-defined]
    assert same(params(a.model), params(b.model))  # type: ignore[attr-defined]
    state_a, state_b = a.optimiser.state_dict()["state"], b.optimiser.state_dict()["state"]  # type: ignore[attr-defined]
    assert all(torch.equal(state_a[k]["exp_avg"], state_b[k]["exp_avg"]) for k in state_a)
    assert same(params(resumed[0].agent.actor), params(resumed[1].agent.actor))


def test_a_new_quantity_reaches_the_store_the_export_and_the_weights_view(registered: None, tmp_path: Path) -> None:
    from offpoc_tui.dashboard.model import Model
    from offpoc_tui.dashboard.request import Request
    from offpoc_tui.runtime.lifecycle import StoreSink
    from store import open_store
    from store.export import columns, rows
    from store.reader import list_runs
    from store.runs import create_runs
    from store.writer import RunWriter
    from tests.support.storefill import spec

    db = open_store(tmp_path / "s.db", create=True)
    (run_id,) = create_runs(db, [spec(correction="test-aux")])
    writer = RunWriter(db, run_id)
    Trainer(TrainConfig.make(algo="sac", correction="test-aux", **SMALL), StoreSink(writer)).run()  # type: ignore[arg-type]
    writer.flush(400, 200)

    exported = [dict(zip(columns("quantities"), r, strict=True)) for r in rows(db, "quantities")]
    assert {r["quantity"] for r in exported} == {LOSS.name, ERROR.name, "eval_at_bound"}  # (and every evaluation's)
    losses = [r for r in exported if r["quantity"] == LOSS.name]
    assert len(losses) == 200 and all(r["value"] > 0 and r["min"] is None for r in losses)  # one value per update
    errors = [r for r in exported if r["quantity"] == ERROR.name]
    assert all(r["min"] <= r["value"] <= r["max"] for r in errors)  # min ≤ mean ≤ max, stored as float32

    runs = list_runs(db)
    model = Model()
    shown = [model.answer(db, runs, Request(view="quantities", cursor=run_id, quantity=i)) for i in range(4)]
    titles = [data.histogram.title for data in shown]  # type: ignore[union-attr]
    # λ first when logged, then by name: every evaluation's share at the bounds, then the correction's two
    assert titles[0].startswith("share of eval actions at the bounds histogram, evaluation at step")
    assert "one value per evaluation" in shown[0].training.title and titles[3] == titles[0]  # type: ignore[union-attr]
    assert "quantiles per 50 updates" in shown[2].training.title  # SMALL's weights_block  # type: ignore[union-attr]
    assert titles[1].startswith("|r̂ − r| histogram") and "reward-model loss)" in titles[1]
    assert titles[2].startswith("reward-model loss histogram")
    assert shown[2].training.ylabel == "reward-model loss"  # type: ignore[union-attr]


def test_an_algorithm_logs_a_quantity_on_the_same_path() -> None:
    """An algorithm declares a quantity and gives its value per update; the update reports it."""
    steps = Quantity("actor_due", "actor stepped")

    class Logging(TD3):
        quantities = (steps,)

        def logged(self) -> dict[str, Tensor]:
            return {steps.name: torch.tensor(float(self.updates % self.config.option(TD3Options).policy_delay == 0))}

    a = Logging(agent("td3").config, 5, ACT, torch.Generator().manual_seed(0))
    reports = [a.update(batch(), Split(torch.tensor(0.5), None)).logged for _ in range(2)]
    assert [float(r[steps.name]) for r in reports] == [0.0, 1.0]
    assert all(set(r) == {steps.name} for r in reports)  # the correction declared nothing to log
