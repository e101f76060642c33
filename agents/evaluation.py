"""The paper's evaluation protocol, and its episodes stepped together where that keeps every bit."""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from agents.algorithms.base import ActorCritic
from agents.algorithms.deterministic import NEAR_BOUND
from agents.envs import make_env
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


STATELESS_MODULES = ("gymnasium.envs.mujoco.", "gymnasium.envs.classic_control.")
"""Where the environments whose episodes may step together are defined. Gymnasium's MuJoCo and classic-control
tasks set all of their state at a reset and draw from their generator in resets alone. Box2D's do not: LunarLander
draws in its steps, BipedalWalker's world keeps bodies from one episode to the next (the returns of its episodes
one after another depend on the episodes before). A user's own environment may carry anything, and says so
itself: :data:`INDEPENDENT_EPISODES` in its ``metadata``."""

INDEPENDENT_EPISODES = "offpoc_independent_episodes"
"""The ``metadata`` key by which an environment declares (True) that a reset sets all of its state and that only
resets draw from its generator, so its evaluations' episodes may step together (the checks of :class:`Evaluator`
still apply)."""


def may_step_together(env: gym.Env) -> bool:
    """Whether ``env`` declares its episodes independent (:data:`INDEPENDENT_EPISODES`), or else its task is one of
    :data:`STATELESS_MODULES`'."""
    unwrapped = env.unwrapped
    return unwrapped.metadata.get(INDEPENDENT_EPISODES) is True or type(unwrapped).__module__.startswith(
        STATELESS_MODULES
    )


def _generator_state(env: gym.Env) -> Any:
    """The state of the environment's own generator (``np_random``), the one its resets draw from."""
    return copy.deepcopy(env.unwrapped.np_random.bit_generator.state)


def evaluate_together(agent: ActorCritic, envs: list[gym.Env], seed: int) -> Evaluation | None:
    """What :func:`evaluate` returns for ``len(envs)`` episodes, the episodes stepped together: one call of the
    actor per step for every episode still running (:meth:`~agents.algorithms.base.ActorCritic.greedy_actions`);
    None where that cannot be promised, the actor's bits or the episodes' initial states.

    Episode k of :func:`evaluate` starts from the (k + 1)-th reset of an environment seeded with ``seed``,
    after episode k − 1's steps. Copy 0 here resets with the seed, and copy k resets once with a copy of the
    generator as copy k − 1's reset left it, without that episode's steps between: the same state exactly
    when the steps draw nothing from the environment's generator (MuJoCo's do not; LunarLander's wind and
    engine dispersion do). Each copy's generator is compared after its episode with where its reset left
    it, and a difference returns None.
    """
    obs: list[np.ndarray] = []
    drawn: list[Any] = []
    for k, env in enumerate(envs):
        if k:
            env.unwrapped.np_random = copy.deepcopy(envs[k - 1].unwrapped.np_random)
        observation, _ = env.reset(seed=None if k else seed)
        obs.append(observation)
        drawn.append(_generator_state(env))
    returns, lengths = [0.0] * len(envs), [0] * len(envs)
    at_bound: list[list[float]] = [[] for _ in envs]
    running = list(range(len(envs)))
    while running:
        actions = agent.greedy_actions(np.stack([obs[k] for k in running]))
        if actions is None:  # only ever at the first step: whether an agent promises its bits does not change
            return None
        shares = np.mean(np.abs(actions) >= NEAR_BOUND, axis=1).tolist()  # exact: small counts over d
        still: list[int] = []
        for k, action, share in zip(running, actions, shares):
            at_bound[k].append(share)
            obs[k], reward, terminated, truncated, _ = envs[k].step(action)
            returns[k] += float(reward)
            lengths[k] += 1
            if not (terminated or truncated):
                still.append(k)
        running = still
    if any(_generator_state(env) != state for env, state in zip(envs, drawn)):
        return None
    return Evaluation(returns, lengths, np.asarray([share for episode in at_bound for share in episode]))


class Evaluator:
    """The paper's evaluation of one run: ``episodes`` deterministic episodes from the same initial states at
    every evaluation, stepped together (:func:`evaluate_together`) where the results keep every bit of
    :func:`evaluate`'s, one at a time otherwise.

    Stepping together saves the per-call cost of acting on one observation at a time (a tenth of the actor's
    calls for the paper's ten episodes); it needs one more environment per episode, made at the first
    evaluation. It is tried only on the tasks of :data:`STATELESS_MODULES` (gymnasium's MuJoCo and classic
    control), with an actor that promises its rows' bits (the NumPy forward on the CPU, an algorithm's own
    ``act``), and kept only while:

    - every episode's steps draw nothing from its environment's generator (checked at every evaluation);
    - the first evaluation, run both ways, gives equal returns, lengths and at-bound shares. This backstop
      sees only what differs at that evaluation; the list of tasks is what keeps other state out.

    Once refused, always alone, and the copies are closed. The episodes alone run in :attr:`env`, which
    stepping together never touches: a refusal leaves it as if the evaluations had always been alone.
    """

    def __init__(self, env_id: str, episodes: int) -> None:
        self.env_id, self.episodes = env_id, episodes
        self.env = make_env(env_id)
        """The environment of the episodes run one at a time."""
        self._copies: list[gym.Env] = []
        self.together: bool | None = None if episodes > 1 and may_step_together(self.env) else False
        """Whether the episodes are stepped together: None until the first evaluation settles it."""

    @property
    def envs(self) -> list[gym.Env]:
        """The environments of the episodes stepped together, one per episode, made on first use."""
        while len(self._copies) < self.episodes:
            self._copies.append(make_env(self.env_id))
        return self._copies

    def evaluate(self, agent: ActorCritic, seed: int) -> Evaluation:
        """One evaluation of ``agent``, its episodes from the initial states ``seed`` gives."""
        if self.together is False:
            return evaluate(agent, self.env, self.episodes, seed)
        alone = evaluate(agent, self.env, self.episodes, seed) if self.together is None else None
        together = evaluate_together(agent, self.envs, seed)
        self.together = together is not None and (alone is None or _same(alone, together))
        if not self.together:
            for env in self._copies:
                env.close()
            self._copies.clear()
        if alone is not None:
            return alone
        return together if together is not None else evaluate(agent, self.env, self.episodes, seed)


def _same(a: Evaluation, b: Evaluation) -> bool:
    return a.returns == b.returns and a.lengths == b.lengths and np.array_equal(a.at_bound, b.at_bound)


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
