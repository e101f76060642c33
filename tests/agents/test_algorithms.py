"""Each algorithm's update on hand-made batches, and where the correction enters."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from agents.algorithms import reduce_loss
from agents.config import TrainConfig
from agents.corrections import CorrectionSettings, make_correction
from agents.corrections.acoffpoc import transition_similarity
from agents.corrections.divergences import DIVERGENCES
from tests.support.batches import ACT, OBS, B, ConstantWeight, agent, batch, params, same


# ---- the reduction ---------------------------------------------------------------------
def test_reduce_loss_per_batch_and_per_transition() -> None:
    loss = torch.tensor([[1.0], [2.0], [3.0], [6.0]])
    assert float(reduce_loss(loss, None)) == 3.0
    assert float(reduce_loss(loss, torch.tensor(0.5))) == 1.5
    weights = torch.tensor([[1.0], [0.0], [0.0], [1.0]])
    assert float(reduce_loss(loss, weights)) == 3.5  # Σλℓ / Σλ
    zero = reduce_loss(loss, torch.zeros(4, 1))
    assert float(zero) == 0.0 and torch.isfinite(zero)


def test_tiny_per_transition_weights_still_give_a_weighted_mean() -> None:
    """Σλℓ/Σλ is a weighted mean however small every λ_i is (the smallest is e⁻⁸⁰): no floor on Σλ
    turns such a batch into a vanishing update."""
    loss = torch.tensor([[1.0], [2.0], [3.0], [6.0]])
    for scale in (1.0, 1e-13, 1e-30, math.exp(-80)):
        weights = torch.tensor([[1.0], [0.0], [0.0], [1.0]]) * scale
        torch.testing.assert_close(reduce_loss(loss, weights), torch.tensor(3.5))


# ---- targets ---------------------------------------------------------------------------
@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_terminated_transitions_do_not_bootstrap_and_truncated_ones_do(algo: str) -> None:
    a, b = agent(algo), batch()
    y = a.target(b)
    terminated = b.not_terminated[:, 0] == 0
    torch.testing.assert_close(y[terminated], b.reward[terminated])
    assert not torch.allclose(y[~terminated], b.reward[~terminated])


def test_td3_target_is_smoothed_clipped_double_q() -> None:
    a, b = agent("td3"), batch()
    state = a.generator.get_state()
    y = a.target(b)
    g = torch.Generator().manual_seed(0)
    g.set_state(state)
    noise = (torch.randn(B, ACT, generator=g) * 0.2).clamp(-0.5, 0.5)
    next_action = (a.actor_target(b.next_obs) + noise).clamp(-1, 1)
    q = a.critic_target(b.next_obs, next_action)
    expected = b.reward + 0.99 * b.not_terminated * torch.minimum(q[0], q[1])
    torch.testing.assert_close(y, expected)


def test_ddpg_target_uses_the_target_actor_without_noise() -> None:
    a, b = agent("ddpg"), batch()
    expected = b.reward + 0.99 * b.not_terminated * a.critic_target(b.next_obs, a.actor_target(b.next_obs))[0]
    torch.testing.assert_close(a.target(b), expected)


def test_sac_target_is_soft_clipped_double_q() -> None:
    a, b = agent("sac"), batch()
    state = a.generator.get_state()
    y = a.target(b)
    g = torch.Generator().manual_seed(0)
    g.set_state(state)
    mean, log_std = a.actor(b.next_obs)
    u = mean + log_std.exp() * torch.randn(B, ACT, generator=g)
    action = torch.tanh(u)
    log_pi = torch.distributions.Normal(mean, log_std.exp()).log_prob(u) - torch.log(1 - action.square() + 1e-12)
    q = a.critic_target(b.next_obs, action).min(0).values - 1.0 * log_pi.sum(-1, keepdim=True)
    torch.testing.assert_close(y, b.reward + 0.99 * b.not_terminated * q, rtol=1e-4, atol=1e-4)


# ---- schedules and target updates ----------------------------------------------------
def test_td3_delays_actor_and_target_updates() -> None:
    a, b = agent("td3"), batch()
    actor0, critic0, critic_t0, actor_t0 = (params(m) for m in (a.actor, a.critic, a.critic_target, a.actor_target))
    s1 = a.update(b)
    assert s1.actor_loss is None
    assert same(params(a.actor), actor0) and same(params(a.critic_target), critic_t0)
    assert not same(params(a.critic), critic0)
    s2 = a.update(b)
    assert s2.actor_loss is not None
    assert not same(params(a.actor), actor0)
    # Soft update: θ' ← τθ + (1 − τ)θ' with the freshly stepped online networks.
    for target, old, online in ((a.critic_target, critic_t0, a.critic), (a.actor_target, actor_t0, a.actor)):
        for new, before, now in zip(params(target), old, params(online)):
            torch.testing.assert_close(new, 0.005 * now + 0.995 * before)


@pytest.mark.parametrize(("algo", "tau"), [("ddpg", 0.001), ("sac", 0.005)])
def test_ddpg_and_sac_update_actor_and_targets_every_step(algo: str, tau: float) -> None:
    a, b = agent(algo), batch()
    actor0, critic_t0 = params(a.actor), params(a.critic_target)
    stats = a.update(b)
    assert stats.actor_loss is not None and not same(params(a.actor), actor0)
    for new, before, now in zip(params(a.critic_target), critic_t0, params(a.critic)):
        torch.testing.assert_close(new, tau * now + (1 - tau) * before)


def test_sac_temperature_moves_towards_the_target_entropy() -> None:
    a, b = agent("sac"), batch()
    stats = a.update(b)
    assert stats.alpha is not None and float(stats.alpha) != 1.0
    log_pi = a._log_pi
    assert log_pi is not None
    # d/dlogα of −logα·(log π + H̄) is −mean(log π + H̄); Adam's first step is lr·sign(grad).
    gradient = -float((log_pi + a.target_entropy).mean())
    torch.testing.assert_close(
        a.log_alpha.detach(), torch.tensor(-3e-4 * float(np.sign(gradient))), rtol=1e-3, atol=1e-7
    )


# ---- where the correction enters -------------------------------------------------------
def test_no_correction_reproduces_the_plain_td3_losses() -> None:
    a, b = agent("td3"), batch()
    reference = copy.deepcopy(a)
    state = a.generator.get_state()
    stats = [a.update(b), a.update(b)]
    # Hand-written plain TD3 (sfujim/TD3) on the same noise stream.
    r = reference
    r.generator.set_state(state)
    for update in (1, 2):
        y = r.target(b)
        q = r.critic(b.obs, b.action)
        critic_loss = F.mse_loss(q[0], y) + F.mse_loss(q[1], y)
        r.critic_optimizer.zero_grad()
        critic_loss.backward()
        r.critic_optimizer.step()
        torch.testing.assert_close(stats[update - 1].critic_loss, critic_loss.detach(), rtol=1e-6, atol=1e-7)
        if update == 2:
            actor_loss = -r.critic(b.obs, r.actor(b.obs))[0].mean()
            torch.testing.assert_close(stats[1].actor_loss, actor_loss.detach(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_unit_weight_is_exactly_the_plain_update(algo: str) -> None:
    plain, weighted = agent(algo), agent(algo)
    b = batch()
    for _ in range(2):
        plain.update(b)
        weighted.update(b, ConstantWeight(torch.tensor(1.0)))  # type: ignore[arg-type]
    for name, module in plain.modules().items():
        assert same(params(module), params(weighted.modules()[name])), name


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_uniform_per_transition_weights_equal_the_plain_update(algo: str) -> None:
    plain, weighted = agent(algo), agent(algo)
    b = batch()
    for _ in range(2):
        plain.update(b)
        weighted.update(b, ConstantWeight(torch.full((B, 1), 0.3)))  # type: ignore[arg-type]
    for name, module in plain.modules().items():
        for x, y in zip(params(module), params(weighted.modules()[name])):
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def test_zero_weight_freezes_learning_but_not_targets_or_exploration() -> None:
    plain, frozen = agent("td3"), agent("td3")
    b = batch()
    actor0, critic0 = params(frozen.actor), params(frozen.critic)
    target0 = params(frozen.critic_target)
    for _ in range(2):
        frozen.update(b, ConstantWeight(torch.tensor(0.0)))  # type: ignore[arg-type]
    assert same(params(frozen.actor), actor0) and same(params(frozen.critic), critic0)
    # Targets still follow the same soft-update rule towards the (unchanged) online networks.
    for new, before, online in zip(params(frozen.critic_target), target0, critic0):
        torch.testing.assert_close(new, 0.005 * online + 0.995 * before)
    # Exploration depends on the policy only, never on the correction.
    obs = np.random.default_rng(0).normal(size=OBS).astype(np.float32)
    a1 = plain.act(obs, True, np.random.default_rng(1)).action
    a2 = frozen.act(obs, True, np.random.default_rng(1)).action
    np.testing.assert_array_equal(a1, a2)


def acoffpoc_config(**values: Any) -> TrainConfig:
    """A resolved AC-Off-POC run config: where a correction finds its options."""
    return TrainConfig.make(correction="acoffpoc", **values).resolved()


def test_deterministic_acoffpoc_weighs_a_batch_by_its_distance_from_the_policy() -> None:
    a = agent("td3")
    correction = make_correction(
        "acoffpoc", CorrectionSettings("deterministic", config=acoffpoc_config(divergence="symkl", ref_std=0.1))
    )
    b = batch()
    g = torch.Generator().manual_seed(9)
    on_policy = b._replace(action=a.greedy_action(b.obs) + 0.1**0.5 * torch.randn(B, ACT, generator=g))
    off_policy = b._replace(action=a.greedy_action(b.obs) + 0.8)
    near, far = float(correction.similarity(on_policy, a)), float(correction.similarity(off_policy, a))
    assert 0.5 < near <= 1.0 and far < 1e-3


def test_stochastic_acoffpoc_is_one_for_data_from_the_current_policy() -> None:
    a = agent("sac")
    correction = make_correction(
        "acoffpoc", CorrectionSettings("stochastic", config=acoffpoc_config(algo="sac", divergence="jsd"))
    )
    b = batch()
    mean, log_std = a.policy_distribution(b.obs)
    action = torch.tanh(mean + log_std.exp() * torch.randn(B, ACT, generator=torch.Generator().manual_seed(4)))
    own = b._replace(action=action, behaviour_mean=mean, behaviour_log_std=log_std)
    lam = correction.similarity(own, a)
    assert lam.shape == (B, 1)
    torch.testing.assert_close(lam, torch.ones(B, 1), rtol=0, atol=1e-5)
    other = correction.similarity(batch(behaviour=True)._replace(action=action), a)
    assert float(other.mean()) < 0.99


@pytest.mark.parametrize("divergence", DIVERGENCES)
def test_stochastic_acoffpoc_clips_by_the_density_ratio_at_the_stored_action(divergence: str) -> None:
    # λ_i = min(π(a_i|s_i)/η(a_i|s_i), exp(−ρ_i)): the ratio from torch's own densities at u = atanh(a).
    a = agent("sac")
    b = batch(behaviour=True)
    noise = torch.randn(B, ACT, generator=torch.Generator().manual_seed(5))
    b = b._replace(action=torch.tanh(b.behaviour_mean + b.behaviour_log_std.exp() * noise))
    stored = TrainConfig.make(algo="sac", correction="acoffpoc", divergence=divergence, acoffpoc_ratio="stored")
    stored = stored.resolved()
    lam = make_correction("acoffpoc", CorrectionSettings("stochastic", config=stored)).similarity(b, a)

    mean, log_std = a.policy_distribution(b.obs)
    u = torch.atanh(b.action.double().clamp(-1 + 1e-6, 1 - 1e-6))
    log_pi = torch.distributions.Normal(mean.double(), log_std.double().exp()).log_prob(u).sum(-1, keepdim=True)
    eta = torch.distributions.Normal(b.behaviour_mean.double(), b.behaviour_log_std.double().exp())
    log_ratio = log_pi - eta.log_prob(u).sum(-1, keepdim=True)
    expected = transition_similarity(mean, log_std, b.behaviour_mean, b.behaviour_log_std, log_ratio, divergence)
    torch.testing.assert_close(lam, expected, rtol=1e-5, atol=1e-7)
    unclipped = transition_similarity(mean, log_std, b.behaviour_mean, b.behaviour_log_std, log_ratio + 1e9, divergence)
    assert (lam < 0.9 * unclipped).any(), "some λ_i must be set by the ratio for this test to check it"


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_the_memory_checks_parameter_counts_are_the_networks_a_run_builds(algo: str) -> None:
    """What the memory check counts (built on the meta device) is what a run builds on the CPU: its learned
    values (networks and SAC's temperature) and its target copies."""
    from agents.algorithms import make_algorithm, parameter_counts

    config = TrainConfig.make(algo=algo, hidden=(48, 40)).resolved()
    agent = make_algorithm(config, 11, 3, torch.Generator().manual_seed(0))
    modules = agent.modules()
    targets = sum(p.numel() for name, m in modules.items() if name.endswith("_target") for p in m.parameters())
    learned = sum(p.numel() for name, m in modules.items() if not name.endswith("_target") for p in m.parameters())
    learned += sum(t.numel() for t in agent.tensors().values())
    assert parameter_counts(config, 11, 3) == (learned, targets)
