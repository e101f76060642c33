"""How fast the paper's published curves import, against just reading the files.

    python benchmarks/import_reference.py [--shared ../shared] [--repeats 3]

Times ``offpoc import reference`` (in-process: parse, check and write 1,440 runs and
1,441,440 evaluations into a fresh store) and, as the peer in the same run, ``np.load``
of the same 1,440 files with nothing written. Prints both and their ratio, plus the
summary export (the paper's Tables 1-2) from the imported store.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from store import open_store
from store.curve_imports import import_curves, reference_curves, reference_files
from store.summary import summary_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    curves = args.shared / "reference-curves"
    files = reference_files(curves)
    loads, imports, summaries = [], [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for file in files:
            np.load(file)
        loads.append(time.perf_counter() - start)
        with tempfile.TemporaryDirectory() as tmp:
            db = open_store(Path(tmp) / "ref.db", create=True)
            start = time.perf_counter()
            report = import_curves(db, reference_curves(curves, files))
            imports.append(time.perf_counter() - start)
            assert report.imported == len(files) and not report.problems
            start = time.perf_counter()
            rows = summary_rows(db)
            summaries.append(time.perf_counter() - start)
            assert len(rows) == 144
            db.close()
    load, imp, summ = (statistics.median(x) for x in (loads, imports, summaries))
    table = Table(title=f"{len(files):,} published curves, median of {args.repeats}")
    for column in ("measure", "time", "peer: np.load of every file", "ratio"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    table.add_row("offpoc import reference", f"{imp:.2f} s", f"{load:.2f} s", f"{imp / load:.1f}")
    table.add_row("export --table summary (144 rows)", f"{summ:.2f} s", f"{load:.2f} s", f"{summ / load:.2f}")
    Console().print(table)


if __name__ == "__main__":
    main()
