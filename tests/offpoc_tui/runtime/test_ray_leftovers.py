"""The note that lets the next command end a killed scheduler's Ray cluster, against hostile or stale notes.

Real processes, no Ray: what :mod:`offpoc_tui.runtime.ray_leftovers` reads is the process table, and a process
whose command line names ``raylet`` is what it takes for a Ray process there (the Ray tier,
``test_ray_backend.py``, ends a real cluster). A few seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from offpoc_tui.runtime.ray_leftovers import NOTE, boot_id, reap_leftovers, started_at
from store.runs import pid_alive
from tests.support.processes import wait_for

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)", "raylet"]
"""A process that looks like Ray's in the process table (its command line names raylet)."""


@pytest.fixture
def started() -> Iterator[list[int]]:
    """Pids of processes a test starts outside its children (grandchildren): killed after it, if still alive."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _leftover(started: list[int]) -> int:
    """A killed scheduler's leftover: a session whose leader has exited, a Ray-looking process still in it. The
    session's id (its leader's pid) is returned; the leftover's pid goes to ``started``."""
    code = "import subprocess as s, sys; print(s.Popen(sys.argv[1:], stdout=s.DEVNULL).pid, flush=True)"
    leader = subprocess.Popen(
        [sys.executable, "-c", code, *SLEEPER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    out, _ = leader.communicate(timeout=60)
    started.append(int(out))
    return leader.pid


def _note(root: Path, scheduler: int, session: int, ray: list[int], **changed: Any) -> None:
    """A note as a scheduler writes it, started when this test's process did (before any process it starts), its
    cluster the processes ``ray`` (each recorded with its start time)."""
    note = {"scheduler": scheduler, "session": session, "boot": boot_id(), "started": started_at(os.getpid())}
    note["ray"] = [[pid, started_at(pid)] for pid in ray]
    (root / NOTE).write_text(json.dumps(note | changed))


def test_a_killed_schedulers_leftover_is_ended(tmp_path: Path, started: list[int]) -> None:
    session = _leftover(started)
    _note(tmp_path, session, session, started)
    assert reap_leftovers(tmp_path) == 1
    wait_for(lambda: not pid_alive(started[0]), timeout=30, what="the leftover to end")
    assert not (tmp_path / NOTE).exists()


def test_a_note_from_another_boot_or_older_than_the_leftover_ends_nothing(tmp_path: Path, started: list[int]) -> None:
    """A note from an earlier boot is dropped unread; the session's Ray processes that started before the note's
    scheduler are not its to end; a note without its times (written by hand) is acted on by no one."""
    session = _leftover(started)
    _note(tmp_path, session, session, started, boot="00000000-0000-0000-0000-000000000000")
    assert reap_leftovers(tmp_path) == 0 and pid_alive(started[-1])
    assert not (tmp_path / NOTE).exists()
    _note(tmp_path, session, session, started, started=started_at(started[-1]) + 1)
    assert reap_leftovers(tmp_path) == 0 and pid_alive(started[-1])
    (tmp_path / NOTE).write_text(json.dumps({"scheduler": session, "session": session}))
    assert reap_leftovers(tmp_path) == 0 and pid_alive(started[-1])
    _note(tmp_path, session, session, started, started=started_at(started[-1]))  # the same tick: its own
    assert reap_leftovers(tmp_path) == 1


def test_a_note_naming_another_session_ends_nothing(tmp_path: Path, started: list[int]) -> None:
    """A note copied from elsewhere or written by hand, naming a session that is not its scheduler's own (here a
    live one of a bystander's, with a Ray-looking process), is never acted on."""
    bystander = subprocess.Popen(SLEEPER, start_new_session=True)
    started.append(bystander.pid)
    _note(tmp_path, _dead_pid(), bystander.pid, [bystander.pid])
    assert reap_leftovers(tmp_path) == 0
    assert bystander.poll() is None
    # and a leftover's session named with another (dead) scheduler's pid: not its scheduler's, left alone too
    session = _leftover(started)
    _note(tmp_path, _dead_pid(), session, started[-1:])
    assert reap_leftovers(tmp_path) == 0 and pid_alive(started[-1])


def test_a_stale_note_ends_none_of_a_later_sessions_processes(tmp_path: Path, started: list[int]) -> None:
    """A note whose scheduler's pid a later session took (its leader since exited, its Ray-looking process alive):
    that process is not one the note recorded, so nothing is ended."""
    session = _leftover(started)
    other = subprocess.Popen(SLEEPER)  # a cluster's process once: recorded, alive, not in that session
    started.append(other.pid)
    _note(tmp_path, session, session, [other.pid])
    assert reap_leftovers(tmp_path) == 0 and pid_alive(started[0]) and other.poll() is None


PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "ray::IDLE"])
print(child.pid, flush=True)
time.sleep(120)
"""


def test_a_recorded_processs_later_child_is_ended_with_it(tmp_path: Path, started: list[int]) -> None:
    """A task's worker the recorded raylet started after the note (its parent recorded): ended too."""
    code = (
        "import subprocess as s, sys; p = s.Popen(sys.argv[1:], stdout=s.PIPE, text=True);"
        " print(p.pid, p.stdout.readline().strip(), flush=True)"
    )
    leader = subprocess.Popen(
        [sys.executable, "-c", code, sys.executable, "-c", PARENT, "raylet"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    out, _ = leader.communicate(timeout=60)
    parent, child = map(int, out.split())
    started += [parent, child]
    _note(tmp_path, leader.pid, leader.pid, [parent])  # the child came after the note
    assert reap_leftovers(tmp_path) == 2
    wait_for(lambda: not pid_alive(parent) and not pid_alive(child), timeout=30, what="both to end")


NOTING = """
import subprocess, sys
from pathlib import Path
from offpoc_tui.runtime.ray_leftovers import note_cluster
ray = subprocess.Popen(sys.argv[2:])
try:
    note_cluster(Path(sys.argv[1]))
finally:
    ray.kill()
    ray.wait()
"""


def _note_from(root: Path, own_session: bool) -> None:
    """note_cluster called by a process with a Ray-looking child, leading a session of its own or not."""
    subprocess.run(
        [sys.executable, "-c", NOTING, str(root), *SLEEPER], start_new_session=own_session, timeout=60, check=True
    )


def test_a_symlink_in_the_notes_place_is_replaced_never_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("precious\n")
    (tmp_path / NOTE).symlink_to(elsewhere)
    _note_from(tmp_path, own_session=True)
    assert elsewhere.read_text() == "precious\n"
    assert not (tmp_path / NOTE).is_symlink()
    note = json.loads((tmp_path / NOTE).read_text())
    assert note["scheduler"] == note["session"] and note["boot"] == boot_id() and len(note["ray"]) == 1
    now = float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK")  # ticks since boot
    assert started_at(os.getpid()) <= note["started"] <= now  # the noting process's start: after this one's


def test_a_scheduler_sharing_a_terminals_session_notes_nothing(tmp_path: Path) -> None:
    """Started by hand, a scheduler shares its terminal's session: that session's Ray processes need not be its
    cluster's, so nothing is noted for a later command to end."""
    _note_from(tmp_path, own_session=False)
    assert not (tmp_path / NOTE).exists()


@pytest.mark.parametrize(
    "note",
    [
        '{"scheduler": 9, "session": 9, "boot": "%s", "started": 0, "ray": [[1e400, 1]]}',
        '{"scheduler": 9, "session": 9, "boot": "%s", "started": 0, "ray": [[Infinity, 1]]}',
        '{"scheduler": Infinity, "session": 9, "boot": "%s", "started": 0, "ray": []}',
        '{"scheduler": 1000000000000000000000000000000, "session": 1000000000000000000000000000000,'
        ' "boot": "%s", "started": 0, "ray": []}',
        "[" * 1500 + "]" * 1500,
    ],
    ids=["1e400", "Infinity", "scheduler-inf", "huge", "deep"],
)
def test_a_malformed_note_is_ignored_never_a_traceback(tmp_path: Path, note: str) -> None:
    """A note no scheduler wrote (numbers past any pid, a deep nesting): every `ps` and a starting scheduler
    read it, so it ends nothing and raises nothing (1e400 was an OverflowError, the nesting a RecursionError)."""
    (tmp_path / NOTE).write_text(note.replace("%s", boot_id()) if "%s" in note else note)
    assert reap_leftovers(tmp_path) == 0
