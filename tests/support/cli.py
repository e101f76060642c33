"""The offpoc CLI in this process (Typer's CliRunner), answering as ``processes.offpoc`` does.

For commands whose promise does not rest on a process of their own: a call costs no Python start (about a
second of CPU each), so a test that reads and writes a store through twenty commands takes a second, not
twenty. Whatever needs a real process (exit codes a shell sees, signals, detached workers, locks held by
another process) goes through ``processes.offpoc``, and so does a test of what a store's files hold after
commands: here a command's connections may outlive it, and the WAL with them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from typer.testing import CliRunner

from offpoc_tui.cli import app

_runner = CliRunner()


def cli(db: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``offpoc ARGS --db DB`` run here, in the store's folder, as ``processes.offpoc(db, *args)`` runs it there."""
    here = Path.cwd()
    os.chdir(db.parent)
    try:
        result = _runner.invoke(app, [*args, "--db", str(db)], prog_name="offpoc")
    finally:
        os.chdir(here)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    done = subprocess.CompletedProcess(["offpoc", *args], result.exit_code, result.stdout, result.stderr)
    if check and done.returncode != 0:
        raise AssertionError(f"offpoc {' '.join(args)} → {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done
