"""One update, two backends: autograd on the losses and the hand-written fast path give the same
training, every algorithm and weighting, over several updates; networks the fast path cannot
follow train with autograd (``auto``) and are refused under ``fast`` with one clear line."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from agents import TrainConfig, Trainer
from agents.algorithms import make_algorithm
from agents.algorithms.base import ActorCritic
from agents.config import ConfigError
from offpoc_tui.cli import app
from tests.support.batches import ACT, OBS, ConstantWeight, batch

UPDATES = 6
WEIGHTS = {
    "plain": None,
    "per-batch": torch.tensor(0.7),
    "per-transition": torch.rand(32, 1, generator=torch.Generator().manual_seed(3)) + 0.05,
}


def agent(algo: str, backend: str, **overrides: object) -> ActorCritic:
    config = TrainConfig.make(algo=algo, hidden=(32, 32), backend=backend, **overrides).resolved()  # type: ignore[arg-type]
    torch.manual_seed(0)
    return make_algorithm(config, OBS, ACT, torch.Generator().manual_seed(0))


def state(agent: ActorCritic) -> dict[str, torch.Tensor]:
    tensors = {f"{name}.{key}": value for name, module in agent.modules().items()
               for key, value in module.state_dict().items()}  # fmt: skip
    return tensors | {name: t.detach() for name, t in agent.tensors().items()}


@pytest.mark.parametrize("weighting", WEIGHTS)
@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_both_backends_train_the_same(algo: str, weighting: str) -> None:
    fast, autograd = agent(algo, "fast"), agent(algo, "autograd")
    assert fast.fast and not autograd.fast
    weight = WEIGHTS[weighting]
    correction = ConstantWeight(weight) if weight is not None else None
    for step in range(UPDATES):
        b = batch(seed=step, terminated_every=5)
        stats = [a.update(b, correction) for a in (fast, autograd)]  # type: ignore[arg-type]
        torch.testing.assert_close(stats[0].critic_loss, stats[1].critic_loss, rtol=1e-4, atol=1e-5)
        if stats[0].actor_loss is not None:
            torch.testing.assert_close(stats[0].actor_loss, stats[1].actor_loss, rtol=1e-4, atol=1e-5)
    mine, theirs = state(fast), state(autograd)
    assert mine.keys() == theirs.keys()
    for key in mine:  # every network, the targets, SAC's temperature: all moved, and alike
        torch.testing.assert_close(mine[key], theirs[key], rtol=1e-4, atol=1e-5, msg=key)
    before = state(agent(algo, "fast"))
    assert any(not torch.equal(before[k], mine[k]) for k in mine)


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_a_layer_norm_trains_with_auto_on_autograd_and_the_config_says_so(algo: str) -> None:
    config = TrainConfig.make(
        algo=algo, env_id="Pendulum-v1", layer_norm=True, hidden=(16, 16), total_steps=300, start_steps=100,
        correction_start=100, eval_freq=300, eval_episodes=1, batch_size=16, correction="acoffpoc",
    ).resolved()  # fmt: skip
    assert config.backend == "autograd"  # what the run's stored config records
    trainer = Trainer(config)
    assert any(isinstance(m, torch.nn.LayerNorm) for m in trainer.agent.actor.modules())
    before = {k: v.clone() for k, v in trainer.agent.critic.state_dict().items()}
    result = trainer.run()
    assert result.status == "finished" and trainer.agent.updates == 200
    after = trainer.agent.critic.state_dict()
    assert all(torch.isfinite(v).all() for v in after.values())
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_fast_refuses_a_layer_norm_with_one_line() -> None:
    with pytest.raises(ConfigError, match="backend fast covers Linear, ReLU and Tanh networks only"):
        TrainConfig.make(layer_norm=True, backend="fast").resolved()
    with pytest.raises(ConfigError, match="unknown backend 'jax'"):
        TrainConfig.make(backend="jax").resolved()
    result = CliRunner().invoke(app, ["run", "td3", "Pendulum-v1", "--set", "layer_norm=true", "--set", "backend=fast",
                                      "--db", "/nonexistent/never.db"])  # fmt: skip
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "layer_norm needs backend=autograd" in lines[0]


def test_the_paper_networks_resolve_to_fast() -> None:
    for algo in ("ddpg", "td3", "sac"):
        assert TrainConfig.make(algo=algo).resolved().backend == "fast"
        assert TrainConfig.make(algo=algo, backend="autograd").resolved().backend == "autograd"
