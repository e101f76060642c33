#!/bin/bash
# One update's time at an earlier commit against the working tree, alternating processes, one torch thread:
#   bash benchmarks/update_ab.sh REV [ROUNDS]        e.g. taskset -c 1 bash benchmarks/update_ab.sh a66c031 4
# Each round, each checkout times TD3's and SAC's update (benchmarks/microbench.py's Hopper-sized agent and
# batch): 50 warm-up updates, then the median over 7 blocks of 60, in ms per update.
set -euo pipefail
rev=${1:?usage: bash benchmarks/update_ab.sh REV [ROUNDS]}
rounds=${2:-4}
here=$(cd "$(dirname "$0")/.." && pwd)
old=$(mktemp -d)
git -C "$here" worktree add --detach "$old" "$rev" >/dev/null
trap 'git -C "$here" worktree remove --force "$old"' EXIT
cd "$old/.."   # outside both checkouts, so each case imports the agents its PYTHONPATH names
ms() { PYTHONPATH=$1 OMP_NUM_THREADS=1 python - <<'PY'
import statistics, time, warnings
warnings.filterwarnings("ignore")
import torch
torch.set_num_threads(1)
from benchmarks.microbench import make_agent, random_batch
out = []
for algo in ("td3", "sac"):
    agent, batch = make_agent(algo), random_batch()
    for _ in range(50):
        agent.update(batch)
    blocks = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(60):
            agent.update(batch)
        blocks.append((time.perf_counter() - start) / 60 * 1e3)
    out.append(f"{algo} {statistics.median(blocks):.3f} ms")
print(", ".join(out))
PY
}
for round in $(seq "$rounds"); do
  echo "round $round: $rev $(ms "$old")  |  working tree $(ms "$here")"
done
