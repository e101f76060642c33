"""What a sequential study says in Compare and ``dashboard --once``: its state per comparison, its interims
and the seeds it saved, in words a reader can act on (a held interim names the runs to resume)."""

from __future__ import annotations

import math

import sqlite_utils

from store.sequential import Pair
from store.studies import JOINT_TEST, Study, StudyState, joint_test, recorded_verdicts, state, studies
from store.summary import method_label
from store.tasks import env_matches


def label(now: StudyState, method: str) -> str:
    """The method's row name; a sweep's method with settings of its own (``none, batch_size=64``) says them."""
    arm = now.study.arms[method]
    variant = method.split(", ", 1)[1] if ", " in method else ""
    return method_label(now.study.algo, arm["correction"], arm.get("divergence"), variant=variant)


def _signed(value: float) -> str:
    return "∞" if value == math.inf else "−∞" if value == -math.inf else f"{value:+,.1f}".replace("-", "−")


def effect(now: StudyState, pair: Pair, interim: int) -> str:
    """``difference +412.3, 95% interval [+120.5, +704.1]``: the mean difference after ``interim`` and its
    repeated confidence interval, valid whenever the study stopped, at the level the pair was tested at there
    (Holm's: 97.5% with two comparisons open), so that it leaves out 0 exactly where the verdict is a
    difference."""
    statistic = now.outcome.interims[interim - 1].statistics[pair]
    low, high = now.interval(pair, interim)
    confidence = f"{100 * (1 - now.level(pair, interim)):.3g}"
    return f"difference {_signed(statistic)}, {confidence}% interval [{_signed(low)}, {_signed(high)}]"


def pair_line(now: StudyState, pair: Pair) -> str:
    """``TD3 + AC-Off-POC > TD3, decided after 2 interims (10 seeds each); difference +412.3, 95% interval
    [+120.5, +704.1]``, or where it stands."""
    design, outcome = now.study.design, now.outcome
    a, b = label(now, pair[0]), label(now, pair[1])
    verdict = outcome.verdicts[pair]
    if verdict in ("larger", "smaller"):
        k = outcome.decided_at[pair]
        sign = ">" if verdict == "larger" else "<"
        plural = "s" if k > 1 else ""
        return (
            f"{a} {sign} {b}, decided after {k} interim{plural} ({k * design.interim_seeds} seeds each);"
            f" {effect(now, pair, k)}"
        )
    if verdict == "undecided":
        return (
            f"{a} vs {b}: undecided at the cap, no difference found at α = {design.alpha} after"
            f" {design.max_interims} interims ({design.seeds_at_most} seeds each); not a proof they are equal;"
            f" {effect(now, pair, design.max_interims)}"
        )
    interim = len(outcome.interims) + 1
    runs = [r for m in pair for r in now.runs[m] if r["interim"] == interim]
    done = sum(r["status"] == "finished" for r in runs)
    held = [(i, status) for i, status in now.holds if any(r["id"] == i for r in runs)]
    line = f"{a} vs {b}: continue, interim {interim} of {design.max_interims} runs ({done} of {len(runs)} seeds done)"
    if interim > 1:
        line += f"; after interim {interim - 1}: {effect(now, pair, interim - 1)}"
    if held:
        listed = ", ".join(f"run {i} {status}" for i, status in held)
        line += f"; held by {listed} until resumed: " + "; ".join(f"offpoc resume {i}" for i, _ in held)
    return line


def history(now: StudyState) -> str:
    """``interim 1: TD3 + ACE − TD3 −12.3 (|d| ≤ 40.1) · …``: each interim's comparisons, their mean
    differences and the boundary each had to pass, on the estimand's scale."""
    parts = []
    for interim in now.outcome.interims:
        cells = []
        for pair, statistic in interim.statistics.items():
            bound = interim.boundaries[pair]
            limit = "∞" if math.isinf(bound) else f"{bound:,.1f}"
            sign = ">" if pair in interim.decided and interim.decided[pair] != "undecided" else "≤"
            cells.append(f"{label(now, pair[0])} − {label(now, pair[1])} {statistic:+,.1f} (|d| {sign} {limit})")
        if cells:
            parts.append(f"interim {interim.index}: " + "; ".join(cells))
    return " · ".join(parts)


def heading(study: Study) -> str:
    """``study 3 (name): AdaStop, α = 0.05 family-wise over its 2 comparisons, interims of …``."""
    design = study.design
    return (
        f"study {study.id} ({study.name}): AdaStop, α = {design.alpha} family-wise over its"
        f" {len(study.comparisons)} comparison{'s' if len(study.comparisons) > 1 else ''}, interims of"
        f" {design.interim_seeds} seeds a method, at most {design.max_interims}; a seed: {study.estimand.describe()}"
    )


def study_lines(now: StudyState) -> list[str]:
    study = now.study
    design = study.design
    lines = [heading(study)]
    if study.status == "abandoned":  # its seeds were deleted: what it decided before is in `decisions`
        return [*lines, "abandoned: runs of it were deleted; what it had decided is in export --table decisions"]
    if study.status == "failed":
        return [*lines, f"failed, not decided: {study.note}"]
    if now.problem is not None:  # the scheduler marks it failed at its next look
        return [*lines, f"cannot be decided: {now.problem}"]
    lines += [pair_line(now, pair) for pair in study.comparisons]
    if text := history(now):
        lines.append(text)
    early = [p for p, v in now.outcome.verdicts.items() if v in ("larger", "smaller")]
    if any(now.outcome.decided_at[p] < design.max_interims for p in early):
        lines.append(
            "stopped early: the fixed-sample figures beside it (means, vs base, P(>base), Welch p) use the seeds"
            " it stopped on and lean away from zero; read them as conditional on stopping, the interval above"
            " as the estimate"
        )
    equal, used, saved = now.equal_power_seeds, sum(now.seeds_run().values()), now.seeds_saved()
    so_far = "" if now.outcome.finished else " so far, by the methods no longer compared"
    tally = f": {saved} saved{so_far}" if saved > 0 else f": {-saved} more{so_far}" if saved < 0 else ""
    lines.append(
        f"seeds queued {used}, the baseline's included; a fixed design of equal power runs {equal} a method,"
        f" {equal * len(study.arms)} in all (80% power where this design has 80%, at α/{len(study.comparisons)};"
        f" a normal approximation){tally}"
    )
    return lines


def task_lines(db: sqlite_utils.Database, algo: str, env: str) -> list[str]:
    """Every study of one task (``env`` an id or a family, as Compare keys tasks), newest first."""
    out: list[str] = []
    for study in reversed([s for s in studies(db) if s.algo == algo and env_matches(s.env, [env])]):
        now = state(db, study)
        out += joint_lines(db, now) if joint_test(db, study) else study_lines(now)
    return out


def joint_lines(db: sqlite_utils.Database, now: StudyState) -> list[str]:
    """A study decided under the earlier joint test (:data:`store.studies.JOINT_TEST`): its verdicts as
    recorded, and why they are not decided again."""
    lines = [heading(now.study)]
    for method, other, verdict, interim in recorded_verdicts(db, now.study):
        a, b = label(now, method), label(now, other)
        said = {"larger": f"{a} > {b}, as recorded at", "smaller": f"{a} < {b}, as recorded at"}.get(
            verdict, f"{a} vs {b}: undecided at the cap," if verdict == "undecided" else f"{a} vs {b}: not decided by"
        )
        lines.append(f"{said} interim {interim}")
    return [*lines, JOINT_TEST]
