"""offpoc's SQLite store: schema, the worker's writer, readers, run control and export.

Persistence only: imports no torch and no UI. Workers write through
:class:`~store.writer.RunWriter`; the CLI and the dashboard read through
:mod:`store.reader`.

    from store import open_store
    db = open_store("offpoc.db")          # raises StoreError for a corrupt or foreign file
"""

from store.db import StoreError, open_store, write
from store.runs import STATUSES, TERMINAL, RunSpec
from store.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "STATUSES", "TERMINAL", "RunSpec", "StoreError", "open_store", "write"]
