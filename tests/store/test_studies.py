"""Sequential studies in a real store: interims queued only for methods still compared, held by a seed
that failed, decisions recorded once, and run --decide from the command line."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from store import open_store
from store.runs import finish, requeue
from store.sequential import Design, interval
from store.studies import Estimand, advance, create_study, decision_rows, state, studies
from store.study_text import task_lines
from store.writer import RunWriter
from tests.support.processes import export, offpoc, run_row, wait_for
from tests.support.storefill import spec

DESIGN = Design(alpha=0.05, interim_seeds=5, max_interims=3)


def _study(tmp_path: Path, design: Design = DESIGN) -> tuple[Path, int, list[int]]:
    db_path = tmp_path / "s.db"
    db = open_store(db_path, create=True)
    arms = {"acoffpoc": spec(correction="acoffpoc"), "none": spec(correction="none")}
    study_id, ids = create_study(
        db, name="t", design=design, estimand=Estimand(), arms=arms, comparisons=[("acoffpoc", "none")]
    )
    return db_path, study_id, ids


def _finish(db_path: Path, run_id: int, level: float, status: str = "finished") -> None:
    """A run's evaluations at ``level`` (plus a little noise per run), then its end."""
    db = open_store(db_path)
    writer = RunWriter(db, run_id)
    noise = np.random.default_rng(run_id).normal(0, 1)
    for step in range(0, 3001, 500):
        writer.add_eval(step, step / 100, level + noise, 1.0, [level + noise] * 3, [100] * 3)
    writer.flush(3000, 2500)
    assert finish(db, run_id, status, only_from=("queued",), error=None if status == "finished" else "boom")


def _runs(db_path: Path) -> list[tuple[int, str, int, int, str]]:
    db = open_store(db_path)
    return db.execute("SELECT id, arm, seed, interim, status FROM runs ORDER BY id").fetchall()


def _levels(arm: str, gap: float) -> float:
    return gap if arm == "acoffpoc" else 0.0


def test_a_clear_difference_stops_the_study_after_its_first_interim(tmp_path: Path) -> None:
    db_path, _study_id, _ids = _study(tmp_path)
    assert [(arm, seed, interim) for _, arm, seed, interim, _ in _runs(db_path)] == [
        (arm, seed, 1) for seed in range(5) for arm in ("acoffpoc", "none")
    ]  # interim 1 only: 5 seeds a method, seed by seed
    for run_id, arm, *_ in _runs(db_path):
        _finish(db_path, run_id, _levels(arm, 500.0))
    db = open_store(db_path)
    lines = advance(db)
    assert any("acoffpoc > none" in line for line in lines) and any("finished" in line for line in lines)
    assert len(_runs(db_path)) == 10  # nothing queued past the decision
    assert studies(db)[0].status == "finished"
    rows = decision_rows(db)
    assert [(r["interim"], r["method"], r["other"], r["verdict"], r["seeds"]) for r in rows] == [
        (1, "acoffpoc", "none", "larger", 5)
    ]
    assert advance(db) == [] and len(decision_rows(db)) == 1  # recorded once
    now = state(db, studies(db)[0])
    assert now.equal_power_seeds == 14  # n = 5, K = 3: the cap is 15, a fixed design of equal power 14
    assert now.seeds_saved() == 2 * (14 - 5)  # both methods, the baseline's seeds counted


def test_no_difference_runs_interim_after_interim_to_the_cap_and_says_undecided(tmp_path: Path) -> None:
    db_path, _study_id, _ = _study(tmp_path)
    db = open_store(db_path)
    for interim in (1, 2, 3):
        for run_id, _arm, _, k, _status in _runs(db_path):
            if k == interim:
                _finish(db_path, run_id, 0.0)
        lines = advance(db)
        assert f"interim {interim}: nothing decided" in " ".join(lines) or interim == 3
        queued = [r for r in _runs(db_path) if r[4] == "queued"]
        if interim < 3:
            assert len(queued) == 10 and {r[3] for r in queued} == {interim + 1}
        assert advance(db) == []  # a second call queues nothing more
    assert len(_runs(db_path)) == 30 and studies(db)[0].status == "finished"
    last = [r for r in decision_rows(db) if r["interim"] == 3]
    assert [r["verdict"] for r in last] == ["undecided"]
    assert [r["interim"] for r in decision_rows(db)] == [1, 2, 3]


def test_a_seed_that_failed_holds_the_interim_until_it_is_resumed(tmp_path: Path) -> None:
    db_path, _study_id, ids = _study(tmp_path)
    db = open_store(db_path)
    failed = ids[3]
    for run_id, *_ in _runs(db_path):
        _finish(db_path, run_id, 0.0, "failed" if run_id == failed else "finished")
    assert advance(db) == []  # no decision on an incomplete interim, no next interim queued
    assert len(_runs(db_path)) == 10 and decision_rows(db) == []
    assert state(db, studies(db)[0]).holds == [(failed, "failed")]
    assert f"held by run {failed} failed until resumed: offpoc resume {failed}" in " ".join(
        task_lines(db, "td3", "Hopper")
    )
    db.execute("UPDATE runs SET status = 'finished' WHERE id = ?", [failed])  # resumed, and it finished
    db.conn.commit()
    assert "interim 2 queued" in " ".join(advance(db))
    assert state(db, studies(db)[0]).holds == []


def test_a_follow_waits_for_the_next_interim_and_ends_on_a_hold_or_the_end(tmp_path: Path) -> None:
    """Every run of interim 1 ended but interim 2 not queued yet: a follow of the study goes on; held by a
    failed seed, or finished, it ends."""
    from offpoc_tui.follow import Studies

    db_path, study_id, ids = _study(tmp_path)
    db = open_store(db_path)
    watch = Studies(db_path, [study_id])
    for run_id in ids:
        _finish(db_path, run_id, 0.0, "failed" if run_id == ids[0] else "finished")
    assert watch.done(db, True)  # held by a failed seed: nothing will come without a resume
    assert not watch.done(db, False)  # a run still going
    db.execute("UPDATE runs SET status = 'finished' WHERE id = ?", [ids[0]])
    db.conn.commit()
    assert not watch.done(db, True)  # interim 1 complete: the scheduler is about to queue interim 2
    advance(db)
    assert watch.runs(db, ids[:1]) == [ids[0], *ids[1:], *range(ids[-1] + 1, ids[-1] + 11)]
    db.execute("UPDATE studies SET status = 'finished' WHERE id = ?", [study_id])
    db.conn.commit()
    assert watch.done(db, True)


def test_a_study_made_once_is_not_made_again_by_the_same_name_and_task(tmp_path: Path) -> None:
    db_path, study_id, ids = _study(tmp_path)
    db = open_store(db_path)
    arms = {"acoffpoc": spec(correction="acoffpoc"), "none": spec(correction="none")}
    again = create_study(
        db, name="t", design=DESIGN, estimand=Estimand(), arms=arms, comparisons=[("acoffpoc", "none")], once=True
    )
    assert again == (study_id, []) and len(_runs(db_path)) == len(ids) and len(studies(db)) == 1


def test_the_design_and_estimand_are_stored_with_the_study_before_any_seed(tmp_path: Path) -> None:
    db_path, _study_id, _ = _study(tmp_path, Design(alpha=0.01, interim_seeds=3, max_interims=2))
    row = open_store(db_path).execute("SELECT design, estimand, status FROM studies").fetchone()
    assert json.loads(row[0])["alpha"] == 0.01 and json.loads(row[0])["interim_seeds"] == 3
    assert json.loads(row[1]) == {"kind": "final", "evaluations": 10, "steps": None, "share": 0.1}
    assert row[2] == "running" and len(_runs(db_path)) == 6


def test_auc_and_final_read_a_seed_as_declared() -> None:
    steps, returns = np.array([0, 1000, 2000, 3000]), np.array([0.0, 10.0, 20.0, 30.0])
    assert Estimand("auc").value(steps, returns) == pytest.approx(15.0)
    assert Estimand("final", evaluations=2).value(steps, returns) == pytest.approx(30.0)  # the last 10% of steps
    assert Estimand("final", evaluations=2, share=None).value(steps, returns) == pytest.approx(25.0)  # as before
    assert Estimand("final", steps=1500).value(steps, returns) == pytest.approx(25.0)
    with pytest.raises(ValueError, match="too short for the window"):  # a study fails, saying why
        Estimand("final").value(np.array([0]), np.array([1.0]))
    assert Estimand("final", steps=1500).value(steps, returns, start=2000) == pytest.approx(30.0)


def test_a_studys_seeds_are_read_after_their_runs_learning_starts(tmp_path: Path) -> None:
    """Each seed's window starts after its run's start_steps, read from the run: a method whose learning
    starts at its last evaluation has no final return, and the study says so instead of deciding."""
    db_path, *_ = _study(tmp_path)
    db = open_store(db_path)
    db.execute("UPDATE runs SET config = json_set(config, '$.start_steps', 3000) WHERE arm = 'acoffpoc'")
    db.conn.commit()
    for run_id, *_ in _runs(db_path):
        _finish(db_path, run_id, 0.0)
    said = " ".join(task_lines(open_store(db_path), "td3", "Hopper"))
    assert "a run too short for the window" in said and "no evaluation in it after step 3,000" in said, said


def test_a_study_declared_before_the_windows_cap_reads_its_seeds_as_declared(tmp_path: Path) -> None:
    db_path, *_ = _study(tmp_path)
    db = open_store(db_path)
    db.execute("UPDATE studies SET estimand = ?", [json.dumps({"kind": "final", "evaluations": 10, "steps": None})])
    db.conn.commit()
    assert studies(db)[0].estimand.share is None and studies(db)[0].estimand.describe().endswith("10 evaluations")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--decide"], "--decide compares a correction with its baseline: pass --compare too"),
        (["--compare", "--decide", "--seeds", "0-3"], "--decide queues its own seeds"),
        (["--compare", "--alpha", "0.1"], "need --decide"),
        (["--compare", "--decide", "--alpha", "2"], "--alpha must be in (0, 1), not 2.0"),
        (["--compare", "--decide", "--interim-seeds", "0"], "--interim-seeds must be 1 to 100"),
        (["--compare", "--decide", "--estimand", "median"], "unknown --estimand 'median'"),
        (["--compare", "--decide", "--interim-seeds", "2", "--max-interims", "2"], "can never tell two methods apart"),
        (["--compare", "--again"], "--again applies to --decide"),
    ],
)
def test_decide_usage_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = offpoc(tmp_path / "s.db", "run", "td3", "Pendulum-v1", "--correction", "acoffpoc", *args, check=False)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "s.db").exists()


def test_run_decide_dry_run_says_the_design_and_its_cost_and_writes_nothing(tmp_path: Path) -> None:
    result = offpoc(tmp_path / "s.db", "run", "td3", "Pendulum-v1", "--correction", "acoffpoc", "--compare",
                    "--decide", "--interim-seeds", "3", "--max-interims", "3", "--dry-run")  # fmt: skip
    said = " ".join(result.stdout.split())
    assert "would start a study: acoffpoc vs none, interims of 3 seeds a method, at most 3" in said
    assert "the first interim that can decide: 2; 6 runs first, 18 at most (9 seeds a method)" in said
    assert "CPU-minutes at most" in said or "CPU-hours at most" in said
    assert said.endswith("nothing written") and not (tmp_path / "s.db").exists()


@pytest.mark.process
def test_the_same_study_twice_is_refused_naming_the_first_unless_again(tmp_path: Path) -> None:
    db_path = tmp_path / "s.db"
    args = ["run", "td3", "Pendulum-v1", "--correction", "acoffpoc", "--compare", "--decide", "--steps", "1000",
            "--set", "start_steps=200", "--set", "correction_start=200", "--set", "hidden=16,16",
            "--interim-seeds", "3", "--max-interims", "3"]  # fmt: skip
    first = " ".join(offpoc(db_path, *args).stdout.split())
    assert "note: interim 1 cannot decide (3 seeds a method cannot reach α·1/3 = 0.0167); the first" in first
    again = offpoc(db_path, *args, check=False)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1, again.stderr
    assert "study 1 (td3-Pendulum-v1-acoffpoc-vs-none) is this study" in again.stderr
    assert len(studies(open_store(db_path))) == 1
    dry = offpoc(db_path, *args, "--dry-run", check=False)  # a dry run shows the refusal it would meet
    assert dry.returncode == 2 and "is this study" in dry.stderr and "would start" not in dry.stdout
    # Stored by an older offpoc, whose configs held every plug-in's options: still this study.
    db = open_store(db_path)
    arms = {m: {**arm, "config": {**arm["config"], "geoff_m2": "all"}} for m, arm in studies(db)[0].arms.items()}
    db.execute("UPDATE studies SET arms = ?", [json.dumps(arms)])
    db.conn.commit()
    db.close()
    older = offpoc(db_path, *args, check=False)
    assert older.returncode == 2 and "is this study" in older.stderr, older.stderr
    offpoc(db_path, *args, "--again")
    assert len(studies(open_store(db_path))) == 2
    other = offpoc(db_path, *args, "--seed", "10", check=False)  # another first seed: another study
    assert other.returncode == 0 and len(studies(open_store(db_path))) == 3
    offpoc(db_path, "stop", "--all")


def test_export_decisions_lists_every_interims_verdict(tmp_path: Path) -> None:
    db_path, *_ = _study(tmp_path)
    for run_id, arm, *_ in _runs(db_path):
        _finish(db_path, run_id, _levels(arm, 800.0))
    advance(open_store(db_path))
    rows = export(db_path, "decisions")
    assert [(r["method"], r["other"], r["verdict"], r["interim"], r["alpha"]) for r in rows] == [
        ("acoffpoc", "none", "larger", "1", "0.05")
    ]
    assert (
        rows[0]["estimand"]
        == "mean return over the last 10 evaluations (within the last 10% of steps, after learning starts)"
    )
    assert 790 < float(rows[0]["statistic"]) < 810 and float(rows[0]["level"]) == 0.05  # a mean difference


def test_decisions_in_markdown_give_dates_and_infinity_as_a_reader_reads_them(tmp_path: Path) -> None:
    """3 seeds cannot reject at interim 1 (its boundary is ∞, stored empty); the time it was recorded is a date."""
    db_path, *_ = _study(tmp_path, Design(alpha=0.05, interim_seeds=3, max_interims=2))
    for run_id, arm, *_ in _runs(db_path):
        _finish(db_path, run_id, _levels(arm, 800.0))
    advance(open_store(db_path))
    md = offpoc(db_path, "export", "--table", "decisions", "--format", "md").stdout.splitlines()
    header, row = [c.strip() for c in md[0].split("|")], [c.strip() for c in md[2].split("|")]
    cell = dict(zip(header, row, strict=True))
    assert cell["boundary"] == "∞" and cell["verdict"] == "continue"
    assert re.fullmatch(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ", cell["recorded"]), cell["recorded"]
    assert (cell["ci_low"], cell["ci_high"]) == ("-∞", "∞")  # unbounded at an interim that cannot reject
    rows = export(db_path, "decisions")  # CSV
    assert (rows[0]["boundary"], rows[0]["ci_low"], rows[0]["ci_high"]) == ("", "-inf", "inf")


def test_a_schema_13_stores_decisions_become_mean_differences(tmp_path: Path) -> None:
    """Schema 13 recorded a sum over interims and no level: opened, its rows read on today's scale."""
    db_path, study_id, _ = _study(tmp_path)
    with sqlite3.connect(db_path) as conn:
        for column in ("level", "ci_low", "ci_high"):
            conn.execute(f"ALTER TABLE decisions DROP COLUMN {column}")
        conn.execute(
            "INSERT INTO decisions (study_id, interim, method, other, verdict, statistic, boundary, level_spent, seeds,"
            " recorded) VALUES (?, 2, 'acoffpoc', 'none', 'larger', 900.0, 600.0, 0.02, 10, 0)",
            [study_id],
        )
        conn.execute("PRAGMA user_version = 13")
    conn.close()
    row = decision_rows(open_store(db_path))[0]
    assert (row["statistic"], row["boundary"], row["level"], row["level_spent"]) == (450.0, 300.0, None, 0.02)


def test_a_decided_method_runs_no_further_seed_while_the_others_go_on(tmp_path: Path) -> None:
    db_path = tmp_path / "s.db"
    db = open_store(db_path, create=True)
    arms = {m: spec(correction=m) for m in ("acoffpoc", "ace", "none")}
    create_study(
        db, name="t", design=DESIGN, estimand=Estimand(), arms=arms, comparisons=[("acoffpoc", "none"), ("ace", "none")]
    )
    for run_id, arm, *_ in _runs(db_path):
        _finish(db_path, run_id, _levels(arm, 500.0))
    assert "interim 2 queued" in " ".join(advance(db))
    second = [(arm, interim) for _, arm, _, interim, status in _runs(db_path) if status == "queued"]
    assert sorted(set(second)) == [("ace", 2), ("none", 2)] and len(second) == 10
    rows = {(r["method"], r["interim"]): r["verdict"] for r in decision_rows(db)}
    assert rows == {("acoffpoc", 1): "larger", ("ace", 1): "continue"}


@pytest.mark.process
def test_a_live_study_holds_for_a_killed_seed_then_runs_to_its_decision(tmp_path: Path) -> None:
    """Real workers: interim 1 queued alone; a seed killed with -9 holds the decision (no interim 2, no
    verdict) until `offpoc resume` runs it again; then interim 2 and the end, each run by one worker."""
    db = tmp_path / "s.db"
    offpoc(db, "run", "td3", "Pendulum-v1", "--correction", "acoffpoc", "--compare", "--decide", "--interim-seeds",
           "3", "--max-interims", "2", "--steps", "1000", "--eval-freq", "250", "--set", "start_steps=300")  # fmt: skip
    wait_for(lambda: run_row(db, 1)["status"] == "running" and run_row(db, 1)["steps"] >= 100, what="run 1")
    os.kill(run_row(db, 1)["pid"], signal.SIGKILL)
    wait_for(lambda: run_row(db, 1)["status"] == "lost", what="run 1 lost")
    wait_for(lambda: all(run_row(db, i)["status"] == "finished" for i in range(2, 7)), what="interim 1's other seeds")
    time.sleep(2.0)  # a scheduler poll or more: nothing may be decided or queued on an incomplete interim
    assert [r[3] for r in _runs(db)] == [1] * 6 and export(db, "decisions") == []
    offpoc(db, "resume", "1")
    wait_for(lambda: studies(open_store(db))[0].status == "finished", what="the study's end")
    runs = _runs(db)
    assert sorted((interim, seed, arm, status) for _, arm, seed, interim, status in runs) == [
        (k, seed, arm, "finished")
        for k, seeds in ((1, (0, 1, 2)), (2, (3, 4, 5)))
        for seed in seeds
        for arm in ("acoffpoc", "none")
    ]
    verdicts = [(r["interim"], r["verdict"]) for r in export(db, "decisions")]
    assert verdicts[0] == ("1", "continue") and len(verdicts) == 2  # 3 seeds can be told apart from interim 2 only
    assert verdicts[1][0] == "2" and verdicts[1][1] in ("larger", "smaller", "undecided")
    log = (tmp_path / "s.db-runs" / "scheduler.log").read_text()
    starts = [line.split("run ")[1].split(":")[0] for line in log.splitlines() if ": worker pid" in line]
    assert sorted(starts, key=int) == ["1", "1", *map(str, range(2, 13))]  # one worker a run; run 1 twice (resumed)


def test_deleting_a_studys_runs_abandons_it_and_queues_nothing_again(tmp_path: Path) -> None:
    from store.runs import delete_runs

    db_path, _, ids = _study(tmp_path)
    for run_id, *_ in _runs(db_path):
        _finish(db_path, run_id, 0.0)
    db = open_store(db_path)
    delete_runs(db, db_path, ids[:2])
    assert studies(db)[0].status == "abandoned"
    assert advance(db) == [] and len(_runs(db_path)) == 8
    assert "abandoned: runs of it were deleted" in " ".join(task_lines(db, "td3", "Hopper"))


def test_a_studys_interval_comes_from_its_verdicts_own_permutation_samples(tmp_path: Path) -> None:
    """A method whose name sorts after the baseline's (ris-off-pac > none) is dealt out second: the interval
    shown must be computed with the names kept, from the same samples as the verdict."""
    db_path = tmp_path / "s.db"
    db = open_store(db_path, create=True)
    design = Design(alpha=0.05, interim_seeds=5, max_interims=1, permutations=200)  # C(10, 5) > 200: drawn
    arms = {"ris-off-pac": spec(correction="ris-off-pac"), "none": spec(correction="none")}
    create_study(db, name="t", design=design, estimand=Estimand(), arms=arms, comparisons=[("ris-off-pac", "none")])
    for run_id, arm, *_ in _runs(db_path):
        _finish(db_path, run_id, 1.0 if arm == "ris-off-pac" else 0.0)
    now = state(open_store(db_path), studies(open_store(db_path))[0])
    pair = ("ris-off-pac", "none")
    assert now.interval(pair, 1) == interval(now.values, pair, design, 1, 1)
    renamed = {"a": now.values[pair[0]], "b": now.values[pair[1]]}  # dealt out in the other order
    assert now.interval(pair, 1) != interval(renamed, ("a", "b"), design, 1)


def test_an_abandoned_studys_queued_runs_are_cancelled_and_can_be_resumed(tmp_path: Path) -> None:
    """Deleting two of interim 1's seeds abandons the study: its eight other queued runs would have trained
    on, unsaid; they are cancelled (resumable), and rm says so."""
    db_path, _, ids = _study(tmp_path)
    result = offpoc(db_path, "rm", str(ids[0]), str(ids[1]), "--yes")
    assert "their study is abandoned: its 8 queued runs cancelled (id 3-10)" in " ".join(result.stdout.split())
    db = open_store(db_path)
    assert studies(db)[0].status == "abandoned"
    assert {status for *_, status in _runs(db_path)} == {"cancelled"} and len(_runs(db_path)) == 8
    assert run_row(db_path, 3)["finished"] is not None
    ps = offpoc(db_path, "ps").stdout
    assert "cancelled" in ps  # listed with the runs that can resume
    assert requeue(db, 3) and run_row(db_path, 3)["status"] == "queued"  # what offpoc resume does


def test_a_study_whose_values_cannot_be_decided_fails_once_saying_why(tmp_path: Path) -> None:
    db_path, _, ids = _study(tmp_path)
    for run_id, *_ in _runs(db_path):
        _finish(db_path, run_id, 0.0)
    db = open_store(db_path)
    db.execute("UPDATE evaluations SET return_mean = 1e309 WHERE run_id = ?", [ids[0]])  # stored as inf
    db.conn.commit()
    said = " ".join(task_lines(db, "td3", "Hopper"))  # Compare and dashboard --once read it before the scheduler
    assert "cannot be decided: ValueError: the values of 'acoffpoc' must be a 1-d sequence of finite" in said
    seen: dict[int, tuple[Any, ...]] = {}
    lines = advance(db, seen)
    assert len(lines) == 1 and "cannot be decided, marked failed: ValueError" in lines[0]
    assert "failed, not decided: ValueError" in " ".join(task_lines(db, "td3", "Hopper"))
    assert studies(db)[0].status == "failed" and advance(db, seen) == [] and len(_runs(db_path)) == 10


def test_a_study_of_several_methods_decided_under_the_joint_test_keeps_its_recorded_verdicts(
    tmp_path: Path,
) -> None:
    """A store from before each comparison became its own test: a three-arm study recorded interim 1 under the
    joint test (its rows have no level). Today's test is never run on it, which could reverse what the store
    recorded and showed: Compare shows the recorded verdicts and says why, the export keeps them, and the
    scheduler marks the running study failed instead of deciding or queueing more."""
    db = open_store(tmp_path / "j.db", create=True)
    arms = {m: spec(correction=m) for m in ("acoffpoc", "ipg", "none")}
    study_id, _ = create_study(
        db, name="j", design=DESIGN, estimand=Estimand(), arms=arms, comparisons=[("acoffpoc", "none"), ("ipg", "none")]
    )
    for run_id, *_ in _runs(tmp_path / "j.db"):
        _finish(tmp_path / "j.db", run_id, 0.0)  # equal methods: today's test would decide nothing
    db = open_store(tmp_path / "j.db")
    for method, verdict in (("acoffpoc", "larger"), ("ipg", "continue")):
        db.execute(
            "INSERT INTO decisions (study_id, interim, method, other, verdict, statistic, boundary, level_spent,"
            " seeds, recorded) VALUES (?, 1, ?, 'none', ?, 5.0, 4.0, 0.01, 5, 0)",
            [study_id, method, verdict],
        )
    db.conn.commit()
    said = "\n".join(task_lines(db, "td3", "Hopper"))
    assert "TD3 + AC-Off-POC > TD3, as recorded at interim 1" in said, said
    assert "TD3 + IPG (JSD) vs TD3: not decided by interim 1" in said and "earlier joint test" in said, said
    lines = advance(db, {})
    assert len(lines) == 1 and "marked failed: declared under offpoc's earlier joint test" in lines[0], lines
    assert len(_runs(tmp_path / "j.db")) == 15 and db.execute("SELECT count(*) FROM decisions").fetchone()[0] == 2
    assert "TD3 + AC-Off-POC > TD3, as recorded at interim 1" in "\n".join(task_lines(db, "td3", "Hopper"))


def test_compare_shows_each_studys_decision_and_the_fixed_p_says_what_it_is(tmp_path: Path) -> None:
    """The dashboard (Pilot) and --once: the decision as it stands, its interims and the seeds saved."""
    from offpoc_tui.dashboard.app import Dashboard
    from offpoc_tui.dashboard.compare_pane import ComparePane
    from tests.support.pilot import drive, shown_text, until

    db_path, *_ = _study(tmp_path)
    for run_id, arm, *_ in _runs(db_path):
        _finish(db_path, run_id, _levels(arm, 500.0))
    advance(open_store(db_path))
    decided = "TD3 + AC-Off-POC > TD3, decided after 1 interim (5 seeds each)"

    async def scenario(app: Dashboard, pilot: Any) -> None:
        await pilot.press("4")
        pane = app.query_one(ComparePane)
        await until(pilot, lambda: pane.table.row_count == 2)
        await until(pilot, lambda: decided in shown_text(app, "#compare-decisions"))
        shown = " ".join(shown_text(app, "#compare-decisions").split())
        equal = "a fixed design of equal power runs 14 a method, 28 in all"  # n = 5, K = 3: the cap is 15
        assert f"seeds queued 10, the baseline's included; {equal}" in shown
        assert "a normal approximation): 18 saved" in shown
        assert "difference +500.6, 95% interval [+" in shown and "stopped early: the fixed-sample figures" in shown
        # every line on screen: the study (two lines), its pair, its interim, the early stop's note (two), its
        # seeds (two)
        assert pane.decisions.size.height == 8
        note = " ".join(shown_text(app, "#compare-note").split())
        assert "p is one look at the seeds there are, not a decision if looked at again" in note

    drive(db_path, scenario)
    once = offpoc(db_path, "dashboard", "--once", env={"COLUMNS": "200"}).stdout
    assert decided in once and "AdaStop, α = 0.05 family-wise" in once
    assert "interim 1: TD3 + AC-Off-POC − TD3 +500.6 (|d| > 301.3)" in once  # a mean difference and its bound


def test_export_decisions_takes_the_filters_of_the_other_tables(tmp_path: Path) -> None:
    db_path, *_ = _study(tmp_path)
    for run_id, arm, *_ in _runs(db_path):
        _finish(db_path, run_id, _levels(arm, 800.0))
    advance(open_store(db_path))
    assert len(export(db_path, "decisions", "--env", "Hopper", "--correction", "acoffpoc")) == 1
    assert export(db_path, "decisions", "--source", "published") == []
    assert export(db_path, "decisions", "--correction", "ace") == []


SWEEP = """
name = "decided"
algos = ["td3"]
envs = ["Pendulum-v1"]
seeds = 7
steps = 1000
[[methods]]
correction = "acoffpoc"
[[methods]]
correction = "none"
[set]
start_steps = 300
eval_freq = 250
"""


@pytest.mark.process
def test_sweep_decide_follows_each_study_through_its_interims_to_the_end_once(tmp_path: Path) -> None:
    """`sweep --decide --follow`: a study per task from the file's seed, each method vs the baseline; the
    follow goes on through interim 2 (queued by the scheduler after interim 1) and returns with the study's
    decision; submitted again, nothing is queued twice."""
    db, file = tmp_path / "s.db", tmp_path / "decided.toml"
    file.write_text(SWEEP)
    first = offpoc(db, "sweep", str(file), "--decide", "--interim-seeds", "3", "--max-interims", "2", "--follow")
    (study,) = studies(open_store(db))
    assert study.status == "finished" and study.comparisons == (("acoffpoc", "none"),) and study.first_seed == 7
    runs = _runs(db)
    assert sorted((interim, seed, arm, status) for _, arm, seed, interim, status in runs) == [
        (k, seed, arm, "finished") for k, seeds in ((1, (7, 8, 9)), (2, (10, 11, 12))) for seed in seeds
        for arm in ("acoffpoc", "none")
    ]  # fmt: skip
    assert "done: 12 finished" in first.stdout and "TD3 + AC-Off-POC" in first.stdout.split("done:")[1]
    again = offpoc(db, "sweep", str(file), "--decide", "--interim-seeds", "3", "--max-interims", "2")
    assert "made before: nothing queued" in again.stdout and len(_runs(db)) == 12
    changed = offpoc(db, "sweep", str(file), "--decide", "--interim-seeds", "4", "--max-interims", "2", check=False)
    assert changed.returncode == 2 and "was declared with another design, estimand or methods" in changed.stderr
    store = open_store(db)  # declared before the window's cap: its estimand has no share, read as then
    store.execute("""UPDATE studies SET estimand = '{"kind": "final", "evaluations": 10, "steps": null}'""")
    store.conn.commit()
    older = offpoc(db, "sweep", str(file), "--decide", "--interim-seeds", "3", "--max-interims", "2")
    assert "made before: nothing queued" in older.stdout and len(_runs(db)) == 12
    store.execute("UPDATE studies SET status = 'abandoned'")  # as `offpoc rm` of a running study's seeds leaves it
    store.conn.commit()
    abandoned = offpoc(db, "sweep", str(file), "--decide", "--interim-seeds", "3", "--max-interims", "2", check=False)
    assert abandoned.returncode == 2 and "is abandoned and cannot go on" in abandoned.stderr
    assert len(_runs(db)) == 12 and len(studies(open_store(db))) == 1


@pytest.mark.parametrize(
    ("methods", "message"),
    [
        ('[[methods]]\ncorrection = "acoffpoc"\n[[methods]]\ncorrection = "ace"\n', 'correction = "none", it has 0'),
        ('[[methods]]\ncorrection = "none"\n', "one method, nothing to compare it with"),
        ('[[methods]]\ncorrection = "none"\n[[methods]]\ncorrection = "none"\n', "the method none is listed twice"),
        (
            '[[methods]]\ncorrection = "none"\n[[methods]]\ncorrection = "acoffpoc"\n'
            '[[methods]]\ncorrection = "acoffpoc"\ndivergence = "jsd"\n',
            "the methods acoffpoc and acoffpoc/jsd are the same runs",
        ),
    ],
)
def test_sweep_decide_refuses_a_file_without_one_baseline_in_one_line(
    tmp_path: Path, methods: str, message: str
) -> None:
    file = tmp_path / "bad.toml"
    file.write_text('name = "b"\nalgos = ["td3"]\nenvs = ["Pendulum-v1"]\n' + methods)
    result = offpoc(tmp_path / "s.db", "sweep", str(file), "--decide", check=False)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "s.db").exists()


def test_sweep_decide_says_when_interim_1_cannot_decide_and_refuses_a_design_that_never_can(tmp_path: Path) -> None:
    """Holm tests a study's first comparison at α/m: with three methods (two comparisons) 5 seeds a method
    decide from interim 2 of 4; 4 seeds in one interim never do (2/C(8, 4) = 0.029 > 0.025), where they would
    with one comparison."""
    file = tmp_path / "three.toml"
    file.write_text('name = "t"\nalgos = ["td3"]\nenvs = ["Pendulum-v1"]\n[[methods]]\ncorrection = "none"\n'
                    '[[methods]]\ncorrection = "acoffpoc"\n[[methods]]\ncorrection = "ace"\n')  # fmt: skip
    said = offpoc(tmp_path / "s.db", "sweep", str(file), "--decide", "--dry-run").stdout
    assert "note: interim 1 cannot decide anything (with 2 comparisons a study tests its first at α/2 = 0.025" in said
    assert "reach from interim 2)" in said
    result = offpoc(tmp_path / "n.db", "sweep", str(file), "--decide", "--interim-seeds", "4", "--max-interims", "1",
                    check=False)  # fmt: skip
    assert result.returncode == 2 and "can never call a method different" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "n.db").exists()


def test_the_scheduler_reads_a_study_again_only_when_its_runs_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """advance(db, seen), called each scheduler poll, skips a study whose runs have not changed since."""
    import store.studies as module

    db_path, _, ids = _study(tmp_path)
    db = open_store(db_path)
    reads: list[int] = []
    real = module.state
    monkeypatch.setattr(module, "state", lambda db, study: reads.append(study.id) or real(db, study))
    seen: dict[int, tuple[Any, ...]] = {}
    advance(db, seen)
    advance(db, seen)
    assert len(reads) == 1  # the second poll: nothing changed, nothing read
    _finish(db_path, ids[0], 0.0)
    advance(db, seen)
    assert len(reads) == 2
