"""Comparisons only at matched budgets: one step per task, seeds short of it left out and said so."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from offpoc_tui.dashboard.compare_pane import row_cells
from offpoc_tui.dashboard.groups import compare, group_runs
from store.budget import budget, task_budgets
from store.stats import FinalWindow


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
    assert b.describe() == "at 3,000 steps, reached by 4 of 6 runs (1 short of it, 1 not evaluated yet)"
    assert budget(runs[:3], reach).describe() == "at 3,000 steps, reached by all 3 runs"
    asked = budget(runs, reach, until=20_000)
    assert (asked.step, asked.reached, asked.short) == (20_000, 3, 2) and "(asked for)" in asked.describe()
    assert budget([runs[5]], reach).step == 1_000_000  # imported curves alone set their own
    assert budget([runs[3]], reach).describe() == "no evaluations yet (1 not evaluated yet)"
    per_task = task_budgets([*runs, run(7, "none", env="Walker2d-v4")], {**reach, 7: 50_000})
    assert {task: b.step for task, b in per_task.items()} == {("td3", "Hopper"): 3_000, ("td3", "Walker2d"): 50_000}


def test_a_run_that_ended_before_its_first_evaluation_is_counted_as_ended_not_queued() -> None:
    """A seed that failed, was stopped or was lost before its first evaluation will never be compared: the budget
    says so (a review found such a failed seed counted "1 queued", as if it were still to come)."""
    runs = [run(1, "none", "finished"), run(2, "acoffpoc", "finished"), run(3, "acoffpoc", "failed"),
            run(4, "acoffpoc", "lost"), run(5, "acoffpoc", "running"), run(6, "acoffpoc", "queued")]  # fmt: skip
    b = budget(runs, {1: 5_000, 2: 5_000})
    assert (b.reached, b.short, b.queued, b.ended) == (2, 0, 2, 2)
    assert b.describe() == "at 5,000 steps, reached by 2 of 6 runs (2 not evaluated yet, 2 ended with no evaluation)"
    assert budget(runs[2:4], {}).describe() == "no evaluations yet (2 ended with no evaluation)"


def test_compare_sets_a_correction_at_3k_beside_its_baseline_at_3k_not_at_20k() -> None:
    """The issue's screen: AC-Off-POC at 3,000 steps against the baseline at 20,000 read −73%, p 0.012."""
    runs = [run(1, "none"), run(2, "none"), run(3, "acoffpoc"), run(4, "acoffpoc")]
    curves = {1: curve(20_000, 1000.0), 2: curve(20_000, 1100.0), 3: curve(3_000, 1000.0), 4: curve(3_000, 1100.0)}
    rows, _, b, _ = compare(group_runs(runs), curves, {i: {} for i in curves})
    assert b.step == 3_000
    base, corrected = rows
    assert base.final_span == corrected.final_span == (3_000, 3_000)  # the last 10% of 3,000 steps
    assert corrected.diff_pct is not None and abs(corrected.diff_pct) < 1e-9  # the same curves, cut alike
    # Asked for 20,000 steps: the correction has no seed there, so it is training, with no difference or test.
    rows, _, b, _ = compare(group_runs(runs), curves, {i: {} for i in curves}, until=20_000)
    base, corrected = rows
    assert base.n_seeds == 2 and corrected.training and corrected.short == 2
    assert corrected.diff_pct is None and corrected.p_value is None and corrected.improvement is None
    assert math.isnan(corrected.final_mean)
    cells = [str(c) for c in row_cells(corrected)]
    assert cells[1:3] == ["0 of 2", "training"] and cells[4:7] == ["–", "–", "–"]


def test_a_group_without_an_evaluation_is_queued_and_compares_with_nothing() -> None:
    runs = [run(1, "none"), run(2, "acoffpoc", "queued")]
    rows, _, b, _ = compare(group_runs(runs), {1: curve(5_000, 10.0)}, {1: {}, 2: {}})
    assert b.step == 5_000 and b.queued == 1
    queued = rows[1]
    assert queued.training and queued.queued == 1 and queued.diff_pct is None
    assert [str(c) for c in row_cells(queued)][1:3] == ["0 of 1", "queued"]


def test_a_seed_that_just_started_does_not_drag_the_budget_back() -> None:
    """The issue's screen: 'compared at 0 steps, reached by 4 of 7 runs' mid-study. Finished runs set the
    budget; while none has, each method's furthest seed does, and the seeds behind it show as training."""
    runs = [run(1, "none", "finished"), run(2, "acoffpoc", "finished"), run(3, "none"), run(4, "acoffpoc", "queued")]
    reach = {1: 100_000, 2: 100_000, 3: 0}
    b = budget(runs, reach)
    assert b.step == 100_000
    assert b.describe() == "at 100,000 steps, reached by 2 of 4 runs (1 short of it, 1 not evaluated yet)"
    live = [run(1, "none"), run(2, "none"), run(3, "acoffpoc"), run(4, "acoffpoc")]
    assert budget(live, {1: 40_000, 2: 0, 3: 30_000, 4: 1_000}).step == 30_000  # not 0: each method has a seed there
    curves = {1: curve(40_000, 10.0), 2: curve(0, 10.0), 3: curve(30_000, 10.0), 4: curve(1_000, 10.0)}
    rows, _, b, _ = compare(group_runs(live), curves, {i: {} for i in curves})
    assert b.step == 30_000 and [(r.n_seeds, r.short, r.running_now) for r in rows] == [(1, 1, 1), (1, 1, 1)]


def test_a_row_says_training_only_while_a_seed_can_still_reach_the_budget() -> None:
    runs = [run(1, "none", "finished"), run(2, "acoffpoc", "failed"), run(3, "ace", "running"),
            run(4, "ris-off-pac", "failed")]  # fmt: skip
    curves = {1: curve(5_000, 10.0), 2: curve(2_000, 10.0), 3: curve(1_000, 10.0)}
    rows, *_ = compare(group_runs(runs), curves, {i: {} for i in curves})
    words = {r.key[2]: [str(c) for c in row_cells(r)][1:3] for r in rows}
    assert words["acoffpoc"] == ["0 of 1", "ended short"] and words["ace"] == ["0 of 1", "training"]
    assert words["ris-off-pac"] == ["0 of 1", "ended short"]  # failed before its first evaluation: not queued
    assert words["none"][0] == "1" and words["none"][1].endswith(" (1 seed)")  # one seed: no interval, no "± nan"


def test_a_method_counts_one_run_a_seed_the_furthest() -> None:
    """quick.toml's seed 0 at 3,000 steps and a study's seed 0 at 4,000 (runs that differ only in budget) are
    one replication: the furthest is kept, the other left out and said."""
    from store.seeds import one_per_seed, repeats_note

    runs = [run(1, "none", "finished"), run(9, "none", "finished"), run(3, "acoffpoc", "finished")]
    runs[1]["seed"] = 1  # run 9 repeats run 1's seed
    runs[0]["seed"] = 1
    kept, dropped = one_per_seed(runs, {1: 3_000, 9: 4_000, 3: 3_000})
    assert [r["id"] for r in kept] == [9, 3] and [(a["id"], b["id"]) for a, b in dropped] == [(1, 9)]
    assert repeats_note(dropped).startswith("1 run repeats a seed of its method, left out (run 1 for run 9)")
    curves = {1: curve(3_000, 10.0), 9: curve(4_000, 20.0), 3: curve(3_000, 10.0)}
    rows, _, b, repeats = compare(group_runs(runs), curves, {i: {} for i in curves})
    assert [r.n_seeds for r in rows] == [1, 1] and [a["id"] for a, _ in repeats] == [1] and b.step == 3_000
    other_env = {**runs[0], "env": "Hopper-v5"}  # another environment version: another method's seed
    assert one_per_seed([other_env, runs[1]], {1: 3_000, 9: 4_000})[1] == []


def test_tables_that_pool_tasks_budget_each_source_apart_and_say_when_budgets_differ() -> None:
    """Own Hopper runs at 3,000 steps must not cut the published Hopper curves pooled with tasks at 1M."""
    from store.budget import mixed_note, source_budgets

    pub = [run(i, "none", "finished", env=env, origin="reference:x") for i, env in ((1, "Hopper-v2"), (2, "Ant-v2"))]
    own = [run(3, "none", "finished"), run(4, "none", "finished", env="Ant-v4")]
    reach = {1: 1_000_000, 2: 1_000_000, 3: 3_000, 4: 100_000}
    found = source_budgets([*pub, *own], reach)
    assert found[("td3", "Hopper", "published")].step == 1_000_000 and found[("td3", "Hopper", "offpoc")].step == 3_000
    assert task_budgets([*pub, *own], reach)[("td3", "Hopper")].step == 3_000  # one task's table: like with like
    assert (
        mixed_note(found)
        == "budgets differ between tasks pooled: td3 Ant offpoc 100,000, td3 Hopper offpoc 3,000 steps"
    )
    assert mixed_note(source_budgets(pub, reach)) == ""


def test_the_line_across_tasks_counts_a_seed_trained_twice_once() -> None:
    from offpoc_tui.dashboard.across import across_tasks
    from store.stats import FinalWindow

    runs = [run(i, "none", "finished", env=env) for i, env in ((1, "Hopper-v4"), (2, "Hopper-v4"),
            (3, "Walker2d-v4"), (4, "Walker2d-v4"))]  # fmt: skip
    repeat = {**run(5, "none", "finished"), "seed": 1}  # run 1's seed again, shorter: left out
    curves = {1: curve(4_000, 500.0), 2: curve(4_000, 900.0), 3: curve(4_000, 300.0), 4: curve(4_000, 700.0),
              5: curve(3_000, 3000.0)}  # fmt: skip
    window = FinalWindow()
    once = across_tasks(runs, {i: curves[i] for i in range(1, 5)}, window)
    assert once and across_tasks([*runs, repeat], curves, window) == once


def test_compare_names_only_the_settings_that_tell_its_rows_apart() -> None:
    from offpoc_tui.dashboard.groups import row_label, shared_settings

    keys = [("td3", "Hopper-v4", "none", None, "offpoc", "uniform", "start_steps=300"),
            ("td3", "Hopper-v4", "acoffpoc", "jsd", "offpoc", "uniform", "correction_start=300, start_steps=300"),
            ("td3", "Hopper-v4", "acoffpoc", "jsd", "offpoc", "uniform",
             "batch_size=64, correction_start=300, start_steps=300")]  # fmt: skip
    shared = shared_settings(keys)
    assert shared == ["start_steps=300"]
    assert [row_label(k, 1, shared) for k in keys] == [
        "none", "acoffpoc/jsd {correction_start=300}", "acoffpoc/jsd {batch_size=64, correction_start=300}"
    ]  # fmt: skip


def test_imported_runs_sharing_a_seed_number_are_all_kept_and_failed_runs_never_cut_them() -> None:
    """A zoo import's seed is its folder's number: two different zoo runs may share it, and both count.
    A failed run of ours at 250 steps does not cut the published curves to 250."""
    from store.seeds import one_per_seed

    zoo = [{**run(i, "none", "finished", origin="zoo:x"), "seed": 0} for i in (1, 2)]
    assert one_per_seed(zoo, {1: 5_000, 2: 5_000}) == (zoo, [])
    published = [run(3, "none", "finished", env="Hopper-v2", origin="reference:x")]
    failed = [run(4, "none", "failed"), run(5, "acoffpoc", "stopped")]
    assert budget([*published, *failed], {3: 1_000_000, 4: 250, 5: 50_000}).step == 1_000_000
    assert budget(failed, {4: 250, 5: 50_000}).step == 250  # nothing else: what there is


def test_the_improvement_table_meets_the_tasks_only_baseline_as_compare_does() -> None:
    from store.aggregate_tables import improvement_rows

    base = ("td3", "none", None, "uniform", "offpoc", "start_steps=500")
    method = ("td3", "acoffpoc", "jsd", "uniform", "offpoc", "start_steps=7500")
    scores = {base: {"Hopper-v4": np.array([0.1, 0.2])}, method: {"Hopper-v4": np.array([0.5, 0.6])}}
    (row,) = improvement_rows(scores, resamples=50)  # type: ignore[arg-type]
    assert row[3] == "none {start_steps=500}" and row[4] == 1.0


def test_a_seed_whose_only_evaluation_is_at_step_0_is_too_short_and_said_so() -> None:
    """Finished at step 0 (a run stopped at once): its window has no evaluation, so no final return, and the
    row says why instead of a number; the seeds column counts it."""
    runs = [run(1, "none", "finished"), run(2, "acoffpoc", "finished")]
    curves = {1: (np.array([0]), np.array([-5.0])), 2: (np.array([0]), np.array([-6.0]))}
    rows, *_ = compare(group_runs(runs), curves, {i: {} for i in curves})
    for row in rows:
        assert row.training and row.too_short == 1 and row.short == 0
        cells = [str(c) for c in row_cells(row)]
        assert cells[1] == "0 of 1" and cells[2] == "too short for the window (1 seed)", cells


def test_compare_reads_each_seed_after_its_own_learning_start() -> None:
    """A seed's final window starts after its run's start_steps (from its config): a baseline learning from
    step 0 and a method whose learning starts at its last evaluation: the method's row is too short."""
    runs = [run(1, "none", "finished"), run(2, "acoffpoc", "finished")]
    steps = np.arange(0, 3001, 500)
    curves = {1: (steps, np.linspace(-100, -10, 7)), 2: (steps, np.linspace(-200, -20, 7))}
    configs = {1: {"start_steps": 0}, 2: {"start_steps": 3000}}
    rows, *_ = compare(group_runs(runs), curves, configs, last=FinalWindow(steps=1000))
    base, method = rows
    assert base.n_seeds == 1 and base.final_mean == -17.5 and base.too_short == 0
    assert method.training and method.too_short == 1 and method.n_seeds == 0
    assert str(row_cells(method)[2]) == "too short for the window (1 seed)"


def test_steps_to_threshold_counts_only_steps_within_the_compared_budget() -> None:
    """Issue 69, item 14: a table compared at 3,000 steps read "steps to thr." 27,000 from the full curve. Only
    steps up to the budget count; a method that reaches the threshold later reads "–" (not by then)."""
    runs = [run(1, "none"), run(2, "acoffpoc")]
    curves = {1: curve(3_000, 20_000.0), 2: curve(30_000, 1000.0)}  # the correction passes 1,350 at 27,000
    rows, _, b, _ = compare(group_runs(runs), curves, {i: {} for i in curves}, threshold=1_350.0)
    assert b.step == 3_000
    base, corrected = rows
    assert base.steps_to_threshold == 2_000 and corrected.steps_to_threshold is None
    rows, *_ = compare(group_runs(runs), curves, {i: {} for i in curves}, threshold=1_350.0, until=30_000)
    assert rows[1].steps_to_threshold == 27_000  # asked for 30,000 steps: within it
