"""Scale-out on this machine: a sweep with --jobs 1 against --jobs 2, and the Ray backend against local.

    python benchmarks/scale_out.py [--sweep sweeps/quick.toml] [--repeats 2] [--no-ray]

Each case submits the sweep to a fresh store with the real CLI (``offpoc sweep``) and waits until
every run has ended. Printed: the wall time from submission to the last run's end, and the mean
per-run speed (steps per second of each run's own training time, evaluations included). The
speed-up is jobs 1's wall time over jobs 2's; Ray's speed is compared with local ``--jobs 2`` (the
same two CPUs), the cases alternating so that drift on a shared VM falls on both. The Ray cluster
is local, started by the store's scheduler on 127.0.0.1 (its start is in the wall time, not in
the per-run speed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from store import open_store
from store.runs import TERMINAL

ROOT = Path(__file__).resolve().parents[1]
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}


def run_case(sweep: Path, jobs: int, backend: str, work: Path) -> tuple[float, float, int]:
    """(wall seconds, mean per-run steps/s, runs) for the sweep in a fresh store."""
    work.mkdir()
    db = work / "offpoc.db"
    env = os.environ | RAY_ENV | {"RAY_TMPDIR": f"/tmp/offpoc-ray-{os.getpid()}"}
    command = [sys.executable, "-m", "offpoc_tui.cli", "sweep", str(sweep), "--jobs", str(jobs), "--db", str(db)]
    if backend == "ray":
        command += ["--backend", "ray"]
    submitted = time.time()  # the store's clock: runs record when they ended with time.time()
    subprocess.run(command, check=True, capture_output=True, env=env, cwd=work)
    while True:
        store = open_store(db)
        rows = store.execute("SELECT status, steps, wall_time, finished FROM runs").fetchall()
        store.close()
        if rows and all(status in TERMINAL for status, *_ in rows):
            break
        time.sleep(0.5)
    failed = [status for status, *_ in rows if status != "finished"]
    if failed:
        raise SystemExit(f"{len(failed)} runs did not finish ({failed[0]}): see {work}")
    wall = max(finished for *_, finished in rows) - submitted
    speed = statistics.mean(steps / wall_time for _, steps, wall_time, _ in rows)
    return wall, speed, len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=Path, default=ROOT / "sweeps" / "quick.toml")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-ray", action="store_true", help="Leave out the Ray backend.")
    args = parser.parse_args()
    cases = [("local", 1), ("local", 2)] + ([] if args.no_ray else [("ray", 2)])
    results: dict[tuple[str, int], list[tuple[float, float]]] = {case: [] for case in cases}
    console = Console()
    with tempfile.TemporaryDirectory(prefix="offpoc-scale-") as tmp:
        for repeat in range(args.repeats):
            for backend, jobs in cases if repeat % 2 == 0 else cases[::-1]:
                wall, speed, n = run_case(args.sweep, jobs, backend, Path(tmp) / f"{backend}-{jobs}-{repeat}")
                results[backend, jobs].append((wall, speed))
                console.print(f"{backend} --jobs {jobs}: {n} runs in {wall:.1f} s, {speed:.0f} steps/s per run")
    table = Table(title=f"{args.sweep.name}: median of {args.repeats}")
    for column in ("backend", "jobs", "wall (s)", "steps/s per run", "ratio"):
        table.add_column(column, justify="left" if column == "backend" else "right")
    wall = {case: statistics.median(w for w, _ in runs) for case, runs in results.items()}
    speed = {case: statistics.median(s for _, s in runs) for case, runs in results.items()}
    for case in cases:
        if case == ("local", 2):
            ratio = f"speed-up vs --jobs 1: {wall['local', 1] / wall[case]:.2f}"
        elif case[0] == "ray":
            ratio = f"per-run speed / local --jobs 2: {speed[case] / speed['local', 2]:.3f}"
        else:
            ratio = ""
        table.add_row(case[0], str(case[1]), f"{wall[case]:.1f}", f"{speed[case]:.0f}", ratio)
    console.print(table)


if __name__ == "__main__":
    main()
