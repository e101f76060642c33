"""DDPG's and TD3's logged share of the actor's actions at the bounds (issue 49's failure: every action at
±1), under both backends, and on the path to the store; and every algorithm's share of its evaluation
actions at the bounds, one value per evaluation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from agents import RecordingSink, TrainConfig, Trainer
from agents.algorithms.base import DECAY_SHARE
from agents.algorithms.deterministic import AT_BOUND
from agents.evaluation import EVAL_AT_BOUND
from offpoc_tui.dashboard.caches import QuantityCache
from offpoc_tui.runtime.lifecycle import StoreSink
from store import open_store
from store.links import opened
from store.reader import quantity_rows
from store.runs import create_runs
from store.writer import RunWriter
from tests.support.batches import agent, batch
from tests.support.storefill import spec


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
    values = sink.quantity_values(AT_BOUND.name)
    assert values.shape == (400, 1) and ((values >= 0) & (values <= 1)).all()
    assert {h.quantity for h in sink.histograms} == {
        AT_BOUND,
        DECAY_SHARE,
        EVAL_AT_BOUND,
    }  # DDPG's critic has a weight decay


@pytest.mark.parametrize("algo", ["ddpg", "sac"])
def test_each_evaluation_records_the_share_of_its_actions_at_the_bounds(algo: str) -> None:
    """One value per evaluation, at its step; an actor pushed to ±1 reads 1 at the next evaluation."""
    config = TrainConfig.make(algo=algo, env_id="Pendulum-v1", hidden=(32, 32), total_steps=400, start_steps=200,
                              eval_freq=200, eval_episodes=1, batch_size=32)  # fmt: skip
    sink = RecordingSink()
    trainer = Trainer(config, sink)
    trainer.run()
    blocks = [b for b in sink.blocks if b.quantity == EVAL_AT_BOUND]
    assert [int(b.steps[0]) for b in blocks] == [e.step for e in sink.evals] == [0, 200, 400]
    assert all(len(b.steps) == 1 and 0 <= b.values[0, 0] < 0.5 for b in blocks)  # a fresh actor: far from ±1
    actor = trainer.agent.actor  # the output layer's bias, before tanh (SAC's: the mean's half)
    bias = actor.net[-2].bias if algo == "ddpg" else actor.head.bias[: trainer.agent.action_dim]  # type: ignore[union-attr,index]
    with torch.no_grad():
        bias.fill_(50.0)  # tanh(50): every action at its upper bound
    trainer._evaluate(0.0)
    assert sink.blocks[-1].quantity == EVAL_AT_BOUND and float(sink.blocks[-1].values[0, 0]) == 1.0


def test_td3s_every_other_update_values_are_stored_as_blocks_with_a_stride(tmp_path: Path) -> None:
    """TD3 logs its actor's share at its actor steps (every other update): the store keeps them as one block
    of stride 2, not one row per value, and gives each back at its own update and step."""
    db = open_store(tmp_path / "s.db", create=True)
    (run_id,) = create_runs(db, [spec(algo="td3", env="Pendulum-v1")])
    writer = RunWriter(db, run_id)
    config = TrainConfig.make(algo="td3", env_id="Pendulum-v1", hidden=(32, 32), total_steps=600, start_steps=200,
                              eval_freq=600, eval_episodes=1, batch_size=32)  # fmt: skip
    sink = RecordingSink()
    Trainer(config, Both(StoreSink(writer), sink)).run()  # type: ignore[arg-type]
    writer.flush(600, 400)
    blocks = db.execute("SELECT count, stride FROM quantity_blocks WHERE quantity = 'at_bound'").fetchall()
    assert blocks == [(200, 2)]
    stored = list(quantity_rows(db, run_id, AT_BOUND.name))
    assert [u for u, *_ in stored] == list(range(2, 401, 2)) and [s for _, s, *_ in stored] == list(range(202, 601, 2))
    np.testing.assert_allclose([v[0] for *_, v in stored], sink.quantity_values(AT_BOUND.name)[:, 0], atol=1e-4)
    assert opened(db, run_id).last_step["quantity_blocks", AT_BOUND.name] == 600  # where a resumed run goes on
    cached = QuantityCache().update(db, run_id, AT_BOUND.name)  # the Quantities view's line: a block's middle step
    assert cached.steps == [401.0] and cached.spans == [400] and not cached.per_evaluation
    again = np.arange(2, 401, 2)  # the same values offered again (a record delivered twice): none stored twice
    writer.add_quantities(("at_bound",), again, again + 200, np.zeros((200, 1), np.float32), AT_BOUND)
    writer.flush(600, 400)
    assert db.execute("SELECT COUNT(*) FROM quantity_blocks WHERE quantity = 'at_bound'").fetchone()[0] == 1


class Both:
    """Every record to two sinks."""

    def __init__(self, *sinks: object) -> None:
        self.sinks = sinks

    def __getattr__(self, name: str) -> Callable[[object], None]:
        return lambda record: [getattr(s, name)(record) for s in self.sinks]
