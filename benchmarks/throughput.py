"""Training throughput: offpoc vs Stable-Baselines3, and the corrections' overhead.

    pip install -c constraints.txt -e ".[bench]"
    python benchmarks/throughput.py                 # TD3 and SAC on Hopper-v4
    python benchmarks/throughput.py --steps 4000 --repeats 3
    python benchmarks/throughput.py --autograd --no-corrections   # both backends against SB3
    python benchmarks/throughput.py --no-sb3 --no-corrections --competitors   # the competitors' overhead
    python benchmarks/throughput.py --no-sb3 --no-corrections --samplers      # CER, PER and ERO against uniform
    python benchmarks/throughput.py --no-corrections --evaluate   # both with the paper's evaluations

SPS = environment steps per second including one gradient update per step,
measured after the uniform-random start phase, one torch thread, same
hyperparameters for both libraries (256-256 networks, batch 256, Adam 3e-4,
TD3 policy delay 2 with target smoothing 0.2/0.5, SAC automatic entropy).
Every case runs in a fresh subprocess, cases are interleaved across repeats,
and the median over repeats is reported (run-to-run noise on a shared VM is
about ±10%, so use --repeats 3 or more). With ``--evaluate`` both libraries also
run the paper's evaluation, 10 deterministic episodes every 1,000 steps (SB3's
``EvalCallback``); an episode's length depends on how each library's policy
happens to do, so the evaluations' share can differ between them by more than
their code does.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from typing import TYPE_CHECKING

import numpy as np
import torch
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from agents import Sink, TrainConfig, Trainer, TrainStatsRecord, corrections, plugins
from agents.corrections.divergences import DIVERGENCES

try:
    from benchmarks.breakdown import cpu_model, matmul_rates, rates_line, update_flops
except ModuleNotFoundError:  # run as a script (the README's way): benchmarks/ itself is on the path
    from breakdown import cpu_model, matmul_rates, rates_line, update_flops  # type: ignore[no-redef,import-not-found]

COMPETITORS = tuple(c for c in corrections.names() if c not in ("none", "acoffpoc"))
"""Every registered correction but the baseline and AC-Off-POC (the paper's four competitors, docs/competitors.md,
and any plug-in), timed with ``--competitors``."""
SAMPLERS = tuple(s for s in plugins.names("sampler") if s != "uniform")
"""Replay samplers other than uniform, timed with ``--samplers`` (their overhead is against ``none``, uniform)."""

EVAL_EVERY, EVAL_EPISODES = 1000, 10
"""The paper's evaluation, run by both libraries with ``--evaluate``."""

if TYPE_CHECKING:
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

warnings.filterwarnings("ignore")


class _Clock(Sink):
    """Timestamps the training-statistics records that bound the timed window."""

    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end
        self.times: dict[int, float] = {}

    def on_train_stats(self, record: TrainStatsRecord) -> None:
        if record.step in (self.start, self.end):
            self.times[record.step] = time.perf_counter()


def ours_config(
    algo: str,
    env_id: str,
    start: int,
    steps: int,
    correction: str = "none",
    divergence: str = "jsd",
    backend: str = "auto",
    sampler: str = "uniform",
    evaluate: bool = False,
) -> TrainConfig:
    """The benchmark's run: statistics every ``start`` steps, one torch thread; no evaluation but the first,
    or with ``evaluate`` the paper's (:data:`EVAL_EPISODES` episodes every :data:`EVAL_EVERY` steps)."""
    return TrainConfig.make(
        algo=algo,
        env_id=env_id,
        correction=correction,
        **({"divergence": divergence} if correction == "acoffpoc" else {}),  # AC-Off-POC's option
        start_steps=start,
        correction_start=start,
        total_steps=start + steps,
        eval_freq=EVAL_EVERY if evaluate else 10**9,
        eval_episodes=EVAL_EPISODES if evaluate else 1,
        stats_every=start,
        threads=1,
        backend=backend,
        sampler=sampler,
    )


def ours(algo: str, env_id: str, start: int, steps: int, evaluate: bool = False, **options: str) -> dict[str, float]:
    """Our run of ``ours_config`` (``options``: its correction, divergence, backend, sampler): its SPS, and
    its update's achieved FLOP/s (every update is in the timed window: learning starts at ``start``) beside
    this process's 256³ matmul rate; the update's FLOPs and the seconds outside it, per environment step."""
    clock = _Clock(start, start + steps)
    trainer = Trainer(ours_config(algo, env_id, start, steps, evaluate=evaluate, **options), clock)
    update, spent = trainer.agent.update, [0.0]

    def timed(*args: object) -> object:
        began = time.perf_counter()
        result = update(*args)
        spent[0] += time.perf_counter() - began
        return result

    trainer.agent.update = timed  # type: ignore[method-assign]
    trainer.run()
    sps = steps / (clock.times[start + steps] - clock.times[start])
    flops = update_flops(trainer, update) * trainer.agent.updates
    rates = matmul_rates()
    return {
        "sps": sps,
        "update_rate": flops / spent[0],
        "matmul_rate": max(rates.values()),
        "matmul_rates": rates,
        "update_flops_per_step": flops / steps,
        "other_seconds_per_step": 1 / sps - spent[0] / steps,
    }


def sb3_model(algo: str, env_id: str, start: int, seed: int = 0) -> OffPolicyAlgorithm:
    """Stable-Baselines3's TD3 or SAC with the same hyperparameters, its random phase done."""
    import gymnasium as gym
    from stable_baselines3 import SAC, TD3
    from stable_baselines3.common.noise import NormalActionNoise

    torch.set_num_threads(1)
    env = gym.make(env_id)
    common = dict(learning_starts=start, batch_size=256, learning_rate=3e-4, buffer_size=1_000_000, gamma=0.99)
    common |= dict(tau=0.005, policy_kwargs=dict(net_arch=[256, 256]), device="cpu", seed=seed, verbose=0)
    if algo == "td3":
        d = env.action_space.shape[0]
        noise = NormalActionNoise(np.zeros(d), 0.1 * np.ones(d))
        model = TD3("MlpPolicy", env, action_noise=noise, policy_delay=2, target_policy_noise=0.2, **common)
    else:
        model = SAC("MlpPolicy", env, ent_coef="auto", **common)
    model.learn(start)
    return model


def sb3(algo: str, env_id: str, start: int, steps: int, evaluate: bool = False) -> dict[str, float]:
    import gymnasium as gym
    from stable_baselines3.common.callbacks import EvalCallback

    model = sb3_model(algo, env_id, start)
    callback = None
    if evaluate:
        callback = EvalCallback(gym.make(env_id), n_eval_episodes=EVAL_EPISODES, eval_freq=EVAL_EVERY, verbose=0)
    began = time.perf_counter()
    model.learn(steps, reset_num_timesteps=False, callback=callback)
    return {"sps": steps / (time.perf_counter() - began)}


def run_case(case: str, env_id: str, start: int, steps: int, evaluate: bool = False) -> dict[str, float]:
    """One measurement, in this process: ``algo:impl[:divergence]``: its SPS (``sps``), and for ours the update's
    FLOP/s and the matmul rate."""
    algo, impl, *rest = case.split(":")
    if impl == "sb3":
        return sb3(algo, env_id, start, steps, evaluate)
    if impl == "none":
        return ours(algo, env_id, start, steps, evaluate)
    if impl == "autograd":
        return ours(algo, env_id, start, steps, evaluate, backend="autograd")
    if impl == "competitor":
        return ours(algo, env_id, start, steps, evaluate, correction=rest[0])
    if impl == "sampler":
        return ours(algo, env_id, start, steps, evaluate, sampler=rest[0])
    return ours(algo, env_id, start, steps, evaluate, correction="acoffpoc", divergence=rest[0])


LABELS = {"sb3": "SB3", "none": "ours none", "autograd": "ours none, autograd backend"}


def paired_ratios(ours: list[float], peer: list[float]) -> list[float]:
    """Ratios pair by pair: each run against the peer's run of the same repeat (or, in
    ``interleaved.py``, the same round), minutes apart at most, so the VM's slow drift cancels."""
    return [a / b for a, b in zip(ours, peer, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="Hopper-v4")
    parser.add_argument("--start", type=int, default=1000, help="random start steps before timing")
    parser.add_argument("--steps", type=int, default=2000, help="timed learning steps (a multiple of --start)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--algos", default="td3,sac")
    parser.add_argument("--no-sb3", action="store_true", help="skip the Stable-Baselines3 peer")
    parser.add_argument("--autograd", action="store_true", help="also time the autograd backend (default: auto)")
    parser.add_argument("--no-corrections", action="store_true", help="skip the AC-Off-POC cases")
    parser.add_argument(
        "--competitors", action="store_true", help="also time the paper's competitors (their overhead vs none)"
    )
    parser.add_argument("--samplers", action="store_true", help="also time the replay samplers (overhead vs uniform)")
    parser.add_argument(
        "--evaluate",
        action="store_true",
        help=f"both libraries evaluate as the paper does ({EVAL_EPISODES} episodes every {EVAL_EVERY:,} steps)",
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case and print its SPS
    args = parser.parse_args()
    if args.steps % args.start:
        parser.error("--steps must be a multiple of --start")
    if args.evaluate and args.start % EVAL_EVERY:
        # Ours evaluates at multiples of EVAL_EVERY steps, SB3's EvalCallback every EVAL_EVERY steps from the
        # timed window's start: only a start at such a multiple gives both the same evaluations in the window.
        parser.error(f"--evaluate needs a --start that is a multiple of {EVAL_EVERY:,}")
    if args.case:
        print(json.dumps(run_case(args.case, args.env, args.start, args.steps, args.evaluate)))
        return

    cases: list[str] = []
    for algo in args.algos.split(","):
        if not args.no_sb3:
            cases.append(f"{algo}:sb3")
        cases += [f"{algo}:none"] + ([f"{algo}:autograd"] if args.autograd else [])
        cases += [] if args.no_corrections else [f"{algo}:acoffpoc:{d}" for d in DIVERGENCES]
        cases += [f"{algo}:competitor:{name}" for name in COMPETITORS] if args.competitors else []
        cases += [f"{algo}:sampler:{name}" for name in SAMPLERS] if args.samplers else []

    results: dict[str, list[float]] = {case: [] for case in cases}
    update_shares: dict[str, list[tuple[float, float]]] = {case: [] for case in cases}
    """Per case and repeat: the update's FLOP/s and the process's matmul rate (ours only)."""
    ceilings: dict[str, list[tuple[float, float]]] = {case: [] for case in cases}
    """Per case and repeat (ours only): the most steps/s the run could make with its update's products at the
    matmul rate, first with nothing else in the step, then with the rest of the step as measured."""
    rates_seen: dict[str, float] = {}
    with Progress() as progress:
        task = progress.add_task("benchmarking", total=len(cases) * args.repeats)
        for repeat in range(args.repeats):
            for case in cases:
                progress.update(task, description=f"{case} ({repeat + 1}/{args.repeats})")
                command = [sys.executable, __file__, "--case", case, "--env", args.env]
                command += ["--start", str(args.start), "--steps", str(args.steps)]
                command += ["--evaluate"] if args.evaluate else []
                out = subprocess.run(command, capture_output=True, text=True, check=True)
                measured = json.loads(out.stdout.strip().splitlines()[-1])
                results[case].append(measured["sps"])
                if "update_rate" in measured:
                    rates_seen = measured["matmul_rates"]
                    update_shares[case].append((measured["update_rate"], measured["matmul_rate"]))
                    at_peak = measured["update_flops_per_step"] / measured["matmul_rate"]  # seconds per step
                    ceilings[case].append((1 / at_peak, 1 / (at_peak + measured["other_seconds_per_step"])))
                progress.advance(task)

    console = Console(width=140)
    evaluations = f", evaluating {EVAL_EPISODES} episodes every {EVAL_EVERY:,} steps" if args.evaluate else ""
    table = Table(
        title=f"Throughput on {args.env}: env steps/s with one update per step, 1 torch thread{evaluations}"
        f" ({cpu_model()})"
    )
    for column in ("algo", "implementation", "SPS (median)", "runs", "ours / SB3", "overhead vs none"):
        table.add_column(column, justify="left" if column in ("algo", "implementation") else "right")
    median = {case: statistics.median(values) for case, values in results.items()}
    for case, values in results.items():
        algo, impl, *rest = case.split(":")
        label = LABELS.get(impl, f"ours {'acoffpoc ' if impl == 'acoffpoc' else ''}{rest[0] if rest else ''}")
        peer = median.get(f"{algo}:sb3")
        ratio = f"{median[case] / peer:.2f}" if peer and impl != "sb3" else ""
        corrected = impl in ("acoffpoc", "competitor", "sampler")
        overhead = f"{(median[f'{algo}:none'] / median[case] - 1) * 100:+.1f}%" if corrected else ""
        runs = ", ".join(f"{v:.1f}" for v in values)
        table.add_row(algo.upper(), label, f"{median[case]:.1f}", runs, ratio, overhead)
    console.print(table)
    console.print("overhead = extra wall time per step relative to 'ours none' (time ratio − 1)")
    if rates_seen:
        console.print(f"ours, the last run's process: {rates_line(rates_seen)}")
    for algo in args.algos.split(","):
        for impl in ("none", "autograd"):
            if f"{algo}:sb3" in results and f"{algo}:{impl}" in results:
                ratios = paired_ratios(results[f"{algo}:{impl}"], results[f"{algo}:sb3"])
                console.print(
                    f"{algo.upper()} {LABELS[impl]} / SB3 per repeat (each against the SB3 run of the same repeat): "
                    f"{min(ratios):.2f} to {max(ratios):.2f}, median {statistics.median(ratios):.2f}"
                )
        shares = update_shares.get(f"{algo}:none") or []
        if shares:
            per_repeat = [rate / peak for rate, peak in shares]
            console.print(
                f"{algo.upper()} ours none, the update's achieved rate against this process's 256³ float32 matmul"
                f" rate (the fastest library's), per repeat:"
                f" {', '.join(f'{r / 1e9:.1f} / {p / 1e9:.1f} GFLOP/s' for r, p in shares)};"
                f" median {statistics.median(per_repeat) * 100:.0f}% ({min(per_repeat) * 100:.0f}% to"
                f" {max(per_repeat) * 100:.0f}%)"
            )
        if ceilings.get(f"{algo}:none") and results.get(f"{algo}:sb3"):
            peer = results[f"{algo}:sb3"]
            alone = paired_ratios([a for a, _ in ceilings[f"{algo}:none"]], peer)
            with_rest = paired_ratios([r for _, r in ceilings[f"{algo}:none"]], peer)
            console.print(
                f"{algo.upper()} ceiling of ours / SB3, per repeat: the update's matrix-product FLOPs at the 256³"
                f" matmul rate and nothing else in a step, {min(alone):.2f} to {max(alone):.2f}; with the rest of our"
                f" step as measured, {min(with_rest):.2f} to {max(with_rest):.2f} (no update of ours could beat it,"
                " the rest unchanged, without fewer FLOPs or a faster core: Adam and the elementwise passes count"
                " as free)"
            )
        corrected = [case for case in results if case.startswith(f"{algo}:") and case.split(":")[1] in
                     ("acoffpoc", "competitor", "sampler")]  # fmt: skip
        if not corrected:
            continue
        overheads = []
        for case in corrected:
            per_repeat = [r - 1 for r in paired_ratios(results[f"{algo}:none"], results[case])]
            overheads.append(
                f"{case.split(':')[-1]} {statistics.median(per_repeat) * 100:+.1f}% "
                f"({min(per_repeat) * 100:+.1f}% to {max(per_repeat) * 100:+.1f}%)"
            )
        console.print(
            f"{algo.upper()} overhead per repeat (each against the none run of the same repeat), median "
            f"(range): {', '.join(overheads)}"
        )


if __name__ == "__main__":
    main()
