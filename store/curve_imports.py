"""Runs recorded elsewhere, brought into a store: the paper's published curves and SB3 evaluations.

An imported run is ``finished``, has no worker, keeps where it came from in ``source``
(the file's path) and what it is in ``origin`` (unique: importing twice adds nothing).
Each file is parsed and checked whole before anything of it is written, and written in
one transaction with its run, so a malformed file is skipped, never half-imported.

    published = reference_curves(Path("../shared/reference-curves"))   # raises ImportProblem
    report = import_curves(db, published)
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils

from store.array_files import ArrayFileError, load_npy, load_npz, walk_files
from store.codec import encode_episodes
from store.db import write
from store.runs import RunSpec

REFERENCE_FOLDER = "Learning Curves"
REFERENCE_EVAL_EVERY = 1000
"""The published curves evaluate every 1,000 environment steps, from step 0."""
REFERENCE_EPISODES = 10
REFERENCE_ALGOS = {"DDPG": "ddpg", "TD3": "td3", "SAC": "sac"}
REFERENCE_METHODS: dict[str, tuple[str, str | None]] = {
    "": ("none", None),
    "AC-Off-POC": ("acoffpoc", "jsd"),  # the paper's AC-Off-POC uses the Jensen-Shannon divergence
    "ACE": ("ace", None),
    "Geoff-PAC": ("geoff-pac", None),
    "IPG": ("ipg", None),
    "RIS-Off-PAC": ("ris-off-pac", None),
}
"""File-name prefix → (correction, divergence)."""
_REFERENCE_NAME = re.compile(
    r"^(?:(?P<method>AC-Off-POC|ACE|Geoff-PAC|IPG|RIS-Off-PAC)_)?(?P<algo>DDPG|TD3|SAC)_(?P<env>[A-Za-z0-9]+-v\d+)"
    r"_(?P<seed>\d+)\.npy$"
)
ZOO_FILE = "evaluations.npz"
_ZOO_RUN_FOLDER = re.compile(r"^(?P<env>.+-v\d+)_(?P<exp>\d+)$")
"""rl-baselines3-zoo writes ``logs/{algo}/{env}_{experiment}/evaluations.npz``."""
MAX_STEP = 10**15
"""An evaluation's environment step at most (a billion times the paper's budget of 10⁶ steps)."""
MAX_RETURN = 1e12
"""A return's magnitude at most: no benchmark task comes near, and a mean of two returns near 1e308 overflows."""
MAX_EPISODE_LENGTH = 2**31 - 1
_CHUNK = 64
"""Files per write transaction at most (each file stays atomic: it is parsed whole before any write)."""
_CHUNK_ROWS = 50_000
"""Evaluations per write transaction at most (a file with more is a transaction of its own): workers writing
to the store meanwhile wait a fraction of a second for the lock, not the whole import."""


class ImportProblem(ValueError):
    """A file or folder that cannot be imported; the message (one line) says which and why."""


@dataclass(frozen=True)
class Curve:
    """One imported run, parsed and checked, ready to write."""

    run: RunSpec
    """What the run is (name, algo, env, correction, divergence, seed, length, config)."""
    origin: str
    source: str
    steps: np.ndarray
    """(T,) increasing environment steps."""
    returns: np.ndarray
    """(T,) mean return of each evaluation."""
    episode_returns: np.ndarray | None = None
    """(T, episodes) when the file records each episode."""
    episode_lengths: np.ndarray | None = None


@dataclass
class ImportReport:
    imported: int = 0
    updated: int = 0
    """Runs already present that got evaluations past their last step (a zoo run still training)."""
    unchanged: int = 0
    problems: list[str] = field(default_factory=list)
    """One line per file skipped, saying why."""


# ---- the paper's published curves -------------------------------------------------------------
def reference_root(path: Path) -> Path:
    """The ``Learning Curves`` folder: ``path`` itself or its child, or, for one file, the folder its
    ``ALGO/ENV/`` folders are in."""
    if path.is_file():
        return path.resolve().parents[2]
    if not path.is_dir():
        raise ImportProblem(f"no file or folder {path}")
    if path.name == REFERENCE_FOLDER:
        return path
    if (path / REFERENCE_FOLDER).is_dir():
        return path / REFERENCE_FOLDER
    raise ImportProblem(f"no {REFERENCE_FOLDER!r} folder in {path} (expected {REFERENCE_FOLDER}/ALGO/ENV/*.npy)")


def reference_files(path: Path) -> list[Path]:
    """``path`` itself (one published curve), or every file under the published layout's root, sorted
    (anything misplaced is reported on reading)."""
    if path.is_file():
        return [path.resolve()]
    return sorted(p for p in walk_files(reference_root(path)) if not p.name.startswith("."))


def read_reference(root: Path, file: Path) -> Curve:
    """One published curve: ``{ALGO}/{ENV}/{PREFIX}{ALGO}_{ENV}_{SEED}.npy``, evaluations every 1,000 steps."""
    parts = file.relative_to(root).parts
    match = _REFERENCE_NAME.match(parts[-1])
    if len(parts) != 3 or match is None:
        raise ImportProblem(f"{file}: not a published curve's name (ALGO/ENV/[METHOD_]ALGO_ENV_SEED.npy)")
    if (match["algo"], match["env"]) != parts[:2]:
        raise ImportProblem(f"{file}: its name says {match['algo']}/{match['env']} but it is in {'/'.join(parts[:2])}")
    returns = _load_npy(file)
    correction, divergence = REFERENCE_METHODS[match["method"] or ""]
    algo, seed = REFERENCE_ALGOS[match["algo"]], _seed(file, int(match["seed"]))
    steps = np.arange(len(returns), dtype=np.int64) * REFERENCE_EVAL_EVERY
    config = {
        "imported": "published curves of the AC-Off-POC paper (arXiv:2208.00755)",
        "eval_freq": REFERENCE_EVAL_EVERY,
        "eval_episodes": REFERENCE_EPISODES,
        "total_steps": int(steps[-1]),
        "seed": seed,
    }
    run = RunSpec("reference", algo, match["env"], correction, divergence, seed, int(steps[-1]), config)
    return Curve(run, f"reference:{'/'.join(parts)}", str(file.resolve()), steps, returns)


def _seed(file: Path, seed: int) -> int:
    """A seed a store can hold (SQLite's 64-bit integers)."""
    if not 0 <= seed < 2**63:
        raise ImportProblem(f"{file}: seed {seed} is out of range (0 to 2^63 - 1)")
    return seed


def _load_npy(file: Path) -> np.ndarray:
    try:
        values = load_npy(file)
    except ArrayFileError as error:
        raise ImportProblem(f"{file}: {error}") from None
    if values.ndim != 1 or len(values) == 0:
        raise ImportProblem(f"{file}: expected a 1-d array of returns, got shape {values.shape}")
    return _returns(file, values, "returns")


def _returns(file: Path, values: np.ndarray, what: str) -> np.ndarray:
    """``values`` as float64 returns: finite and within ±:data:`MAX_RETURN`."""
    as_float = values.astype(np.float64)
    if not np.isfinite(as_float).all() or np.abs(as_float).max() > MAX_RETURN:
        raise ImportProblem(f"{file}: {what} must be finite numbers within ±{MAX_RETURN:.0e}")
    return as_float


def _counts(file: Path, values: np.ndarray, what: str, high: int) -> np.ndarray:
    """``values`` as int64 counts: whole numbers from 0 to ``high`` (a float array may hold them)."""
    as_float = values.astype(np.float64)
    whole = np.isfinite(as_float).all() and bool(np.all(as_float == np.floor(as_float)))
    if not whole or as_float.min() < 0 or as_float.max() > high:
        raise ImportProblem(f"{file}: {what} must be whole numbers from 0 to {high:,}")
    return values.astype(np.int64)


def reference_curves(path: Path, files: list[Path] | None = None) -> Iterator[Curve | ImportProblem]:
    """Each file under ``path``'s published layout (``files``, when already listed), parsed, or
    the problem that stops it."""
    root = reference_root(path)
    for file in reference_files(path) if files is None else files:
        try:
            yield read_reference(root, file)
        except ImportProblem as problem:
            yield problem


# ---- rl-baselines3-zoo / Stable-Baselines3 EvalCallback ---------------------------------------
def zoo_files(path: Path) -> list[Path]:
    """``path`` itself (an evaluations.npz) or every evaluations.npz below it."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ImportProblem(f"no file or folder {path}")
    files = sorted(p for p in walk_files(path) if p.name == ZOO_FILE)
    if not files:
        raise ImportProblem(f"no {ZOO_FILE} under {path}")
    return files


def read_zoo(
    file: Path, algo: str | None = None, env: str | None = None, seed: int | None = None, correction: str = "none"
) -> Curve:
    """An ``evaluations.npz`` (keys ``timesteps`` (T,), ``results`` and ``ep_lengths`` (T, episodes)).

    Algo and env default to the zoo's folders, ``{algo}/{env}_{experiment}/``; the seed to
    the experiment number (the zoo does not record the seed beside the file).
    """
    folder = _ZOO_RUN_FOLDER.match(file.parent.name)
    algo = algo or (file.parent.parent.name.lower() if folder else None)
    env = env or (folder["env"] if folder else None)
    if not algo or not env:
        raise ImportProblem(f"{file}: cannot tell the algo and env from its folder ({{algo}}/{{env}}_{{n}}/): "
                            "pass --algo and --env")  # fmt: skip
    seed = _seed(file, seed if seed is not None else (int(folder["exp"]) if folder else 0))
    try:
        arrays = load_npz(file, ("timesteps", "results", "ep_lengths"))
    except ArrayFileError as error:
        raise ImportProblem(f"{file}: {error}") from None
    missing = {"timesteps", "results", "ep_lengths"} - set(arrays)
    if missing:
        raise ImportProblem(f"{file}: missing {', '.join(sorted(missing))} (not an EvalCallback evaluations.npz)")
    steps, results, lengths = arrays["timesteps"], arrays["results"], arrays["ep_lengths"]
    if results.ndim == 1:
        results, lengths = results[:, None], lengths.reshape(-1, 1)
    if (
        steps.ndim != 1
        or len(steps) == 0
        or results.ndim != 2
        or results.shape[0] != len(steps)
        or lengths.shape != results.shape
        or results.shape[1] == 0
    ):
        raise ImportProblem(
            f"{file}: shapes do not fit (timesteps {steps.shape}, results {results.shape}, ep_lengths {lengths.shape};"
            " expected (T,), (T, episodes ≥ 1), (T, episodes))"
        )
    steps = _counts(file, steps, "timesteps", MAX_STEP)
    results = _returns(file, results, "results")
    lengths = _counts(file, lengths, "ep_lengths", MAX_EPISODE_LENGTH)
    if np.any(np.diff(steps) <= 0):
        raise ImportProblem(f"{file}: timesteps must increase")
    resolved = file.resolve()
    config = {"imported": "Stable-Baselines3 evaluations.npz", "eval_episodes": int(results.shape[1]), "seed": seed}
    run = RunSpec(_zoo_name(file.parent.name), algo, env, correction, None, seed, int(steps[-1]), config)
    return Curve(
        run,
        origin=f"zoo:{resolved}",
        source=str(resolved),
        steps=steps,
        returns=results.mean(axis=1),
        episode_returns=results,
        episode_lengths=lengths,
    )


def _zoo_name(folder: str) -> str:
    """``zoo-{folder}`` as a run name a command line can give back: no comma (it separates run tokens) and no
    control character or undecodable byte."""
    kept = (c if c.isprintable() and c != "," and not "\udc80" <= c <= "\udcff" else "_" for c in folder)
    return f"zoo-{''.join(kept)}"


def zoo_curves(path: Path, files: list[Path] | None = None, **overrides: Any) -> Iterator[Curve | ImportProblem]:
    """Each ``evaluations.npz`` at or under ``path`` (``files``, when already listed), parsed, or
    the problem that stops it."""
    for file in zoo_files(path) if files is None else files:
        try:
            yield read_zoo(file, **overrides)
        except ImportProblem as problem:
            yield problem


# ---- writing --------------------------------------------------------------------------------
def import_curves(
    db: sqlite_utils.Database,
    curves: Iterable[Curve | ImportProblem],
    advance: Callable[[], None] | None = None,
) -> ImportReport:
    """Write each curve as a finished run (or extend an imported run it already holds); ``advance`` per file."""
    report = ImportReport()
    chunk: list[Curve] = []
    rows = 0
    for item in curves:
        if isinstance(item, ImportProblem):
            report.problems.append(str(item))
        else:
            if chunk and rows + len(item.steps) > _CHUNK_ROWS:
                _write_chunk(db, chunk, report)
                chunk, rows = [], 0
            chunk.append(item)
            rows += len(item.steps)
        if len(chunk) >= _CHUNK or rows >= _CHUNK_ROWS:
            _write_chunk(db, chunk, report)
            chunk, rows = [], 0
        if advance is not None:
            advance()
    if chunk:
        _write_chunk(db, chunk, report)
    return report


def _write_chunk(db: sqlite_utils.Database, chunk: list[Curve], report: ImportReport) -> None:
    """One transaction for the chunk, a savepoint per curve: a curve the store refuses is rolled back alone
    and reported, and the others are written."""
    with write(db):
        for curve in chunk:
            db.execute("SAVEPOINT curve")
            try:
                _write_curve(db, curve, report)
            except sqlite3.IntegrityError as error:
                db.execute("ROLLBACK TO curve")
                report.problems.append(f"{curve.source}: the store refused it ({error})")
            db.execute("RELEASE curve")


def _write_curve(db: sqlite_utils.Database, curve: Curve, report: ImportReport) -> None:
    row = db.execute("SELECT id FROM runs WHERE origin = ?", [curve.origin]).fetchone()
    if row is None:
        run_id = _insert_run(db, curve)
        after = -1
    else:
        run_id = row[0]
        sql = "SELECT COALESCE(MAX(step), -1) FROM evaluations WHERE run_id = ?"
        after = db.execute(sql, [run_id]).fetchone()[0]
    fresh = curve.steps > after
    if not fresh.any():
        report.unchanged += 1
        return
    db.conn.executemany(
        "INSERT INTO evaluations (run_id, step, wall_time, return_mean, return_std, length_mean, returns,"
        " lengths) VALUES (?, ?, NULL, ?, ?, ?, ?, ?)",
        _evaluation_rows(run_id, curve, fresh),
    )
    best = float(curve.returns.max())
    db.execute(
        "UPDATE runs SET steps = ?, total_steps = MAX(total_steps, ?), last_return = ?,"
        " best_return = MAX(COALESCE(best_return, ?), ?) WHERE id = ?",
        [int(curve.steps[-1]), int(curve.steps[-1]), float(curve.returns[-1]), best, best, run_id],
    )
    if row is None:
        report.imported += 1
    else:
        report.updated += 1


def _insert_run(db: sqlite_utils.Database, curve: Curve) -> int:
    run, now = curve.run, time.time()
    cursor = db.execute(
        "INSERT INTO runs (name, algo, env, correction, divergence, seed, config, status, total_steps, steps,"
        " source, origin, created, finished) VALUES (?, ?, ?, ?, ?, ?, ?, 'finished', ?, 0, ?, ?, ?, ?)",
        [run.name, run.algo, run.env, run.correction, run.divergence, run.seed, json.dumps(run.config),
         run.total_steps, curve.source, curve.origin, now, now],
    )  # fmt: skip
    return int(cursor.lastrowid)  # type: ignore[arg-type]


def _evaluation_rows(run_id: int, curve: Curve, fresh: np.ndarray) -> Iterable[tuple[Any, ...]]:
    if curve.episode_returns is None or curve.episode_lengths is None:  # the mean return is all there is
        steps, means = curve.steps[fresh].tolist(), curve.returns[fresh].tolist()
        return zip(repeat(run_id), steps, means, repeat(None), repeat(None), repeat("[]"), repeat("[]"))
    return _episode_rows(run_id, curve, np.flatnonzero(fresh))


def _episode_rows(run_id: int, curve: Curve, indices: np.ndarray) -> Iterator[tuple[Any, ...]]:
    assert curve.episode_returns is not None and curve.episode_lengths is not None
    for i in indices:
        returns, lengths = curve.episode_returns[i], curve.episode_lengths[i]
        yield (run_id, int(curve.steps[i]), float(curve.returns[i]), float(returns.std()), float(lengths.mean()),
               *encode_episodes(returns, lengths))  # fmt: skip
