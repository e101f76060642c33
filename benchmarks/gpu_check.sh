#!/usr/bin/env bash
# The product on a GPU machine, in one go (issue 70), everything in one folder. Each step has a time limit;
# together they stay under the device machine's 10 minutes a command (planned for 8; not yet run on a GPU).
#
#   bash benchmarks/gpu_check.sh [FOLDER]             # on the GPU machine (default folder: gpu-check)
#   INSTALL=0 PYTHON=python DEVICE=cpu LANES="1 2" WINDOW=5 STUDY_S=30 bash benchmarks/gpu_check.sh /tmp/dry
#                                                     # its dry run, in the active environment, on the CPU
#
# 1. the machine: the GPU (nvidia-smi), its cores;                    (8 files in FOLDER: summary.txt first)
# 2. the project installed the README's way (pip install -e) into the machine's Python, over its own CUDA
#    build of torch; a machine that cannot reach a package index takes the other packages as wheels from
#    .whl/ (constraints-cuda.txt says what a connected machine installs instead);
# 3. the lane test on CUDA: tests/agents/test_lanes_cuda.py (lanes on the GPU equal the same lanes on the
#    CPU within 1e-4 after 10 updates, TD3 and SAC, with and without AC-Off-POC);
# 4. benchmarks/lanes.py --device cuda, K = 1, 5, 10, 20, 40 TD3 Hopper-v4 lanes: aggregate steps/s, GPU
#    memory per lane, the share of time in the environments and in acting;
# 5. a 20-lane TD3 ± AC-Off-POC Hopper-v4 study through the CLI (10 seeds each, one lane group) for
#    STUDY_S seconds, then stopped gracefully; its store is kept (study.db.gz) with ps and the runs table.
set -uo pipefail

out=${1:-gpu-check}
device=${DEVICE:-cuda}
lanes=${LANES:-1 5 10 20 40}
window=${WINDOW:-12}
study_s=${STUDY_S:-180}
python=${PYTHON:-python3}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
status=0
step() { echo "== [$(date +%T)] $*" | tee -a "$out/summary.txt"; }
failed() {
  echo "   FAILED ($1): $2" | tee -a "$out/summary.txt"
  status=1
}

step "1. the machine"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || echo "no nvidia-smi"
  echo "$(nproc) CPU cores ($(uname -m)), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
} 2>&1 | sed 's/^/   /' | tee -a "$out/summary.txt"

step "2. install (the README's way: pip install -e, over the machine's own CUDA build of torch)"
start=$SECONDS
if [ "${INSTALL:-1}" = 1 ]; then # into the machine's Python (it holds torch); INSTALL=0: the active one as is
  {
    if [ -d .whl ] && ls .whl/*.whl > /dev/null 2>&1; then # no package index here: what is missing travels
      timeout 90 "$python" -m pip install -q --no-index --no-deps --no-compile .whl/*.whl &&
        timeout 60 "$python" -m pip install -q --no-index --no-deps --no-build-isolation -e .
    else # a connected machine: torch's CUDA build as constraints-cuda.txt pins it (replaces the machine's)
      timeout 300 "$python" -m pip install -q -c constraints-cuda.txt -e '.[test]'
    fi
  } > "$out/install.log" 2>&1 || failed install "see install.log"
fi
here=$(dirname "$(command -v "$python")")
if [ -x "$here/offpoc" ]; then # the CLI the install put beside this Python, whatever else is on PATH
  offpoc() { "$here/offpoc" "$@"; }
else # the install failed: the package from the tree, its CLI through Python
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  offpoc() { "$python" -c "from offpoc_tui.cli import main; main()" "$@"; }
  echo "   offpoc from the tree (PYTHONPATH), not installed" | tee -a "$out/summary.txt"
fi
"$python" -c "
import torch, gymnasium, textual, agents, offpoc_tui
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA device'
print(f'   torch {torch.__version__} (CUDA {torch.version.cuda}), {gpu}; gymnasium {gymnasium.__version__}')
" 2>&1 | tee -a "$out/summary.txt"
echo "   install: $((SECONDS - start)) s" | tee -a "$out/summary.txt"

step "3. lane tests on $device"
timeout 90 "$python" -m pytest -p no:cacheprovider -p no:randomly -o addopts="" -q -rs \
  tests/agents/test_lanes_cuda.py > "$out/tests.log" 2>&1 || failed tests "see tests.log"
tail -n 4 "$out/tests.log" | tee -a "$out/summary.txt"

step "4. benchmarks/lanes.py --device $device, K = $lanes"
# shellcheck disable=SC2086  # the K values as separate words
COLUMNS=160 timeout 200 "$python" benchmarks/lanes.py --device "$device" --algos td3 --lanes $lanes --window "$window" \
  --json "$out/lanes.json" > "$out/lanes.txt" 2>&1 || failed lanes "see lanes.txt"
tail -n 14 "$out/lanes.txt" | tee -a "$out/summary.txt"

step "5. a 20-lane TD3 ± AC-Off-POC Hopper-v4 study through the CLI, $study_s s"
export OFFPOC_DB="$out/study.db"
rm -rf "$OFFPOC_DB" "$OFFPOC_DB-runs"
offpoc run td3 Hopper-v4 --correction acoffpoc --compare --seeds 0-9 --lanes 20 --steps 1M --eval-freq 5000 \
  --set device="$device" --name gpu-study > "$out/study.txt" 2>&1 || failed study "see study.txt"
sleep "$study_s"
offpoc ps --all >> "$out/study.txt" 2>&1
offpoc stop --all >> "$out/study.txt" 2>&1
for _ in $(seq 20); do # a graceful stop checkpoints each lane first
  offpoc ps --json 2> /dev/null | "$python" -c "import json, sys; sys.exit(any(r['status'] in ('queued', 'running') for r in json.load(sys.stdin)))" &&
    break
  sleep 2
done
offpoc ps --all >> "$out/study.txt" 2>&1
"$python" -c "
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute('SELECT status, count(*), sum(steps), max(steps), sum(wall_time) FROM runs GROUP BY status').fetchall()
for status, n, steps, most, _ in rows:
    print(f'   {n} runs {status}: {steps:,} environment steps in all, at most {most:,} a run')
total = sum(r[2] for r in rows)
print(f'   {total / float(sys.argv[2]):,.0f} aggregate environment steps/s over the {sys.argv[2]} s'
      ' (the start, the random start phase and evaluations included)')
" "$OFFPOC_DB" "$study_s" 2>&1 | tee -a "$out/summary.txt"
offpoc export --format csv --table runs > "$out/study-runs.csv" 2>> "$out/study.txt"
# A consistent copy (what the WAL holds included, whatever still runs), then nothing else of the store in FOLDER.
"$python" -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('VACUUM INTO ?', (sys.argv[2],))" \
  "$OFFPOC_DB" "$out/study-copy.db" && rm -rf "$OFFPOC_DB" "$OFFPOC_DB-runs" "$OFFPOC_DB-wal" "$OFFPOC_DB-shm" &&
  mv "$out/study-copy.db" "$OFFPOC_DB" && gzip -f "$OFFPOC_DB"

step "done: exit $status"
exit $status
