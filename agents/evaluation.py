"""The paper's evaluation protocol."""

from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import numpy as np

from agents.algorithms.base import ActorCritic
from agents.algorithms.deterministic import NEAR_BOUND
from agents.quantities import Quantity
from agents.sink import QuantityBlock, QuantityHistogram

EVAL_AT_BOUND = Quantity("eval_at_bound", "share of eval actions at the bounds")
"""Per evaluation, the share of the deterministic policy's action entries within 1% of the bounds of
[-1, 1] (|a_j| ≥ 0.99), over every step of every episode: an actor saturated at its bounds (issue 49)."""


class Evaluation(NamedTuple):
    returns: list[float]
    lengths: list[int]
    at_bound: np.ndarray
    """Per step of every episode, the share of the action's entries at the bounds; their mean is
    :data:`EVAL_AT_BOUND`'s value."""


def evaluate(agent: ActorCritic, env: gym.Env, episodes: int, seed: int) -> Evaluation:
    """Undiscounted returns and lengths of ``episodes`` deterministic episodes, and how much of each
    step's action is at the bounds.

    No exploration noise and no updates. The environment is reseeded with
    ``seed`` at every evaluation, as in the authors' code (TD3's ``eval_policy``),
    so every evaluation faces the same sequence of initial states.
    """
    rng = np.random.default_rng(0)  # unused by a deterministic policy; required by act()
    returns: list[float] = []
    lengths: list[int] = []
    at_bound: list[float] = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed if episode == 0 else None)
        done, total, length = False, 0.0, 0
        while not done:
            action = agent.act(obs, explore=False, rng=rng).action
            at_bound.append(float(np.mean(np.abs(action) >= NEAR_BOUND)))
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            length += 1
            done = terminated or truncated
        returns.append(total)
        lengths.append(length)
    return Evaluation(returns, lengths, np.asarray(at_bound))


def eval_at_bound(at_bound: np.ndarray, step: int, updates: int, bins: int) -> list[QuantityBlock | QuantityHistogram]:
    """An evaluation's :data:`EVAL_AT_BOUND` records: its value (a one-row block at the evaluation's step)
    and the histogram of its steps' shares, for the Quantities view."""
    value = QuantityBlock(
        columns=(EVAL_AT_BOUND.name,),
        updates=np.array([updates], dtype=np.int64),
        steps=np.array([step], dtype=np.int64),
        values=np.array([[at_bound.mean() if at_bound.size else 0.0]], dtype=np.float32),
        quantity=EVAL_AT_BOUND,
    )
    counts, edges = np.histogram(at_bound, bins=bins, range=(EVAL_AT_BOUND.low, EVAL_AT_BOUND.high))
    return [value, QuantityHistogram(step=step, edges=edges, counts=counts.astype(np.int64), quantity=EVAL_AT_BOUND)]
