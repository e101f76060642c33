"""Learning quality (slow; run deliberately): ``python -m pytest -m slow -n 0 -s``.

Each algorithm, with and without AC-Off-POC, and with each of the paper's competitors, and TD3
with each replay sampler, must learn Pendulum-v1 (random policy ≈ −1200, solved ≈ −150) to a
clearly learned level within 15k steps. ``-k "not competitor and not sampler and not lane"`` runs the first six
alone (about 9 minutes); the lane groups (`-k lane`) train each algorithm with every correction, and
TD3 with each sampler, as lanes.
"""

from __future__ import annotations

import dataclasses

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


@pytest.mark.slow
def test_ddpg_with_ac_off_poc_learns_pendulum_without_saturating() -> None:
    """Issue 49: DDPG + AC-Off-POC froze on HalfCheetah with every action at ±1. On Pendulum it must learn,
    and its learned policy must not sit at the bounds: swinging up takes full torque, balancing does not
    (measured at 15k steps: 18-28% of evaluation actions at the bounds, plain DDPG 21-34%; a frozen actor
    reads 100%)."""
    sink = learns_pendulum("ddpg", "acoffpoc")
    shares = sink.quantity_values("eval_at_bound")[:, 0]
    assert len(shares) == len(sink.evals)  # one per evaluation
    print(f"evaluation actions at the bounds, last 3 evaluations: {shares[-3:].round(2).tolist()}")
    assert shares[-3:].mean() < 0.5
    assert sink.quantity_values("at_bound")[-1000:, 0].mean() < 0.9  # the replayed states too, last 1,000 updates


def learns_pendulum(algo: str, correction: str, sampler: str = "uniform") -> RecordingSink:
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
    trained = [b for b in sink.blocks if b.quantity.name != "eval_at_bound"]
    logged = trained[0].quantity if trained else None  # λ, or a competitor's first quantity
    weights = sink.quantity_values(logged.name) if logged else np.zeros((0, 1))
    lam = f", mean {logged.label} {weights[:, 0].mean():.3f}" if logged else ""
    print(f"\n{algo} + {correction} ({sampler}): return {first:.0f} at step 0 -> {final:.0f} (last 3 evaluations){lam}")
    assert final > LEARNED
    return sink


@pytest.mark.slow
def test_a_pendulum_lane_group_learns_like_its_solo_runs() -> None:
    """Four TD3 lanes (seeds 0 and 1, each without and with AC-Off-POC), 20k steps, against the same four runs
    trained alone: each lane learns, and its final return (last three evaluations) lies within the solo runs'
    spread (their range, widened by their standard deviation on each side: float rounding lets a lane's
    trajectory drift from its solo run's, as any two implementations of one run drift apart)."""
    from agents.lanes import LaneGroup

    base = TrainConfig(
        algo="td3", env_id="Pendulum-v1", total_steps=20_000, start_steps=1_000, eval_freq=1_000, eval_episodes=5
    )
    configs = [
        dataclasses.replace(base, correction=correction, seed=seed)
        for seed in (0, 1)
        for correction in ("none", "acoffpoc")
    ]
    solo = [RecordingSink() for _ in configs]
    for config, sink in zip(configs, solo, strict=True):
        Trainer(config, sink).run()
    lanes = [RecordingSink() for _ in configs]
    ends = LaneGroup([Trainer(config, sink) for config, sink in zip(configs, lanes, strict=True)]).run()
    assert all(getattr(end, "status", None) == "finished" for end in ends.values()), ends

    def final(sink: RecordingSink) -> float:
        return float(np.mean([e.return_mean for e in sink.evals[-3:]]))

    alone, grouped = np.array([final(s) for s in solo]), np.array([final(s) for s in lanes])
    low, high = alone.min() - alone.std(), alone.max() + alone.std()
    print(f"\nsolo finals {alone.round(0).tolist()}, lane finals {grouped.round(0).tolist()}")
    print(f"spread {low:.0f}..{high:.0f}")
    assert (grouped > LEARNED).all()
    assert ((grouped >= low) & (grouped <= high)).all()


def lanes_learn_pendulum(algo: str, corrections: list[str], sampler: str = "uniform") -> None:
    """One lane group, a lane per correction (seed 0 each), in :func:`learns_pendulum`'s setting: each lane learns."""
    from agents.lanes import LaneGroup

    base = TrainConfig(
        algo=algo, env_id="Pendulum-v1", sampler=sampler, total_steps=15_000, start_steps=1_000, eval_freq=1_000,
        eval_episodes=5, stats_every=5_000,
    )  # fmt: skip
    sinks = [RecordingSink() for _ in corrections]
    trainers = [Trainer(dataclasses.replace(base, correction=c), s) for c, s in zip(corrections, sinks, strict=True)]
    ends = LaneGroup(trainers).run()
    assert all(getattr(end, "status", None) == "finished" for end in ends.values()), ends
    finals = {c: float(np.mean([e.return_mean for e in s.evals[-3:]])) for c, s in zip(corrections, sinks, strict=True)}
    print(f"\n{algo} lanes ({sampler}): final returns { ({c: round(f) for c, f in finals.items()}) }")
    assert all(final > LEARNED for final in finals.values()), finals


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_every_correction_learns_pendulum_as_a_lane(algo: str) -> None:
    """Each algorithm as one group of six lanes, one per built-in correction: every lane learns (issue 67)."""
    lanes_learn_pendulum(algo, ["none", "acoffpoc", "ace", "geoff-pac", "ipg", "ris-off-pac"])


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["cer", "per", "ero"])
def test_td3_lanes_learn_pendulum_with_each_replay_sampler(sampler: str) -> None:
    lanes_learn_pendulum("td3", ["none", "acoffpoc"], sampler)
