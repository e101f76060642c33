"""How large Geoff-PAC's M2 gradient is beside its main term's, on the actor (about a minute).

    python -m benchmarks.diagnostics.geoff_m2_gradient [--algo td3] [--baseline state] [--steps 6000]

Trains Geoff-PAC with ``geoff_m2=one`` on Pendulum-v1 for ``steps``, then, on three batches of 256,
prints the norm of the actor's gradient of the main term (ρ̄ M1 on the baseline's loss) and of the
M2 term (γ̂ Σκ (V(s_i) − b) log π(a_j|s_j), one predecessor): docs/competitors.md, "Why M2 is off by
default".
"""

from __future__ import annotations

import argparse

import torch

from agents import TrainConfig, Trainer
from agents.corrections.geoff_pac import GeoffPAC


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="td3")
    parser.add_argument("--baseline", default="state", choices=("state", "mean", "none"))
    parser.add_argument("--steps", type=int, default=6000)
    args = parser.parse_args()
    config = TrainConfig.make(algo=args.algo, env_id="Pendulum-v1", correction="geoff-pac", geoff_m2="one",
                         geoff_m2_baseline=args.baseline, total_steps=args.steps, start_steps=1000,
                         eval_freq=args.steps, eval_episodes=1)  # fmt: skip
    trainer = Trainer(config)
    trainer.run()
    geoff, agent = trainer.correction, trainer.agent
    assert isinstance(geoff, GeoffPAC)
    params = list(agent.actor.parameters())

    def norm(per_sample: torch.Tensor) -> float:
        grads = torch.autograd.grad(per_sample.mean(), params, allow_unused=True)
        return float(torch.sqrt(sum((g.square().sum() for g in grads if g is not None), torch.tensor(0.0))))

    for seed in range(3):
        batch = trainer.buffer.sample(256, torch.Generator().manual_seed(seed))
        agent.updates = 2 * (agent.updates // 2 + 1)  # an actor step
        with torch.no_grad():
            geoff.weights(batch, agent)
        pending = geoff._pending
        assert pending is not None and geoff.rho_bar is not None
        m2 = geoff._predecessors(pending, agent)
        per_sample = agent.actor_loss(batch.obs)
        main_term = geoff.rho_bar * pending.m1
        m2_term = geoff.gamma_hat * geoff._m2_term(m2, -per_sample.detach(), agent)
        print(
            f"{args.algo}, baseline {args.baseline}, batch {seed}: main term {norm(main_term * per_sample):.3g},"
            f" M2 term {norm(m2_term):.3g}"
        )


if __name__ == "__main__":
    main()
