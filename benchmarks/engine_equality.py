"""Every algorithm × correction × sampler × gradient engine, 50 updates: saved, or compared with a saved file.

    python benchmarks/engine_equality.py --save before.pt          # at one commit (PYTHONPATH=its checkout)
    python benchmarks/engine_equality.py --against before.pt       # at another: one line per combination

What it compares after 50 updates of a solo run on Pendulum-v1 (32-32 networks, batches of 32): every
parameter and learned tensor (the correction's networks too), each logged quantity's values (λ, ρ̄, ...),
the critic and actor losses, and the run's torch generator state. Each number is the largest relative
difference max|a − b| / max|b| over a category; "refused" is a combination the code refuses (the same
refusal on both sides counts as equal). It uses only APIs that every version since lanes has: run it with
an older checkout on PYTHONPATH to save that checkout's figures.

Checkpoints too: ``--save`` also writes each combination's checkpoint after 25 updates (beside the file, in
``before.pt.checkpoints/``) and records that checkpoint resumed to 50 updates by the same code; ``--against``
resumes the saved checkpoints with today's code and compares them the same way ("resumed" lines).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

import torch

from agents import TrainConfig, Trainer, corrections, plugins
from agents.sink import RecordingSink

ALGORITHMS = plugins.algorithm_names()
CORRECTIONS = corrections.names()
SAMPLERS = plugins.names("sampler")
ENGINES = ("fast", "autograd")
START, UPDATES = 50, 50


def config(algo: str, correction: str, sampler: str, backend: str) -> TrainConfig:
    return TrainConfig.make(
        algo=algo, env_id="Pendulum-v1", correction=correction, sampler=sampler, backend=backend, seed=3,
        total_steps=START + UPDATES, start_steps=START, correction_start=START, batch_size=32, hidden=(32, 32),
        eval_freq=100_000, eval_episodes=1, stats_every=5, weights_block=5, checkpoint_every=0,
    )  # fmt: skip


def record(algo: str, correction: str, sampler: str, backend: str, resume: Path | None = None) -> dict[str, Any] | str:
    """One combination's state after its updates (``resume``: from that checkpoint, to the same end), or the
    first line of its refusal."""
    try:
        if resume is not None:
            trainer = Trainer.resume(resume, RecordingSink(), checkpoint_path=resume.with_suffix(".again.pt"))
        else:
            trainer = Trainer(config(algo, correction, sampler, backend), RecordingSink())
        trainer.run()
    except Exception as error:  # a refused combination: the message's first line
        return f"refused: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
    agent, sink = trainer.agent, trainer.sink
    assert isinstance(sink, RecordingSink)
    modules = {**agent.modules(), **{f"correction.{m}": mod for m, mod in trainer.correction.modules().items()}}
    tensors = {f"{m}.{n}": p.detach().clone() for m, mod in modules.items() for n, p in mod.state_dict().items()}
    tensors |= {name: t.detach().clone() for name, t in agent.tensors().items()}
    logged: dict[str, list[float]] = {}
    for block in sink.blocks:
        logged.setdefault(block.quantity.name, []).extend(float(v) for v in block.values.reshape(-1))
    losses = [float(x) for s in sink.stats for x in (s.critic_loss, s.actor_loss) if x is not None]
    return {
        "tensors": tensors,
        "logged": {name: torch.tensor(values, dtype=torch.float64) for name, values in logged.items()},
        "losses": torch.tensor(losses, dtype=torch.float64),
        "generator": trainer.generator.get_state(),
        "updates": agent.updates,
    }


def checkpoint(key: tuple[str, str, str, str], folder: Path) -> Path | None:
    """The combination's checkpoint after half its updates, written into ``folder``; None where it is refused."""
    path = folder / ("-".join(key) + ".pt")
    try:
        half = dataclasses.replace(config(*key), total_steps=START + UPDATES // 2)
        Trainer(half, RecordingSink(), checkpoint_path=path).run()
    except Exception:
        return None
    return path if path.exists() else None


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        return float("inf")
    if not a.numel():
        return 0.0
    scale = b.double().abs().max().clamp_min(1e-12)
    return float((a.double() - b.double()).abs().max() / scale)


def compare(now: dict[str, Any] | str, then: dict[str, Any] | str) -> tuple[str, float]:
    """A one-line verdict and the largest relative difference (inf when they cannot be compared)."""
    if isinstance(now, str) or isinstance(then, str):
        same = isinstance(now, str) and isinstance(then, str)
        return ("both refused" if same else f"now {now if isinstance(now, str) else 'trains'};"
                f" then {then if isinstance(then, str) else 'trained'}"), (0.0 if same else float("inf"))  # fmt: skip
    worst: dict[str, float] = {}
    missing = sorted(set(then["tensors"]) ^ set(now["tensors"]))
    worst["params"] = max((relative(now["tensors"][k], v) for k, v in then["tensors"].items() if k in now["tensors"]),
                          default=0.0)  # fmt: skip
    names = set(then["logged"]) | set(now["logged"])
    worst["logged"] = max(
        (relative(now["logged"].get(n, torch.zeros(0)), then["logged"].get(n, torch.zeros(1))) for n in names),
        default=0.0,
    )
    worst["losses"] = relative(now["losses"], then["losses"])
    generator = torch.equal(now["generator"], then["generator"])
    largest = max(worst.values()) if generator and not missing and now["updates"] == then["updates"] else float("inf")
    said = "  ".join(f"{k} {v:.1e}" for k, v in worst.items())
    extra = (" generator differs" if not generator else "") + (f" tensors differ: {missing}" if missing else "")
    return said + extra, largest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--save", type=Path, help="record every combination into this file")
    action.add_argument("--against", type=Path, help="compare every combination with this saved file")
    parser.add_argument("--tolerance", type=float, default=1e-6, help="the largest relative difference that passes")
    args = parser.parse_args()
    torch.set_num_threads(1)
    keys = [(a, c, s, e) for a in ALGORITHMS for c in CORRECTIONS for s in SAMPLERS for e in ENGINES]
    results: dict[Any, Any] = {key: record(*key) for key in keys}
    folder = Path(f"{args.save or args.against}.checkpoints")
    if args.save:
        folder.mkdir(exist_ok=True)
        for key in keys:
            path = checkpoint(key, folder)
            results["resumed", *key] = record(*key, resume=path) if path is not None else "refused"
        torch.save(results, args.save)
        print(f"saved {len(keys)} combinations and their checkpoints' resumptions to {args.save}")
        return 0
    then = torch.load(args.against, weights_only=False)
    for key in keys:
        if ("resumed", *key) in then:
            path = folder / ("-".join(key) + ".pt")
            results["resumed", *key] = record(*key, resume=path) if path.exists() else "refused"
    failed = 0
    print(f"{'':8}{'algorithm':9} {'correction':11} {'sampler':7} {'engine':8} largest relative difference")
    for key, now in results.items():
        said, largest = compare(now, then[key])
        ok = largest <= args.tolerance
        failed += not ok
        kind, (algo, correction, sampler, engine) = (key[0] if len(key) > 4 else ""), key[-4:]
        verdict = "ok " if ok else "BAD"
        print(f"{kind:8}{algo:9} {correction:11} {sampler:7} {engine:8} {verdict} {said}")
    print(f"{len(results) - failed} of {len(results)} within {args.tolerance:g}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
