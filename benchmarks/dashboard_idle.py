"""An idle dashboard's CPU: the real app in a real pseudo-terminal, nobody pressing a key, while runs write.

    python benchmarks/dashboard_idle.py                  # 2 live runs among 40, 30 s a measurement
    python benchmarks/dashboard_idle.py --runs 200 --live 4 --seconds 60

Builds a store of ``--runs`` finished runs of which ``--live`` are "running": a writer process keeps them
live as workers do (a flush a second: progress, heartbeat, an evaluation and training statistics every
few seconds). Then measures, one after the other over the same ``--seconds``, the CPU time (user +
system, from /proc) of:

- ``offpoc dashboard`` on the Runs view, then on Curves (grouping off), each in a 120×40 pty;
- the peer: ``offpoc ps`` run once a second, as ``watch -n 1 offpoc ps`` would (what a user without the
  dashboard runs to watch the same store).

Prints each as a share of one core: the dashboard just after a key press and once idle (no key for
``IDLE_AFTER_S``, when it polls less often), and against the peer's. Target (issue 51): an idle
dashboard under 2% of a core.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import numpy as np

from offpoc_tui.dashboard.poller import IDLE_AFTER_S
from store import open_store
from store.runs import create_runs
from store.writer import RunWriter
from tests.support.storefill import fill_learning, spec

CLI = [sys.executable, "-m", "offpoc_tui.cli"]


def build(path: Path, runs: int, live: int) -> list[int]:
    db = open_store(path, create=True)
    ids = create_runs(db, [spec(correction="acoffpoc" if i % 2 else "none", seed=i // 2) for i in range(runs)])
    db.close()
    for run_id in ids:
        fill_learning(path, run_id, 10_000, gain=1.0 + 0.01 * run_id)
    db = open_store(path)
    db.execute("UPDATE runs SET status = 'finished', total_steps = 1000000")
    db.conn.commit()
    db.close()
    return ids[:live]


def keep_live(path: Path, ids: list[int], stop: threading.Event) -> None:
    """What live workers write, from this process: a flush a second per run."""
    db = open_store(path)
    db.execute(
        f"UPDATE runs SET status = 'running', pid = ?, host = ? WHERE id IN ({','.join('?' * len(ids))})",
        [os.getpid(), socket.gethostname(), *ids],
    )
    db.conn.commit()
    writers = {run_id: RunWriter(db, run_id, flush_interval=0) for run_id in ids}
    step = 10_000
    rng = np.random.default_rng(0)
    while not stop.is_set():
        step += 150
        for writer in writers.values():
            if step % 1_500 == 0:
                writer.add_eval(step, step / 150, float(rng.normal(1000, 50)), 10.0, [1000.0], [1000])
                writer.add_train_stats(step, step, 0.5, -1.0, 2.0, None, 150.0)
            writer.flush(step, step, step / 150)
        stop.wait(1.0)
    db.close()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def dashboard_cpu(path: Path, keys: bytes, seconds: float, warmup: float = 8.0) -> tuple[float, float]:
    """(share of a core within a key press's :data:`IDLE_AFTER_S`, share once idle) on the view ``keys`` opens."""
    fd, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen([*CLI, "dashboard", "--db", str(path)], stdin=terminal, stdout=terminal,
                               stderr=terminal, start_new_session=True)  # fmt: skip
    os.close(terminal)
    drain = threading.Thread(target=_drain, args=(fd,), daemon=True)
    drain.start()
    time.sleep(warmup)
    os.write(fd, keys)
    pressed = time.monotonic()
    time.sleep(2.0)
    before = cpu_seconds(process.pid)
    time.sleep(min(seconds, IDLE_AFTER_S - 4.0))
    active = (cpu_seconds(process.pid) - before) / (time.monotonic() - pressed - 2.0)
    time.sleep(max(0.0, pressed + IDLE_AFTER_S + 4.0 - time.monotonic()))
    before = cpu_seconds(process.pid)
    time.sleep(seconds)
    idle = (cpu_seconds(process.pid) - before) / seconds
    os.write(fd, b"q")
    process.wait(timeout=20)
    os.close(fd)
    return active, idle


def _drain(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 65536):
                return
        except OSError:
            return


def ps_cpu(path: Path, seconds: float) -> float:
    """``offpoc ps`` once a second: the CPU of every process it takes."""
    before = os.times()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        tick = time.monotonic()
        subprocess.run([*CLI, "ps", "--db", str(path)], capture_output=True, check=True)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    after = os.times()
    return (after.children_user - before.children_user + after.children_system - before.children_system) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--live", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "idle.db"
        live = build(path, args.runs, args.live)
        stop = threading.Event()
        writer = threading.Thread(target=keep_live, args=(path, live, stop), daemon=True)
        writer.start()
        try:
            runs_view = dashboard_cpu(path, b"1", args.seconds)
            curves_view = dashboard_cpu(path, b"2", args.seconds)
            peer = ps_cpu(path, args.seconds)
        finally:
            stop.set()
            writer.join()
    print(f"{args.runs} runs, {args.live} live; share of one core (after a key / idle, {IDLE_AFTER_S:.0f} s on):")
    for name, (active, idle) in (("Runs", runs_view), ("Curves", curves_view)):
        print(f"  dashboard, {name + ' view:':13} {100 * active:5.2f}% / {100 * idle:5.2f}%"
              f"  ({active / peer:.3f}× / {idle / peer:.3f}× the peer)")  # fmt: skip
    print(f"  peer, offpoc ps each 1 s: {100 * peer:5.2f}%")
    print("  target: an idle dashboard under 2% of a core")


if __name__ == "__main__":
    main()
