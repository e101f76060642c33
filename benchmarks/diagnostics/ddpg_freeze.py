"""Issue 49: why a DDPG actor that sits at its action bounds stays there.

From a run's last checkpoint (with its replay buffer), on batches of the run's own replayed
transitions:

1. **The tanh.** The actor's last layer before its tanh, z: the share of |z| > 3 (tanh'(z) < 0.01) and
   the mean tanh'(z). A saturated tanh passes almost no gradient, whatever the critic says.
2. **The critic's preference.** ∂Q/∂a at a = π(s): the share of saturated entries where the critic asks
   to go further out (the bound is where it wants the action) rather than back in.
3. **The decay beside the TD term.** The critic's TD gradient g (the run's own target networks), scaled
   by the batch's λ as the run scaled it, against wd·θ: the decay's norm against the whole gradient's,
   ‖wd·θ‖ / ‖λ·g + wd·θ‖ with Adam's L2 and ‖λ·wd·θ‖ / ‖λ·(g + wd·θ)‖ in the loss (not the logged
   ``decay_share``, ‖d‖ / (‖g‖ + ‖d‖)); and per coordinate, the share of the critic's parameters where
   |wd·θ_i| outweighs the TD term's |λ·g_i| (Adam scales each coordinate's step by its own gradient).
4. **Counterfactual continuations.** From the checkpoint, ``--updates`` further updates on the same fixed
   buffer, sampled uniformly whatever the run's sampler (no new data: only the optimisation differs),
   under each variant: as the run trained; the decay
   in the loss; in Adam; no correction (λ = 1); no weight decay. The share of π(s) at the bounds after each says
   which of them, if any, lets the actor leave the bounds.

    python -m benchmarks.diagnostics.ddpg_freeze --db /tmp/i49/s.db 4 --updates 3000
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import torch
from torch import Tensor

from agents.algorithms.base import ActorCritic
from agents.algorithms.deterministic import NEAR_BOUND
from agents.replay import Batch
from agents.training import Trainer
from store import open_store
from store.files import RunFiles

BATCHES = 20


def pre_tanh(agent: ActorCritic, obs: Tensor) -> Tensor:
    """The actor's last layer before its tanh."""
    return agent.actor.net[:-1](obs)  # type: ignore[index,operator]


def lam(trainer: Trainer, batch: Batch) -> Tensor:
    if trainer.correction is None:
        return torch.tensor(1.0)
    with torch.no_grad():
        weight = trainer.correction.weights(batch, trainer.agent).critic
    return torch.tensor(1.0) if weight is None else weight.mean()


def static(trainer: Trainer, batches: list[Batch]) -> dict[str, float]:
    agent = trainer.agent
    wd = float(trainer.config.critic_weight_decay or 0.0)
    params = list(agent.critic.parameters())
    sums: dict[str, float] = {}

    def add(name: str, value: float) -> None:
        sums[name] = sums.get(name, 0.0) + value / len(batches)

    for batch in batches:
        with torch.no_grad():
            z = pre_tanh(agent, batch.obs)
            a = torch.tanh(z)
        add("at_bound", float((a.abs() >= NEAR_BOUND).float().mean()))
        add("z_over_3", float((z.abs() > 3).float().mean()))
        add("z_median", float(z.abs().median()))
        add("tanh_grad", float((1 - a.square()).mean()))
        action = a.clone().requires_grad_(True)
        q = agent.critic(batch.obs, action, first_only=True)[0]
        (dq,) = torch.autograd.grad(q.sum(), action)
        saturated = a.abs() >= NEAR_BOUND
        outward = (dq * a.sign() > 0) & saturated
        add("outward", float(outward.sum() / saturated.sum().clamp_min(1)))
        weight = lam(trainer, batch)
        add("lambda", float(weight))
        with torch.no_grad():
            y = agent.target(batch)
        td = (agent.critic(batch.obs, batch.action)[0] - y).square().mean()
        grads = torch.autograd.grad(td, params)
        g = torch.cat([x.flatten() for x in grads])
        theta = torch.cat([p.detach().flatten() for p in params])
        add("q_abs", float(y.abs().mean()))
        add("decay_share_adam", float((wd * theta).norm() / (weight * g + wd * theta).norm()))
        add("decay_share_loss", float((wd * theta).norm() / (g + wd * theta).norm()))
        # Adam steps each coordinate by its own gradient's scale: where the decay outweighs the TD term
        add("decay_wins_adam", float(((wd * theta).abs() > (weight * g).abs()).float().mean()))
        add("decay_wins_loss", float(((wd * theta).abs() > g.abs()).float().mean()))
    return sums


def continuation(trainer: Trainer, variant: str, updates: int) -> float:
    """The share of π(s) at the bounds after ``updates`` more updates on the fixed buffer under ``variant``."""
    agent = copy.deepcopy(trainer.agent)
    correction = copy.deepcopy(trainer.correction)
    wd = float(trainer.config.critic_weight_decay or 0.0)
    if variant == "decay in the loss":
        agent.set_critic_decay(wd, "loss")
    elif variant == "decay in Adam":
        agent.set_critic_decay(wd, "adam")
    elif variant == "no weight decay":
        agent.set_critic_decay(0.0, "loss")
    if variant == "no correction":
        correction = None
    generator = torch.Generator().manual_seed(1)
    for _ in range(updates):
        agent.update(trainer.buffer.sample(trainer.config.batch_size, generator), correction)
    probe = trainer.buffer.sample(4096, torch.Generator().manual_seed(2))
    with torch.no_grad():
        return float((agent.actor(probe.obs).abs() >= NEAR_BOUND).float().mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("run", type=int)
    parser.add_argument("--updates", type=int, default=3000, help="updates per counterfactual continuation")
    args = parser.parse_args()
    files = RunFiles.of(open_store(args.db), args.db)
    path = files.find_checkpoint(args.run)
    if path is None:
        raise SystemExit(f"run {args.run} has no checkpoint")
    trainer = Trainer.resume(path)
    c = trainer.config
    print(f"run {args.run}: {c.algo} {c.env_id} correction {c.correction} seed {c.seed},"
          f" decay {c.critic_weight_decay} ({c.critic_decay_form}), at step {trainer.step:,}")  # fmt: skip
    generator = torch.Generator().manual_seed(0)
    batches = [trainer.buffer.sample(c.batch_size, generator) for _ in range(BATCHES)]
    m = static(trainer, batches)
    print(f"π(s) at the bounds {m['at_bound']:.1%}; |z| > 3 (tanh' < 0.01) {m['z_over_3']:.1%};"
          f" median |z| {m['z_median']:.1f}; mean tanh'(z) {m['tanh_grad']:.4f}")  # fmt: skip
    print(f"of the saturated entries, the critic asks to go further out on {m['outward']:.1%}")
    print(f"λ {m['lambda']:.3f}, |y| {m['q_abs']:.1f}; ‖decay‖ / ‖critic gradient‖:"
          f" {m['decay_share_adam']:.1%} with Adam's L2 (λ·g + wd·θ), {m['decay_share_loss']:.1%} with it in"
          " the loss (λ·(g + wd·θ))")  # fmt: skip
    print(f"critic coordinates where the decay outweighs the TD term: {m['decay_wins_adam']:.1%} with Adam's L2,"
          f" {m['decay_wins_loss']:.1%} with it in the loss")  # fmt: skip
    print(f"after {args.updates:,} more updates on the fixed buffer, π(s) at the bounds:")
    for variant in ("as trained", "decay in the loss", "decay in Adam", "no correction", "no weight decay"):
        print(f"  {variant:<18} {continuation(trainer, variant, args.updates):.1%}")


if __name__ == "__main__":
    main()
