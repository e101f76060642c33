"""Studies that decide as they go: seeds queued one interim at a time until AdaStop decides.

A study is one task (algorithm, environment) and its arms (methods, each a run template), with a
design (:class:`store.sequential.Design`) and an estimand (what one seed contributes), both stored
before its first seed runs. Interim k of a method is its runs of seeds ``first_seed + (k−1)·n …``.
:func:`advance` (the scheduler calls it each poll) reads the finished runs, decides over the complete
interims, records each new interim's verdicts in ``decisions``, and queues the next interim only for
the methods still compared. A seed that failed, was lost or stopped holds its interim until it is
resumed: it is never replaced by another seed, whose choice after seeing results could bias the test.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import numpy as np
import sqlite_utils

from store.db import write
from store.reader import learning_starts
from store.runs import RunSpec, insert_runs
from store.sequential import Design, Outcome, Pair, decide, interval
from store.stats import LAST_EVALUATIONS, LAST_SHARE, FinalWindow

HOLDING = ("failed", "lost", "stopped")
"""Run statuses that hold an interim until the run is resumed."""
UNDECIDABLE = (ValueError, ArithmeticError, LookupError, TypeError)
"""What :func:`store.sequential.decide` or a seed's statistic raises on data they cannot use."""


@dataclass(frozen=True)
class Estimand:
    """What one seed contributes to a decision, declared with the study."""

    kind: Literal["final", "auc"] = "final"
    """``final``: the mean return over the last evaluations (the paper's statistic); ``auc``: the area
    under the return curve over the run, per step (the mean return over its budget)."""
    evaluations: int = LAST_EVALUATIONS
    """``final``: this many last evaluations (unless ``steps``)."""
    steps: int | None = None
    """``final``: the evaluations within the run's last this-many steps instead."""
    share: float | None = LAST_SHARE
    """``final``: the window's cap (:class:`store.stats.FinalWindow`); None in studies declared before it, whose
    seeds are read as they were declared."""

    @property
    def window(self) -> FinalWindow:
        return FinalWindow(self.evaluations, self.steps, self.share)

    def describe(self) -> str:
        if self.kind == "auc":
            return "area under the return curve per step"
        return "mean return over the " + self.window.describe()

    def value(self, steps: np.ndarray, returns: np.ndarray, start: int = 0) -> float:
        """One seed's statistic from its evaluations (steps increasing); ``start``: the step its learning
        starts, the final window's floor (:func:`store.stats.learning_start`)."""
        if self.kind == "auc":
            if len(steps) < 2:
                return float(returns[0])
            return float(np.trapezoid(returns, steps) / (steps[-1] - steps[0]))
        chosen = self.window.select(steps, returns, start)[1]
        if not len(chosen):
            raise ValueError(
                f"a run too short for the window ({self.window.describe()}): no evaluation in it after step {start:,}"
            )
        return float(np.mean(chosen))


@dataclass(frozen=True)
class Study:
    id: int
    name: str
    algo: str
    env: str
    design: Design
    estimand: Estimand
    arms: dict[str, dict[str, Any]]
    """Method → its run template (a :class:`RunSpec` as a dict; the seed is set per run)."""
    comparisons: tuple[Pair, ...]
    first_seed: int
    status: str
    """``running``; ``finished`` once every comparison is decided or undecided at the cap; ``abandoned`` when
    runs of it were deleted; ``failed`` when it could not be decided (``note`` says why)."""
    note: str | None = None

    @property
    def methods(self) -> list[str]:
        return list(self.arms)


@dataclass
class StudyState:
    """A study as the store has it now: its decision over the complete interims, and what holds it."""

    study: Study
    outcome: Outcome
    runs: dict[str, list[dict[str, Any]]]
    """Method → its runs (id, seed, interim, status), by seed."""
    holds: list[tuple[int, str]] = field(default_factory=list)
    """(run id, status) of the runs holding the next interim: failed, lost or stopped."""
    values: dict[str, tuple[float, ...]] = field(default_factory=dict)
    """Method → its seeds' statistics over its complete interims, in seed order: what was decided on."""
    problem: str | None = None
    """Why its seeds cannot be decided on (a non-finite value, a run too short for the window): it decides
    nothing, and :func:`advance` marks it failed with this reason."""

    def interval(self, pair: Pair, interim: int) -> tuple[float, float]:
        """The repeated confidence interval of ``pair``'s mean difference after ``interim`` (1-based), at the
        level the pair was tested at there (:meth:`level`)."""
        a, b = pair
        remaining = round(self.study.design.alpha / self.level(pair, interim))
        return _interval(a, self.values[a], b, self.values[b], self.study.design, interim, remaining)

    def level(self, pair: Pair, interim: int) -> float:
        """Holm's level of ``pair`` at ``interim`` (1-based): α over the comparisons not yet called different."""
        return self.outcome.interims[interim - 1].levels[pair]

    @property
    def interim(self) -> int:
        """The interim being run (1-based): the one after those decided on."""
        return min(len(self.outcome.interims) + 1, self.study.design.max_interims)

    def seeds_run(self) -> dict[str, int]:
        """Seeds each method was queued for so far."""
        return {m: len(rs) for m, rs in self.runs.items()}

    @property
    def equal_power_seeds(self) -> int:
        """Seeds a method of the fixed-sample design with this study's power (:meth:`Design.equal_power_seeds`
        at Holm's first level, α over the study's comparisons)."""
        return self.study.design.equal_power_seeds(len(self.study.comparisons))

    def seeds_saved(self) -> int:
        """Seeds the fixed design of equal power would run, every method (the baseline included), less what this
        study ran; so far, while it runs, only over the methods no longer compared. Negative: it ran more."""
        run = self.seeds_run()
        methods = list(run) if self.outcome.finished else [m for m in run if _done(self, m)]
        return sum(self.equal_power_seeds - run[m] for m in methods)


def _done(state: StudyState, method: str) -> bool:
    return method not in state.outcome.open_methods()


def create_study(
    db: sqlite_utils.Database,
    *,
    name: str,
    design: Design,
    estimand: Estimand,
    arms: dict[str, RunSpec],
    comparisons: Sequence[Pair],
    first_seed: int = 0,
    backend: str | None = None,
    once: bool = False,
) -> tuple[int, list[int]]:
    """Record a study and queue its first interim (``n`` seeds of every method), in one transaction; its id
    and the runs queued. ``once``: where a study of this name and task exists already (``sweep --decide``
    submitted again), nothing is written and its id comes back with no runs."""
    if problems := design.problems():
        raise ValueError(problems[0])
    first = next(iter(arms.values()))
    templates = {m: asdict(spec) for m, spec in arms.items()}
    with write(db):
        if once:
            found = db.execute(
                "SELECT id FROM studies WHERE name = ? AND algo = ? AND env = ? ORDER BY id LIMIT 1",
                [name, first.algo, first.env],
            ).fetchone()
            if found is not None:
                return int(found[0]), []
        cursor = db.execute(
            "INSERT INTO studies (name, algo, env, design, estimand, arms, comparisons, first_seed, status, created)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)",
            [
                name,
                first.algo,
                first.env,
                json.dumps(asdict(design)),
                json.dumps(asdict(estimand)),
                json.dumps(templates),
                json.dumps([list(p) for p in comparisons]),
                first_seed,
                time.time(),
            ],
        )
        study_id = int(cursor.lastrowid)  # type: ignore[arg-type]
        study = _study(db, study_id)
        ids = _queue_interim(db, study, 1, list(arms), backend)
    return study_id, ids


def _spec(study: Study, method: str, seed: int) -> RunSpec:
    template = dict(study.arms[method])
    template["config"] = {**template["config"], "seed": seed}
    return replace(RunSpec(**template), seed=seed)


def _queue_interim(
    db: sqlite_utils.Database, study: Study, interim: int, methods: list[str], backend: str | None
) -> list[int]:
    n = study.design.interim_seeds
    seeds = range(study.first_seed + (interim - 1) * n, study.first_seed + interim * n)
    order = [m for m in study.methods if m in methods]  # as declared, seed by seed: methods progress together
    arms = [(m, _spec(study, m, s)) for s in seeds for m in order]
    ids = insert_runs(db, [spec for _, spec in arms], backend)
    for run_id, (method, _) in zip(ids, arms, strict=True):
        db.execute(
            "UPDATE runs SET study_id = ?, interim = ?, arm = ? WHERE id = ?", [study.id, interim, method, run_id]
        )
    return ids


def _study(db: sqlite_utils.Database, study_id: int) -> Study:
    return next(s for s in studies(db) if s.id == study_id)


def studies(db: sqlite_utils.Database, status: str | None = None) -> list[Study]:
    """The store's studies, oldest first."""
    if not db["studies"].exists():
        return []
    sql = "SELECT id, name, algo, env, design, estimand, arms, comparisons, first_seed, status, note FROM studies"
    rows = db.execute(sql + (" WHERE status = ?" if status else "") + " ORDER BY id", [status] if status else [])
    return [
        Study(
            id=r[0],
            name=r[1],
            algo=r[2],
            env=r[3],
            design=Design(**json.loads(r[4])),
            estimand=Estimand(**{"share": None, **json.loads(r[5])}),  # declared before the cap: none
            arms=json.loads(r[6]),
            comparisons=tuple((a, b) for a, b in json.loads(r[7])),
            first_seed=r[8],
            status=r[9],
            note=r[10],
        )
        for r in rows.fetchall()
    ]


def _values(db: sqlite_utils.Database, study: Study, runs: list[dict[str, Any]]) -> list[float]:
    """The statistics of a method's leading complete interims (every run of each finished), in seed order."""
    n = study.design.interim_seeds
    starts = learning_starts(db, [r["id"] for r in runs])
    out: list[float] = []
    for k in range(study.design.max_interims):
        block = [r for r in runs if r["interim"] == k + 1]
        if len(block) < n or any(r["status"] != "finished" for r in block):
            break
        for r in sorted(block, key=lambda r: r["seed"]):
            rows = db.execute(
                "SELECT step, return_mean FROM evaluations WHERE run_id = ? ORDER BY step", [r["id"]]
            ).fetchall()
            if not rows:
                return out  # a finished run without evaluations cannot count: the interim stays open
            steps, returns = np.array([x[0] for x in rows]), np.array([x[1] for x in rows], dtype=np.float64)
            out.append(study.estimand.value(steps, returns, starts[r["id"]]))
    return out


@functools.lru_cache(maxsize=64)
def _decide(
    values: tuple[tuple[str, tuple[float, ...]], ...], comparisons: tuple[Pair, ...], design: Design
) -> Outcome:
    """:func:`decide`, remembered per input: a dashboard polling every second recomputes only when an interim
    completes (10 methods × 20 seeds take ~70 ms on these machines; benchmarks/decision_cost.py)."""
    return decide(dict(values), comparisons, design)


@functools.lru_cache(maxsize=256)
def _interval(
    a: str,
    a_values: tuple[float, ...],
    b: str,
    b_values: tuple[float, ...],
    design: Design,
    interim: int,
    remaining: int,
) -> tuple[float, float]:
    """:func:`store.sequential.interval`, remembered per input (tens of ms each). The methods keep their names:
    they order the permutation samples, which must be the verdict's."""
    return interval({a: a_values, b: b_values}, (a, b), design, interim, remaining)


JOINT_TEST = (
    "declared under offpoc's earlier joint test of several methods (weak family-wise control), which no longer"
    " runs, and not re-read with today's: its recorded verdicts stand (export --table decisions); --again starts"
    " a study with Holm's strong control"
)
"""Why a study of several comparisons that recorded an interim before each comparison became its own test
(schema 14) is not decided again: the new test could reverse a verdict the store recorded and showed."""


def joint_test(db: sqlite_utils.Database, study: Study) -> bool:
    """Whether ``study`` compared several methods under the earlier joint test: it has more than one
    comparison and decision rows recorded before levels were (``level`` empty)."""
    if len(study.comparisons) < 2:  # two arms: the test is the same as it was
        return False
    sql = "SELECT 1 FROM decisions WHERE study_id = ? AND level IS NULL LIMIT 1"
    return db.execute(sql, [study.id]).fetchone() is not None


def recorded_verdicts(db: sqlite_utils.Database, study: Study) -> list[tuple[str, str, str, int]]:
    """(method, other, verdict, interim) of each comparison's last recorded decision, in comparison order."""
    rows = db.execute(
        "SELECT method, other, verdict, interim FROM decisions WHERE study_id = ? ORDER BY interim", [study.id]
    ).fetchall()
    last = {(m, o): (m, o, v, k) for m, o, v, k in rows}
    return [last[pair] for pair in study.comparisons if pair in last]


def state(db: sqlite_utils.Database, study: Study) -> StudyState:
    """Where ``study`` stands: recomputed from its runs, so every reader of the store agrees."""
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in study.methods}
    for run_id, seed, interim, status, arm in db.execute(
        "SELECT id, seed, interim, status, arm FROM runs WHERE study_id = ? ORDER BY seed, id", [study.id]
    ).fetchall():
        if arm in runs:
            runs[arm].append({"id": run_id, "seed": seed, "interim": interim, "status": status})
    if joint_test(db, study):  # never decided again: advance marks a running one failed, saying why
        undecided = Outcome(study.design, study.comparisons, dict.fromkeys(study.comparisons, "continue"), {})
        return StudyState(study, undecided, runs, [], {}, problem=JOINT_TEST)
    try:
        values = tuple((m, tuple(_values(db, study, rs))) for m, rs in runs.items())
        outcome = _decide(values, study.comparisons, study.design)
    except UNDECIDABLE as error:  # every reader still gets a state; advance marks the study failed
        undecided = Outcome(study.design, study.comparisons, dict.fromkeys(study.comparisons, "continue"), {})
        return StudyState(study, undecided, runs, [], {}, problem=f"{type(error).__name__}: {error}")
    next_interim = len(outcome.interims) + 1
    holds = [
        (r["id"], r["status"])
        for m in outcome.open_methods()
        for r in runs[m]
        if r["interim"] == next_interim and r["status"] in HOLDING
    ]
    return StudyState(study, outcome, runs, holds, dict(values))


def advance(db: sqlite_utils.Database, seen: dict[int, tuple[Any, ...]] | None = None) -> list[str]:
    """Record new interims' verdicts and queue the next interim of each running study; what happened, one
    line each. Read first; only a study with something to write takes a write transaction, in which it is
    read again, so two callers never record or queue an interim twice. ``seen`` (the scheduler's, kept across
    polls): a study whose runs have not changed since it was last looked at is not read again."""
    lines = []
    for study in studies(db, status="running"):
        if seen is not None:
            mark = _runs_mark(db, study.id)
            if seen.get(study.id) == mark:
                continue
            seen[study.id] = mark
        try:
            now = state(db, study)
            reason = now.problem
            if reason is None and _pending(db, now):
                with write(db):
                    lines += _advance(db, study.id)
        except UNDECIDABLE as error:
            reason = f"{type(error).__name__}: {error}"
        if reason is not None:
            with write(db):  # said once, and the study left alone after: the scheduler serves the rest
                db.execute(
                    "UPDATE studies SET status = 'failed', note = ?, finished = ? WHERE id = ? AND status = 'running'",
                    [reason, time.time(), study.id],
                )
            lines.append(f"study {study.id} ({study.name}) cannot be decided, marked failed: {reason}")
    return lines


def _runs_mark(db: sqlite_utils.Database, study_id: int) -> tuple[Any, ...]:
    """What changes when a study's runs do: their count, statuses, revisions and steps."""
    return tuple(
        db.execute(
            "SELECT count(*), sum(status = 'finished'), sum(status = 'queued'), sum(status = 'running'),"
            " sum(revision), sum(steps), max(id)"
            " FROM runs WHERE study_id = ?",
            [study_id],
        ).fetchone()
    )


def _pending(db: sqlite_utils.Database, now: StudyState) -> bool:
    """Whether ``now`` has an interim to record, an end to mark or an interim to queue."""
    if now.outcome.finished or len(now.outcome.interims) > _recorded(db, now.study.id):
        return True
    return bool(_unqueued(now))


def _recorded(db: sqlite_utils.Database, study_id: int) -> int:
    return int(
        db.execute("SELECT COALESCE(max(interim), 0) FROM decisions WHERE study_id = ?", [study_id]).fetchone()[0]
    )


def _unqueued(now: StudyState) -> list[str]:
    """Methods still compared whose runs of the next interim are not queued yet."""
    interim = len(now.outcome.interims) + 1
    return [m for m in sorted(now.outcome.open_methods()) if not any(r["interim"] == interim for r in now.runs[m])]


def _advance(db: sqlite_utils.Database, study_id: int) -> list[str]:
    current = _study(db, study_id)
    if current.status != "running":
        return []
    now = state(db, current)
    lines = _record(db, now)
    if now.outcome.finished:
        db.execute("UPDATE studies SET status = 'finished', finished = ? WHERE id = ?", [time.time(), study_id])
        return [*lines, f"study {study_id} ({current.name}): finished after {len(now.outcome.interims)} interims"]
    waiting = _unqueued(now)
    if waiting:
        interim = len(now.outcome.interims) + 1
        backend = db.execute("SELECT backend FROM runs WHERE study_id = ? LIMIT 1", [study_id]).fetchone()
        ids = _queue_interim(db, current, interim, waiting, backend[0] if backend else None)
        lines.append(f"study {study_id} ({current.name}): interim {interim} queued, runs {ids[0]}–{ids[-1]}")
    return lines


def _record(db: sqlite_utils.Database, now: StudyState) -> list[str]:
    """Store the interims decided since the last call: one row per comparison open at each."""
    known = db.execute("SELECT COALESCE(max(interim), 0) FROM decisions WHERE study_id = ?", [now.study.id]).fetchone()[
        0
    ]
    lines = []
    for interim in now.outcome.interims[known:]:
        for pair, statistic in interim.statistics.items():
            verdict = interim.decided.get(pair, "continue")
            boundary = interim.boundaries[pair]
            low, high = now.interval(pair, interim.index)
            db.execute(
                "INSERT INTO decisions (study_id, interim, method, other, verdict, statistic, ci_low, ci_high,"
                " boundary, level, level_spent, seeds, recorded) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    now.study.id,
                    interim.index,
                    pair[0],
                    pair[1],
                    verdict,
                    statistic,
                    low,  # −inf, inf where unbounded (SQLite keeps them; NULL is a row from before intervals)
                    high,
                    None if not np.isfinite(boundary) else boundary,
                    interim.levels[pair],
                    interim.spent[pair],
                    interim.seeds,
                    time.time(),
                ],
            )
        decided = ", ".join(f"{a} {_SIGN[v]} {b}" for (a, b), v in interim.decided.items()) or "nothing decided"
        lines.append(f"study {now.study.id} ({now.study.name}): interim {interim.index}: {decided}")
    return lines


_SIGN = {"larger": ">", "smaller": "<", "undecided": "≟", "continue": "…"}


def decision_rows(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """Every recorded interim verdict, with its study's task and design: ``export --table decisions``."""
    if not db["decisions"].exists():
        return []
    cursor = db.execute(
        "SELECT d.study_id, s.name, s.algo, s.env, d.interim, d.method, d.other, d.verdict, d.statistic, d.ci_low,"
        " d.ci_high, d.boundary,"
        " d.level, d.level_spent, d.seeds, s.design, s.estimand, d.recorded"
        " FROM decisions d JOIN studies s ON s.id = d.study_id ORDER BY d.study_id, d.interim, d.id"
    )
    columns = [c[0] for c in cursor.description]
    rows = []
    for r in cursor.fetchall():
        row = dict(zip(columns, r, strict=True))
        design, estimand = json.loads(row.pop("design")), Estimand(**{"share": None, **json.loads(row.pop("estimand"))})
        row["alpha"], row["interim_seeds"], row["max_interims"] = (
            design["alpha"],
            design["interim_seeds"],
            design["max_interims"],
        )
        row["estimand"] = estimand.describe()
        rows.append(row)
    return rows
