"""The house's layering: agents pulls in no UI or storage; store no torch or UI; the CLI's read path no torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest


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


def _imports(modules: set[str], path: Path, name: str) -> set[str]:
    """The project modules ``path`` imports anywhere in it: at its top, under TYPE_CHECKING, in a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{alias.name}" for alias in node.names} & modules
            names = subs if len(subs) == len(node.names) else subs | {node.module}
        elif isinstance(node, ast.Import):
            names = {alias.name for alias in node.names}
        else:
            continue
        found |= (names & modules) - {name}
    return found


def test_the_store_starts_without_pandas_and_pandas_imports_after() -> None:
    """sqlite-utils imports pandas when it is installed; the store hides it for that one import (a third of every
    command's start: benchmarks/cli_start.py), and pandas imports as usual afterwards."""
    pytest.importorskip("pandas", reason="pandas is not installed: nothing to hide")
    code = (
        "import sys, store, store.reader\nprint('pandas' in sys.modules)\n"
        "import pandas, sqlite_utils.db\nprint(sqlite_utils.db.pd is None, pandas.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "pandas"]


def test_no_module_imports_one_that_imports_it_back() -> None:
    """No import circle among agents, store and offpoc_tui, counting every import (a circle through a
    TYPE_CHECKING or a function-level import still ties two modules' insides together)."""
    root = Path(__file__).resolve().parent.parent
    files = {
        ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): path
        for package in ("agents", "store", "offpoc_tui")
        for path in (root / package).rglob("*.py")
    }
    graph = {name: _imports(set(files), path, name) for name, path in files.items()}
    circles = []
    for start in graph:  # a path from one of a module's imports back to it
        seen: set[str] = set()
        frontier: list[tuple[str, tuple[str, ...]]] = [(start, (start,))]
        while frontier:
            node, trail = frontier.pop()
            for nxt in graph[node]:
                if nxt == start:
                    circles.append(" → ".join((*trail, start)))
                elif nxt not in seen:
                    seen.add(nxt)
                    frontier.append((nxt, (*trail, nxt)))
    assert circles == [], circles[:5]


def _own(node: ast.Attribute) -> bool:
    """``self._x`` or ``cls._x``: an attribute of the module's own objects, not another's."""
    return isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")


def _private_names(tree: ast.AST) -> set[str]:
    """Private (single-underscore) names a module defines: functions, methods, module and class attributes, and
    ``self._x`` attributes it assigns."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _own(node):
            found.add(node.attr)
    return {n for n in found if n.startswith("_") and not n.startswith("__")}


def test_no_module_of_agents_reaches_another_modules_private_names() -> None:
    """A module uses another's public names only: an underscore name defined in one module of ``agents/`` is
    read or set from no other (its owner offers a public method instead: ``AdamStep.regather()``, the
    algorithm's ``critic_step``). Third-party private names (``torch._foreach_*``) are not ours to police."""
    root = Path(__file__).resolve().parents[1] / "agents"
    trees = {path: ast.parse(path.read_text()) for path in sorted(root.rglob("*.py"))}
    defined = {path: _private_names(tree) for path, tree in trees.items()}
    reaches = []
    for path, tree in trees.items():
        others = set().union(*(names for other, names in defined.items() if other != path)) - defined[path]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in others and not _own(node):
                reaches.append(f"{path.relative_to(root.parent)}:{node.lineno} {ast.unparse(node)}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agents"):
                reaches += [
                    f"{path.relative_to(root.parent)}:{node.lineno} from {node.module} import {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert reaches == [], "\n".join(reaches)
