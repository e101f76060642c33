"""Where a TD3 update's time goes, and what the optimiser choice is worth.

    python -m benchmarks.diagnostics.update_profile              # about 30 s
    python -m benchmarks.diagnostics.update_profile --compile    # also eager vs torch.compile (+ ~30 s)

Prints, on one torch thread:
- the single-core throughput of a 256×256×256 float32 matrix product;
- the share of a plain TD3 update (Hopper sizes, batch 256) spent in matrix products (torch.profiler),
  and their FLOPs per update;
- TD3's and SAC's matrix products replayed alone, back to back (recorded from real updates), against the
  whole update: the floor that arithmetic sets, and what the rest of the update costs on top;
- TD3's matrix products by shape, each replayed alone: calls and µs per update, and GFLOP/s against the
  256×256×256 rate above (how close the products that dominate already run to it);
- TD3 and SAC updates at batch 8 and 256: the first is what an update costs besides arithmetic;
- one twin-critic optimiser step: fused Adam vs the per-tensor loop (torch's
  ``foreach=False``, which Stable-Baselines3 uses on CPU), as a ratio;
- the same fused step right after an update, as the training loop runs it: through
  ``Adam.step()`` vs ``agents.optim.AdamStep`` (the kernel called directly), as a ratio;
- one action selection in a tight loop vs right after an update (cold caches), through the NumPy
  forward pass acting uses on a CPU and through torch, and torch / NumPy right after an update;
- the TD3 kl similarity right after an update, then repeated twice: the cold-cache cost falls on
  the first run of each piece of code after the update, not on every operation;
- with ``--compile``: one critic step eager vs ``torch.compile``d, as a ratio, and the compile time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

import numpy as np
import torch
from rich.console import Console
from rich.table import Table
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from agents.corrections.acoffpoc import batch_similarity
from agents.networks import TwinCritic
from agents.optim import AdamStep
from benchmarks.breakdown import matmul_rates, rates_line
from benchmarks.microbench import ACT, OBS, B, make_agent, random_batch, seconds_per_call


def matmul_share() -> tuple[float, float, float]:
    """(ms per TD3 update, fraction of profiled CPU time in mm/addmm/bmm, GFLOP of matrix products per update)."""
    agent = make_agent("td3")
    b = random_batch()
    per_update = seconds_per_call(lambda: agent.update(b), repeats=5, calls=20)
    products = ("aten::mm", "aten::addmm", "aten::bmm", "mkldnn::_linear_pointwise")  # the last: agents.gemm
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(40):
            agent.update(b)
    events = prof.key_averages()
    share = sum(e.self_cpu_time_total for e in events if e.key in products) / sum(e.self_cpu_time_total for e in events)
    # Counting FLOPs slows what it profiles: a separate pass (an even number of updates: TD3's actor steps every
    # other), by torch's FLOP counter, which agents.gemm teaches oneDNN's products.
    with FlopCounterMode(display=False) as counter:
        for _ in range(10):
            agent.update(b)
    return per_update * 1e3, share, counter.get_total_flops() / 10 / 1e9


PRODUCTS = ("aten.mm.default", "aten.addmm.default", "aten.bmm.default", "mkldnn._linear_pointwise.default")
"""What a dispatch mode sees of matrix products: ``F.linear`` reaches it as ``t`` and ``addmm``; the last is
oneDNN's (``agents.gemm``)."""


Products = list[tuple[Callable[..., object], list[object]]]
"""Recorded matrix products: (operator, copies of its arguments)."""


class _RecordProducts(TorchDispatchMode):
    """Records every matrix product an update runs, with copies of its operands."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Products = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if str(func) in PRODUCTS:
            self.calls.append((func, [a.clone() if isinstance(a, torch.Tensor) else a for a in args]))
        return func(*args, **(kwargs or {}))


def products_alone(algo: str) -> tuple[float, float, Products]:
    """(whole update, its matrix products replayed alone) in seconds, and the products of two updates
    (TD3: one actor step in two), recorded after the timing has warmed the agent up."""
    agent = make_agent(algo)
    b = random_batch()
    whole = seconds_per_call(lambda: (agent.update(b), agent.update(b)), calls=10) / 2
    with _RecordProducts() as recorder:
        agent.update(b)
        agent.update(b)

    def replay() -> None:
        for func, args in recorder.calls:
            func(*args)

    return whole, seconds_per_call(replay, calls=10) / 2, recorder.calls


def _product_label(func: Callable[..., object], args: list[object]) -> tuple[str, int]:
    """("op A @ B", FLOPs) of one recorded product; ``ᵀ`` marks an operand read transposed."""
    if "linear_pointwise" in str(func):  # oneDNN's x·wᵀ (+ bias)
        a, b = args[0], args[1].t()  # type: ignore[union-attr]
    else:
        a, b = [t for t in args if isinstance(t, torch.Tensor)][-2:]  # addmm's bias comes first
    flops = 2 * a.numel() * b.shape[-1]  # (…, m, k) @ (…, k, n): 2·m·k·n per matrix

    def shape(t: torch.Tensor) -> str:
        transposed = t.shape[-1] > 1 and t.stride(-2) == 1
        return "×".join(map(str, t.shape)) + ("ᵀ" if transposed else "")

    name = "oneDNN" if "linear_pointwise" in str(func) else str(func).split(".")[1]
    return f"{name} {shape(a)} @ {shape(b)}", flops


def products_by_shape(products: Products) -> list[tuple[str, float, float, float]]:
    """(product, calls per update, seconds per update, FLOP/s) for each shape among two updates'
    ``products``, each replayed alone (warm): the dearest first."""
    rows: dict[str, list[float]] = {}
    for func, args in products:
        label, flops = _product_label(func, args)
        seconds = seconds_per_call(partial(func, *args), repeats=3, calls=50)
        row = rows.setdefault(label, [0.0, 0.0, 0.0])
        row[0] += 0.5
        row[1] += seconds / 2
        row[2] += flops / 2
    table = [(label, calls, seconds, flops / seconds) for label, (calls, seconds, flops) in rows.items()]
    return sorted(table, key=lambda row: -row[2])


def optimiser_steps() -> tuple[float, float]:
    """(fused, per-tensor) seconds per Adam step on the twin critic's parameters."""
    results = []
    for kwargs in ({"fused": True}, {"foreach": False}):
        critic = TwinCritic(OBS, ACT, (256, 256))
        for p in critic.parameters():
            p.grad = torch.randn_like(p)
        optimiser = torch.optim.Adam(critic.parameters(), lr=3e-4, **kwargs)
        results.append(seconds_per_call(optimiser.step, calls=100))
    return results[0], results[1]


def adam_in_context() -> tuple[float, float]:
    """(Adam.step(), AdamStep) median seconds of the twin critic's fused step, each timed right
    after a TD3 update, as in the training loop (where caches hold the update's data)."""
    agent = make_agent("td3")
    b = random_batch()
    optimiser = agent.critic_optimizer
    steps: dict[str, Callable[[], object]] = {"step()": optimiser.step, "AdamStep": AdamStep(optimiser)}
    times: dict[str, list[float]] = {name: [] for name in steps}
    for i in range(400):
        name = "step()" if i % 2 else "AdamStep"
        agent.update(b)
        start = time.perf_counter()
        steps[name]()
        times[name].append(time.perf_counter() - start)
    return statistics.median(times["step()"]), statistics.median(times["AdamStep"])


def compiled_critic_step() -> tuple[float, float, float]:
    """(eager, compiled, compile seconds) for one critic forward + backward + fused Adam step."""
    critic = TwinCritic(OBS, ACT, (256, 256))
    optimiser = torch.optim.Adam(critic.parameters(), lr=3e-4, fused=True)
    b, y = random_batch(), torch.randn(B, 1)

    def loss() -> torch.Tensor:
        return (critic(b.obs, b.action) - y).square().sum(0).mean()

    compiled = torch.compile(loss)

    def step(fn: Callable[[], torch.Tensor]) -> None:
        value = fn()
        optimiser.zero_grad(set_to_none=True)
        value.backward()
        optimiser.step()

    start = time.perf_counter()
    step(compiled)
    compile_seconds = time.perf_counter() - start
    return seconds_per_call(lambda: step(loss)), seconds_per_call(lambda: step(compiled)), compile_seconds


def fixed_cost(algo: str) -> tuple[float, float]:
    """(batch 8, batch 256) seconds per update: at batch 8 the matrix products are negligible,
    which leaves the per-update cost of eager PyTorch (op dispatch, autograd, optimiser calls)."""
    times = []
    for size in (8, B):
        agent = make_agent(algo, batch_size=size)
        times.append(seconds_per_call(partial(agent.update, random_batch(size=size)), repeats=5, calls=30))
    return times[0], times[1]


def cold_action() -> dict[str, tuple[float, float]]:
    """Seconds of one TD3 action selection (agent.act), (alone, right after an update), by forward pass:
    ``numpy`` (the CPU default, :mod:`agents.host_forward`) and ``torch``.

    The step's small work (acting, the environment, sampling) runs on caches the update
    has just filled with its own data and code: the same call costs several times more
    there than in a tight loop.
    """
    agent = make_agent("td3")
    host = agent.host_forward
    obs, rng, b = np.zeros(OBS, dtype=np.float32), np.random.default_rng(0), random_batch()
    paths = {"numpy": host, "torch": None}
    alone, after = {}, {name: [] for name in paths}
    for name, forward in paths.items():
        agent.host_forward = forward
        alone[name] = seconds_per_call(lambda: agent.act(obs, True, rng), calls=200)
    for _ in range(200):
        for name, forward in paths.items():
            agent.host_forward = forward
            agent.update(b)
            start = time.perf_counter()
            agent.act(obs, True, rng)
            after[name].append(time.perf_counter() - start)
    agent.host_forward = host
    return {name: (alone[name], statistics.median(after[name])) for name in paths}


def cold_similarity(calls: int = 3) -> list[float]:
    """Median seconds of ``calls`` successive TD3 kl similarities (``batch_similarity``) right after an
    update: the first runs code the update has evicted from the caches, the next ones find it warm."""
    agent = make_agent("td3")
    b = random_batch()
    diff = b.action * 0.1
    times: list[list[float]] = [[] for _ in range(calls)]
    for _ in range(200):
        agent.update(b)
        for column in times:
            start = time.perf_counter()
            batch_similarity(diff, 0.1, "kl")
            column.append(time.perf_counter() - start)
    return [statistics.median(column) for column in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compile", action="store_true", help="also measure torch.compile on a critic step")
    args = parser.parse_args()
    torch.set_num_threads(1)
    console = Console()

    rates = matmul_rates()
    rate = max(rates.values()) / 1e9
    console.print(rates_line(rates))

    ms, share, gflop = matmul_share()
    console.print(
        f"plain TD3 update: {ms:.2f} ms, of which matrix products {share:.0%} of profiled CPU time; "
        f"{gflop:.3f} GFLOP of matrix products per update ({gflop / rate * 1e3:.1f} ms at the rate above)"
    )

    recorded: dict[str, Products] = {}
    for algo in ("td3", "sac"):
        whole, alone, recorded[algo] = products_alone(algo)
        console.print(
            f"{algo.upper()} update: {whole * 1e3:.2f} ms; its {len(recorded[algo]) / 2:.0f} matrix products "
            f"replayed alone {alone * 1e3:.2f} ms ({alone / whole:.0%}), everything else {(whole - alone) * 1e3:.2f} ms"
        )

    table = Table("TD3 product", "calls / update", "µs / update", "GFLOP/s", "of 256³ rate")
    for label, calls, seconds, flop_rate in products_by_shape(recorded["td3"]):
        rate_gflops = flop_rate / 1e9
        table.add_row(label, f"{calls:g}", f"{seconds * 1e6:.1f}", f"{rate_gflops:.0f}", f"{rate_gflops / rate:.0%}")
    console.print(table)

    fused, loop = optimiser_steps()
    console.print(
        f"twin-critic Adam step: fused {fused * 1e6:.0f} µs, per-tensor loop {loop * 1e6:.0f} µs "
        f"(per-tensor / fused = {loop / fused:.2f}, {(loop - fused) * 1e3:.2f} ms more per step)"
    )

    through_step, direct = adam_in_context()
    console.print(
        f"twin-critic Adam step right after an update: Adam.step() {through_step * 1e3:.2f} ms, "
        f"AdamStep {direct * 1e3:.2f} ms (step() / AdamStep = {through_step / direct:.2f})"
    )

    for algo in ("td3", "sac"):
        small, full = fixed_cost(algo)
        console.print(
            f"{algo.upper()} update: {small * 1e3:.2f} ms at batch 8 (fixed cost of eager PyTorch), "
            f"{full * 1e3:.2f} ms at batch {B}"
        )

    action = cold_action()
    for name, (alone, after) in action.items():
        console.print(
            f"one TD3 action selection, {name} forward: {alone * 1e6:.0f} µs in a loop, "
            f"{after * 1e6:.0f} µs right after an update (× {after / alone:.1f})"
        )
    console.print(f"right after an update, torch / numpy = {action['torch'][1] / action['numpy'][1]:.2f}")

    first, *then = cold_similarity()
    console.print(
        f"TD3 kl similarity right after an update: {first * 1e6:.0f} µs, then "
        f"{', '.join(f'{t * 1e6:.0f}' for t in then)} µs for the same call repeated (first / second = "
        f"{first / then[0]:.1f})"
    )

    if args.compile:
        eager, compiled, compile_seconds = compiled_critic_step()
        console.print(
            f"critic step: eager {eager * 1e3:.2f} ms, torch.compile {compiled * 1e3:.2f} ms "
            f"(compiled / eager = {compiled / eager:.2f}; first call incl. compilation {compile_seconds:.0f} s)"
        )


if __name__ == "__main__":
    main()
