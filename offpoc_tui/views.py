"""Rich renderings of runs for ``offpoc ps`` and ``offpoc show``."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from offpoc_tui.console import literal, visible
from store.runs import RunRow
from store.writer import RATE_WINDOW_S

STATUS_STYLE = {
    "queued": "cyan",
    "running": "green",
    "finished": "bold",
    "failed": "red",
    "stopped": "yellow",
    "lost": "magenta",
    "cancelled": "dim",
}


def number(value: float | None, spec: str = ",.0f") -> str:
    """A number for display; "–" for a missing one."""
    return "–" if value is None else format(value, spec)


def _when(timestamp: float | None) -> str:
    return "–" if timestamp is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


def duration(seconds: float | None) -> str:
    """``1 h 05 min`` or ``4 min 09 s``; "–" for a missing one."""
    if seconds is None:
        return "–"
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours} h {rest // 60:02d} min" if hours else f"{rest // 60} min {rest % 60:02d} s"


PS_PRIORITY = (
    "id", "status", "progress", "return", "env", "correction", "algo", "seed", "tags", "name", "steps", "div",
    "sampler", "SPS", "where",
)  # fmt: skip
"""Which of ``ps``'s columns a narrow terminal keeps, first to last (tags, what users find runs by, before the
names and the counters); shown in the table's own order."""
NAME_WIDTH = 24
"""A longer name is cut with an ellipsis at this width while columns compete for the room; the room the kept
columns leave widens it again (the id names the run whole)."""


def runs_table(runs: list[RunRow], width: int | None = None) -> Table:
    """``offpoc ps``: a ``sampler`` column appears when a listed run replays other than uniformly, a ``tags``
    column when one carries tags.

    Within ``width`` characters, columns are left out by :data:`PS_PRIORITY`, whole, rather than every
    column cut; the caption names the ones left out."""
    samplers = any(run.get("sampler", "uniform") != "uniform" for run in runs)
    tagged = any(run.get("tags") for run in runs)
    columns: list[tuple[str, str, list[str] | list[Text]]] = [
        ("id", "right", [str(run["id"]) for run in runs]),
        ("name", "left", [literal(run["name"]) for run in runs]),
        ("algo", "left", [literal(run["algo"]) for run in runs]),
        ("env", "left", [literal(run["env"]) for run in runs]),
        ("correction", "left", [literal(run["correction"]) for run in runs]),
        ("div", "left", [literal(run["divergence"] or "–") for run in runs]),
        *([("sampler", "left", [literal(run.get("sampler", "uniform")) for run in runs])] if samplers else []),
        ("seed", "right", [str(run["seed"]) for run in runs]),
        ("status", "left", [Text(run["status"], style=STATUS_STYLE.get(run["status"], "")) for run in runs]),
        ("steps", "right", [f"{run['steps']:,}/{run['total_steps']:,}" for run in runs]),
        ("progress", "right", [f"{100 * _progress(run):.0f}%" for run in runs]),
        ("SPS", "right", [number(run["sps"]) for run in runs]),
        ("return", "right", [number(run["last_return"], ",.1f") for run in runs]),
        ("where", "left", [literal(where(run)) for run in runs]),
        *([("tags", "left", [" ".join(run.get("tags", [])) for run in runs])] if tagged else []),
    ]  # fmt: skip

    def size(header: str, values: list[str] | list[Text]) -> int:
        widest = max((len(value) for value in values), default=0)
        return min(max(len(header), widest), NAME_WIDTH) if header == "name" else max(len(header), widest)

    sizes = {header: size(header, values) for header, _, values in columns}
    kept: set[str] = set()
    used = -1  # one space between columns, none before the first
    for header in (header for header in PS_PRIORITY if header in sizes):
        if width is not None and used + 1 + sizes[header] > width and kept:
            break  # a column is never kept while one before it in priority is left out
        kept.add(header)
        used += 1 + sizes[header]
    names = max((len(value) for value in next(v for h, _, v in columns if h == "name")), default=0)
    if "name" in kept and names > sizes["name"]:  # the room left over goes to the names cut at NAME_WIDTH
        spare = names - sizes["name"] if width is None else max(width - used, 0)
        sizes["name"] += min(spare, names - sizes["name"])
    left_out = [header for header, _, _ in columns if header not in kept]
    caption = f"not shown at {width} columns: {', '.join(left_out)}; see --json" if left_out else None
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 1, 0, 0), collapse_padding=True)
    table.caption, table.caption_justify, table.caption_style = caption, "left", "dim"
    shown = [column for column in columns if column[0] in kept]
    for header, justify, _ in shown:
        table.add_column(header, justify=justify, no_wrap=True, overflow="ellipsis", max_width=sizes[header])  # type: ignore[arg-type]
    for i in range(len(runs)):
        table.add_row(*(values[i] for _, _, values in shown))
    return table


def _progress(run: RunRow) -> float:
    return run["steps"] / run["total_steps"] if run["total_steps"] else 0.0


def where(run: RunRow) -> str:
    """Where a run runs: ``pid N`` on this machine, ``ray:HOST/NODE`` on a Ray cluster, ``ray`` before it starts."""
    remote = run.get("backend") == "ray"
    if run["status"] != "running":
        return "ray" if remote and run["status"] == "queued" else "–"
    if remote:
        return str(run.get("host") or "ray")
    return f"pid {run['pid']}" if run["pid"] else "–"


def _worker(run: RunRow) -> str:
    if not run["pid"]:
        return "ray task, not started" if run.get("backend") == "ray" else "–"
    if run.get("backend") == "ray":
        return f"ray task on {str(run['host']).removeprefix('ray:')} (pid {run['pid']} there)"
    return f"pid {run['pid']} on {run['host']}"


FRAME = re.compile(r'^\s*File "(?P<path>.+)", line (?P<line>\d+), in (?P<function>.+)$')
PROJECT = str(Path(__file__).resolve().parent.parent) + os.sep
"""The folder holding offpoc's packages: their frames are shown relative to it."""


def short_paths(line: str) -> str:
    """A traceback line with offpoc's own folder left out of its paths, and a library's path from its
    ``site-packages`` on: the file and line fit a narrow pane."""
    line = line.replace(f'File "{PROJECT}', 'File "')
    return re.sub(r'File "[^"]*/(site-packages|dist-packages)/', r'File "…/\1/', line)


def innermost_frame(lines: list[str]) -> str | None:
    """``failing_envs.py:9, in step``: the last frame of the last exception's traceback (a chained one's
    frames, before "During handling…", are not where the error shown was raised); None when it has none."""
    for line in reversed(lines):
        found = FRAME.match(line)
        if found:
            return f"{found['path']}:{found['line']}, in {found['function']}"
        if line.startswith("Traceback (most recent call last)"):
            return None  # the last exception's own traceback has no frame
    return None


def run_view(run: RunRow, failure_first: bool = False) -> RenderableType:
    """``offpoc show``: status, timings, summary, config, and the error of a failed run: last, just above the
    prompt, or with ``failure_first`` (the dashboard's Detail, read from the top) first."""
    status = Text(run["status"], style=STATUS_STYLE.get(run["status"], ""))
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    counts = run["counts"]
    first, last = run["evaluated_steps"]  # None, None before the first evaluation
    rows: list[tuple[str, Any]] = [
        ("name", run["name"]),  # in rows, not the panel's title, which a narrow pane cuts without a mark
        ("trains", f"{run['algo']} on {run['env']}, {run['correction']}, seed {run['seed']}"),
        ("status", status),
        ("steps", f"{run['steps']:,} of {run['total_steps']:,} ({run['updates']:,} updates)"),
        ("created", _when(run["created"])),
        ("started", _when(run["started"])),
        ("ended", _when(run["finished"])),
        ("training time", duration(run["wall_time"])),
        ("speed", f"{number(run['sps'])} steps/s over {_rate_span(run['wall_time'])} of training"),
        ("last heartbeat", _when(run["heartbeat"])),
        ("worker", _worker(run)),
        ("evaluations", "0" if first is None else f"{counts['evaluations']} (steps {number(first)}–{number(last)})"),
        ("return", f"last {number(run['last_return'], ',.1f')}, best {number(run['best_return'], ',.1f')}"),
        ("mean λ (last block)", number(run["mean_lambda"], ".4f")),
        ("logged values", ", ".join(f"{name} {n:,}" for name, n in run["logged"].items()) or "none"),
        ("histograms", f"{counts['histograms']:,}"),
        ("training episodes", f"{counts['episodes']:,}"),
        ("checkpoint", f"step {run['checkpoint_step']:,}" if run["checkpoint_step"] is not None else "none yet"),
    ]
    if run.get("files"):
        rows.append(("files", run["files"]))
    if run.get("source"):
        merged = str(run.get("origin") or "").startswith("merged:")
        rows.append(("merged from" if merged else "imported from", run["source"]))
    if run.get("tags"):
        rows.append(("tags", " ".join(run["tags"])))
    if run.get("note"):
        rows.append(("note", run["note"]))
    if run.get("lane_group") is not None:
        rows.append(("lane group", f"{run['lane_group']} (trained as a lane, in one process with the group's others)"))
    for key, value in rows:
        facts.add_row(key, literal(value))
    config = Table.grid(padding=(0, 2))
    config.add_column(style="cyan")
    config.add_column()
    for key, value in run["config"].items():
        config.add_row(literal(key), literal(value))
    title = f"run {run['id']}"
    parts: list[RenderableType] = [Panel(facts, title=title, title_align="left"), Panel(config, title="config")]
    if run["error"]:
        # The reason first and whole (a panel's title is cut at its width), then the traceback that led to it.
        error = Text(visible(run["error"]), style="bold")
        if run["traceback"]:
            lines = [short_paths(visible(line)) for line in run["traceback"].splitlines()]
            raised = innermost_frame(lines)  # where it was raised, before the frames of offpoc that led there
            error.append(f"\nraised at {raised}" if raised else "", style="not bold")
            error.append("\n\n" + "\n".join(lines), style="not bold")
        ended = run["status"] if run["status"] in ("failed", "lost", "stopped", "cancelled") else "error"
        failure = Panel(error, title=ended, title_align="left", style="red")
        parts.insert(0 if failure_first else len(parts), failure)
    return Group(*parts)


def _rate_span(training_s: float | None) -> str:
    """What a run's speed was measured over: its last :data:`RATE_WINDOW_S` of training, or all of a shorter one."""
    if training_s is not None and training_s < RATE_WINDOW_S:
        return f"all its {training_s:.0f} s"
    return f"its last {RATE_WINDOW_S:.0f} s"
