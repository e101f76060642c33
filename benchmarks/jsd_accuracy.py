"""Accuracy and cost of the Monte Carlo JSD: ours against the textbook estimator (the peer).

    python benchmarks/jsd_accuracy.py

Ours (``agents.corrections.divergences``): 128 base samples per distribution,
scrambled Sobol points mapped to standard normals, each contributing the mixture
integrand ln 2 − H(p/(p+q)). The peer: 512 independent standard normal samples
per distribution and the textbook integrand ln 2 − softplus(log q − log p),
which is what offpoc computed before (commit b2fef5b and earlier).

Both are scored against a reference from 200,000 independent samples per
distribution (standard error below 6e-4) on random pairs of diagonal Gaussians,
by action dimension d and by how far apart the pairs are drawn ("spread"); the
peer is scored over four independent sample tables. Then both are timed on 256
pairs in d = 3 (Hopper), one torch thread, as SAC's per-transition weight runs.
"""

from __future__ import annotations

import math

import torch
from microbench import seconds_per_call
from rich.console import Console
from rich.table import Table

from agents.corrections.divergences import (
    JSD_SAMPLES,
    diag_gaussian_jsd,
    diag_log_ratios,
    jsd_from_log_ratios,
    quadratic_basis,
)

LN2 = math.log(2.0)
PEER_SAMPLES = 512
PAIRS = 200
REFERENCE_CHUNKS, CHUNK = 20, 10_000


def reference_jsd(pair: tuple[torch.Tensor, ...], d: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(12345 + d)
    total = torch.zeros(pair[0].shape[0], dtype=torch.float64)
    for _ in range(REFERENCE_CHUNKS):
        basis = quadratic_basis(torch.randn(CHUNK, d, generator=g, dtype=torch.float64))
        total += jsd_from_log_ratios(diag_log_ratios(*pair, basis))
    return total / REFERENCE_CHUNKS


def peer_jsd(pair: tuple[torch.Tensor, ...], basis: torch.Tensor) -> torch.Tensor:
    """The textbook estimate on the samples whose :func:`quadratic_basis` is ``basis``."""
    spread = torch.nn.functional.softplus(diag_log_ratios(*pair, basis)).mean(-1)
    return (LN2 - 0.5 * (spread[0] + spread[1])).clamp(0.0, LN2)


def peer_samples(d: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(PEER_SAMPLES, d, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def random_pairs(d: int, spread: float, g: torch.Generator, n: int = PAIRS) -> tuple[torch.Tensor, ...]:
    """Pairs whose means and log-stds differ by about ``spread`` per dimension."""
    mean_p = torch.randn(n, d, generator=g, dtype=torch.float64)
    log_std_p = torch.empty(n, d, dtype=torch.float64).uniform_(-2.0, 0.0, generator=g)
    mean_q = mean_p + spread * log_std_p.exp() * torch.randn(n, d, generator=g, dtype=torch.float64)
    log_std_q = log_std_p + 0.5 * spread * torch.randn(n, d, generator=g, dtype=torch.float64)
    return mean_p, log_std_p, mean_q, log_std_q


def errors(estimate: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    diff = estimate - reference
    return float(diff.square().mean().sqrt()), float(diff.abs().max())


def main() -> None:
    torch.set_num_threads(1)
    table = Table(title=f"JSD error against a 200,000-sample reference ({PAIRS} random pairs per row)")
    for column in ("d", "spread", "mean JSD (nats)", "ours rms / max", "peer rms / max", "peer rms / ours rms"):
        table.add_column(column, justify="right")
    g = torch.Generator().manual_seed(0)
    for d in (1, 3, 6, 17):
        for spread in (0.1, 0.3, 1.0, 3.0):
            pair = random_pairs(d, spread, g)
            reference = reference_jsd(pair, d)
            ours_rms, ours_max = errors(diag_gaussian_jsd(*pair), reference)
            peer = [
                errors(peer_jsd(pair, quadratic_basis(peer_samples(d, seed, torch.float64))), reference)
                for seed in range(4)
            ]
            peer_rms = math.sqrt(sum(rms**2 for rms, _ in peer) / len(peer))
            peer_max = max(worst for _, worst in peer)
            table.add_row(
                str(d),
                f"{spread:.1f}",
                f"{float(reference.mean()):.3f}",
                f"{ours_rms:.4f} / {ours_max:.3f}",
                f"{peer_rms:.4f} / {peer_max:.3f}",
                f"{peer_rms / ours_rms:.1f}×",
            )
    console = Console(width=120)
    console.print(table)

    # As transition_similarity runs them: float64 coefficients, float32 samples.
    pair = random_pairs(3, 1.0, g, n=256)
    basis = quadratic_basis(peer_samples(3, 0, torch.float64)).float()
    ours = seconds_per_call(lambda: diag_gaussian_jsd(*pair, sample_dtype=torch.float32), calls=50)
    peer = seconds_per_call(lambda: peer_jsd(pair, basis), calls=50)
    console.print(
        f"256 pairs, d = 3: ours ({JSD_SAMPLES} samples) {ours * 1e6:.0f} µs, "
        f"peer ({PEER_SAMPLES} samples) {peer * 1e6:.0f} µs per call: peer / ours = {peer / ours:.2f}"
    )


if __name__ == "__main__":
    main()
