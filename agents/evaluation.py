"""The paper's evaluation protocol."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from agents.algorithms.base import ActorCritic


def evaluate(agent: ActorCritic, env: gym.Env, episodes: int, seed: int) -> tuple[list[float], list[int]]:
    """Undiscounted returns and lengths of ``episodes`` deterministic episodes.

    No exploration noise and no updates. The environment is reseeded with
    ``seed`` at every evaluation, as in the authors' code (TD3's ``eval_policy``),
    so every evaluation faces the same sequence of initial states.
    """
    rng = np.random.default_rng(0)  # unused by a deterministic policy; required by act()
    returns: list[float] = []
    lengths: list[int] = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed if episode == 0 else None)
        done, total, length = False, 0.0, 0
        while not done:
            obs, reward, terminated, truncated, _ = env.step(agent.act(obs, explore=False, rng=rng).action)
            total += float(reward)
            length += 1
            done = terminated or truncated
        returns.append(total)
        lengths.append(length)
    return returns, lengths
