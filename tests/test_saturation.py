"""DDPG's and TD3's logged share of the actor's actions at the bounds (issue 49's failure: every action at
±1), under both backends, and on the path to the store."""

from __future__ import annotations

import pytest
import torch

from agents import RecordingSink, TrainConfig, Trainer
from agents.algorithms.deterministic import AT_BOUND
from tests.test_algorithms import agent, batch


@pytest.mark.parametrize("backend", ["autograd", "fast"])
@pytest.mark.parametrize("algo", ["ddpg", "td3"])
def test_a_saturated_actor_logs_all_of_its_actions_at_the_bounds(algo: str, backend: str) -> None:
    a = agent(algo, backend=backend)
    fresh = [a.update(batch(i)).logged for i in range(2)]
    stepped = [r for r in fresh if r]  # TD3 steps its actor every other update: only those log
    assert len(stepped) == (1 if algo == "td3" else 2)
    assert all(float(r[AT_BOUND.name]) < 0.2 for r in stepped)  # a fresh actor is far from ±1
    last = a.actor.net[-2]  # the output layer, before tanh
    with torch.no_grad():
        last.bias.copy_(torch.tensor([50.0, -50.0]))  # tanh(±50): every action at its bound
    after = [a.update(batch(i)).logged for i in range(2, 4)]
    assert [float(r[AT_BOUND.name]) for r in after if r] == [1.0] * len(stepped)


def test_a_ddpg_run_records_the_share_per_update_for_the_weights_view() -> None:
    config = TrainConfig.make(algo="ddpg", env_id="Pendulum-v1", hidden=(32, 32), total_steps=600, start_steps=200,
                              eval_freq=600, eval_episodes=1, batch_size=32)  # fmt: skip
    sink = RecordingSink()
    Trainer(config, sink).run()
    values = sink.weight_values(AT_BOUND.name)
    assert values.shape == (400, 1) and ((values >= 0) & (values <= 1)).all()
    assert {h.quantity for h in sink.histograms} == {AT_BOUND}
