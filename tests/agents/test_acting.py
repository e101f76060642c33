"""Acting on one observation: the NumPy forward pass computes what the networks compute."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from agents.algorithms import ActorCritic
from agents.backprop import LinearChain
from agents.host_forward import HostForward
from tests.support.batches import ACT, OBS, agent, batch


def observations(count: int = 8) -> np.ndarray:
    # float64, as MuJoCo environments return them.
    return np.random.default_rng(3).normal(scale=2.0, size=(count, OBS))


def chain_output(chain: LinearChain, obs: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return chain(torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0))[0].numpy()


def torch_output(a: ActorCritic, obs: np.ndarray) -> np.ndarray:
    return chain_output(a.actor.chain, obs)


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_host_forward_matches_the_network_through_training_and_reloading(algo: str) -> None:
    a = agent(algo)
    assert a.host_forward is not None  # a CPU agent acts in NumPy

    def check() -> None:
        for obs in observations():
            out = a.actor_output(obs)
            assert out.dtype == np.float32 and out.shape == torch_output(a, obs).shape
            np.testing.assert_allclose(out, torch_output(a, obs), rtol=1e-5, atol=1e-6)

    check()
    before = a.actor_output(observations()[0]).copy()
    for _ in range(3):  # the actor steps in place: the views see it
        a.update(batch())
    assert not np.allclose(a.actor_output(observations()[0]), before)
    check()
    other = agent(algo, seed=1)  # load_state_dict copies in place
    a.actor.load_state_dict(other.actor.state_dict())
    np.testing.assert_allclose(a.actor_output(observations()[0]), torch_output(other, observations()[0]), rtol=1e-5)
    check()


def test_host_forward_follows_a_replaced_parameter_storage() -> None:
    a = agent("td3")
    host = HostForward(a.actor.chain)
    obs = observations()[0]
    host(obs)
    weight = a.actor.chain.layers[0][0]
    with torch.no_grad():
        weight.data = weight.data * 2.0  # new storage, same Parameter object
    np.testing.assert_allclose(host(obs), torch_output(a, obs), rtol=1e-5, atol=1e-6)


def test_a_copied_forward_acts_with_the_copy_of_the_parameters() -> None:
    a = agent("td3")
    host = HostForward(a.actor.chain)
    obs = observations()[1]
    host(obs)  # the views are taken
    copied = copy.deepcopy(host)  # copies the chain's parameters, and stale views of the originals
    with torch.no_grad():
        for weight, _ in copied.chain.layers:
            weight.add_(0.5)
    np.testing.assert_allclose(copied(obs), chain_output(copied.chain, obs), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(host(obs), chain_output(a.actor.chain, obs), rtol=1e-5, atol=1e-6)
    assert not np.allclose(copied(obs), host(obs))


def test_sac_acts_as_its_torch_policy_and_draws_the_same_noise() -> None:
    a = agent("sac")
    obs = observations()[0]
    with torch.no_grad():
        mean, log_std = a.actor(torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0))
    state = a.generator.get_state()
    explored = a.act(obs, explore=True, rng=np.random.default_rng(0))
    noise = torch.randn(mean.shape, generator=torch.Generator().set_state(state))
    expected = torch.tanh(mean + log_std.exp() * noise)[0].numpy()
    np.testing.assert_allclose(explored.action, expected, rtol=1e-5, atol=1e-6)
    assert explored.behaviour is not None
    np.testing.assert_allclose(explored.behaviour[0], mean[0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(explored.behaviour[1], log_std[0].numpy(), rtol=1e-5, atol=1e-6)
    # One draw of d numbers per action: the generator moved exactly past that noise.
    after = torch.Generator().set_state(state)
    torch.randn(mean.shape, generator=after)
    assert torch.equal(a.generator.get_state(), after.get_state())
    greedy = a.act(obs, explore=False, rng=np.random.default_rng(0)).action
    np.testing.assert_allclose(greedy, torch.tanh(mean)[0].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("algo", ["ddpg", "td3"])
def test_deterministic_exploration_is_clipped_gaussian_noise_around_the_policy(algo: str) -> None:
    a = agent(algo)
    obs = observations()[0]
    pi = torch_output(a, obs)
    greedy = a.act(obs, explore=False, rng=np.random.default_rng(0)).action
    np.testing.assert_allclose(greedy, pi, rtol=1e-5, atol=1e-6)
    explored = a.act(obs, explore=True, rng=np.random.default_rng(5)).action
    noise = np.random.default_rng(5).normal(0.0, 0.1, size=ACT)
    assert explored.dtype == np.float32
    np.testing.assert_allclose(explored, np.clip(pi + noise, -1.0, 1.0), rtol=1e-5, atol=1e-6)
