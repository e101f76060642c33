"""A Ray cluster that a scheduler started for its runs ends with it, even when it is killed.

The scheduler runs in a session of its own (:func:`offpoc_tui.runtime.scheduler.start_scheduler`), and a
local cluster that ``ray.init`` starts for it lives in that session. The scheduler notes the
session in ``<store>-runs/ray-cluster.json`` when it started the cluster, and removes the note when
it shuts the cluster down. If it was killed instead, Ray's agents (``ray::DashboardAgent``,
``ray::RuntimeEnvAgent``) outlive it for a minute or more: the store's next command (a new
scheduler, ``ps``, ``show``, ``follow``) finds the note with its scheduler gone and ends the Ray
processes of that session, and only those (a worker of that session, still training, is left alone).
A note is acted on only where the session it names is its scheduler's own (the scheduler led it, and its
pid numbers it: Linux gives no process that number while the session has a member), so a note copied
from elsewhere or written by hand can name no session to end but one whose leader has exited, never a live
one's (a serving scheduler's, an open terminal's). The note also holds the machine's boot, the scheduler's
start time and the cluster's processes as ``ray.init`` left them (each pid with its start time: the agents
that outlive a killed scheduler are among them). A note from an earlier boot is dropped unread; and only
those processes, or their children started since (a task's worker, by the recorded raylet), are ended, never
one older than the scheduler. So a stale note whose scheduler pid a later session took (Ray processes a user
started from a terminal since closed: ``ray start`` leaves them in its session) ends nothing of that
session's: its processes are not the recorded ones (a pid and a start time name one process per boot). Only
a note written by hand, naming live processes with their start times, could still name others'.
No Ray import here: ``ps`` must start fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

from store.files import read_own, write_new
from store.runs import pid_alive

NOTE = "ray-cluster.json"
NOTE_BYTES = 65_536
"""The most of a note that is read (a cluster's processes are a few dozen)."""
PID_MAX = 4_194_304
"""Linux's largest pid (``/proc/sys/kernel/pid_max`` is at most this): a number past it names no process."""
_RAY = ("raylet", "gcs_server", "ray::", "/ray/_private/", "/ray/dashboard/", "/ray/autoscaler/")
"""What a Ray process's command line holds (an offpoc worker's never does: see :func:`_is_ray`)."""


def note_cluster(root: Path) -> None:
    """Called by a scheduler right after ``ray.init``: note the session if the cluster is its own.

    Only a scheduler that leads its session (:func:`~offpoc_tui.runtime.scheduler.start_scheduler` starts it
    so) notes one: one started by hand in a terminal shares the terminal's session, whose other Ray processes
    are not its to end. The note is a new file of its own, never written through a symlink in its place; where
    none can be made there (a folder in its place), none is, and a killed scheduler's cluster is not ended."""
    session = os.getsid(0)
    members = _members(session) if session == os.getpid() else []
    if not members:
        return
    note = {"scheduler": os.getpid(), "session": session, "boot": boot_id(), "started": started_at(os.getpid())}
    note["ray"] = [[pid, start] for pid, _, start in members]
    with contextlib.suppress(OSError):  # a symlink there: the link goes, never what it points to
        write_new(root / NOTE, json.dumps(note))


def forget_cluster(root: Path) -> None:
    """Called by a scheduler that shut its cluster down."""
    (root / NOTE).unlink(missing_ok=True)


def reap_leftovers(root: Path) -> int:
    """End the Ray processes a killed scheduler left behind; how many were signalled."""
    try:
        note = json.loads(read_own(root / NOTE, NOTE_BYTES))  # a FIFO or a link to /dev/zero there: OSError
        scheduler, session, started = int(note["scheduler"]), int(note["session"]), int(note["started"])
        boot = str(note["boot"])
        recorded = {(int(pid), int(start)) for pid, start in note["ray"]}
    except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError):  # a note not ours: ignored
        return 0
    if not all(0 < pid <= PID_MAX for pid in (scheduler, session, *(pid for pid, _ in recorded))):
        return 0
    if session != scheduler or pid_alive(scheduler):  # a note naming another's session is never acted on
        return 0
    if boot != boot_id():  # from before this boot: its cluster ended with the machine, its pids are others'
        forget_cluster(root)
        return 0
    members = _members(session)  # read once, all chosen before any is ended: a child whose parent ended first is
    starts = {pid: start for pid, _, start in members}  # no longer that parent's (a recorded parent is a member)
    mine = [
        pid
        for pid, parent, start in members
        if start >= started and ((pid, start) in recorded or (parent, starts.get(parent)) in recorded)
    ]
    ended = 0
    for pid in mine:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            ended += 1
    forget_cluster(root)
    return ended


def ray_processes(session: int) -> list[int]:
    """Live Ray processes of the session ``session``."""
    return [pid for pid, _, _ in _members(session)]


def _members(session: int) -> list[tuple[int, int, int]]:
    """(pid, parent pid, start time: :func:`started_at`) of each live Ray process of the session ``session``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat(int(entry.name))
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if fields[0] not in ("Z", "X") and int(fields[3]) == session and _is_ray(command):
                found.append((int(entry.name), int(fields[1]), int(fields[19])))
        except (OSError, IndexError, ValueError):
            continue
    return found


def started_at(pid: int) -> int:
    """When the process ``pid`` started, in clock ticks since the machine booted (``/proc/PID/stat``'s 22nd)."""
    return int(_stat(pid)[19])


def boot_id() -> str:
    """This boot's id: a note from another boot names pids that are not the ones it meant."""
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def _stat(pid: int) -> list[str]:
    """``/proc/PID/stat``'s fields after the command's name (in parentheses, which may hold spaces): the state is
    the first, the session the fourth, the start time the twentieth."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _is_ray(command: str) -> bool:
    return "offpoc_tui." not in command and any(marker in command for marker in _RAY)
