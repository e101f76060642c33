"""offpoc's SQLite store: schema, the worker's writer, readers, run control and export.

Persistence only: imports no torch and no UI. Workers write through
:class:`~store.writer.RunWriter`; the CLI and the dashboard read through
:mod:`store.reader`.

    from store import open_store
    db = open_store("offpoc.db")          # raises StoreError for a corrupt or foreign file
"""

import sys


def _import_sqlite_utils_without_pandas() -> None:
    """Import sqlite-utils with pandas hidden. sqlite-utils imports pandas whenever it is installed (the test
    and Ray extras bring it), only to give ``pd.Timestamp`` a column type, which offpoc never writes: 0.3 s of
    every command's 0.8 s start (benchmarks/cli_start.py). Hidden for this one import only: anything that
    imports pandas later gets it as usual (tests/test_layering.py)."""
    if "pandas" in sys.modules or "sqlite_utils" in sys.modules:
        return
    sys.modules["pandas"] = None  # type: ignore[assignment]  # None here: `import pandas` raises ImportError
    try:
        import sqlite_utils  # noqa: F401
    finally:
        del sys.modules["pandas"]


_import_sqlite_utils_without_pandas()

from store.db import StoreError, open_store, write  # noqa: E402
from store.runs import STATUSES, TERMINAL, RunSpec  # noqa: E402
from store.schema import SCHEMA_VERSION  # noqa: E402

__all__ = ["SCHEMA_VERSION", "STATUSES", "TERMINAL", "RunSpec", "StoreError", "open_store", "write"]
