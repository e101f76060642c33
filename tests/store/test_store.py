"""The SQLite store: opening and schema, the writer, weights encoding, lifecycle, export, concurrency."""

from __future__ import annotations

import io
import json
import multiprocessing as mp
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from store import SCHEMA_VERSION, StoreError, open_store
from store.codec import MAX_ERROR, decode_values, encode_values, regular_runs
from store.db import check_writable
from store.export import columns, rows, write_rows
from store.files import RunFiles
from store.reader import list_runs, quantity_rows, run_detail
from store.runs import claim, create_runs, delete_runs, finish, reap_lost, requeue, resolve
from store.writer import RunWriter
from tests.support.storefill import fill, spec


# ---- opening -------------------------------------------------------------------------------
def test_new_store_has_schema_wal_and_marker(tmp_path: Path) -> None:
    db = open_store(tmp_path / "s.db", create=True)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.journal_mode == "wal"
    assert {"runs", "evaluations", "episodes", "train", "quantity_blocks", "histograms", "meta"} <= set(
        db.table_names()
    )
    db.close()
    open_store(tmp_path / "s.db").close()  # reopening is fine


def test_missing_store_is_not_created_without_create(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no offpoc store"):
        open_store(tmp_path / "none.db")
    assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"this is not a database at all" * 10, "not an SQLite database"),
        (b"SQLite format 3\x00" + b"\xff" * 200, "not an SQLite database \\(corrupt"),
    ],
)
def test_corrupt_file_is_a_clear_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.db"
    path.write_bytes(content)
    with pytest.raises(StoreError, match=message):
        open_store(path)
    assert path.read_bytes() == content  # untouched


def test_foreign_and_newer_databases_are_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    with pytest.raises(StoreError, match="not an offpoc store"):
        open_store(foreign)
    newer = tmp_path / "newer.db"
    open_store(newer, create=True).close()
    with sqlite3.connect(newer) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer than this offpoc"):
        open_store(newer)
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = -1")  # no offpoc writes one (it was a KeyError in the migration)
    content = newer.read_bytes()
    with pytest.raises(StoreError, match="schema -1, which no offpoc writes"):
        open_store(newer)
    assert newer.read_bytes() == content


def test_check_writable_writes_nothing(tmp_path: Path) -> None:
    check_writable(tmp_path / "new.db")
    assert not (tmp_path / "new.db").exists()
    with pytest.raises(StoreError, match="does not exist"):
        check_writable(tmp_path / "missing-dir" / "s.db")


# ---- weights encoding ------------------------------------------------------------------------
def test_weights_round_trip_within_quantisation_error() -> None:
    values = np.random.default_rng(0).uniform(0, 1, (1000, 8)).astype(np.float32)
    values[0] = [0, 1, 0.5, 1e-9, 1 - 1e-9, 0.25, 0.75, 0.123456]
    decoded = decode_values(encode_values(values), 8, 1000)
    assert decoded.shape == values.shape
    assert np.abs(decoded - values).max() <= MAX_ERROR + 1e-7
    assert decoded[0, 0] == 0.0 and decoded[0, 1] == 1.0


def test_quantities_off_the_unit_interval_round_trip_as_float32() -> None:
    values = np.random.default_rng(1).uniform(-5, 50, (7, 1)).astype(np.float32)
    np.testing.assert_array_equal(decode_values(encode_values(values, unit=False), 1, 7), values)
    # One row of 2 columns at 16 bits is as long as one value at 32: the count tells them apart.
    pair = np.array([[0.25, 0.5]])
    np.testing.assert_allclose(decode_values(encode_values(pair), 2, 1), pair, atol=MAX_ERROR)


def test_regular_runs_split_where_the_stride_changes() -> None:
    updates = np.array([1, 2, 3, 7, 8, 10])
    assert regular_runs(updates, updates + 100) == [(slice(0, 3), 1), (slice(3, 5), 1), (slice(5, 6), 1)]
    assert regular_runs(np.array([], dtype=int), np.array([], dtype=int)) == []
    every_other = np.arange(2, 402, 2)  # TD3's actor steps: one block of stride 2, not 200 blocks
    assert regular_runs(every_other, every_other + 1000) == [(slice(0, 200), 2)]
    steps = every_other + 1000
    steps[100:] += 1  # a step without an update: steps and updates part ways there, a new block begins
    assert regular_runs(every_other, steps) == [(slice(0, 100), 2), (slice(100, 200), 2)]


# ---- writer --------------------------------------------------------------------------------
def test_writer_buffers_until_flush_and_updates_progress(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = open_store(path, create=True)
    (run_id,) = create_runs(db, [spec()])
    writer = RunWriter(db, run_id, flush_interval=3600)
    writer.add_eval(0, 0.1, 5.0, 1.0, [4.0, 6.0], [10, 12])
    writer.tick(0, 0)
    assert db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == 0  # batched, not yet written
    writer.add_eval(1000, 9.0, 7.5, 1.0, [7.5], [20])
    writer.add_quantities(("lambda",), np.arange(1, 11), np.arange(501, 511), np.full((10, 1), 0.25, np.float32))
    writer.flush(1000, 500)
    run = list_runs(db)[0]
    assert (run["steps"], run["updates"], run["last_return"], run["best_return"]) == (1000, 500, 7.5, 7.5)
    assert run["mean_lambda"] == pytest.approx(0.25, abs=1e-4)
    assert [r["step"] for r in db.query("SELECT step FROM evaluations ORDER BY step")] == [0, 1000]
    decoded = list(quantity_rows(db, run_id))
    assert [(u, s) for u, s, _, _ in decoded] == [(u, u + 500) for u in range(1, 11)]


def test_the_runs_speed_and_time_are_recent_not_a_stats_block(tmp_path: Path) -> None:
    """``runs.sps`` is the steps per second over the last flushes, and ``wall_time`` the training time at the last
    flush: a block measured over the random phase (945 steps/s) never stands for a run now doing far fewer."""
    db = open_store(tmp_path / "s.db", create=True)
    (run_id,) = create_runs(db, [spec()])
    writer = RunWriter(db, run_id, flush_interval=3600)
    writer.add_train_stats(1000, 0, None, None, None, None, sps=945.0)  # the random phase's block
    writer.flush(1000, 0, training_time=1.1)
    time.sleep(1.2)
    writer.flush(1030, 30, training_time=34.0)
    run = list_runs(db)[0]
    assert run["sps"] == pytest.approx(30 / 1.2, rel=0.3) and run["wall_time"] == 34.0
    assert db.execute("SELECT sps FROM train").fetchall() == [(945.0,)]  # the block's record itself is kept
    writer.add_eval(1030, 33.0, 10.0, 1.0, [10.0], [200])  # the evaluation ended at 33 s of training
    writer.flush(1030, 30, training_time=36.0)
    writer.flush()  # a checkpoint's flush, with no time: the run's time stays the latest, never the evaluation's
    assert list_runs(db)[0]["wall_time"] == 36.0
    writer.rewind(500)  # resumed from an earlier checkpoint: the rate starts again
    writer.flush(500, 0)
    assert list_runs(db)[0]["sps"] == pytest.approx(30 / 1.2, rel=0.3)  # one sample: no new figure yet


def test_tick_asks_the_training_time_only_when_it_flushes(tmp_path: Path) -> None:
    """The worker ticks every step: the training time is read only at a flush, and then written."""
    db = open_store(tmp_path / "s.db", create=True)
    (run_id,) = create_runs(db, [spec()])

    def never() -> float:
        raise AssertionError("asked between flushes")

    RunWriter(db, run_id, flush_interval=3600).tick(5, 5, never)
    RunWriter(db, run_id, flush_interval=0).tick(7, 7, lambda: 12.5)
    assert list_runs(db)[0]["wall_time"] == 12.5


def test_resumed_writer_never_writes_a_step_twice(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = open_store(path, create=True)
    (run_id,) = create_runs(db, [spec()])
    first = RunWriter(db, run_id)
    for step in (0, 1000, 2000):
        first.add_eval(step, step, float(step), 0.0, [float(step)], [1])
    first.add_quantities(("lambda",), np.arange(1, 1501), np.arange(501, 2001), np.full((1500, 1), 0.5, np.float32))
    first.flush(2000, 1500)
    # A second writer opened on the run (no rewind) skips the steps the run has stored.
    second = RunWriter(db, run_id)
    for step in (2000, 3000):
        second.add_eval(step, step, -1.0, 0.0, [-1.0], [1])
    second.add_quantities(("lambda",), np.arange(501, 2501), np.arange(1001, 3001), np.full((2000, 1), 0.9, np.float32))
    second.flush(3000, 2500)
    evals = db.execute("SELECT step, return_mean FROM evaluations ORDER BY step").fetchall()
    assert evals == [(0, 0.0), (1000, 1000.0), (2000, 2000.0), (3000, -1.0)]  # the first writer's 2000 stays
    steps = [s for _, s, _, _ in quantity_rows(db, run_id)]
    assert steps == list(range(501, 3001))  # each step once, in order


# ---- lifecycle -----------------------------------------------------------------------------
def test_claim_finish_reap_requeue_delete(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = open_store(path, create=True)
    a, b = create_runs(db, [spec(), spec(seed=1)])
    assert claim(db, a, 999_999_999)  # a pid that cannot exist
    assert not claim(db, a, 1)  # not queued any more
    assert reap_lost(db) == [a]
    assert list_runs(db, run_ids=[a])[0]["status"] == "lost"
    assert requeue(db, a)
    assert list_runs(db, run_ids=[a])[0]["status"] == "queued"
    assert not requeue(db, a)  # queued already (another resume won): left as it is
    assert finish(db, b, "stopped", only_from=("queued",))
    assert not finish(db, b, "failed")  # only from running
    assert resolve(db, [str(a), "td3-Hopper-v4-acoffpoc"]) == [a, b]
    with pytest.raises(LookupError):
        resolve(db, ["nope"])
    files = RunFiles.of(db, path)
    files.prepare(a)
    fill(path, a)
    delete_runs(db, path, [a])
    assert not files.run_dir(a).exists() and files.owned()
    assert [r["id"] for r in list_runs(db)] == [b]
    assert all(db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] == 0 for t in ("evaluations", "quantity_blocks"))


def test_run_detail_counts(filled_store: Path) -> None:
    db = open_store(filled_store)
    detail = run_detail(db, 3)
    assert detail is not None
    counts = {"evaluations": 4, "episodes": 60, "train": 3, "histograms": 1, "quantities": 2500}
    assert detail["counts"] == {**counts, "weights": 2500}  # the old name stays for scripts
    assert detail["config"]["algo"] == "sac"
    assert detail["evaluated_steps"] == [0, 3000]


# ---- export --------------------------------------------------------------------------------
def test_export_evaluations_csv_has_metadata_first(filled_store: Path) -> None:
    db = open_store(filled_store)
    out = io.StringIO()
    n = write_rows(out, "csv", columns("evaluations"), rows(db, "evaluations", algos=["td3"]))
    lines = out.getvalue().splitlines()
    assert n == 8 and len(lines) == 9
    header = "run_id,name,algo,env,correction,divergence,sampler,seed,step,wall_time,return_mean,return_std,length_mean"
    assert lines[0] == header
    assert lines[1].startswith("1,td3-Hopper-v4-none,td3,Hopper-v4,none,,uniform,0,0,")


def test_export_weights_expands_blocks(filled_store: Path) -> None:
    db = open_store(filled_store)
    td3 = list(rows(db, "quantities", run_ids=[2]))
    assert len(td3) == 2500 and td3[0][6:11] == ("uniform", 0, "lambda", 1, 501)  # sampler, seed, ...
    assert td3[0][11] is not None and td3[0][12] is None  # the value only
    sac = list(rows(db, "quantities", run_ids=[3]))
    assert all(v is not None for v in sac[0][11:])  # mean and the summary
    assert all(0.0 <= v <= 1.0 for row in sac[:100] for v in row[11:])


@pytest.mark.parametrize("fmt", ["json", "md"])
def test_export_json_and_markdown(filled_store: Path, fmt: str) -> None:
    db = open_store(filled_store)
    out = io.StringIO()
    n = write_rows(out, fmt, columns("runs"), rows(db, "runs"))
    assert n == 3
    if fmt == "json":
        data = json.loads(out.getvalue())
        assert [d["run_id"] for d in data] == [1, 2, 3] and data[2]["algo"] == "sac"
    else:
        lines = out.getvalue().splitlines()
        assert lines[0].startswith("| run_id | name |") and lines[1].startswith("|---|") and len(lines) == 5


# ---- concurrency -----------------------------------------------------------------------------
def _hammer(path: str, run_id: int, flushes: int) -> None:
    db = open_store(path)
    writer = RunWriter(db, run_id, flush_interval=0)
    for i in range(flushes):
        for j in range(20):
            writer.add_episode(i * 20 + j + 1, i * 20 + j, 1.0, 1)
        writer.add_eval(i, float(i), float(i), 0.0, [float(i)], [1])
        writer.tick(i, i)


def test_eight_writers_and_a_reader_never_see_database_locked(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = open_store(path, create=True)
    ids = create_runs(db, [spec(seed=s) for s in range(8)])
    ctx = mp.get_context("spawn")
    workers = [ctx.Process(target=_hammer, args=(str(path), run_id, 60)) for run_id in ids]
    for w in workers:
        w.start()
    reads = 0
    while any(w.is_alive() for w in workers):
        list_runs(db)
        db.execute("SELECT COUNT(*) FROM evaluations").fetchone()
        reads += 1
        time.sleep(0.01)
    for w in workers:
        w.join()
    assert [w.exitcode for w in workers] == [0] * 8
    assert reads > 0
    assert db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == 8 * 60
    assert db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0] == 8 * 60 * 20
