"""Measure the uniform-random policy's return on the paper's eight tasks (store.normalise's table).

    python -m agents.random_scores [--episodes 100]

Each task at the version that runs here (MuJoCo ``-v4``, Box2D ``-v3``): actions uniform on the
normalised box [-1, 1]^d, ``--episodes`` episodes from seeds 0, 1, ...; prints the mean return per
task as the Python dict ``store/normalise.py`` holds.
"""

from __future__ import annotations

import argparse

import numpy as np
from rich.progress import Progress

from agents.envs import make_env

TASKS = ("Ant-v4", "BipedalWalker-v3", "HalfCheetah-v4", "Hopper-v4", "Humanoid-v4", "LunarLanderContinuous-v3",
         "Swimmer-v4", "Walker2d-v4")  # fmt: skip


def random_return(env_id: str, episodes: int) -> float:
    env = make_env(env_id)
    rng = np.random.default_rng(0)
    returns = []
    for episode in range(episodes):
        env.reset(seed=episode)
        total, done = 0.0, False
        while not done:
            action = rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
            _, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100)
    args = parser.parse_args()
    scores = {}
    with Progress() as progress:
        task = progress.add_task("random policy", total=len(TASKS))
        for env_id in TASKS:
            progress.update(task, description=env_id)
            scores[env_id.rsplit("-v", 1)[0]] = round(random_return(env_id, args.episodes), 2)
            progress.advance(task)
    print("{" + ", ".join(f'"{family}": {score}' for family, score in scores.items()) + "}")


if __name__ == "__main__":
    main()
