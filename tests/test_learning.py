"""Learning quality (slow; run deliberately): ``python -m pytest -m slow -s``.

Each algorithm, with and without AC-Off-POC, and with each of the paper's competitors, and TD3
with each replay sampler, must learn Pendulum-v1 (random policy ≈ −1200, solved ≈ −150) to a
clearly learned level within 15k steps. ``-k "not competitor and not sampler"`` runs the first six
alone (about 9 minutes).
"""

from __future__ import annotations

import numpy as np
import pytest

from agents import RecordingSink, TrainConfig, Trainer

LEARNED = -400.0
"""Mean return of the last three evaluations must beat this (random: about −1200)."""


@pytest.mark.slow
@pytest.mark.parametrize("correction", ["none", "acoffpoc"])
@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_learns_pendulum(algo: str, correction: str) -> None:
    learns_pendulum(algo, correction)


@pytest.mark.slow
@pytest.mark.parametrize("correction", ["ace", "geoff-pac", "ipg", "ris-off-pac"])
@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_learns_pendulum_with_a_competitor(algo: str, correction: str) -> None:
    learns_pendulum(algo, correction)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["cer", "per", "ero"])
def test_td3_learns_pendulum_with_each_replay_sampler(sampler: str) -> None:
    learns_pendulum("td3", "none", sampler)


def learns_pendulum(algo: str, correction: str, sampler: str = "uniform") -> None:
    config = TrainConfig(
        algo=algo,
        env_id="Pendulum-v1",
        correction=correction,
        sampler=sampler,
        total_steps=15_000,
        start_steps=1_000,
        eval_freq=1_000,
        eval_episodes=5,
        stats_every=5_000,
    )
    sink = RecordingSink()
    Trainer(config, sink).run()
    final = float(np.mean([e.return_mean for e in sink.evals[-3:]]))
    first = sink.evals[0].return_mean
    logged = sink.weights[0].quantity if sink.weights else None  # λ, or a competitor's first quantity
    weights = sink.weight_values(logged.name) if logged else np.zeros((0, 1))
    lam = f", mean {logged.label} {weights[:, 0].mean():.3f}" if logged else ""
    print(f"\n{algo} + {correction} ({sampler}): return {first:.0f} at step 0 -> {final:.0f} (last 3 evaluations){lam}")
    assert final > LEARNED
