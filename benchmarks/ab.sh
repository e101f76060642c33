#!/bin/bash
# Throughput of an earlier commit against the working tree, one process per case, alternating, with SB3
# in every round:   bash benchmarks/ab.sh REV [ROUNDS] [ALGOS...]      e.g. bash benchmarks/ab.sh 1eb6c68 4 td3 sac
# Prints one line per round and algorithm with each case's SPS (see benchmarks/throughput.py --case).
set -euo pipefail
rev=${1:?usage: bash benchmarks/ab.sh REV [ROUNDS] [ALGOS...]}
rounds=${2:-4}
shift $(( $# > 1 ? 2 : 1 ))
algos=${*:-td3 sac}
here=$(cd "$(dirname "$0")/.." && pwd)
old=$(mktemp -d)
git -C "$here" worktree add --detach "$old" "$rev" >/dev/null
trap 'git -C "$here" worktree remove --force "$old"' EXIT
cd "$old/.."   # outside both checkouts, so each case imports the agents its PYTHONPATH names
sps() { PYTHONPATH=$1 python "$1/benchmarks/throughput.py" --case "$2" --env Hopper-v4 --start 1000 --steps 2000 \
  | tail -1 | python -c 'import json, sys; print(round(json.load(sys.stdin)["sps"], 1))'; }
peer() { echo "SB3 $(sps "$here" "$1:sb3")"; }
if ! python -c 'import stable_baselines3' 2>/dev/null; then
  echo "Stable-Baselines3 is not installed (pip install -c constraints.txt -e '.[bench]'): no SB3 column" >&2
  peer() { :; }
fi
for round in $(seq "$rounds"); do
  for algo in $algos; do
    echo "round $round $algo: $rev $(sps "$old" "$algo:none")  working tree $(sps "$here" "$algo:none")  $(peer "$algo")"
  done
done
