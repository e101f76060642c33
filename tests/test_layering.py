"""The house's layering: agents pulls in no UI or storage; store no torch or UI; the CLI's read path no torch."""

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


def _imported(module: str, roots: set[str]) -> list[str]:
    code = f"import sys, {module}\nprint(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {roots!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def test_store_imports_neither_torch_nor_any_ui() -> None:
    modules = "store, store.writer, store.links, store.reader, store.export, store.runs"
    assert _imported(modules, {"torch", "agents", "offpoc_tui", "textual", "typer"}) == []


def test_cli_starts_without_torch() -> None:
    """ps, show and export must start fast: torch and gymnasium load only in the commands that train."""
    assert _imported("offpoc_tui.cli", {"torch", "gymnasium", "agents"}) == []


def test_dashboard_starts_without_torch() -> None:
    """The dashboard reads through store only and must start fast."""
    assert _imported("offpoc_tui.dashboard.app", {"torch", "gymnasium", "agents"}) == []
