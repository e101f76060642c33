"""Export: tidy long tables (one row per observation, run metadata first) as CSV, JSON or Markdown,
and the paper's summary table (:mod:`store.summary`) as CSV, JSON, Markdown or LaTeX.

Rows are streamed, so exporting millions of per-batch values of logged quantities holds one block in memory.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import IO, Any

import sqlite_utils

from store import summary, tables
from store.codec import json_text
from store.reader import META_COLUMNS, SAMPLER_SQL, quantities, quantity_rows, where_runs
from store.tasks import env_matches

TABLES = (
    "evaluations", "episodes", "train", "quantities", "runs", "decisions",
    "finals", "summary", "aggregate", "improvement",
)  # fmt: skip
TABLE_ALIASES = {"weights": "quantities"}
"""Names a table went by before (``--table weights``: the logged quantities, λ first among them)."""
FINAL_TABLES = ("finals", "summary", "aggregate", "improvement")
"""Tables of each run's final return: they take --last, --last-steps, --until and --dedupe."""
LATEX_TABLES = FINAL_TABLES[1:]
"""Tables across seeds, written as LaTeX too; ``finals`` is tidy, a row per seed."""
FORMATS = ("csv", "json", "md")
SUMMARY_FORMATS = (*FORMATS, "latex")

QUANTITY_COLUMNS = ("quantity", "update", "step", "value", "min", "max", "p10", "p25", "p50", "p75", "p90")
"""One row per logged quantity (``lambda``, ...) and update: a per-batch value fills ``value``; per-transition
values fill ``value`` with their mean and the rest with their summary."""
_SUMMARY = QUANTITY_COLUMNS[3:]

_OBSERVATIONS = {
    "evaluations": ("step", "wall_time", "return_mean", "return_std", "length_mean"),
    "episodes": ("step", "episode", "return", "length"),
    "train": ("step", "updates", "critic_loss", "actor_loss", "q_mean", "alpha", "sps"),
}
RUN_COLUMNS = (
    "status", "steps", "total_steps", "sps", "last_return", "best_return", "mean_lambda", "created", "started",
    "finished", "wall_time", "source", "tags", "note", "lane_group", "config",
)  # fmt: skip
_RUN_SQL = {"tags": "(SELECT group_concat(tag, ' ') FROM (SELECT tag FROM tags WHERE run_id = runs.id ORDER BY tag))"}
"""Run columns that are not the ``runs`` table's own: the tags, space-separated."""
_META_SQL = (
    "runs.id AS run_id, runs.name, runs.algo, runs.env, runs.correction, runs.divergence, "
    f"{SAMPLER_SQL.replace('config', 'runs.config')} AS sampler, runs.seed"
)


DECISION_COLUMNS = (
    "study_id", "name", "algo", "env", "interim", "method", "other", "verdict", "statistic", "ci_low", "ci_high",
    "boundary", "level", "level_spent", "seeds", "alpha", "interim_seeds", "max_interims", "estimand", "recorded",
)  # fmt: skip
"""One row per comparison open at an interim of a sequential study (store.studies): ``verdict`` is where it
stood after that interim (continue, larger, smaller, undecided); ``statistic`` the difference of the two
methods' means over the seeds so far (method − other, in the estimand's units); ``ci_low``, ``ci_high`` its
repeated confidence interval at the comparison's ``level`` (confidence 1 − level: 95% with one comparison),
valid at whichever interim the study stopped (infinite where the
design cannot reject at that interim: ``-inf``/``inf`` in CSV, ``null`` in JSON, ∞ in Markdown; empty in rows
recorded before offpoc kept it); ``boundary`` what
|statistic| had to exceed (empty: nothing could be rejected yet); ``level`` the comparison's share of alpha
then (Holm: alpha over the comparisons not yet called different; empty in rows recorded before offpoc kept
it); ``level_spent`` its own test's error spent by then (≤ level·interim/max_interims)."""


def columns(table: str) -> tuple[str, ...]:
    if table == "decisions":
        return DECISION_COLUMNS
    if table == "runs":
        return (*META_COLUMNS, *RUN_COLUMNS)
    if table == "quantities":
        return (*META_COLUMNS, *QUANTITY_COLUMNS)
    if table == "finals":
        return (*META_COLUMNS, *summary.FINAL_COLUMNS)
    return (*META_COLUMNS, *_OBSERVATIONS[table])


def rows(db: sqlite_utils.Database, table: str, **filters: Any) -> Iterator[tuple[Any, ...]]:
    """Rows of ``table`` for the runs matching ``filters`` (see :func:`store.reader.where_runs`)."""
    if table == "decisions":
        from store.studies import decision_rows

        runs = filters.get("run_ids")
        for row in decision_rows(db):
            if _study_matches(row, filters) and (runs is None or row["study_id"] in _studies_of(db, runs)):
                yield tuple(row[c] for c in DECISION_COLUMNS)
        return
    where, params = where_runs(**filters)
    if table == "runs":
        selected = ", ".join(f"{_RUN_SQL[c]} AS {c}" if c in _RUN_SQL else c for c in RUN_COLUMNS)
        yield from db.execute(f"SELECT {_META_SQL}, {selected} FROM runs{where} ORDER BY runs.id", params)
    elif table == "quantities":
        yield from _quantity_rows(db, where, params)
    else:
        observed = ", ".join(f"t.{c}" for c in _OBSERVATIONS[table])
        yield from db.execute(
            f"SELECT {_META_SQL}, {observed} FROM {table} t JOIN runs ON runs.id = t.run_id{where}"
            " ORDER BY runs.id, t.step",
            params,
        )


def _study_matches(row: dict[str, Any], filters: dict[str, Any]) -> bool:
    """A decision row against export's filters: a study's runs are trained here (source offpoc); a
    correction filter keeps the comparisons that involve one of its corrections."""
    algos, envs, corrections, sources = (filters.get(k) for k in ("algos", "envs", "corrections", "sources"))
    return (
        (not algos or row["algo"] in algos)
        and (not envs or env_matches(row["env"], envs))
        and (not corrections or row["method"] in corrections or row["other"] in corrections)
        and (not sources or "offpoc" in sources)
    )


def _studies_of(db: sqlite_utils.Database, run_ids: list[int]) -> set[int]:
    marks = ", ".join("?" * len(run_ids))
    return {r[0] for r in db.execute(f"SELECT DISTINCT study_id FROM runs WHERE id IN ({marks})", run_ids)}


def _quantity_rows(db: sqlite_utils.Database, where: str, params: list[Any]) -> Iterator[tuple[Any, ...]]:
    index = {name: i for i, name in enumerate(_SUMMARY)} | {"mean": 0}
    slots: dict[tuple[str, ...], list[int]] = {}  # a run's stored columns → export columns, worked out once
    for meta in db.execute(f"SELECT {_META_SQL} FROM runs{where} ORDER BY runs.id", params).fetchall():
        for quantity in [q["name"] for q in quantities(db, [meta[0]])]:
            for update, step, names, values in quantity_rows(db, meta[0], quantity):
                if names not in slots:
                    slots[names] = [0] if len(names) == 1 else [index[name] for name in names]
                row: list[Any] = [None] * len(_SUMMARY)
                for slot, value in zip(slots[names], values):
                    row[slot] = round(float(value), 6)
                yield (*meta, quantity, update, step, *row)


TIME_COLUMNS = ("created", "started", "finished", "heartbeat", "recorded")
"""Columns holding a time (seconds since the epoch): written for a reader as an ISO date in Markdown."""
UNBOUNDED_COLUMNS = ("boundary",)
"""Columns where an empty value means ∞ (a decision's boundary where nothing can be rejected yet)."""


def _md_cell(value: Any, column: str = "") -> str:
    if value is None:
        return "∞" if column in UNBOUNDED_COLUMNS else ""
    if column in TIME_COLUMNS and isinstance(value, int | float) and math.isfinite(value):
        return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    if isinstance(value, float):
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"  # the minus of the numbers beside it
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def write_rows(
    out: IO[str], fmt: str, header: tuple[str, ...], data: Iterator[tuple[Any, ...]], objects: tuple[str, ...] = ()
) -> int:
    """Write rows in ``fmt``; returns how many. ``objects``: columns holding JSON text (a run's config), written
    into JSON as the objects they are, not as strings."""
    n = 0
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        for row in data:
            writer.writerow(["" if v is None else v for v in row])
            n += 1
    elif fmt == "json":
        out.write("[")
        for row in data:
            record = dict(zip(header, row))
            for column in objects:
                if isinstance(record.get(column), str):
                    record[column] = json.loads(record[column])
            out.write(("\n  " if n == 0 else ",\n  ") + json_text(record))
            n += 1
        out.write("\n]\n" if n else "]\n")
    elif fmt == "md":
        out.write("| " + " | ".join(header) + " |\n")
        out.write("|" + "|".join("---" for _ in header) + "|\n")
        for row in data:
            out.write("| " + " | ".join(_md_cell(v, c) for v, c in zip(row, header, strict=True)) + " |\n")
            n += 1
    else:
        raise ValueError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    return n


def write_summary(out: IO[str], fmt: str, rows: list[summary.SummaryRow], window: str, note: str = "") -> int:
    """The summary: one row per method and environment (csv, json), or the paper's layout (md, latex);
    ``window`` names the evaluations each final return takes (``last 10 evaluations``); ``note``: a line
    more under a Markdown table."""
    if fmt == "md":
        out.write(tables.markdown(rows, window) + (f"{note}\n" if note else ""))
    elif fmt == "latex":
        out.write(tables.latex(rows, window))
    else:
        cells = (tuple(None if isinstance(v, float) and math.isnan(v) else v for v in r.values()) for r in rows)
        write_rows(out, fmt, summary.COLUMNS, cells)
    return len(rows)
