"""Compare's line across tasks: each method's IQM of normalised final returns over every environment
of the algorithm on screen, and its probability of beating the baseline, with bootstrap intervals.

Computed in the poller thread with the caches' curves (off the UI thread), with fewer resamples than
``offpoc export --table aggregate`` so it can follow each poll; ``export`` gives the full tables.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from offpoc_tui.dashboard.groups import BASELINE, MIN_SEEDS, group_key
from store.aggregate import improvement_interval, interval, iqm
from store.budget import cut, mixed_note, reach_of_curves, source_budgets, sources_steps
from store.normalise import NormalisationError, normaliser
from store.runs import RunRow
from store.seeds import one_per_seed
from store.stats import FinalWindow, final_returns
from store.summary import method_rank
from store.tasks import env_family, source_of, task_of
from store.variants import baseline_variant

RESAMPLES = 500


def across_tasks(
    runs: list[RunRow],
    curves: dict[int, tuple[np.ndarray, np.ndarray]],
    window: FinalWindow,
    until: int | None = None,
    starts: Mapping[int, int] | None = None,
) -> str:
    """One line: ``across 3 tasks (Ant, Hopper, Walker2d), normalised, IQM [95% CI]: none 1.02 [...] · ...``;
    empty with fewer than two tasks, a reason where a task has no normalising scores. Each task's runs
    count at its budget (:mod:`store.budget`), as in its Compare table; ``starts``: each run's learning start
    (:func:`store.reader.learning_starts`; absent: step 0), the floor of its window."""
    methods: dict[tuple[Any, ...], dict[str, list[float]]] = {}
    if len({run["env"] for run in runs}) < 2:
        return ""
    reach = reach_of_curves(curves)
    runs = one_per_seed(runs, reach)[0]
    short = 0
    budgets = source_budgets(runs, reach, until)
    for run in runs:
        budget = budgets[(*task_of(run), source_of(run))]
        if not budget.counts(reach.get(run["id"])):
            continue
        steps, returns = cut(*curves[run["id"]], budget.step)
        try:
            offset, scale = normaliser(run["env"])
        except NormalisationError:
            return f"across tasks: no random and reference scores for {run['env']}, so no aggregate"
        key = group_key(run)
        method = (key[2], key[3], key[4], key[5], key[6])  # correction, divergence, source, sampler, variant
        finals = final_returns([(steps, returns)], window, [(starts or {}).get(run["id"], 0)])
        if not len(finals):  # too short for the window (no evaluation after learning starts): no final score
            short += 1
            continue
        score = (float(finals[0]) - offset) / scale
        methods.setdefault(method, {}).setdefault(run["env"], []).append(score)
    tasks = sorted({env for tasks in methods.values() for env in tasks})
    if len(tasks) < 2:
        return ""
    parts = []
    for method, scores in sorted(methods.items(), key=lambda item: (item[0][2], method_rank(item[0][0]))):
        arrays = {task: np.asarray(v) for task, v in scores.items()}
        estimate, low, high = interval(iqm, arrays, RESAMPLES)
        name = method[0] if method[1] is None else f"{method[0]}/{method[1]}"
        name += "" if method[2] == "offpoc" else f" {method[2]}"
        name += f" {{{method[4]}}}" if method[4] else ""
        if len(scores) < len(tasks):  # say on which tasks: the others' IQM pools more
            name += f" (on {', '.join(sorted(scores))} only)"
        if min(len(v) for v in arrays.values()) < MIN_SEEDS:  # a bootstrap of one seed is no interval
            text = f"{name} {estimate:.2f} [– under {MIN_SEEDS} seeds on a task]"
        else:
            text = f"{name} {estimate:.2f} [{low:.2f}, {high:.2f}]"
        alone = [k for k in methods if k[0] == BASELINE and k[2] == method[2]]
        base = methods.get(
            (BASELINE, None, method[2], method[3], baseline_variant(method[4])),
            methods.get((BASELINE, None, method[2], method[3], ""), methods[alone[0]] if len(alone) == 1 else None),
        )
        if method[0] != BASELINE and base is not None and set(base) & set(scores):
            shared = set(base) & set(scores)
            if min(min(len(base[t]), len(scores[t])) for t in shared) < MIN_SEEDS:  # as the improvement table
                text += f", P(>base) – (under {MIN_SEEDS} seeds a side on a task)"
            else:
                p, p_low, p_high = improvement_interval(arrays, {t: np.asarray(v) for t, v in base.items()}, RESAMPLES)
                text += f", P(>base) {p:.2f} [{p_low:.2f}, {p_high:.2f}]"
        parts.append(text)
    per_family = Counter(env_family(t) for t in tasks)  # Hopper-v2 (published) and Hopper-v4 are two tasks
    families = ", ".join(f"{f} ×{n}" if n > 1 else f for f, n in sorted(per_family.items()))
    at = sources_steps(budgets)  # each source at its own budgets: published curves at 1M beside runs at 100k
    heading = f"across {len(tasks)} tasks ({families}), normalised final returns at each task's budget ({at}), IQM"
    heading += " [95% CI]: "
    notes = [mixed_note(budgets)]
    if short:
        notes.append(f"{short} seed{'s' if short > 1 else ''} too short for the window left out")
    said = "; ".join(n for n in notes if n)
    return heading + " · ".join(parts) + (f" ({said})" if said else "")
