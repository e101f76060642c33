"""Driving the dashboard through Textual's Pilot: wait on a condition, run a scenario, read what it shows."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static

from offpoc_tui.dashboard.app import Dashboard
from offpoc_tui.dashboard.figures import LinesFigure
from offpoc_tui.dashboard.plots import FigurePlot

SIZE = (160, 48)


async def until(pilot: Pilot, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the dashboard never got there"
        await pilot.pause(0.05)


def drive(
    path: Path,
    scenario: Callable[[Dashboard, Pilot], Awaitable[None]],
    until_step: int | None = None,
    read_only: bool = False,
) -> None:
    async def main() -> None:
        app = Dashboard(path, poll_s=0.1, until=until_step, read_only=read_only)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.polls > 0)
            await scenario(app, pilot)

    asyncio.run(main())


def plot(app: Dashboard, plot_id: str) -> FigurePlot:
    return app.query_one(f"#{plot_id}", FigurePlot)


def shown_text(app: Dashboard, selector: str) -> str:
    """What a Static shows, as plain text."""
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(app.query_one(selector, Static).content)
    return console.export_text()


def labels(app: Dashboard, plot_id: str) -> list[str]:
    figure = plot(app, plot_id).figure
    assert isinstance(figure, LinesFigure)
    return [line.label for line in figure.lines if line.label]
