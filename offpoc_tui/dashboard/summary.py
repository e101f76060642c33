"""``offpoc dashboard --once``: the runs table and a compare table per algo and env, as rich text."""

from __future__ import annotations

from typing import Any

import sqlite_utils
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from offpoc_tui.dashboard.across import across_tasks
from offpoc_tui.dashboard.caches import EvalCache
from offpoc_tui.dashboard.compare_pane import HEADERS, note, row_cells, shared_text
from offpoc_tui.dashboard.data.compare import compare_keys, compare_members, compare_rows
from offpoc_tui.dashboard.groups import shared_settings, task_name, versions_shown
from offpoc_tui.views import number, runs_table
from store.reader import learning_starts, list_runs
from store.seeds import repeats_note
from store.stats import FinalWindow
from store.study_text import task_lines
from store.variants import label_variants


def compare_table(algo: str, env: str, rows: list[Any], threshold: float | None, budget: str = "") -> Table:
    env = task_name(env, rows)
    title = f"{algo} on {env}" + (f", compared {budget}" if budget else "")
    title += f" · threshold {number(threshold, ',.1f')}" if threshold is not None else ""
    shared = shared_settings([row.key for row in rows])
    title += shared_text(shared)
    table = Table(title=title, title_justify="left", title_style="bold", header_style="bold", box=None)
    for header in HEADERS:
        table.add_column(header, justify="left" if header in ("method", "config vs baseline") else "right")
    versions = versions_shown(rows)
    for row in rows:
        table.add_row(*row_cells(row, versions, shared))
    return table


def summary(
    db: sqlite_utils.Database,
    window: FinalWindow | None = None,
    until: int | None = None,
    sources: list[str] | None = None,
    tags: list[str] | None = None,
) -> RenderableType:
    """The runs table and each (algo, env)'s compare table; ``window``: the final statistic's (default the paper's);
    ``until``: the budget every task is compared at (default: each task's, :mod:`store.budget`)."""
    window = window or FinalWindow()
    runs = label_variants(db, list_runs(db, sources=sources, tags=tags))
    if not runs and (sources or tags):  # the store has runs, perhaps: none passes the filters
        asked = [f"--source {s}" for s in sources or ()] + [f"--tag {t}" for t in tags or ()]
        return Text(f"no runs match {' '.join(asked)} (offpoc ps --all lists the store's)")
    if not runs:
        return Text("no runs in this store yet: start some with `offpoc run`")
    parts: list[RenderableType] = [Text(f"{len(runs)} runs", style="bold"), runs_table(runs), Text("")]
    evals = EvalCache()
    keys = compare_keys(runs)
    for i, key in enumerate(keys):
        members = compare_members(runs, key)
        rows, threshold, budget, repeats = compare_rows(db, members, evals.update(db, [r["id"] for r in members]),
                                                        None, window, until)  # fmt: skip
        said = budget.describe() + (f"; {repeated}" if (repeated := repeats_note(repeats)) else "")
        parts += [compare_table(*key, rows, threshold, said), Text("")]
        if decided := task_lines(db, *key):  # sequential studies of this task: their decisions, as they stand
            parts += [Text("\n".join(decided)), Text("")]
        if i + 1 == len(keys) or keys[i + 1][0] != key[0]:  # the algorithm's last environment: the line across
            algo_runs = [r for r in runs if r["algo"] == key[0]]
            curves = evals.update(db, [r["id"] for r in algo_runs])
            returns = {i: c.arrays()[::2] for i, c in curves.items()}
            line = across_tasks(algo_runs, returns, window, until, learning_starts(db, list(curves)))
            parts += [Text(f"{key[0]} {line}"), Text("")] if line else []
    parts.append(Text(f"{note(window)}; threshold: the first baseline's final return", style="dim"))
    return Group(*parts)
