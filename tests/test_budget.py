"""Comparisons only at matched budgets: one step per task, seeds short of it left out and said so."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from offpoc_tui.dashboard.compare_pane import row_cells
from offpoc_tui.dashboard.groups import compare, group_runs
from store.budget import budget, task_budgets


def run(
    run_id: int, correction: str, status: str = "running", env: str = "Hopper-v4", origin: str | None = None
) -> dict[str, Any]:
    return {"id": run_id, "algo": "td3", "env": env, "correction": correction, "seed": run_id, "divergence": None,
            "origin": origin, "sampler": "uniform", "status": status}  # fmt: skip


def curve(last: int, level: float, every: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    steps = np.arange(0, last + 1, every)
    return steps, level * steps / 20_000  # rising: a run further on has higher last evaluations


def test_the_budget_is_the_largest_step_every_live_run_trained_here_reached() -> None:
    runs = [run(1, "none"), run(2, "none"), run(3, "acoffpoc"), run(4, "acoffpoc", "queued"),
            run(5, "none", "failed"), run(6, "none", "finished", env="Hopper-v2", origin="reference:x")]  # fmt: skip
    reach = {1: 20_000, 2: 20_000, 3: 3_000, 5: 1_000, 6: 1_000_000}
    b = budget(runs, reach)
    assert (b.step, b.reached, b.short, b.queued) == (3_000, 4, 1, 1)  # the failed run at 1,000 sets nothing
    assert b.describe() == "at 3,000 steps, reached by 4 of 6 runs (1 short of it, 1 queued)"
    assert budget(runs[:3], reach).describe() == "at 3,000 steps, reached by all 3 runs"
    asked = budget(runs, reach, until=20_000)
    assert (asked.step, asked.reached, asked.short) == (20_000, 3, 2) and "(asked for)" in asked.describe()
    assert budget([runs[5]], reach).step == 1_000_000  # imported curves alone set their own
    assert budget([runs[3]], reach).describe() == "no evaluations yet (1 queued)"
    per_task = task_budgets([*runs, run(7, "none", env="Walker2d-v4")], {**reach, 7: 50_000})
    assert {task: b.step for task, b in per_task.items()} == {("td3", "Hopper"): 3_000, ("td3", "Walker2d"): 50_000}


def test_compare_sets_a_correction_at_3k_beside_its_baseline_at_3k_not_at_20k() -> None:
    """The issue's screen: AC-Off-POC at 3,000 steps against the baseline at 20,000 read −73%, p 0.012."""
    runs = [run(1, "none"), run(2, "none"), run(3, "acoffpoc"), run(4, "acoffpoc")]
    curves = {1: curve(20_000, 1000.0), 2: curve(20_000, 1100.0), 3: curve(3_000, 1000.0), 4: curve(3_000, 1100.0)}
    rows, _, b = compare(group_runs(runs), curves, {i: {} for i in curves})
    assert b.step == 3_000
    base, corrected = rows
    assert base.final_span == corrected.final_span == (0, 3_000)
    assert corrected.diff_pct is not None and abs(corrected.diff_pct) < 1e-9  # the same curves, cut alike
    # Asked for 20,000 steps: the correction has no seed there, so it is training, with no difference or test.
    rows, _, b = compare(group_runs(runs), curves, {i: {} for i in curves}, until=20_000)
    base, corrected = rows
    assert base.n_seeds == 2 and corrected.training and corrected.short == 2
    assert corrected.diff_pct is None and corrected.p_value is None and corrected.improvement is None
    assert math.isnan(corrected.final_mean)
    cells = [str(c) for c in row_cells(corrected)]
    assert cells[1:3] == ["0 of 2", "training"] and cells[4:7] == ["–", "–", "–"]


def test_a_group_without_an_evaluation_is_queued_and_compares_with_nothing() -> None:
    runs = [run(1, "none"), run(2, "acoffpoc", "queued")]
    rows, _, b = compare(group_runs(runs), {1: curve(5_000, 10.0)}, {1: {}, 2: {}})
    assert b.step == 5_000 and b.queued == 1
    queued = rows[1]
    assert queued.training and queued.queued == 1 and queued.diff_pct is None
    assert [str(c) for c in row_cells(queued)][1:3] == ["0 of 1", "queued"]
