"""Cost of one similarity weight, against one plain update of the same algorithm (the peer).

    python benchmarks/weights.py

Times batch_similarity (deterministic variant, a (256, d) batch) and
transition_similarity (stochastic variant, 256 transitions) for each
divergence on one torch thread, and prints each as a share of one plain TD3 or
SAC update on Hopper-sized networks measured in the same run.
"""

from __future__ import annotations

import torch
from microbench import ACT, B, make_agent, random_batch, seconds_per_call
from rich.console import Console
from rich.table import Table

from agents.corrections.acoffpoc import batch_similarity, transition_similarity
from agents.corrections.divergences import DIVERGENCES


def plain_update(algo: str) -> float:
    agent = make_agent(algo)
    batch = random_batch(seed=1)
    return seconds_per_call(lambda: agent.update(batch), repeats=5, calls=20)


def main() -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    diff = torch.randn(B, ACT, generator=g) * 0.3
    mean, log_std = torch.randn(B, ACT, generator=g), torch.randn(B, ACT, generator=g).clamp(-2, 0)
    b_mean, b_log_std = torch.randn(B, ACT, generator=g), torch.randn(B, ACT, generator=g).clamp(-2, 0)
    log_ratio = torch.randn(B, 1, generator=g)
    updates = {"td3": plain_update("td3"), "sac": plain_update("sac")}
    table = Table(title=f"One similarity weight vs one plain update (batch {B}, action dim {ACT}, 1 thread)")
    for column in ("function", "divergence", "µs per call", "share of a plain update"):
        table.add_column(column, justify="left" if column in ("function", "divergence") else "right")
    for divergence in DIVERGENCES:
        cost = seconds_per_call(lambda d=divergence: batch_similarity(diff, 0.1, d), calls=50)
        table.add_row("batch_similarity", divergence, f"{cost * 1e6:.0f}", f"{cost / updates['td3']:.1%} of TD3")
    for divergence in DIVERGENCES:
        cost = seconds_per_call(
            lambda d=divergence: transition_similarity(mean, log_std, b_mean, b_log_std, log_ratio, d), calls=50
        )
        table.add_row("transition_similarity", divergence, f"{cost * 1e6:.0f}", f"{cost / updates['sac']:.1%} of SAC")
    console = Console()
    console.print(table)
    console.print(f"plain update: TD3 {updates['td3'] * 1e3:.2f} ms, SAC {updates['sac'] * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
