"""Shared fixtures: a store filled through the real writer, without training."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from store import open_store
from store.curve_imports import import_curves, reference_curves
from store.runs import create_runs
from store.tags import add_tags
from tests.support.storefill import FIXED_TIME, fill, fill_learning, fill_study, spec

REFERENCE_CURVES = (
    Path(os.environ.get("OFFPOC_SHARED", Path(__file__).resolve().parents[2] / "shared")) / "reference-curves"
)
"""The paper's published curves beside the project (``../shared``; ``OFFPOC_SHARED`` points elsewhere)."""
needs_reference = pytest.mark.skipif(
    not (REFERENCE_CURVES / "Learning Curves").is_dir(),
    reason=f"the published curves are not at {REFERENCE_CURVES} (set OFFPOC_SHARED to the folder holding them)",
)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: a run without xdist (-p no:xdist) never calls it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: for the default tier, one worker more than the cores this process may run on. A share of
    it waits rather than computes (a dashboard's poller thread, a child process's start, a Pilot's pauses),
    and the extra worker fills that time: on 2 cores the tier took 516 s with 3 workers against 560 s with 2
    (benchmarks/README.md, "The test suite"). Other tiers (``-m process``: training processes of their own,
    conditions waited on with time limits) get one worker a core."""
    cores = len(os.sched_getaffinity(0))
    return cores + 1 if "not process" in (config.getoption("markexpr") or "") else cores


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a real-process test (``process`` marker), kill what it started and left running: the processes whose
    command line names its own tmp_path (its scheduler and workers, ``--db`` there). A test that fails before its
    own ``stop`` leaves training workers behind, and on 2 cores they slowed the tests after it into their time
    limits. Processes of other tests or of nobody's test are never touched."""
    if request.node.get_closest_marker("process") is None or "tmp_path" not in request.fixturenames:
        yield
        return
    mine = str(request.getfixturevalue("tmp_path")).encode()  # taken here: torn down after this fixture
    yield
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if mine in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), 9)
        except (OSError, ProcessLookupError):
            continue


LONGEST = ("offpoc_tui/dashboard/test_dashboard_keys.py",)
"""Test files whose tests take the longest in the default tier (each a minute or two on 2 cores)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Start the longest tests first. pytest-xdist hands out tests in the collected order, so one left to the
    end runs alone on one core while the other idles: on 2 cores the default tier took 631 s with
    these in the middle of the order."""
    items.sort(key=lambda item: not any(item.nodeid.startswith(f"tests/{path}") for path in LONGEST))


@pytest.fixture(scope="session")
def reference_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding every published curve, imported once per session: read it, never write it."""
    if not (REFERENCE_CURVES / "Learning Curves").is_dir():
        pytest.skip(f"the published curves are not at {REFERENCE_CURVES}")
    path = tmp_path_factory.mktemp("reference") / "reference.db"
    db = open_store(path, create=True)
    report = import_curves(db, reference_curves(REFERENCE_CURVES))
    db.close()
    assert report.problems == []
    return path


@pytest.fixture
def filled_store(tmp_path: Path) -> Path:
    """Two finished TD3 runs (baseline and AC-Off-POC) and one SAC run with records."""
    path = tmp_path / "offpoc.db"
    db = open_store(path, create=True)
    ids = create_runs(db, [spec(correction="none"), spec(), spec(algo="sac", seed=1)])
    db.close()
    for run_id in ids:
        fill(path, run_id, per_transition=run_id == 3, offset=run_id)
    db = open_store(path)
    db.execute("UPDATE runs SET status = 'finished'")
    db.conn.commit()
    db.close()
    return path


@pytest.fixture
def dashboard_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """TD3 on Hopper-v4, baseline and AC-Off-POC, 3 seeds each, 20,000 steps; fixed clock and cwd.

    The path returned is relative (``offpoc.db`` in the test's working directory), so
    nothing machine-specific shows on screen.
    """
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    path = Path("offpoc.db")
    db = open_store(path, create=True)
    specs = [spec(correction=c, seed=s) for c in ("none", "acoffpoc") for s in range(3)]
    for s in specs:
        s.config["total_steps"] = 20_000
    ids = create_runs(db, [dataclasses.replace(s, total_steps=20_000) for s in specs])
    db.close()
    for run_id in ids:
        fill_learning(path, run_id, 20_000, gain=1.0 if run_id <= 3 else 1.15)
    db = open_store(path)
    db.execute(
        "UPDATE runs SET status = 'finished', created = ?, started = ?, finished = ?, heartbeat = ?, sps = 120.0",
        [FIXED_TIME, FIXED_TIME + 1, FIXED_TIME + 170, FIXED_TIME + 170],  # the rate a flush measures
    )
    db.conn.commit()
    db.close()
    yield path
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def swept_store(dashboard_store: Path) -> Path:
    """The dashboard store and a batch-size sweep tagged ``sweep``: baseline and AC-Off-POC at batch sizes
    64 and 128, 2 seeds each (ids 7 to 14), learning faster the larger the batch."""
    db = open_store(dashboard_store)
    swept = [
        dataclasses.replace(base, total_steps=20_000, config={**base.config, "total_steps": 20_000, "batch_size": b})
        for b in (64, 128) for base in (spec(correction=c, seed=s) for c in ("none", "acoffpoc") for s in (0, 1))
    ]  # fmt: skip
    ids = create_runs(db, swept)
    add_tags(db, ids, ["sweep"])
    db.conn.commit()
    db.close()
    for run_id, run in zip(ids, swept, strict=True):
        fill_learning(dashboard_store, run_id, 20_000, gain=0.8 if run.config["batch_size"] == 64 else 1.3)
    db = open_store(dashboard_store)
    db.execute(
        "UPDATE runs SET status = 'finished', created = ?, started = ?, finished = ?, heartbeat = ?, sps = 120.0",
        [FIXED_TIME, FIXED_TIME + 1, FIXED_TIME + 170, FIXED_TIME + 170],
    )
    db.conn.commit()
    db.close()
    return dashboard_store


@pytest.fixture(params=[2, 10], ids=["n=2", "n=10"])
def study_store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The issue's HalfCheetah study with 2 or 10 seeds a method, evaluated every 5,000 steps; fixed cwd and clock."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    path = Path("offpoc.db")
    fill_study(path, request.param)
    yield path
    monkeypatch.undo()
    time.tzset()
