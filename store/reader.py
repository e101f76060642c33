"""Read-only queries over a store: run listings, one run's summary, observations.

Everything the CLI and the dashboard show comes through here, as plain dicts
and lists; nothing here writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, TypedDict, cast

import numpy as np
import sqlite_utils

from store.codec import decode_counts, decode_values
from store.runs import RunRow
from store.stats import learning_start
from store.tags import tags_of

META_COLUMNS = ("run_id", "name", "algo", "env", "correction", "divergence", "sampler", "seed")
"""The run metadata that leads every exported row."""

PS_COLUMNS = (
    "id", "name", "algo", "env", "correction", "divergence", "sampler", "seed", "status", "steps", "total_steps",
    "sps", "last_return", "pid", "host", "backend", "tags", "note", "lane_group",
)  # fmt: skip


def _dicts(cursor: Any) -> list[dict[str, Any]]:
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]


DEFAULT_SAMPLER = "uniform"
SAMPLER_SQL = f"COALESCE(json_extract(config, '$.sampler'), '{DEFAULT_SAMPLER}')"
"""A run's replay sampler, from its stored config (runs from before samplers, and imports: uniform)."""


SOURCE_SQL = {
    "offpoc": "(runs.origin IS NULL OR runs.origin LIKE 'merged:%')",  # trained here, or merged from a store
    "published": "runs.origin LIKE 'reference:%'",
    "zoo": "runs.origin LIKE 'zoo:%'",
}
"""Where a run's evaluations come from (:data:`store.tasks.SOURCES`), as a condition on ``runs``."""


class RunFilters(TypedDict, total=False):
    """Which runs a read covers (each None or absent: all); the keyword arguments of :func:`where_runs`."""

    run_ids: list[int] | None
    algos: list[str] | None
    envs: list[str] | None
    corrections: list[str] | None
    sources: list[str] | None
    tags: list[str] | None


def where_runs(
    run_ids: list[int] | None = None,
    algos: list[str] | None = None,
    envs: list[str] | None = None,
    corrections: list[str] | None = None,
    statuses: list[str] | None = None,
    sources: list[str] | None = None,
    tags: list[str] | None = None,
) -> tuple[str, list[Any]]:
    """A WHERE clause (possibly empty) over ``runs`` and its parameters; ``tags``: runs carrying every one."""
    clauses: list[str] = [f"({' OR '.join(SOURCE_SQL[s] for s in sources)})"] if sources else []
    params: list[Any] = []
    for tag in tags or ():
        clauses.append("runs.id IN (SELECT run_id FROM tags WHERE tag = ?)")
        params.append(tag.lower())  # tags are stored in lower case
    if envs:  # an exact id, or a family: every version of it (store.tasks.env_matches)
        exact = f"runs.env IN ({', '.join('?' for _ in envs)})"
        version = "(runs.env GLOB ? || '-v[0-9]*' AND substr(runs.env, length(?) + 3) NOT GLOB '*[^0-9]*')"
        clauses.append(f"({' OR '.join([exact, *[version] * len(envs)])})")
        params.extend([*envs, *(f for family in envs for f in (_glob_literal(family), family))])
    for column, values in (
        ("id", run_ids),
        ("algo", algos),
        ("correction", corrections),
        ("status", statuses),
    ):
        if values:
            clauses.append(f"runs.{column} IN ({', '.join('?' for _ in values)})")
            params.extend(values)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _glob_literal(text: str) -> str:
    """``text`` as a GLOB pattern matching itself only: its ``*``, ``?`` and ``[`` each in brackets."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def list_runs(db: sqlite_utils.Database, statuses: list[str] | None = None, **filters: Any) -> list[RunRow]:
    """Runs (every column but the config and traceback, and the config's replay ``sampler``), oldest first."""
    where, params = where_runs(statuses=statuses, **filters)
    columns = "id, name, algo, env, correction, divergence, seed, status, steps, total_steps, updates, sps,"
    columns += " last_return, best_return, mean_lambda, pid, host, source, origin, created, started, finished,"
    columns += (
        f" heartbeat, wall_time, checkpoint_step, error, duplicate_of, backend, revision, {SAMPLER_SQL} AS sampler,"
        " note, lane_group"
    )
    runs = cast(list[RunRow], _dicts(db.execute(f"SELECT {columns} FROM runs{where} ORDER BY id", params)))
    tagged = tags_of(db)
    for run in runs:
        run["tags"] = tagged.get(run["id"], [])
    return runs


def run_detail(db: sqlite_utils.Database, run_id: int) -> RunRow | None:
    """Everything about one run: its row, config (parsed) and a summary of its observations."""
    rows = _dicts(db.execute("SELECT * FROM runs WHERE id = ?", [run_id]))
    if not rows:
        return None
    run = cast(RunRow, rows[0])
    run["config"] = json.loads(run["config"])
    run["tags"] = tags_of(db, [run_id]).get(run_id, [])
    counts = {
        table: db.execute(f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", [run_id]).fetchone()[0]
        for table in ("evaluations", "episodes", "train", "histograms")
    }
    run["logged"] = dict(  # values stored per logged quantity (per update, per actor step or per evaluation)
        db.execute(
            "SELECT quantity, SUM(count) FROM quantity_blocks WHERE run_id = ? GROUP BY quantity"
            " ORDER BY quantity != ?, quantity",
            [run_id, "lambda"],
        ).fetchall()
    )
    counts["quantities"] = sum(run["logged"].values())  # values, every quantity's
    counts["weights"] = counts["quantities"]  # its name before schema 12, for scripts reading `show --json`
    run["counts"] = counts
    first_last = db.execute("SELECT MIN(step), MAX(step) FROM evaluations WHERE run_id = ?", [run_id]).fetchone()
    run["evaluated_steps"] = list(first_last)
    return run


def quantity_blocks(
    db: sqlite_utils.Database, run_id: int, after_step: int = -1, quantity: str = "lambda"
) -> Iterator[tuple[int, int, tuple[str, ...], np.ndarray, int]]:
    """A run's blocks of one logged quantity (λ by default) starting past ``after_step``, in order.

    Yields (first update, first step, columns, (count, columns) values, stride): row i is at update
    first + i·stride and step first step + i·stride (stride 2: every other update). A run never writes
    a step twice, so ``after_step`` (the last block's first step) is a watermark that misses nothing
    while the run's ``revision`` stays (a resumed run that replaced records bumps it).
    """
    for first_update, first_step, count, columns, data, stride in db.execute(
        "SELECT first_update, first_step, count, columns, data, stride FROM quantity_blocks"
        " WHERE run_id = ? AND quantity = ? AND first_step > ? ORDER BY first_step",
        [run_id, quantity, after_step],
    ):
        names = tuple(columns.split(","))
        yield first_update, first_step, names, decode_values(data, len(names), count), stride


def mean_until(db: sqlite_utils.Database, run_id: int, quantity: str, step: int) -> float | None:
    """The mean of a logged quantity (its first column: λ, or the mean of per-transition λ_i) over the updates at
    or before ``step``; None where there are none. Whole blocks by their stored means; the one block that
    straddles ``step`` decoded."""
    last = "first_step + (count - 1) * stride"
    total, n = db.execute(
        f"SELECT SUM(mean * count), SUM(count) FROM quantity_blocks WHERE run_id = ? AND quantity = ? AND {last} <= ?",
        [run_id, quantity, step],
    ).fetchone()
    total, n = total or 0.0, n or 0
    straddling = db.execute(
        f"SELECT first_step FROM quantity_blocks WHERE run_id = ? AND quantity = ? AND first_step <= ? AND {last} > ?",
        [run_id, quantity, step, step],
    ).fetchone()
    if straddling is not None:
        _, first_step, _, values, stride = next(quantity_blocks(db, run_id, straddling[0] - 1, quantity))
        kept = values[: (step - first_step) // stride + 1, 0]
        total, n = total + float(kept.sum(dtype=np.float64)), n + len(kept)
    return total / n if n else None


def quantity_rows(
    db: sqlite_utils.Database, run_id: int, quantity: str = "lambda"
) -> Iterator[tuple[int, int, tuple[str, ...], np.ndarray]]:
    """Per update: (update, step, columns, values) decoded from the run's blocks of ``quantity``, in order."""
    for first_update, first_step, names, values, stride in quantity_blocks(db, run_id, quantity=quantity):
        for i in range(len(values)):
            yield first_update + i * stride, first_step + i * stride, names, values[i]


def quantities(db: sqlite_utils.Database, run_ids: list[int]) -> list[dict[str, Any]]:
    """The logged quantities of ``run_ids`` (name, label, low, high), λ first, then by name."""
    if not run_ids:
        return []
    rows = db.execute(
        f"SELECT name, MIN(label), MIN(low), MAX(high) FROM quantities WHERE run_id IN ({_in(run_ids)})"
        " GROUP BY name ORDER BY name != 'lambda', name",
        run_ids,
    )
    return [{"name": n, "label": label, "low": low, "high": high} for n, label, low, high in rows]


# ---- incremental reads for live views (the dashboard polls these) ---------------------------
def _in(run_ids: list[int]) -> str:
    return ", ".join("?" for _ in run_ids)


def eval_points(db: sqlite_utils.Database, after: dict[int, int]) -> list[tuple[Any, ...]]:
    """Evaluations past a step per run: ``after`` maps run id → last step seen (−1: none).

    Returns (run_id, step, wall_time, return_mean) in run, step order. Each run is one range
    scan of the (run_id, step) index, so a poll costs what was written since the last one;
    a run never writes a step twice, so a step watermark misses nothing while the run's ``revision``
    stays (a resumed run that replaced what it recorded past its checkpoint bumps it).
    """
    if not after:
        return []
    pairs = ", ".join("(?, ?)" for _ in after)
    params = [v for item in after.items() for v in item]
    return db.execute(
        f"WITH seen(run_id, step) AS (VALUES {pairs}) SELECT e.run_id, e.step, e.wall_time, e.return_mean"
        " FROM seen CROSS JOIN evaluations AS e ON e.run_id = seen.run_id AND e.step > seen.step"
        " ORDER BY e.run_id, e.step",
        params,
    ).fetchall()


def eval_series(
    db: sqlite_utils.Database, after: dict[int, int]
) -> dict[int, tuple[list[int], list[float | None], list[float]]]:
    """:func:`eval_points` by run: (steps, wall times, returns); runs with nothing new are left out."""
    series: dict[int, tuple[list[int], list[float | None], list[float]]] = {}
    for run_id, step, wall, ret in eval_points(db, after):
        steps, walls, returns = series.setdefault(run_id, ([], [], []))
        steps.append(step)
        walls.append(wall)
        returns.append(ret)
    return series


def train_points(db: sqlite_utils.Database, run_id: int) -> list[dict[str, Any]]:
    """A run's training statistics, in step order."""
    return _dicts(
        db.execute(
            "SELECT step, updates, critic_loss, actor_loss, q_mean, alpha, sps FROM train WHERE run_id = ?"
            " ORDER BY step",
            [run_id],
        )
    )


def histograms(
    db: sqlite_utils.Database, run_ids: list[int], quantity: str = "lambda"
) -> list[tuple[int, int, np.ndarray]]:
    """(run_id, step, counts) of every histogram of ``quantity`` (λ by default) of ``run_ids``, by run then step."""
    if not run_ids:
        return []
    rows = db.execute(
        f"SELECT run_id, step, counts FROM histograms WHERE quantity = ? AND run_id IN ({_in(run_ids)})"
        " ORDER BY run_id, step",
        [quantity, *run_ids],
    )
    return [(run_id, step, decode_counts(counts)) for run_id, step, counts in rows]


def configs(db: sqlite_utils.Database, run_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Each run's resolved config."""
    if not run_ids:
        return {}
    rows = db.execute(f"SELECT id, config FROM runs WHERE id IN ({_in(run_ids)})", run_ids)
    return {run_id: json.loads(config) for run_id, config in rows}


def learning_starts(db: sqlite_utils.Database, run_ids: list[int]) -> dict[int, int]:
    """Each run's learning start (:func:`store.stats.learning_start`): the floor of its final window."""
    return {run_id: learning_start(config) for run_id, config in configs(db, run_ids).items()}
