"""Driving the real CLI from tests: offpoc in a subprocess, the store read directly, waits with a deadline."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from store import open_store
from store.runs import get_run

SMALL = ["--set", "hidden=64,64", "--set", "start_steps=500", "--set", "eval_episodes=3"]


def offpoc(
    db: Path, *args: str, check: bool = True, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``offpoc ARGS --db DB`` in a real process, run in ``cwd`` (default: the store's folder), with ``env``
    added to the environment."""
    result = subprocess.run(
        [sys.executable, "-m", "offpoc_tui.cli", *args, "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=cwd or db.parent,
        timeout=300,
        env={**os.environ, **(env or {})},
    )
    if check and result.returncode != 0:
        raise AssertionError(f"offpoc {' '.join(args)} → {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def offpoc_in_terminal(db: Path, *args: str, columns: int, lines: int = 24, timeout: float = 60.0) -> str:
    """``offpoc ARGS --db DB`` on a real pseudo-terminal of ``columns`` × ``lines``: what a user sees there,
    colours removed, each line's trailing spaces too."""
    import fcntl
    import pty
    import struct
    import termios

    fd, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))  # before it starts
    process = subprocess.Popen(
        [sys.executable, "-m", "offpoc_tui.cli", *args, "--db", str(db)],
        stdin=terminal, stdout=terminal, stderr=terminal, cwd=db.parent, start_new_session=True,
        env={key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")},
    )  # fmt: skip
    os.close(terminal)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    code = process.wait(timeout=10)
    text = ANSI.sub("", b"".join(chunks).decode()).replace("\r\n", "\n")
    if code != 0:
        raise AssertionError(f"offpoc {' '.join(args)} failed in a terminal:\n{text}")
    return "\n".join(line.rstrip() for line in text.splitlines())


def read_until(process: subprocess.Popen[bytes], text: str, timeout: float = 60.0, stream: str = "stdout") -> str:
    """What ``process`` wrote to its ``stream`` (a pipe: stdout or stderr) up to and including ``text``: a
    prompt, which ends no line, so a line-wise read would wait past it."""
    pipe = getattr(process, stream)
    assert pipe is not None
    fd, seen = pipe.fileno(), b""
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {text!r} within {timeout:.0f} s; written: {seen.decode()!r}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 4096)
            assert chunk, f"{stream} closed before {text!r}; written: {seen.decode()!r}"
            seen += chunk
    return seen.decode()


GATED_ENV = """
import os
import time

import gymnasium as gym
from gymnasium.envs.classic_control.pendulum import PendulumEnv

AFTER, GATE = {after}, {gate!r}


class Gated(PendulumEnv):
    steps = 0

    def step(self, action):
        Gated.steps += 1
        while Gated.steps > AFTER and not os.path.exists(GATE):
            time.sleep(0.05)
        return super().step(action)


gym.register(id="Gated-v0", entry_point=Gated, max_episode_steps=200)
"""


def gated_env(folder: Path, after: int) -> tuple[str, Path]:
    """A Pendulum held at step ``after`` + 1, counted over every instance in the worker (training and evaluation
    episodes alike), until the test creates the returned gate file: a run on it
    (``offpoc run ALGO gated_envs:Gated-v0``, queued from ``folder``) stays live, however fast the machine,
    until the test has seen what it waits for. The env id and the gate."""
    gate = folder / "gate"
    (folder / "gated_envs.py").write_text(GATED_ENV.format(after=after, gate=str(gate)))
    return "gated_envs:Gated-v0", gate


class Payload:
    """What a hostile checkpoint holds: unpickled, it would run ``touch MARKER`` (a test asserts it never does)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def runs(db: Path) -> dict[int, dict[str, Any]]:
    return {r["id"]: r for r in json.loads(offpoc(db, "ps", "--json", "--all").stdout)}


def run_row(db: Path, run_id: int) -> dict[str, Any]:
    """A run's row, read directly (milliseconds, where `offpoc ps` takes a second or more)."""
    store = open_store(db)
    try:
        row = get_run(store, run_id)
    finally:
        store.close()
    assert row is not None
    return row


def limit_memory() -> None:
    """A child's ``preexec_fn``: 2 GiB of address space, so a reader that would read without end (``/dev/zero``)
    fails in seconds instead of taking the machine's memory."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def wait_for(predicate: Callable[[], bool], timeout: float = 240.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def export(db: Path, table: str, *args: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(offpoc(db, "export", "--table", table, *args).stdout)))


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """``path`` made immutable (``chattr +i``) for the block: nothing in it can be made or written, by root
    too, which file modes do not stop. Skips where the file system or the user cannot (not root, say)."""
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here: needs root and a file system with the attribute")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(path)], check=True)
