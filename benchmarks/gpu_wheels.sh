#!/usr/bin/env bash
# The wheels benchmarks/gpu_check.sh installs on a GPU machine that reaches no package index: what offpoc needs
# beyond the packages such a machine's image holds (torch with CUDA, numpy, scipy, matplotlib, pytest...), for
# its Python (3.12, x86-64), at the versions constraints.txt pins. Run here, where an index is reachable:
#
#   bash benchmarks/gpu_wheels.sh          # into .whl/ (about 28 MB; git ignores it: echo /.whl/ >> .git/info/exclude)
#
# then name .whl in the device call's carry.
set -euo pipefail
cd "$(dirname "$0")/.."
python_version=${PYTHON_VERSION:-3.12}
pinned() { grep -i "^$1==" constraints.txt | head -n 1 || true; }  # unpinned: the newest
packages=(gymnasium Farama-Notifications mujoco mujoco-core mujoco-studio glfw PyOpenGL textual textual-plotext plotext
  sqlite-utils sqlite-fts4 click-default-group linkify-it-py uc-micro-py mdit-py-plugins markdown-it-py mdurl
  platformdirs rich typer click shellingham annotated-doc websockets)
mkdir -p .whl
for package in "${packages[@]}"; do
  spec=$(pinned "$package")
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$python_version" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 \
    -d .whl "${spec:-$package}"
done
du -sh .whl
