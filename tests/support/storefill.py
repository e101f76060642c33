"""Filling a store through the real writer, without training (store, CLI and export tests)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from store import RunSpec, open_store
from store.runs import create_runs
from store.writer import RunWriter


def spec(algo: str = "td3", correction: str = "acoffpoc", seed: int = 0, env: str = "Hopper-v4") -> RunSpec:
    divergence = "jsd" if correction != "none" else None
    config = {"algo": algo, "env_id": env, "correction": correction, "seed": seed, "total_steps": 3000}
    return RunSpec(f"{algo}-{env}-{correction}", algo, env, correction, divergence, seed, 3000, config)


def fill(db_path: Path, run_id: int, steps: int = 3000, per_transition: bool = False, offset: float = 0.0) -> None:
    """Write a run's worth of deterministic records through RunWriter."""
    db = open_store(db_path)
    writer = RunWriter(db, run_id)
    rng = np.random.default_rng(run_id)
    for step in range(0, steps + 1, 1000):
        writer.add_eval(step, step / 100, offset + step / 10, 1.0, [offset + step / 10] * 3, [100, 100, 100])
    for step in range(50, steps + 1, 50):
        writer.add_episode(step, step // 50 - 1, float(step), 50)
    for step in range(1000, steps + 1, 1000):
        writer.add_train_stats(step, step - 500, 0.5, -1.0, 2.0, 0.2 if per_transition else None, 123.0)
    columns = ("mean", "min", "max", "p10", "p25", "p50", "p75", "p90") if per_transition else ("lambda",)
    updates = np.arange(1, steps - 500 + 1)
    values = rng.uniform(0, 1, (len(updates), len(columns))).astype(np.float32)
    for start in range(0, len(updates), 1000):
        part = slice(start, start + 1000)
        writer.add_quantities(columns, updates[part], updates[part] + 500, values[part])
    writer.add_histogram(steps, np.arange(50))
    writer.flush(steps, steps - 500)
    db.close()


FIXED_TIME = 1_790_000_000.0
"""A fixed clock for stores whose rendering is compared byte for byte (snapshots)."""


def fill_learning(db_path: Path, run_id: int, steps: int, gain: float, per_transition: bool = False) -> None:
    """A learning-like run through RunWriter: rising returns, λ drifting up, a histogram per evaluation."""
    db = open_store(db_path)
    writer = RunWriter(db, run_id)
    rng = np.random.default_rng(run_id)
    columns = ("mean", "min", "max", "p10", "p25", "p50", "p75", "p90") if per_transition else ("lambda",)
    for step in range(0, steps + 1, 1000):
        ret = gain * 3000 * (1 - np.exp(-step / 15000)) + rng.normal(0, 40)
        writer.add_eval(step, step / 120, float(ret), 30.0, [float(ret)] * 3, [1000, 1000, 1000])
        if step >= 2000:
            writer.add_train_stats(step, step - 1000, 1 / (1 + step / 5000), -step / 100, step / 50, None, 120.0)
            level = min(0.5 + step / (2 * steps), 0.99)
            values = np.clip(rng.normal(level, 0.1, (1000, len(columns))), 0, 1)
            writer.add_quantities(columns, np.arange(step - 1999, step - 999), np.arange(step - 999, step + 1), values)
            writer.add_histogram(step, np.histogram(values[:, 0], bins=50, range=(0, 1))[0])
    writer.flush(steps, steps - 1000)
    db.close()


_UNDO_V4 = """
ALTER TABLE runs DROP COLUMN lane_group;
ALTER TABLE quantity_blocks RENAME TO weights;
DELETE FROM meta WHERE key = 'methods';
DROP TABLE tags;
ALTER TABLE runs DROP COLUMN note;
ALTER TABLE runs DROP COLUMN env_path;
DROP TABLE studies;
DROP TABLE decisions;
ALTER TABLE runs DROP COLUMN arm;
ALTER TABLE runs DROP COLUMN interim;
ALTER TABLE runs DROP COLUMN study_id;
ALTER TABLE runs DROP COLUMN revision;
ALTER TABLE runs DROP COLUMN owner;
ALTER TABLE runs DROP COLUMN stop_requested;
ALTER TABLE runs DROP COLUMN backend;
ALTER TABLE runs DROP COLUMN duplicate_of;
DROP TABLE quantities;
CREATE TABLE weights_v3 (
    id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, first_update INTEGER NOT NULL, first_step INTEGER NOT NULL,
    count INTEGER NOT NULL, columns TEXT NOT NULL, mean REAL NOT NULL, data BLOB NOT NULL, UNIQUE (run_id, first_step)
);
INSERT INTO weights_v3 SELECT id, run_id, first_update, first_step, count, columns, mean, data FROM weights
    WHERE quantity = 'lambda';
DROP TABLE weights;
ALTER TABLE weights_v3 RENAME TO weights;
CREATE TABLE histograms_v3 (
    id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, step INTEGER NOT NULL, counts TEXT NOT NULL, UNIQUE (run_id, step)
);
INSERT INTO histograms_v3 SELECT id, run_id, step, counts FROM histograms WHERE quantity = 'lambda';
DROP TABLE histograms;
ALTER TABLE histograms_v3 RENAME TO histograms;
"""


def as_schema_2(db_path: Path) -> None:
    """Make a store what offpoc left before schema 3: no identity (its runs' files then lived in ``offpoc-runs/``).

    Schema 3 added rows to ``meta`` only; schema 4 the quantity of weights and histograms (λ's alone before);
    schema 5 the runs' ``duplicate_of``; schema 6 their ``backend`` and ``stop_requested``; schema 7 their ``owner``;
    schema 8 their ``revision``; schema 9 the studies, their decisions and the runs' study, interim and arm;
    schema 10 the weights' stride; schema 11 the tags, the runs' note and env_path; schema 12 the corrections'
    record and the weights table's new name (quantity_blocks); schema 13 the runs' lane group; schema 14 the
    decisions' level. Before schema 4 only λ was logged: the other quantities' rows go.
    """
    with sqlite3.connect(db_path) as conn:
        conn.executescript(_UNDO_V4)
        conn.execute("DELETE FROM meta WHERE key IN ('store_id', 'legacy_run_files')")
        conn.execute("PRAGMA user_version = 2")
    conn.close()


def fill_study(db_path: Path, seeds: int, steps: int = 100_000, every: int = 5_000) -> None:
    """The issue's study: TD3 on HalfCheetah-v4, baseline and AC-Off-POC, ``seeds`` seeds each,
    evaluated every ``every`` steps, returns rising from about −600 to 3,000-5,000, seeds apart by
    hundreds; deterministic, finished, on the fixed clock."""
    db = open_store(db_path, create=True)
    specs = []
    for correction in ("none", "acoffpoc"):
        for seed in range(seeds):
            s = spec(correction=correction, seed=seed, env="HalfCheetah-v4")
            s.config.update(total_steps=steps, eval_freq=every)
            specs.append(RunSpec(s.name, s.algo, s.env, s.correction, s.divergence, seed, steps, s.config))
    ids = create_runs(db, specs)
    rng = np.random.default_rng(7)
    for run_id, s in zip(ids, specs, strict=True):
        writer = RunWriter(db, run_id)
        top = (4200.0 if s.correction == "acoffpoc" else 3300.0) + rng.normal(0, 700)
        for step in range(0, steps + 1, every):
            ret = -600 + (top + 600) * (1 - np.exp(-step / 30_000)) + rng.normal(0, 150)
            writer.add_eval(step, step / 200, float(ret), 50.0, [float(ret)], [1000])
        writer.flush(steps, steps - 5000)
    db.execute(
        "UPDATE runs SET status = 'finished', created = ?, started = ?, finished = ?, heartbeat = ?",
        [FIXED_TIME, FIXED_TIME + 1, FIXED_TIME + 500, FIXED_TIME + 500],
    )
    db.conn.commit()
    db.close()
