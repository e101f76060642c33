"""What the micro-benchmarks share: a timer and a random Hopper-sized batch."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from agents.algorithms import ActorCritic, make_algorithm
from agents.config import TrainConfig
from agents.replay import Batch

OBS, ACT, B = 11, 3, 256
"""Hopper-v4's observation and action sizes, and the paper's batch size."""


def cpu_vendor() -> str:
    """The CPU's vendor string (``GenuineIntel``, ``AuthenticAMD``), or "" where Linux's /proc/cpuinfo is absent."""
    try:
        with Path("/proc/cpuinfo").open() as cpuinfo:
            for line in cpuinfo:
                if line.startswith("vendor_id"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return ""


def seconds_per_call(fn: Callable[[], object], repeats: int = 7, calls: int = 30) -> float:
    """Median over ``repeats`` of the mean seconds per call over ``calls`` calls (after 5 warm-up calls)."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def random_batch(seed: int = 0, size: int = B) -> Batch:
    """A (size, ·) batch of Hopper-sized random transitions, none terminal."""
    g = torch.Generator().manual_seed(seed)
    return Batch(
        obs=torch.randn(size, OBS, generator=g),
        action=torch.rand(size, ACT, generator=g) * 2 - 1,
        reward=torch.randn(size, 1, generator=g),
        next_obs=torch.randn(size, OBS, generator=g),
        not_terminated=torch.ones(size, 1),
    )


def make_agent(algo: str, **config: object) -> ActorCritic:
    """A Hopper-sized agent with the algorithm's defaults (``config`` overrides them), seeded."""
    resolved = TrainConfig.make(algo=algo, **config).resolved()  # type: ignore[arg-type]
    return make_algorithm(resolved, OBS, ACT, torch.Generator().manual_seed(0))
