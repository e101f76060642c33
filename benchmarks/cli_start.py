"""How long an offpoc command takes to start: `offpoc ps` on a small store, against the same command with pandas
imported first (what every command paid before store/__init__.py hid pandas from sqlite-utils' import).

    python benchmarks/cli_start.py              # 15 alternating pairs
    python benchmarks/cli_start.py --repeats 30

Each start is a fresh Python process, the two cases alternate so that the machine's load falls on both, and the
medians of wall time are compared. The peer, "with pandas", runs the same command in the same interpreter after
`import pandas`, so the difference is pandas' import and nothing else.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.progress import track
from rich.table import Table

COMMAND = (
    "import runpy, sys; sys.argv = ['offpoc', 'ps', '--db', sys.argv[1]]; "
    "runpy.run_module('offpoc_tui.cli', run_name='__main__')"
)
WITH_PANDAS = "import pandas; " + COMMAND


def started(code: str, db: Path) -> float:
    """Wall seconds of one `offpoc ps` in a fresh process."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(db)], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="alternating pairs of starts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "offpoc.db"
        subprocess.run([sys.executable, "-c", COMMAND, str(db)], check=False, capture_output=True)  # warm the cache
        from store import open_store

        open_store(db, create=True).close()
        times: dict[str, list[float]] = {"offpoc ps": [], "offpoc ps, pandas imported first": []}
        for _ in track(range(args.repeats), description="starting offpoc ps"):
            times["offpoc ps"].append(started(COMMAND, db))
            times["offpoc ps, pandas imported first"].append(started(WITH_PANDAS, db))
    medians = {name: statistics.median(values) for name, values in times.items()}
    table = Table(title=f"offpoc ps: start to exit, median of {args.repeats} (s)")
    table.add_column("case")
    table.add_column("median (s)", justify="right")
    table.add_column("min (s)", justify="right")
    for name, values in times.items():
        table.add_row(name, f"{medians[name]:.3f}", f"{min(values):.3f}")
    console = Console()
    console.print(table)
    ours, peer = medians["offpoc ps"], medians["offpoc ps, pandas imported first"]
    console.print(f"offpoc ps / offpoc ps with pandas: {ours / peer:.2f} (lower is faster)")


if __name__ == "__main__":
    main()
