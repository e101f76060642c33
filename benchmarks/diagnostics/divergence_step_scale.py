"""Issue 66: λ under each divergence at one moment of a run, and what it would do to Adam's steps.

Loads a TD3 or DDPG + AC-Off-POC checkpoint (its policy and replay buffer), draws ``--batches`` batches as its
training would, and computes each batch's λ with the run's policy under every divergence (jsd, the paper's;
symkl, the authors' code's; kl). For each: λ's mean and spread over the batches, and the spread of Adam's
step scale r (:mod:`benchmarks.diagnostics.adam_step_scale`) for that sequence of λ: how far the correction
would move each step from the baseline's, were the run to train with that divergence from here.

    python -m benchmarks.diagnostics.divergence_step_scale CHECKPOINT --batches 3000
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
import torch

from agents import Trainer
from agents.corrections import CorrectionSettings, make_correction
from agents.corrections.divergences import DIVERGENCES
from benchmarks.diagnostics.adam_step_scale import step_scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--batches", type=int, default=3000, help="more than 1,000: r is read after Adam's horizon")
    args = parser.parse_args()
    if args.batches <= 1000:
        parser.error(f"--batches must be more than 1000 (r is read after the first 1,000), got {args.batches}")
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = Trainer.resume(args.checkpoint)
    config, agent = trainer.config, trainer.agent
    if config.correction != "acoffpoc" or agent.policy_kind != "deterministic":
        raise SystemExit("a checkpoint of DDPG or TD3 with --correction acoffpoc, please")
    batches = [trainer.sample()[0] for _ in range(args.batches)]
    print(f"{config.algo} {config.env_id} seed {config.seed} at step {trainer.step:,}; {args.batches:,} batches\n")
    print("| divergence | λ mean ± sd | λ 1st–99th pct | r: sd, 1st–99th pct |")
    print("|---|---|---|---|")
    for divergence in DIVERGENCES:
        settings = CorrectionSettings(agent.policy_kind, 0, config.replace(divergence=divergence))
        correction = make_correction("acoffpoc", settings)
        with torch.no_grad():
            lam = np.array([float(correction.weights(b, agent).logged["lambda"].float().mean()) for b in batches])
        r = step_scale(lam)[1000:]  # after Adam's second moment has its horizon
        low, high = np.percentile(lam, [1, 99])
        r_low, r_high = np.percentile(r, [1, 99])
        print(
            f"| {divergence} | {lam.mean():.3f} ± {lam.std():.3f} | {low:.3f}–{high:.3f} |"
            f" {r.std():.4f}, {r_low:.3f}–{r_high:.3f} |"
        )


if __name__ == "__main__":
    main()
