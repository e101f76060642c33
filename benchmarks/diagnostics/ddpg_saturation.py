"""Issue 49: does a DDPG run's actor sit at its action bounds, and how large is Q beside the critic's decay?

For each run (of a store trained here), its last checkpoint's actor is run greedily for one
evaluation episode (the run's evaluation seed) and three things are measured:

- the share of actions at, or within 1% of, the bounds (|a| ≥ 0.99 of the [-1, 1] range), over all
  steps and action dimensions, and the share of steps where every dimension is there;
- Q's scale: the mean |Q(s, π(s))| over the episode's states (the first critic);
- the critic's weight-decay term: Adam's L2 (``critic_weight_decay`` wd, added to the gradient as
  wd·θ) is the gradient of wd/2·‖θ‖², reported beside the critic's mean squared TD error on a batch
  drawn from the states the episode visited (target from the run's own target networks is not
  available here, so the TD error is against the one-step target of the online networks: a scale, not
  the training loss).

    python -m benchmarks.diagnostics.ddpg_saturation --db /tmp/i49/s.db 1 2 3 4
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from agents.algorithms.deterministic import NEAR_BOUND
from agents.checkpoint import read_state
from agents.training import Trainer
from store import open_store
from store.files import RunFiles
from store.reader import list_runs

NEAR = NEAR_BOUND
"""|a| at or beyond this share of the bound counts as at the bound (the issue's "within 1%")."""


def measure(trainer: Trainer) -> dict[str, float]:
    agent, env = trainer.agent, trainer.evaluator.env
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=trainer.config.seed + 100)
    states, actions, rewards, done = [], [], [], False
    while not done:
        action = agent.act(obs, explore=False, rng=rng).action
        states.append(obs)
        actions.append(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(float(reward))
        done = terminated or truncated
    a = np.abs(np.asarray(actions))
    s = torch.as_tensor(np.asarray(states), dtype=torch.float32)
    with torch.no_grad():
        q = agent.critic(s, agent.actor(s), first_only=True)[0]
        next_s = torch.as_tensor(np.asarray([*states[1:], obs]), dtype=torch.float32)
        y = torch.as_tensor(rewards, dtype=torch.float32)[:, None]
        y = y + trainer.config.gamma * agent.critic(next_s, agent.actor(next_s), first_only=True)[0]
    wd = float(trainer.config.critic_weight_decay or 0.0)
    norm2 = sum(float((p.detach() ** 2).sum()) for p in agent.critic.parameters())
    return {
        "return": float(np.sum(rewards)),
        "at_bound": float((a >= NEAR).mean()),
        "all_at_bound": float((a >= NEAR).all(axis=1).mean()),
        "q_abs": float(q.abs().mean()),
        "td_mse": float(((q - y) ** 2).mean()),
        "decay_term": wd / 2 * norm2,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("runs", type=int, nargs="+")
    args = parser.parse_args()
    db = open_store(args.db)
    files = RunFiles.of(db, args.db)
    rows = {r["id"]: r for r in list_runs(db, run_ids=args.runs)}
    print(
        "run  algo  env             correction  seed   steps   return  at bound  all dims   |Q|     TD mse   wd/2·‖θ‖²"
    )
    for run_id in args.runs:
        path = files.find_checkpoint(run_id)
        if path is None:
            print(f"{run_id:>3}  no checkpoint")
            continue
        trainer = Trainer.resume(path)
        m = measure(trainer)
        r = rows[run_id]
        step = read_state(path)["counters"]["step"]  # the checkpoint's, which a running run is past
        print(
            f"{run_id:>3}  {r['algo']:<5} {r['env']:<15} {r['correction']:<11} {r['seed']:>4} {step:>7,}"
            f" {m['return']:>8.1f} {m['at_bound']:>8.1%} {m['all_at_bound']:>9.1%} {m['q_abs']:>7.1f}"
            f" {m['td_mse']:>9.3f} {m['decay_term']:>10.3f}"
        )


if __name__ == "__main__":
    main()
