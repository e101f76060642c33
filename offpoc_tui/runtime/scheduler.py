"""The store's scheduler: one detached process per store that starts its queued runs.

    python -m offpoc_tui.runtime.scheduler --db offpoc.db      # started by every command that queues runs

Every command that queues runs (``run``, ``sweep``, ``resume``, the dashboard) starts one with
:func:`start_scheduler`; a scheduler that finds another holding the store's lock
(``<store>-runs/scheduler.lock``) exits at once, so a store has one, and two invocations never
run more than the store's limit. It starts queued runs oldest first: at most ``jobs`` worker
processes on this machine (``offpoc jobs N``, read again every poll; workers it did not start
count too), and runs for a Ray cluster as Ray tasks (:mod:`offpoc_tui.runtime.ray_backend`), as many
as the cluster has CPUs. It stamps its pid on the runs it waits to start, settles a worker that
died without saying how it ended (killed by a signal → ``lost``, resumable; a non-zero exit →
``failed`` with the tail of its log), and exits when nothing is queued or running. Its own
death leaves its queued runs, and its Ray runs, ``lost`` (:func:`store.runs.reap_lost`). It leaves
early when the store is no longer at its path (moved, replaced or deleted: it checks every poll) or
another scheduler holds the lock of a run-files folder made again, handing its queued runs back.

It runs in its own session (closing the terminal leaves it and its workers running), inside
the store's run-files folder, and logs to ``<store>-runs/scheduler.log``.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import sqlite_utils

from offpoc_tui.runtime.ray_leftovers import reap_leftovers
from store import open_store
from store.db import StoreError, StoreFile, read_only
from store.files import WORKER_LOG, RunFiles, read_own
from store.queue import adopt, adopted, jobs_limit, release, running_here, waiting
from store.runs import NOT_OWNER_EXIT, finish, pid_alive, reap_lost
from store.studies import advance

POLL_S = 0.2
RETRY_S = 5.0
"""After a failed write to the store (a full disk), the scheduler waits this long and carries on."""
VANISHED_S = 10.0
"""How long the run-files folder may keep vanishing as the scheduler makes it again (a deletion still under
way) before the scheduler leaves, its queued runs handed back, rather than wait on without serving them."""
LOCK = "scheduler.lock"
LOG_TAIL_BYTES = 64 * 1024
"""How much of a failed worker's log's end the scheduler reads for its reason and traceback."""


def start_scheduler(db_path: Path) -> int:
    """Make sure the store's scheduler runs (it exits at once if one already does); the pid started."""
    db_path = db_path.resolve()
    db = open_store(db_path)
    files = RunFiles.of(db, db_path)
    files.ensure()
    db.close()
    # The lock and the log are checked here, where a symlink, a FIFO or a folder in their place is the command's
    # one line (StoreError), not a scheduler that leaves at once with its runs waiting.
    try:
        files.append_to(files.root / LOCK).close()
        log = files.append_to(files.scheduler_log)
    except OSError as error:  # no right to write there, say: one line too
        raise StoreError(f"cannot start the store's scheduler: {error.strerror or error} ({error.filename})") from None
    with log:
        process = subprocess.Popen(
            [sys.executable, "-m", "offpoc_tui.runtime.scheduler", "--db", str(db_path)],
            cwd=files.root,  # whatever a library writes into its working folder stays with the store's files
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return process.pid


def _say(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} [{os.getpid()}] {line}", flush=True)


class LocalWorkers:
    """Worker processes this scheduler started, one per run (:mod:`offpoc_tui.runtime.worker`)."""

    def __init__(self, db_path: Path, db: sqlite_utils.Database, files: RunFiles, where: StoreFile) -> None:
        self.db_path, self.db, self.files, self.where = db_path, db, files, where
        self.active: dict[int, subprocess.Popen[bytes]] = {}
        """Each running run's worker process (the runs of a lane group share one)."""
        self.logs: dict[int, Path] = {}
        """Each started run's worker log (a lane group's is in its first run's folder)."""
        self.studies_seen: dict[int, tuple[Any, ...]] = {}
        """Each running study's runs as last looked at (store.studies.advance reads a study again on a change)."""
        self.stale: list[subprocess.Popen[bytes]] = []
        """Workers whose run was queued again while they lived (declared lost, then resumed): waited
        for, never settled; they stop at their next write (:class:`store.runs.NotOwner`)."""

    def start(self, run_ids: list[int]) -> None:
        """One worker process for ``run_ids``: one run, or a lane group (its log in its first run's folder)."""
        if not self.where.here():  # looked at again right before the store's folder is used
            raise Leave(f"the store is no longer at {self.where.path} (moved, replaced or deleted)")
        ready: list[int] = []
        for run_id in run_ids:
            try:
                self.files.prepare(run_id)
                ready.append(run_id)
            except StoreError as error:  # its folder is not this store's (a symlink): the run fails, others go on
                _say(f"run {run_id}: {error}")
                finish(self.db, run_id, "failed", error=str(error), only_from=("queued",))
        if not ready:
            return
        directory = self.files.run_dir(ready[0])
        try:
            log = self.files.append_to(directory / WORKER_LOG)
        except StoreError as error:
            for run_id in ready:
                _say(f"run {run_id}: {error}")
                finish(self.db, run_id, "failed", error=str(error), only_from=("queued",))
            return
        command = [sys.executable, "-m", "offpoc_tui.runtime.worker", "--db", str(self.db_path)]
        with log:
            process = subprocess.Popen(
                [*command, *(arg for run_id in ready for arg in ("--run", str(run_id)))],
                cwd=directory,  # whatever a library writes into its working folder lands here, not in the user's
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        for run_id in ready:
            self.active[run_id] = process
            self.logs[run_id] = directory / WORKER_LOG
            if run_id != ready[0]:
                self._share_log(run_id, directory / WORKER_LOG, ready)
        lanes = f" (lane group of runs {', '.join(map(str, ready))})" if len(ready) > 1 else ""
        _say(f"run {ready[0]}: worker pid {process.pid}{lanes}")

    def _share_log(self, run_id: int, log: Path, group: list[int]) -> None:
        """A lane's worker.log is its group's (a hard link: ``offpoc logs`` reads it from the lane's own folder,
        ``rm`` of another lane leaves it); a log the lane had from before gets a line saying where it goes on."""
        own = self.files.run_dir(run_id) / WORKER_LOG
        try:
            os.link(log, own)
        except FileExistsError:
            try:
                with self.files.append_to(own) as handle:
                    lanes = ", ".join(map(str, group))
                    handle.write(f"run {run_id} goes on in the lane group of runs {lanes}: {log}\n".encode())
            except (OSError, StoreError) as error:
                _say(f"run {run_id}: {error}")
        except OSError as error:  # a file system without hard links: the log stays in the first lane's folder
            _say(f"run {run_id}: its log is {log} ({error.strerror or error})")

    def processes(self) -> int:
        """Worker processes this scheduler runs (a lane group's runs share one)."""
        return len({process.pid for process in self.active.values()})

    def poll(self) -> None:
        """Settle the workers that exited: a run must not stay running or queued without one."""
        self.stale = [process for process in self.stale if process.poll() is None]
        if self.active:
            marks = ", ".join("?" for _ in self.active)
            sql = f"SELECT id FROM runs WHERE status = 'queued' AND launcher_pid IS NULL AND id IN ({marks})"
            for (run_id,) in self.db.execute(sql, list(self.active)).fetchall():
                if self.active[run_id].poll() is None:  # requeued under a live worker: a new one will take it
                    self.stale.append(self.active.pop(run_id))
        for run_id, process in list(self.active.items()):
            code = process.poll()
            if code is None:
                continue
            del self.active[run_id]
            if code == NOT_OWNER_EXIT:  # the run is another worker's now: nothing of it is this one's to settle
                _say(f"run {run_id}: worker pid {process.pid} left a run that is no longer its own")
            elif code < 0:
                self._settle(run_id, process.pid, "lost", f"worker killed by signal {-code}", None)
            elif code != 0:
                tail = self._log_tail(run_id)
                self._settle(run_id, process.pid, "failed", _reason(run_id, tail) or f"exit status {code}", tail)

    def _settle(self, run_id: int, pid: int, status: str, error: str, text: str | None) -> None:
        """End the run of a worker that died without saying how: if it is running under that worker,
        or queued still (the worker died before it claimed the run)."""
        if not finish(self.db, run_id, status, error=error, traceback=text, worker_pid=pid):
            finish(self.db, run_id, status, error=error, traceback=text, only_from=("queued",))

    def others(self) -> int:
        """Live workers on this machine that this scheduler did not start (a previous scheduler's)."""
        return len({pid for i, pid in running_here(self.db).items() if i not in self.active and pid_alive(pid)})

    def _log_tail(self, run_id: int, lines: int = 20) -> str:
        path = self.logs.get(run_id, self.files.run_dir(run_id) / WORKER_LOG)
        try:  # its end only, and never a FIFO or a device put in its place: the scheduler must not hang on it
            return "\n".join(read_own(path, LOG_TAIL_BYTES, tail=True).decode(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _reason(run_id: int, tail: str) -> str:
    """Why a worker that exited 1 without recording it failed ``run_id``, from its log's end: a lane group's
    worker ends with a line per lane (``run 5: failed: <reason>``), a solo run's with the reason itself."""
    lines = tail.splitlines()
    mine = [line for line in lines if line.startswith(f"run {run_id}: ")]
    if mine:
        return mine[-1].split(": ", 2)[-1]
    return lines[-1] if lines else ""


def needs_scheduler(db: sqlite_utils.Database, db_path: Path) -> int:
    """How many runs wait on this machine with no scheduler to start them (the command that queued them
    was killed before it could start one); 0 when a scheduler runs or nothing waits."""
    if read_only(db):
        return 0
    queued = [run_id for run_id, backend in waiting(db) if backend is None]
    if not queued:
        return 0
    files = RunFiles.of(db, db_path)
    lock = files.root / LOCK
    if not files.owned():  # no scheduler ever ran here for this store: nothing is made in a folder not its own
        return len(queued)  # (start_scheduler claims it, or says in one line why it cannot)
    try:
        with files.append_to(lock) as handle:  # a symlink, FIFO or folder in its place: StoreError, the command's line
            if not _lock(handle):
                return 0
            fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError:  # not this user's to write (another's file, an immutable folder): looked at read-only
        return 0 if _held_elsewhere(lock) else len(queued)  # stranded: start_scheduler says why in its line
    return len(queued)


def _held_elsewhere(lock: Path) -> bool:
    """Whether a scheduler holds the lock file at ``lock``, opened read-only (never through a symlink, never
    waiting on a FIFO); False where there is none to open."""
    try:
        descriptor = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(descriptor) as handle:
        if not _lock(handle):
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def _lock(handle: IO[Any]) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class Lock:
    """The store's scheduler lock, ``<store>-runs/scheduler.lock``: held while this scheduler serves the store.

    The lock is on the file; if the run-files folder is deleted and made again, another scheduler could
    lock the new file, so :meth:`still_held` looks at the path again each poll and locks what is there now.
    A symlink, a FIFO or a folder in the file's place is refused (:class:`~store.db.StoreError`), as in the
    store's logs' places: nothing is made or locked where a link points.
    """

    def __init__(self, files: RunFiles, where: StoreFile) -> None:
        self.files, self.where = files, where
        self.handle: IO[Any] | None = None

    @property
    def path(self) -> Path:
        return self.files.root / LOCK

    def take(self) -> bool:
        """Lock the file at the path now; whether this process holds it. Never makes the folder again
        where the store is no longer (:class:`~store.db.StoreMoved`)."""
        self.release()
        self.where.check()
        self.files.ensure()
        handle = self.files.append_to(self.path)  # never through a symlink (StoreError), as the store's logs
        if not _lock(handle):
            handle.close()
            return False
        self.handle = handle
        return True

    def still_held(self) -> bool:
        """Whether this process holds the lock of the file at the path (taken again if the file is new)."""
        if self.handle is None:
            return self.take()
        try:
            found = self.path.lstat()  # a symlink put in its place, even to the file it holds, is not its file
        except OSError:
            found = None
        mine = os.fstat(self.handle.fileno())
        if found is not None and (found.st_dev, found.st_ino) == (mine.st_dev, mine.st_ino):
            return True
        return self.take()

    def release(self) -> None:
        if self.handle is not None:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None


class Leave(Exception):
    """The scheduler must stop serving the store: the line says why."""


def schedule(db_path: Path) -> None:
    """Start the store's queued runs until none is queued or running; at once if another scheduler runs.

    It leaves early, with a line in its log, when the store is no longer at its path (moved, replaced or
    deleted: :class:`~store.db.StoreFile`) or another scheduler holds the lock of a run-files folder made
    again; the queued runs it answered for are then handed back to whichever scheduler comes next."""
    db = open_store(db_path)
    where = StoreFile.of(db_path)
    files = RunFiles.of(db, db_path)
    lock = Lock(files, where)
    if not lock.take():
        return
    _say("scheduler started")
    if reap_leftovers(files.root):
        _say("ended the Ray processes a killed scheduler left behind")
    reap_lost(db)  # a dead scheduler's queued runs are lost before this one adopts anything
    local, ray = LocalWorkers(db_path, db, files, where), None
    try:
        while True:
            ray = _serve(db, local, ray, lock)
            # Unlock, then look again: a command that queued runs while this one was leaving
            # started a scheduler that found the lock taken; then this one carries on.
            lock.release()
            try:
                again = bool(waiting(db)) and lock.take()
            except (StoreError, OSError) as error:
                raise Leave(f"cannot lock {lock.path}: {error}") from None
            if not again:
                break
    except Leave as reason:
        _say(f"scheduler leaves: {reason}")
        try:
            release(db, os.getpid())
        except sqlite3.Error as error:  # its queued runs then show lost: resumable
            _say(f"could not hand back its queued runs: {error}")
        return
    finally:
        lock.release()
        if ray is not None:
            ray.close()
    _say("scheduler done: nothing queued or running")


def _serve(db: sqlite_utils.Database, local: LocalWorkers, ray: Any, lock: Lock) -> Any:
    """Poll until nothing is queued, nor running from this scheduler; the Ray runs' driver, if it made one."""
    me = os.getpid()
    vanished: float | None = None  # since when the run-files folder has kept vanishing as it was made again
    while True:
        if not local.where.here():
            raise Leave(f"the store is no longer at {local.where.path} (moved, replaced or deleted)")
        try:
            if not lock.still_held():
                raise Leave(f"another scheduler holds {lock.path} (the run-files folder was made again)")
        except StoreError as error:
            raise Leave(str(error)) from None
        except FileNotFoundError:  # the folder vanished while it was made again (its deletion still under way)
            vanished = time.monotonic() if vanished is None else vanished
            if time.monotonic() - vanished > VANISHED_S:
                raise Leave(f"cannot lock {lock.path}: its folder kept vanishing for {VANISHED_S:.0f} s") from None
            time.sleep(POLL_S)
            continue
        except OSError as error:  # the folder could not be made again (a full disk): the next command retries
            raise Leave(f"cannot lock {lock.path}: {error.strerror or error}") from None
        vanished = None
        try:
            done, ray = _serve_once(db, local, ray, me)
        except (sqlite3.OperationalError, OSError) as error:  # a full disk, a lock held too long: the runs need us
            _say(f"a write to the store or its files failed ({error}); trying again in {RETRY_S:.0f} s")
            time.sleep(RETRY_S)
            continue
        if done:
            return ray
        time.sleep(POLL_S)


def _serve_once(db: sqlite_utils.Database, local: LocalWorkers, ray: Any, me: int) -> tuple[bool, Any]:
    """One poll: settle ended workers, start what fits; (whether nothing is left, the Ray driver)."""
    local.poll()
    if ray is not None:
        ray.poll()
    for line in advance(db, local.studies_seen):  # sequential studies: record an interim's verdicts, queue the next
        _say(line)
    adopt(db, me)  # after advance: a run queued unadopted under a live worker reads as requeued (a new worker)
    queue = [(i, b) for i, b in waiting(db) if i not in local.active and (ray is None or i not in ray.active)]
    # Only the runs adopted above: one queued since (another command's) waits for the next poll. Started now,
    # unstamped, it would read at the next poll as requeued under a live worker and get a second worker.
    ours = adopted(db, me)
    mine = [i for i, backend in queue if backend is None and i in ours]
    if mine:
        free = jobs_limit(db) - local.processes() - local.others()
        for run_ids in lane_groups(db, mine)[: max(free, 0)]:
            local.start(run_ids)
    remote = [i for i, backend in queue if backend == "ray"]
    if remote:
        if ray is None:
            ray = _connect(local.db_path, db, remote)
        for run_ids in lane_groups(db, remote)[: max(ray.free(), 0)] if ray is not None else ():
            ray.submit(run_ids)
    return not queue and not local.active and (ray is None or not ray.active), ray


def lane_groups(db: sqlite_utils.Database, queued: list[int]) -> list[list[int]]:
    """The queued runs as the workers to start, oldest first: the runs of one lane group (queued with
    ``--lanes``) that go on from one step share one, fresh ones or ones resumed from checkpoints of one step
    (a group stopped or lost together, resumed); a run alone, or a lane whose checkpoint is at another step
    than its group's others, has its own."""
    marks = ", ".join("?" for _ in queued)
    sql = f"SELECT id, lane_group, COALESCE(checkpoint_step, 0) FROM runs WHERE id IN ({marks})"
    sql += " AND lane_group IS NOT NULL"
    group_of = {run_id: (group, step) for run_id, group, step in db.execute(sql, queued).fetchall()}
    workers: list[list[int]] = []
    seen: dict[tuple[int, int], list[int]] = {}
    for run_id in queued:
        group = group_of.get(run_id)
        if group is None:
            workers.append([run_id])
        elif group in seen:
            seen[group].append(run_id)
        else:
            seen[group] = [run_id]
            workers.append(seen[group])
    return workers


def _connect(db_path: Path, db: sqlite_utils.Database, runs: list[int]) -> Any:
    """The Ray driver; None, with ``runs`` failed and the reason stored, when the cluster cannot be reached."""
    from offpoc_tui.runtime.ray_backend import RayRuns

    try:
        return RayRuns.connect(db_path, db)
    except Exception as error:  # Ray raises many kinds here (connection, version, auth): each ends the runs
        line = f"could not start or reach the Ray cluster: {type(error).__name__}: {str(error).splitlines()[0]}"
        _say(line)
        for run_id in runs:
            finish(db, run_id, "failed", error=line, only_from=("queued",))
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m offpoc_tui.runtime.scheduler", description="Run a store's queued runs."
    )
    parser.add_argument("--db", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        schedule(args.db.resolve())
    except (StoreError, OSError) as error:  # the store went, or its folder is not offpoc's: one line, no traceback
        _say(f"scheduler cannot serve {args.db}: {error}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
