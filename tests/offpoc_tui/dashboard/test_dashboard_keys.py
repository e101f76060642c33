"""Every view × every key on every kind of store: the dashboard never dies (Pilot, real stores).

A key a view does not use must do nothing harmful there; a key on a store with nothing to show must
say so, not raise. The states: an empty store; runs queued only; live runs mid-evaluation (a writer
adding evaluations while keys are pressed); one failed run; the paper's 1,440 published curves with
runs trained here beside them.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.binding import Binding
from textual.pilot import Pilot

from offpoc_tui.dashboard.app import Dashboard
from offpoc_tui.dashboard.help_screen import HelpScreen
from store import open_store
from store.runs import create_runs, finish
from store.writer import RunWriter
from tests.conftest import needs_reference
from tests.support.storefill import fill_learning, spec

VIEWS = ("1", "2", "3", "4", "5")
KEYS = ("b", "g", "m", "w", "h", "v", "p", "e", "t", "left_square_bracket", "right_square_bracket", "slash", "s", "S",
        "space", "enter", "x", "r", "question_mark", "down", "up")  # fmt: skip
"""Every key the help lists, with the cursor keys; / and ? open a box or a screen that escape closes."""
CLOSES = {"slash": "escape", "question_mark": "escape", "t": "escape"}


async def answered(app: Dashboard, pilot: Pilot, timeout: float = 60.0) -> None:
    """Until the poller has answered what is on screen (the runs view asks it nothing)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while app.request.view != "runs" and app.answered != app.request and app.is_running:
        assert loop.time() < deadline, f"no answer to {app.request}"
        await pilot.pause(0.02)


async def press(app: Dashboard, pilot: Pilot, key: str, trail: list[str]) -> None:
    trail.append(key)
    await pilot.press(key)
    if key in CLOSES:
        await pilot.press(CLOSES[key])
    assert not isinstance(app.screen, HelpScreen), f"{key} left the help open"
    await answered(app, pilot)
    assert app.is_running, f"the dashboard died after {' '.join(trail[-12:])}"


async def press_everything(app: Dashboard, pilot: Pilot, presses: int = 30) -> None:
    """Every key in every view, with every band grouped and not; then a seeded random walk over views and
    keys, so toggles meet in combinations."""
    trail: list[str] = []
    for view in VIEWS:
        await press(app, pilot, view, trail)
        for key in KEYS:
            await press(app, pilot, key, trail)
            if app.request.view != {"1": "runs", "2": "curves", "3": "quantities", "4": "compare", "5": "detail"}[view]:
                await press(app, pilot, view, trail)  # enter opened the detail, x or r a notice: back
        for _ in range(2):  # grouped and not, each band
            await press(app, pilot, "g", trail)
            for _ in range(4):
                await press(app, pilot, "b", trail)
    rng = random.Random(len(app.runs))
    for _ in range(presses):
        await press(app, pilot, rng.choice(VIEWS + KEYS), trail)


def drive(path: Path, size: tuple[int, int] = (80, 24)) -> None:
    async def main() -> None:
        app = Dashboard(path, poll_s=0.05)
        async with app.run_test(size=size) as pilot:
            for _ in range(400):
                if app.polls:
                    break
                await pilot.pause(0.05)
            await press_everything(app, pilot)
        if app._exception is not None:  # raised inside a handler: the app would have died
            raise app._exception

    asyncio.run(main())


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "offpoc.db"


def test_an_empty_store(store: Path) -> None:
    open_store(store, create=True).close()
    drive(store)


def test_queued_runs_only(store: Path) -> None:
    db = open_store(store, create=True)
    create_runs(db, [spec(correction=c, seed=s) for c in ("none", "acoffpoc") for s in (0, 1)])
    db.close()
    drive(store)


def test_live_runs_mid_evaluation_and_a_failed_one(store: Path) -> None:
    db = open_store(store, create=True)
    ids = create_runs(db, [spec(correction=c, seed=s) for c in ("none", "acoffpoc") for s in (0, 1, 2)])
    db.execute("UPDATE runs SET status = 'running', pid = ?, heartbeat = strftime('%s','now')", [0])
    db.conn.commit()
    db.close()
    fill_learning(store, ids[0], 5_000, gain=1.0)
    fill_learning(store, ids[3], 2_000, gain=1.1)
    db = open_store(store)
    finish(db, ids[5], "failed", error="RuntimeError: boom")
    db.close()
    stop = threading.Event()

    def writer() -> None:  # evaluations keep arriving while the keys are pressed
        live = open_store(store)
        out = RunWriter(live, ids[1], flush_interval=0.0)
        step = 0
        while not stop.is_set() and step < 200_000:
            out.add_eval(step, step / 100, float(step), 1.0, [1.0], [10])
            out.flush(step, step)
            step += 1000
            stop.wait(0.05)
        live.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        drive(store)
    finally:
        stop.set()
        thread.join()


@needs_reference
def test_the_published_curves_beside_own_runs(reference_store: Path, tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    shutil.copy(reference_store, path)
    db = open_store(path)
    ids = create_runs(db, [spec(correction=c, seed=s) for c in ("none", "acoffpoc") for s in (0, 1)])
    db.close()
    for run_id in ids:
        fill_learning(path, run_id, 6_000, gain=1.0)
    drive(path, size=(160, 45))


def sizes() -> Iterator[tuple[int, int]]:
    yield from ((80, 24), (160, 45))


def test_every_view_has_a_pane_a_key_and_its_data() -> None:
    """A view is a data module in ``model.VIEWS`` and a pane in ``panes.PANES``: the two tables name the same
    views, and each pane's number key switches to it."""
    from offpoc_tui.dashboard.keys import KEYS
    from offpoc_tui.dashboard.model import VIEWS
    from offpoc_tui.dashboard.panes import PANES

    assert [p.view for p in PANES] == list(VIEWS)
    keyed = {b.key: b.action for b in KEYS if isinstance(b, Binding)}
    assert [keyed[str(n)] for n in range(1, len(PANES) + 2)] == ["view('runs')", *(f"view('{p.view}')" for p in PANES)]
