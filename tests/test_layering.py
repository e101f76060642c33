"""agents is a plain PyTorch library: importing it pulls in no UI and no storage."""

from __future__ import annotations

import subprocess
import sys


def test_agents_imports_neither_store_nor_any_ui() -> None:
    code = (
        "import sys, agents, agents.training, agents.corrections.acoffpoc\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'store', 'offpoc_tui', 'textual', 'typer', "
        "'sqlite_utils', 'sqlite3'})\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"agents imported {out.stdout.strip()}"
