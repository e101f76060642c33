"""One Pendulum-v1 run in the slow tests' setting, with any config fields set (about 2-5 minutes).

    python -m benchmarks.diagnostics.pendulum td3 geoff-pac --set geoff_m2=one --set geoff_m2_baseline=state

The setting of ``tests/agents/test_learning.py`` (15,000 steps, 1,000 random ones, five evaluation episodes
every 1,000 steps); prints the mean return of the last three evaluations, the slow tests' measure
(random play is about −1200; their bar is −400). This is how a form of a correction is tried before
it becomes a default: docs/competitors.md quotes these runs.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from agents import RecordingSink, Trainer
from agents.config import TrainConfig
from agents.config_text import with_overrides

PENDULUM = dict(env_id="Pendulum-v1", total_steps=15_000, start_steps=1_000, eval_freq=1_000, eval_episodes=5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("algo")
    parser.add_argument("correction")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a config field")
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.set)
    config = with_overrides(TrainConfig.make(algo=args.algo, correction=args.correction, **PENDULUM), overrides)  # type: ignore[arg-type]
    sink = RecordingSink()
    start = time.perf_counter()
    Trainer(config, sink).run()
    final = float(np.mean([e.return_mean for e in sink.evals[-3:]]))
    settings = " ".join(args.set) or "defaults"
    print(
        f"{args.algo} + {args.correction} ({settings}), seed {config.seed}: last three evaluations {final:.0f}"
        f" ({time.perf_counter() - start:.0f} s)"
    )


if __name__ == "__main__":
    main()
