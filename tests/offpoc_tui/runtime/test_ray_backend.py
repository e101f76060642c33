"""The Ray backend with real clusters on 127.0.0.1: retries, node loss, stop, lane groups, nothing left behind.

Skipped, saying why, where Ray is not installed (``pip install -c constraints.txt -e ".[ray]"``).
About three minutes on a quiet 2-core machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.runs import pid_alive
from tests.support.processes import SMALL, export, offpoc, run_row, runs, wait_for

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -c constraints.txt -e '.[ray]'")
# One Ray cluster at a time: --dist loadgroup keeps these tests on one xdist worker, in order.
pytestmark = [pytest.mark.ray, pytest.mark.process, pytest.mark.xdist_group("ray")]

SHORT = [*SMALL, "--correction", "acoffpoc", "--eval-freq", "500", "--set", "checkpoint_every=1000"]


@pytest.fixture
def ray_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Ray's switches for a cluster on loopback only, no token in $HOME, and a short socket folder.

    After the test, no process of that folder may be left (they are the clusters' and the workers')."""
    tmp = Path(f"/tmp/offpoc-ray-{os.getpid()}")
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # gcs_server and raylet on 127.0.0.1 only
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_TMPDIR", str(tmp))
    yield tmp
    try:
        wait_for(lambda: not ray_processes(tmp), timeout=90, what="Ray's processes to end")
    finally:
        for pid in ray_processes(tmp):  # only processes of this test's own Ray folder
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


def ray_processes(tmp: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                text = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if str(tmp).encode() in text and state not in ("Z", "X"):
                found.append(int(entry.name))
    return found


def listening(pids: list[int]) -> list[str]:
    """Local addresses these processes listen on (TCP), from ``ss``."""
    lines = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout.splitlines()
    return [line.split()[3] for line in lines if any(f"pid={pid}," in line for pid in pids)]


def test_runs_on_a_local_cluster_survive_a_killed_worker_and_stop_with_a_checkpoint(
    tmp_path: Path, ray_env: Path
) -> None:
    db = tmp_path / "offpoc.db"
    offpoc(db, "run", "td3", "Hopper-v4", "--steps", "4000", *SHORT, "--backend", "ray")
    offpoc(db, "run", "td3", "Hopper-v4", "--seed", "1", "--steps", "200000", *SHORT, "--backend", "ray")
    wait_for(lambda: run_row(db, 1)["status"] == "running" and run_row(db, 1)["steps"] >= 1800, what="step 1800")
    addresses = listening(ray_processes(ray_env))
    loopback = ("127.0.0.1:", "[::ffff:127.0.0.1]:", "[::1]:")
    assert addresses and all(a.startswith(loopback) for a in addresses), addresses
    shown = offpoc(db, "ps").stdout
    assert "ray:" in shown and "pid" not in shown.split("where")[1]  # where each runs, not a local pid

    pid = run_row(db, 1)["pid"]
    os.kill(pid, signal.SIGKILL)  # the Ray worker process: Ray runs the task again
    wait_for(lambda: not pid_alive(pid), what="the killed worker gone")
    killed = run_row(db, 1)  # what it left, read before the retried task claims the run (as a rule)
    wait_for(lambda: run_row(db, 1)["status"] == "finished", what="run 1 finished after the retry")
    evaluations = [int(r["step"]) for r in export(db, "evaluations", "--run", "1")]
    assert evaluations == list(range(0, 4001, 500))  # every evaluation exactly once
    if killed["pid"] == pid and killed["steps"] > killed["checkpoint_step"]:  # it recorded past its checkpoint:
        assert run_row(db, 1)["revision"] == 1  # the retried task replaced those records with its own
    weights = [int(r["step"]) for r in export(db, "quantities", "--run", "1") if r["quantity"] == "lambda"]
    assert weights == list(range(weights[0], 4001))  # no gap, nothing twice

    wait_for(lambda: run_row(db, 2)["steps"] >= 1200, what="run 2 past step 1200")
    stopped = offpoc(db, "stop", "2")
    row = run_row(db, 2)
    assert row["status"] == "stopped" and "run 2: stopped" in stopped.stdout
    assert row["checkpoint_step"] == row["steps"] and (tmp_path / "offpoc.db-runs" / "2" / "checkpoint.pt").exists()


def test_a_cluster_offpoc_started_ends_with_its_killed_scheduler_at_the_next_command(
    tmp_path: Path, ray_env: Path
) -> None:
    from offpoc_tui.runtime.ray_leftovers import ray_processes as session_ray_processes

    db = tmp_path / "offpoc.db"
    offpoc(db, "run", "td3", "Hopper-v4", "--steps", "200000", *SHORT, "--backend", "ray")
    wait_for(lambda: run_row(db, 1)["status"] == "running" and run_row(db, 1)["steps"] >= 600, what="running")
    scheduler = run_row(db, 1)["launcher_pid"]
    session = os.getsid(scheduler)
    assert session_ray_processes(session)  # the cluster it started lives in its session
    os.kill(scheduler, signal.SIGKILL)
    offpoc(db, "ps")  # the store's next command
    wait_for(lambda: not session_ray_processes(session), timeout=90, what="the cluster's processes to end")
    wait_for(lambda: run_row(db, 1)["status"] == "lost", timeout=90, what="lost")
    assert not (tmp_path / "offpoc.db-runs" / "ray-cluster.json").exists()


def test_a_lost_node_moves_the_run_or_loses_it_and_resume_finishes_it(tmp_path: Path, ray_env: Path) -> None:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})  # the head holds the store's writer
    try:
        nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
        db = tmp_path / "offpoc.db"
        offpoc(db, "run", "td3", "Hopper-v4", "--steps", "3000", *SHORT, "--backend", "ray",
               "--address", cluster.address)  # fmt: skip

        def node_of(run_id: int) -> object:
            where = str(run_row(db, run_id)["host"])
            return next(n for n in nodes if where.endswith("/" + n.node_id[:8]))

        wait_for(lambda: run_row(db, 1)["status"] == "running" and run_row(db, 1)["steps"] >= 1200, what="running")
        first = node_of(1)
        cluster.remove_node(first, allow_graceful=False)
        nodes.remove(first)
        wait_for(lambda: run_row(db, 1)["status"] == "finished", what="run 1 finished on the other node")
        assert str(run_row(db, 1)["host"]).endswith(nodes[0].node_id[:8])  # moved
        assert [int(r["step"]) for r in export(db, "evaluations", "--run", "1")] == list(range(0, 3001, 500))

        # Without retries, the node's loss ends the run lost; resumed, it finishes on a new node.
        os.environ["OFFPOC_RAY_MAX_RETRIES"] = "0"
        try:
            offpoc(db, "run", "td3", "Hopper-v4", "--seed", "1", "--steps", "3000", *SHORT, "--backend", "ray")
        finally:
            del os.environ["OFFPOC_RAY_MAX_RETRIES"]
        wait_for(lambda: run_row(db, 2)["status"] == "running" and run_row(db, 2)["steps"] >= 1200, what="running")
        cluster.remove_node(node_of(2), allow_graceful=False)
        wait_for(lambda: runs(db)[2]["status"] == "lost", timeout=60, what="run 2 lost")
        assert "retries" in run_row(db, 2)["error"]
        cluster.add_node(num_cpus=1)
        offpoc(db, "resume", "2")
        wait_for(lambda: run_row(db, 2)["status"] == "finished", what="run 2 finished after resume")
        assert [int(r["step"]) for r in export(db, "evaluations", "--run", "2")] == list(range(0, 3001, 500))
        wait_for(lambda: not run_row(db, 2)["launcher_pid"] or not _alive(run_row(db, 2)["launcher_pid"]),
                 timeout=90, what="the scheduler to leave")  # fmt: skip
    finally:
        cluster.shutdown()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_a_task_ray_ran_again_never_puts_the_earlier_ones_checkpoint_in_place(tmp_path: Path, ray_env: Path) -> None:
    """The writer actor and two tasks' links, for real: the earlier task (the run taken from it by a retry)
    can neither ship its checkpoint nor rename one on shared storage (``--checkpoint-dir``)."""
    from offpoc_tui.runtime.ray_backend import StoreWriter
    from offpoc_tui.runtime.ray_task import ActorLink
    from store import open_store
    from store.runs import NotOwner, create_runs
    from tests.support.storefill import spec

    db = tmp_path / "s.db"
    store = open_store(db, create=True)
    (run_id,) = create_runs(store, [spec()], backend="ray")
    store.close()
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        writer = ray.remote(StoreWriter).options(num_cpus=0).remote(str(db))
        earlier = ray.get(writer.start.remote(run_id, 100, "ray:a"))
        later = ray.get(writer.start.remote(run_id, 101, "ray:b"))  # Ray ran the task again
        shared = tmp_path / "shared"
        shared.mkdir()
        head = tmp_path / "s.db-runs" / str(run_id) / "checkpoint.pt"
        for ships, kept in ((True, head), (False, shared / "checkpoint.pt")):
            mine, theirs = ActorLink(writer, later["owner"], ships), ActorLink(writer, earlier["owner"], ships)
            (shared / "new.tmp").write_bytes(b"the run's")  # each task's file: on its node, or on shared storage
            mine.place_checkpoint(run_id, 200, shared / "new.tmp", shared / ("mine.pt" if ships else "checkpoint.pt"))
            (shared / "old.tmp").write_bytes(b"stale")
            with pytest.raises(NotOwner):
                theirs.place_checkpoint(
                    run_id, 300, shared / "old.tmp", shared / ("theirs.pt" if ships else "checkpoint.pt")
                )
            assert kept.read_bytes() == b"the run's" and run_row(db, run_id)["checkpoint_step"] == 200
    finally:
        ray.shutdown()


def test_a_lane_group_runs_as_one_ray_task_equal_to_the_group_run_locally(tmp_path: Path, ray_env: Path) -> None:
    """``run --backend ray --lanes 4`` on a two-node cluster: the four runs train in one task (one process on one
    node, each run claimed with its own owner), and record what the same group records in a local worker."""
    from ray.cluster_utils import Cluster

    args = ["td3", "Pendulum-v1", *SMALL, "--eval-freq", "500", "--correction", "acoffpoc", "--compare",
            "--seeds", "0-1", "--steps", "1500", "--lanes", "4"]  # fmt: skip
    local = tmp_path / "local.db"
    offpoc(local, "run", *args, "--follow")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})  # the head holds the store's writer
    try:
        nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
        db = tmp_path / "offpoc.db"
        submitted = offpoc(db, "run", *args, "--backend", "ray", "--address", cluster.address)
        assert "queued 4 runs" in submitted.stdout
        wait_for(lambda: all(run_row(db, i)["status"] == "finished" for i in (1, 2, 3, 4)), what="the group's end")
        rows = [run_row(db, i) for i in (1, 2, 3, 4)]
        assert len({(r["host"], r["pid"]) for r in rows}) == 1, rows  # one task, one process
        assert any(str(rows[0]["host"]).endswith("/" + n.node_id[:8]) for n in nodes)
        kept = {"evaluations": ("run_id", "step", "return_mean", "return_std"),
                "train": ("run_id", "step", "updates", "critic_loss", "actor_loss", "q_mean")}  # fmt: skip
        for table, columns in kept.items():  # everything but the clocks
            ours, theirs = ([tuple(r[c] for c in columns) for r in export(d, table)] for d in (db, local))
            assert ours == theirs and len(ours) >= 4, table  # every run, at least one row each
        wait_for(lambda: not rows[0]["launcher_pid"] or not _alive(rows[0]["launcher_pid"]),
                 timeout=90, what="the scheduler to leave")  # fmt: skip
    finally:
        cluster.shutdown()
