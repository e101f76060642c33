"""The evaluation's episodes stepped together give every bit of the episodes run one at a time, and where they
cannot (steps that draw from the environment's generator, episodes that share anything else, acting off the
CPU) the evaluation runs them one at a time."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control.pendulum import PendulumEnv

from agents import RecordingSink, TrainConfig, Trainer
from agents.evaluation import INDEPENDENT_EPISODES, Evaluation, Evaluator, evaluate, evaluate_together


class CountingPendulum(PendulumEnv):
    """Pendulum whose every episode starts higher than the last: it carries a count from one episode to the
    next, outside its generator (its steps draw nothing). Its metadata declares nothing: a user's env."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.episodes = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        _, info = super().reset(seed=seed, options=options)
        self.episodes += 1
        self.state[0] = 0.1 * self.episodes
        return self._get_obs(), info


class ClaimingCountingPendulum(CountingPendulum):
    """The same, declaring (wrongly) that its episodes are independent."""

    metadata: ClassVar[dict[str, Any]] = {**CountingPendulum.metadata, INDEPENDENT_EPISODES: True}


gym.register(id="CountingPendulum-v0", entry_point=CountingPendulum, max_episode_steps=50)
gym.register(id="ClaimingCountingPendulum-v0", entry_point=ClaimingCountingPendulum, max_episode_steps=50)


def trained(algo: str, env_id: str, steps: int = 1_500) -> Trainer:
    config = TrainConfig.make(algo=algo, env_id=env_id, hidden=(64, 64), batch_size=64, start_steps=500,
                              total_steps=steps, eval_freq=10**6, threads=1)  # fmt: skip
    trainer = Trainer(config, RecordingSink())
    trainer.run()
    return trainer


def same(a: Evaluation, b: Evaluation | None) -> bool:
    return b is not None and (a.returns, a.lengths) == (b.returns, b.lengths) and np.array_equal(a.at_bound, b.at_bound)


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_episodes_stepped_together_keep_every_bit_of_the_episodes_alone(algo: str) -> None:
    """On Hopper, chaotic enough that a last-bit difference in one action changes a return: each episode from
    its own initial state (the returns differ), the same returns, lengths and at-bound shares as one at a
    time, at each of several evaluations of a policy that learns between them."""
    trainer = trained(algo, "Hopper-v4", steps=1_000)
    evaluator = trainer.evaluator
    for more in range(3):
        for _ in range(200 * more):
            trainer.agent.update(*trainer.sample())
        alone = evaluate(trainer.agent, evaluator.env, 10, seed=100)
        assert len(set(alone.returns)) == 10  # ten initial states, not one
        assert same(alone, evaluate_together(trainer.agent, evaluator.envs, seed=100))
        assert same(alone, evaluator.evaluate(trainer.agent, seed=100))
        assert evaluator.together is True


def test_a_run_evaluates_as_it_did_with_its_episodes_one_at_a_time() -> None:
    """Two runs of one seed, one with its evaluations stepped together and one with them alone: equal
    evaluation records, every one of them."""
    config = TrainConfig.make(algo="td3", env_id="Hopper-v4", hidden=(64, 64), batch_size=64, start_steps=300,
                              total_steps=1_200, eval_freq=300, threads=1)  # fmt: skip
    sinks = [RecordingSink(), RecordingSink()]
    for sink, together in zip(sinks, (None, False)):
        trainer = Trainer(config, sink)
        trainer.evaluator.together = together
        trainer.run()
        assert trainer.evaluator.together is (together is None)
    together, alone = ([(e.step, e.returns, e.lengths) for e in sink.evals] for sink in sinks)
    assert len(together) == 5 and together == alone


def test_steps_that_draw_from_the_generator_are_seen() -> None:
    """LunarLander draws its engines' dispersion at every step: the copies' generators move, and stepping
    together says it cannot promise the episodes' initial states. (Its evaluations do not try: Box2D's tasks
    are not among the tasks that step together.)"""
    trainer = trained("td3", "LunarLanderContinuous-v3", steps=800)
    assert evaluate_together(trainer.agent, trainer.evaluator.envs, seed=100) is None
    assert trainer.evaluator.together is False


@pytest.mark.parametrize("env_id", ["CountingPendulum-v0", "BipedalWalker-v3", "LunarLanderContinuous-v3"])
def test_only_gymnasiums_mujoco_and_classic_control_tasks_step_together(env_id: str) -> None:
    """A user's own environment may carry anything from one episode to the next, and Box2D's do (BipedalWalker's
    world, LunarLander's draws): their episodes run one after another from the first evaluation."""
    assert Evaluator(env_id, 10).together is False
    assert Evaluator("Hopper-v4", 10).together is None and Evaluator("Pendulum-v1", 10).together is None


def test_episodes_that_share_state_outside_the_generator_are_refused_at_the_first_evaluation() -> None:
    """The backstop behind the list of tasks: an environment that carries a count from one episode to the next
    and declares its episodes independent all the same. Stepping together gives other returns (each copy's
    count is its own); the first evaluation, run both ways, sees it and keeps the episodes alone from then on."""
    env_id = "ClaimingCountingPendulum-v0"
    agent = trained("td3", env_id, steps=800).agent
    alone = evaluate(agent, Evaluator(env_id, 10).env, 10, seed=100)
    together = evaluate_together(agent, Evaluator(env_id, 10).envs, seed=100)
    assert together is not None and together.returns != alone.returns
    evaluator = Evaluator(env_id, 10)
    assert evaluator.together is None  # its declaration lets it try
    assert same(alone, evaluator.evaluate(agent, seed=100))
    assert evaluator.together is False and not evaluator._copies


@pytest.mark.parametrize("algo", ["td3", "sac"])
def test_an_algorithm_that_acts_otherwise_runs_its_episodes_one_at_a_time(algo: str) -> None:
    """A subclass of TD3 or SAC with its own ``act``: the batched actions of its parent would not be its own."""
    agent = trained(algo, "Pendulum-v1", steps=600).agent
    rows = np.zeros((2, agent.obs_dim), dtype=np.float32)
    assert agent.greedy_actions(rows) is not None
    parent = type(agent)

    class ActsOtherwise(parent):  # type: ignore[valid-type,misc]
        def act(self, obs: np.ndarray, explore: bool, rng: np.random.Generator) -> Any:
            return parent.act(self, obs, explore, rng)

    agent.__class__ = ActsOtherwise
    assert agent.greedy_actions(rows) is None


def test_acting_off_the_cpus_numpy_path_runs_the_episodes_one_at_a_time() -> None:
    """Without the NumPy forward (a device's actor) no batched action can promise a row's bits."""
    trainer = trained("sac", "Pendulum-v1", steps=600)
    trainer.agent.host_forward = None
    evaluator = trainer.evaluator
    alone = evaluate(trainer.agent, evaluator.env, 10, seed=100)
    assert same(alone, evaluator.evaluate(trainer.agent, seed=100))
    assert evaluator.together is False
