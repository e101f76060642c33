"""Replay buffer: derived next observations, FIFO wrap-around, exact uniform sampling."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.replay import ReplayBuffer


def fill(buffer: ReplayBuffer, transitions: int, episode_length: int, truncate: bool = True, random_until: int = 0):
    """Observations encode (step, episode) so every sampled field can be checked."""
    step = 0
    for episode in range(10**9):
        for t in range(episode_length):
            if step == transitions:
                return
            end = t == episode_length - 1
            obs = np.array([step, episode, t], dtype=np.float32)
            # As in a real env, a continuing episode's next_obs is the next obs; a final
            # observation is marked with .5 so the test can tell where it came from.
            next_obs = np.array([step + (0.5 if end else 1.0), episode, t + 1], dtype=np.float32)
            buffer.add(
                obs,
                np.array([step / 1e4], dtype=np.float32),
                float(step),
                next_obs,
                terminated=end and not truncate,
                episode_end=end,
                random_phase=step < random_until,
                behaviour=(np.array([step], dtype=np.float32), np.array([-step], dtype=np.float32))
                if buffer.behaviour_mean is not None
                else None,
            )
            step += 1


def check_batch(batch, episode_length: int, truncate: bool) -> None:
    obs, next_obs = batch.obs.numpy(), batch.next_obs.numpy()
    step = obs[:, 0]
    # The reward, action and next observation all belong to the sampled transition.
    np.testing.assert_array_equal(batch.reward.numpy()[:, 0], step)
    np.testing.assert_allclose(batch.action.numpy()[:, 0], step / 1e4, rtol=1e-6)
    end = obs[:, 2] == episode_length - 1
    within = ~end
    # Inside an episode next_obs is the next step's obs; at an end it is the stored final obs.
    np.testing.assert_array_equal(next_obs[within, 0], step[within] + 1)
    np.testing.assert_array_equal(next_obs[end, 0], step[end] + 0.5)
    np.testing.assert_array_equal(next_obs[:, 1], obs[:, 1])
    expected_nt = np.where(end & (not truncate), 0.0, 1.0)
    np.testing.assert_array_equal(batch.not_terminated.numpy()[:, 0], expected_nt)


@pytest.mark.parametrize("truncate", [True, False])
@pytest.mark.parametrize("episode_length", [1, 3, 7, 50])
def test_samples_are_whole_transitions_before_and_after_wrap_around(episode_length: int, truncate: bool) -> None:
    g = torch.Generator().manual_seed(0)
    for transitions in (10, 64, 1000):
        fill(buffer := ReplayBuffer(64, 3, 1), transitions, episode_length, truncate)
        check_batch(buffer.sample(512, g), episode_length, truncate)


def test_fifo_keeps_the_newest_transitions() -> None:
    buffer = ReplayBuffer(100, 3, 1)
    fill(buffer, 1000, episode_length=1000)  # one long episode: one slot per transition
    steps = set(buffer.sample(5000, torch.Generator().manual_seed(0)).obs[:, 0].int().tolist())
    # The newest transition's next_obs takes a slot, so 99 transitions remain: steps 901..999.
    assert steps == set(range(901, 1000))
    assert len(buffer) == 99


def test_each_finished_episode_costs_one_extra_slot() -> None:
    buffer = ReplayBuffer(1000, 3, 1)
    fill(buffer, 100, episode_length=10)
    assert len(buffer) == 100
    assert buffer.filled == 110


def test_sampling_is_uniform_over_eligible_transitions() -> None:
    buffer = ReplayBuffer(64, 3, 1)
    fill(buffer, 40, episode_length=4)  # 40 transitions, 10 end slots
    counts = np.bincount(buffer.sample(200_000, torch.Generator().manual_seed(1)).obs[:, 0].int().numpy(), minlength=40)
    expected = 200_000 / 40
    assert counts.min() > 0.9 * expected and counts.max() < 1.1 * expected


def test_random_phase_can_be_excluded_and_behaviour_params_travel_with_transitions() -> None:
    buffer = ReplayBuffer(256, 3, 1, behaviour_params=True)
    fill(buffer, 100, episode_length=25, random_until=30)
    g = torch.Generator().manual_seed(2)
    everything = buffer.sample(4000, g)
    assert everything.obs[:, 0].min() < 30
    policy_only = buffer.sample(4000, g, exclude_random_phase=True)
    assert policy_only.obs[:, 0].min() >= 30
    assert policy_only.behaviour_mean is not None and policy_only.behaviour_log_std is not None
    torch.testing.assert_close(policy_only.behaviour_mean[:, 0], policy_only.obs[:, 0])
    torch.testing.assert_close(policy_only.behaviour_log_std[:, 0], -policy_only.obs[:, 0])


def test_state_dict_round_trip_reproduces_samples() -> None:
    a = ReplayBuffer(128, 3, 1, behaviour_params=True)
    fill(a, 300, episode_length=9)
    b = ReplayBuffer(128, 3, 1, behaviour_params=True)
    b.load_state_dict(a.state_dict())
    sa, sb = a.sample(64, torch.Generator().manual_seed(3)), b.sample(64, torch.Generator().manual_seed(3))
    for x, y in zip(sa, sb):
        torch.testing.assert_close(x, y)


def test_bytes_per_transition_store_no_next_obs() -> None:
    # Hopper: 11-d obs, 3-d actions; Humanoid: 376-d obs, 17-d actions.
    hopper = ReplayBuffer(2, 11, 3)
    assert hopper.bytes_per_slot == 4 * (11 + 3 + 1 + 1) + 2
    humanoid_sac = ReplayBuffer(2, 376, 17, behaviour_params=True)
    assert humanoid_sac.bytes_per_slot == 4 * (376 + 17 + 1 + 1 + 2 * 17) + 2


def test_sampling_stays_uniform_when_almost_nothing_is_eligible() -> None:
    buffer = ReplayBuffer(4096, 3, 1, behaviour_params=True)
    fill(buffer, 3000, episode_length=1000, random_until=2997)  # 3 policy transitions left
    sample = buffer.sample(30_000, torch.Generator().manual_seed(4), exclude_random_phase=True)
    counts = np.bincount(sample.obs[:, 0].int().numpy() - 2997, minlength=3)
    assert counts.sum() == 30_000 and counts.min() > 9_000
