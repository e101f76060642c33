"""The arithmetic floor of Geoff-PAC's window against a plain TD3 update (about 20 s).

    python -m benchmarks.diagnostics.geoff_floor [--window 16]

Geoff-PAC recomputes each replayed transition's traces over up to ``window`` predecessors under the
current policy (docs/competitors.md): every update sends B·(window + 1) states through the actor
without gradient, and on actor steps (TD3: every other update) keeps the graph and backpropagates
through it for M2. This times, on one torch thread with Hopper sizes and batch 256, those two
passes alone against one whole plain TD3 update, so the overhead no implementation of that
recomputation can go below is printed as a ratio to the update it is added to.
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.microbench import OBS, B, make_agent, random_batch, seconds_per_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=16)
    args = parser.parse_args()
    torch.set_num_threads(1)
    agent = make_agent("td3")
    batch = random_batch()
    plain = seconds_per_call(lambda: agent.update(batch), repeats=5, calls=20)
    states = torch.randn(B * (args.window + 1), OBS)

    def forward() -> None:
        with torch.no_grad():
            agent.actor(states)

    def forward_backward() -> None:
        agent.actor(states).square().sum().backward()

    no_grad = seconds_per_call(forward, repeats=5, calls=10)
    with_grad = seconds_per_call(forward_backward, repeats=5, calls=10)
    # Per update: the forward on every update, with gradient (and back) on half of them instead.
    floor = no_grad / 2 + with_grad / 2
    print(f"plain TD3 update, batch {B}: {plain * 1e3:.2f} ms")
    passes = f"forward {no_grad * 1e3:.2f} ms, forward + backward {with_grad * 1e3:.2f} ms"
    print(f"actor on {len(states):,} states: {passes}")
    print(f"window passes per update / plain update: {floor / plain:.2f} (the overhead's floor, before anything else)")


if __name__ == "__main__":
    main()
