"""Replay memory per transition: offpoc's buffer vs Stable-Baselines3's ReplayBuffer.

    pip install -c constraints.txt -e ".[bench]"
    python benchmarks/replay_memory.py

offpoc stores each observation once (next_obs is the next slot; an episode's
final observation takes one extra slot), float32 actions/rewards/termination,
two flag bytes, and for SAC + AC-Off-POC the behaviour policy's pre-tanh mean
and log-std. SB3's ReplayBuffer (default, optimize_memory_usage=False) stores
obs and next_obs, action, reward, done and timeout per transition.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
from rich.console import Console
from rich.table import Table

from agents.replay import ReplayBuffer

warnings.filterwarnings("ignore")
CAPACITY = 10_000


def sb3_bytes_per_transition(env_id: str) -> float:
    from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer

    env = gym.make(env_id)
    buffer = SB3ReplayBuffer(CAPACITY, env.observation_space, env.action_space, device="cpu")
    arrays = [buffer.observations, buffer.next_observations, buffer.actions, buffer.rewards, buffer.dones]
    arrays.append(buffer.timeouts)
    return sum(a.nbytes for a in arrays) / CAPACITY


def main() -> None:
    table = Table(title="Replay memory per stored transition")
    for column in (
        "env",
        "obs/act dims",
        "offpoc TD3",
        "offpoc SAC+AC-Off-POC",
        "SB3",
        "offpoc TD3 / SB3",
        "1M transitions (offpoc TD3)",
    ):
        table.add_column(column, justify="right")
    for env_id in ("Hopper-v4", "Humanoid-v4"):
        env = gym.make(env_id)
        obs_dim, action_dim = env.observation_space.shape[0], env.action_space.shape[0]
        plain = ReplayBuffer(2, obs_dim, action_dim).bytes_per_slot
        sac = ReplayBuffer(2, obs_dim, action_dim, behaviour_params=True).bytes_per_slot
        peer = sb3_bytes_per_transition(env_id)
        table.add_row(
            env_id,
            f"{obs_dim}/{action_dim}",
            f"{plain} B",
            f"{sac} B",
            f"{peer:.0f} B",
            f"{plain / peer:.2f}",
            f"{plain * 1e6 / 2**20:.0f} MiB",
        )
    Console().print(table)
    Console().print("offpoc adds one slot per finished episode (its final observation): ≤ 0.1% at 1000-step episodes.")


if __name__ == "__main__":
    main()
