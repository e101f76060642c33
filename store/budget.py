"""The budget of a comparison: the one step at which the methods of a task are compared.

A method at 3,000 steps set beside its baseline at 20,000 says nothing about the method. So every
view and table that sets methods side by side (Compare, ``dashboard --once``, the line across
tasks, ``export --table summary|aggregate|improvement``) compares a task's methods at one budget.
A task is an algorithm on an environment family (a Hopper-v4 run meets the published Hopper-v2
curves). By default its budget is where the compared seeds are:

- the runs trained here that finished set it: the smallest of their last evaluated steps;
- while none has finished, the running ones: each method's furthest seed, and the budget is the
  smallest of those, so every method has a seed there and a seed that has just started (or was
  queued behind the others) does not drag the whole task back to step 0;
- a run that failed or was stopped early never holds the comparison back: with no run trained here
  finished or running, the imported runs set it alike (the smallest of their last steps), and only
  where there are none either, the runs that ended early.

Imported curves are cut at it. ``--until STEP`` asks for a budget instead.

A run counts at a budget when it has reached it, and then with its evaluations up to it; a run
that has not (still training, or ended before it) is left out of the statistics, and counted
so a view can say so. Tables that pool tasks (the aggregate and improvement tables, Compare's
line across tasks) take each source's budget apart (:func:`source_budgets`): the published curves
are not cut because runs trained here were added to the store.

    reach = reach_of(db, [r["id"] for r in runs])
    budgets = task_budgets(runs, reach)                  # (algo, family) -> Budget
    budget = budgets[task_of(run)]; budget.counts(reach.get(run["id"]))
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlite_utils

from store.tasks import Task, source_of, task_of
from store.variants import method_of


@dataclass(frozen=True)
class Budget:
    """One task's budget and how many of its runs reach it."""

    step: int | None
    """The step every compared run is cut at; None where no run has an evaluation yet."""
    given: bool
    """Asked for (``--until``) rather than derived from the runs."""
    reached: int
    """Runs that reached it (their evaluations up to it count)."""
    short: int
    """Runs with evaluations that have not reached it: still training, or ended before it."""
    queued: int
    """Runs without an evaluation yet that may still make one (queued, or running before their first)."""
    ended: int = 0
    """Runs that ended without an evaluation (failed, stopped or lost before their first): never compared."""

    def counts(self, reach: int | None) -> bool:
        """Whether a run that reached step ``reach`` (None: no evaluation yet) counts at this budget."""
        return reach is not None and self.step is not None and reach >= self.step

    def describe(self) -> str:
        """``at 20,000 steps, reached by all 4 runs`` or ``at 20,000 steps, reached by 4 of 8 runs (2 short of
        it, 1 not evaluated yet, 1 ended with no evaluation)``; ``no evaluations yet``."""
        unevaluated = [f"{self.queued} not evaluated yet"] if self.queued else []
        unevaluated += [f"{self.ended} ended with no evaluation"] if self.ended else []
        if self.step is None:
            return "no evaluations yet" + (f" ({', '.join(unevaluated)})" if unevaluated else "")
        total = self.reached + self.short + self.queued + self.ended
        text = f"at {self.step:,} steps" + (" (asked for)" if self.given else "")
        if self.reached == total:
            return text + f", reached by {'all ' if total > 1 else ''}{total} run{'s' if total != 1 else ''}"
        missing = [f"{self.short} short of it"] if self.short else []
        return text + f", reached by {self.reached} of {total} runs ({', '.join(missing + unevaluated)})"


def reach_of(db: sqlite_utils.Database, run_ids: Iterable[int]) -> dict[int, int]:
    """Each run's latest evaluated step (runs without an evaluation absent)."""
    ids = list(run_ids)
    reach: dict[int, int] = {}
    for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        query = f"SELECT run_id, MAX(step) FROM evaluations WHERE run_id IN ({marks}) GROUP BY run_id"
        reach.update((int(run_id), int(step)) for run_id, step in db.execute(query, chunk))
    return reach


def reach_of_curves(curves: dict[int, tuple[np.ndarray, np.ndarray]]) -> dict[int, int]:
    """:func:`reach_of` from curves already read (steps, values)."""
    return {run_id: int(steps[-1]) for run_id, (steps, _) in curves.items() if len(steps)}


def budget(runs: Sequence[Mapping[str, Any]], reach: dict[int, int], until: int | None = None) -> Budget:
    """The budget of one task's ``runs`` (see the module's docstring); ``until`` asks for one."""
    started = [r for r in runs if r["id"] in reach]
    if until is not None:
        step: int | None = until
    else:
        own = [r for r in started if source_of(r) == "offpoc"]
        finished = [r for r in own if r["status"] == "finished"]
        running = [r for r in own if r["status"] == "running"]
        if finished or not running:  # nothing finished or running here: the imported curves, else what there is
            imported = [r for r in started if source_of(r) != "offpoc"]
            step = min((reach[r["id"]] for r in finished or imported or own), default=None)
        else:  # each method's furthest seed; the budget is the least of those
            furthest: dict[Any, int] = {}
            for r in running:
                key = (*method_of(r), r.get("variant", ""))
                furthest[key] = max(furthest.get(key, 0), reach[r["id"]])
            step = min(furthest.values())
    reached = sum(1 for r in started if step is not None and reach[r["id"]] >= step)
    ended = sum(1 for r in runs if r["id"] not in reach and r["status"] not in ("queued", "running"))
    return Budget(step, until is not None, reached, len(started) - reached, len(runs) - len(started) - ended, ended)


def source_budgets(
    runs: Sequence[Mapping[str, Any]], reach: dict[int, int], until: int | None = None
) -> dict[tuple[str, str, str], Budget]:
    """Each (algorithm, family, source)'s :func:`budget` over that source's runs alone: for tables that pool
    tasks, where published rows must not change because runs trained here were added."""
    found: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for run in runs:
        found.setdefault((*task_of(run), source_of(run)), []).append(run)
    return {key: budget(members, reach, until) for key, members in found.items()}


def mixed_note(budgets: Mapping[Any, Budget]) -> str:
    """``budgets differ between tasks: td3 Hopper offpoc 3,000, td3 Walker2d offpoc 100,000 steps``, for a table
    that pools one source's tasks at different budgets; empty where each source's tasks meet at one step."""
    by_source: dict[tuple[str, str], set[int]] = {}
    for key, b in budgets.items():
        if b.step is not None:
            by_source.setdefault((key[0], key[-1]), set()).add(b.step)
    if all(len(steps) < 2 for steps in by_source.values()):
        return ""
    listed = ", ".join(
        f"{' '.join(key)} {b.step:,}" for key, b in sorted(budgets.items()) if b.step is not None
        and len(by_source[(key[0], key[-1])]) > 1
    )  # fmt: skip
    return f"budgets differ between tasks pooled: {listed} steps"


def steps_range(steps: Iterable[int]) -> str:
    """``100,000`` or ``3,000–100,000``: the least and the greatest of ``steps``; ``–`` for none."""
    found = list(steps)
    if not found:
        return "–"
    low, high = min(found), max(found)
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def sources_steps(budgets: Mapping[tuple[str, str, str], Budget]) -> str:
    """``offpoc at 100,000 steps, published at 1,000,000``: where each source's tasks are compared, for a line that
    pools tasks (each source at its own budgets: :func:`source_budgets`), so rows of two sources side by side say
    that they are not at one step; ``3,000–100,000`` where a source's tasks differ."""
    steps: dict[str, list[int]] = {}
    for (_, _, source), b in budgets.items():
        if b.step is not None:
            steps.setdefault(source, []).append(b.step)
    parts = [
        f"{source} at {steps_range(found)}"
        for source, found in sorted(steps.items(), key=lambda item: item[0] != "offpoc")
    ]
    if parts:
        parts[0] += " steps"
    return ", ".join(parts)


def task_budgets(
    runs: Sequence[Mapping[str, Any]], reach: dict[int, int], until: int | None = None
) -> dict[Task, Budget]:
    """Every task's :func:`budget`."""
    tasks: dict[Task, list[Mapping[str, Any]]] = {}
    for run in runs:
        tasks.setdefault(task_of(run), []).append(run)
    return {task: budget(members, reach, until) for task, members in tasks.items()}


def cut(steps: np.ndarray, values: np.ndarray, step: int | None) -> tuple[np.ndarray, np.ndarray]:
    """A curve up to ``step`` (all of it for None)."""
    if step is None:
        return steps, values
    keep = np.asarray(steps) <= step
    return np.asarray(steps)[keep], np.asarray(values)[keep]


def budgets_note(budgets: Mapping[Any, Budget]) -> str:
    """One line for a table's note: where each task's methods meet (``td3 Hopper at 20,000 steps, reached by
    all 6 runs; ...``); keyed by task, or by task and source (``td3 Hopper published at 1,000,000 ...``)."""
    return "; ".join(f"{' '.join(key)} {b.describe()}" for key, b in sorted(budgets.items()))
