"""``offpoc sweep``: a sweep file's grid of runs queued at once (and its studies, with ``--decide``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from offpoc_tui.commands.backend_options import AddressOption, BackendOption, CheckpointDirOption, check_backend
from offpoc_tui.commands.queue import (
    AlphaOption,
    EstimandOption,
    InterimSeedsOption,
    JobsOption,
    LastStepsOption,
    MaxInterimsOption,
    TagOption,
    checked_tags,
    configure,
    declared_alike,
    start_runs,
    study_design,
)
from offpoc_tui.commands.watch import follow_runs
from offpoc_tui.console import (
    DEFAULT_DB,
    DbOption,
    db_flag,
    err,
    fail,
    id_list,
    open_db,
    out,
)
from offpoc_tui.runtime.stop_resume import ControlError
from store import StoreError
from store.db import check_writable, write
from store.files import RunFiles
from store.files import check_usable as check_run_files
from store.queue import jobs_problem
from store.reader import list_runs
from store.runs import RunRow


def sweep(
    file: Annotated[Path, typer.Argument(help="A sweep file (TOML): algos, envs, methods, seeds, steps, set.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say how many runs and CPU-hours, write nothing.")] = False,
    jobs: JobsOption = None,
    lanes: Annotated[
        int,
        typer.Option(
            help="Train up to K runs that share every setting but the seed and correction as one lane group"
            " (not layer_norm); the others alone.",
            metavar="K",
        ),
    ] = 1,
    backend: BackendOption = "local",
    address: AddressOption = None,
    checkpoint_dir: CheckpointDirOption = None,
    follow_: Annotated[bool, typer.Option("--follow", help="Show progress bars until they finish.")] = False,
    retry: Annotated[
        bool, typer.Option("--retry", help="Resume the sweep's failed, lost and stopped runs instead.")
    ] = False,
    decide_: Annotated[
        bool,
        typer.Option(
            "--decide",
            help="One sequential study (AdaStop) per algorithm × environment: each method against the baseline"
            " (correction none), --interim-seeds seeds a method at a time, stopped once decided.",
        ),
    ] = False,
    alpha: AlphaOption = 0.05,
    interim_seeds: InterimSeedsOption = 5,
    max_interims: MaxInterimsOption = 4,
    estimand: EstimandOption = "final",
    last_steps: LastStepsOption = None,
    tag: TagOption = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Queue a study's grid (algorithms × environments × methods × seeds); again, only what is missing."""
    from offpoc_tui.specs import UsageError, assign_lanes, check_groups
    from offpoc_tui.sweep import cpu_hours, load_sweep, missing, queue_missing
    from store.reader import configs

    try:
        if jobs is not None and (problem := jobs_problem(jobs, "--jobs")) is not None:
            raise UsageError(problem)
        if lanes < 1:
            raise UsageError(f"--lanes must be at least 1, got {lanes}")
        where = check_backend(backend, address, checkpoint_dir)
        if lanes > 1 and decide_:
            raise UsageError(
                "--lanes trains lane groups without --decide (a study's seeds are queued interim by interim)"
            )
        study = study_design(decide_, True, None, alpha, interim_seeds, max_interims, estimand, last_steps)
        grid = load_sweep(file, checked_tags(tag))
        if study is not None and not retry:
            baseline = sweep_baseline(grid)
            comparisons, can = _first_look(grid, study[0])
            if can is None:
                raise UsageError(
                    f"{study[0].interim_seeds} seeds an interim, at most {study[0].max_interims} interims, can never"
                    f" call a method different: {_holm(study[0], comparisons)}; give more --interim-seeds or"
                    " --max-interims"
                )
        if not dry_run:
            check_writable(db)
            check_run_files(db)
    except (UsageError, StoreError) as error:
        fail(str(error))
    store = open_db(db, create=True) if not dry_run or db.exists() else None
    named = [] if store is None else [r for r in list_runs(store) if r["name"] == grid.name]
    if retry:
        _retry(db, store, grid.name, named)
        return
    if study is not None:
        _sweep_studies(db, store, grid, baseline, study, dry_run, where, (jobs, address, checkpoint_dir), follow_)
        return
    new = missing(configs(store, [r["id"] for r in named]).values() if store is not None else [], grid.specs)
    broken = [r["id"] for r in named if r["status"] in ("failed", "lost", "stopped")]
    hours, basis = cpu_hours(store, new)
    summary = (
        f"sweep {grid.name}: {len(grid.specs):,} run{'s' if len(grid.specs) != 1 else ''}, "
        f"{len(new):,} not yet in {db}; "
        f"{sum(s.total_steps for s in new):,} env steps, about "
        + (f"{hours:,.1f} CPU-hours" if hours >= 1 else f"{hours * 60:.0f} CPU-minutes")
        + f" ({basis})"
    )
    unfinished = (
        f"; {len(broken)} of its runs failed, were lost or stopped (id {id_list(broken)}):"
        f" `offpoc sweep {file} --retry{db_flag(db)}` resumes them"
        if broken
        else ""
    )
    if lanes > 1 and where is None and new:  # each group must fit this machine as one process, dry run too
        try:
            check_groups(assign_lanes(new, lanes, strict=False))
        except UsageError as error:
            if store is not None:
                store.close()
            fail(str(error))
    if dry_run or not new:
        out.print(summary + unfinished, highlight=False)
        if store is not None:
            store.close()
        return
    assert store is not None
    configure(store, jobs, where, address, checkpoint_dir)
    ids = queue_missing(store, grid, where, lanes)
    if not ids:
        out.print(f"sweep {grid.name}: another command queued its missing runs meanwhile", highlight=False)
        return
    RunFiles.of(store, db).ensure()
    limit = start_runs(db, store, where)
    out.print(summary + unfinished, highlight=False)
    plural = "s" if len(ids) > 1 else ""
    out.print(f"queued {len(ids)} run{plural} (id {id_list(ids)}); {limit}", markup=False)
    if not follow_:
        on = db_flag(db)
        out.print(f"watch: offpoc follow {id_list(ids)}{on}  ·  offpoc ps{on}", markup=False)
    if follow_:
        follow_runs(db, ids)


def _check_made_before(store: Any, name: str, tasks: dict[Any, Any], design: Any, target: Any, first_seed: int) -> None:
    """A study this sweep made before must be the one asked for now: its design, estimand and methods are
    fixed before its first seed runs, so a changed file is refused (exit 2), not silently kept; one that
    was abandoned or failed cannot go on, and is said so."""
    from dataclasses import asdict

    from store.studies import studies

    for study in studies(store):
        if study.name != name or (study.algo, study.env) not in tasks:
            continue
        where = f"study {study.id} of sweep {name} ({study.algo} {study.env})"
        asked = {m: asdict(spec) for m, spec in tasks[(study.algo, study.env)].items()}
        if study.first_seed != first_seed:
            fail(f"{where} starts at seed {study.first_seed}, the file now at {first_seed}: give the sweep a new name")
        if not declared_alike(study, design, target, asked):
            fail(
                f"{where} was declared with another design, estimand or methods, fixed before its first seed:"
                " give the sweep a new name to start another study"
            )
        if study.status in ("abandoned", "failed"):
            fail(f"{where} is {study.status} and cannot go on: give the sweep a new name to start again")


def sweep_baseline(grid: Any) -> str:
    """The method every other is compared with by ``sweep --decide``: the one with correction none."""
    from offpoc_tui.specs import UsageError

    methods = next(iter(grid.tasks().values()))
    found = [m for m, spec in methods.items() if spec.correction == "none"]
    if len(found) != 1:
        raise UsageError(
            f"sweep {grid.name} --decide compares each method with the baseline: the file needs one [[methods]]"
            f' with correction = "none", it has {len(found)}'
        )
    if len(methods) < 2:
        raise UsageError(f"sweep {grid.name} --decide: one method, nothing to compare it with")
    return found[0]


def _first_look(grid: Any, design: Any) -> tuple[int, int | None]:
    """(The comparisons of the file's largest study, the first interim at which it can call one different)."""
    comparisons = max(len(arms) for arms in grid.tasks().values()) - 1
    return comparisons, design.first_possible_decision(comparisons)


def _holm(design: Any, comparisons: int) -> str:
    level = design.alpha / comparisons
    return f"with {comparisons} comparisons a study tests its first at α/{comparisons} = {level:.3g}"


def _sweep_studies(
    db: Path,
    store: Any,
    grid: Any,
    baseline: str,
    study: tuple[Any, Any],
    dry_run: bool,
    where: str | None,
    settings: tuple[int | None, str | None, Path | None],
    follow_: bool,
) -> None:
    """``sweep --decide``: one study per algorithm × environment, made once (again: nothing new)."""
    from offpoc_tui.sweep import cpu_hours
    from store.studies import create_study

    design, target = study
    tasks = grid.tasks()
    first = min(grid.seeds)
    n, most = design.interim_seeds, design.seeds_at_most
    runs_first = sum(len(arms) for arms in tasks.values()) * n
    hours, basis = cpu_hours(store, [spec for arms in tasks.values() for spec in arms.values() for _ in range(most)])
    cost = f"{hours:,.1f} CPU-hours" if hours >= 1 else f"{hours * 60:.0f} CPU-minutes"
    out.print(
        f"sweep {grid.name} --decide: {len(tasks)} stud{'ies' if len(tasks) > 1 else 'y'} (one per algorithm ×"
        f" environment), each method vs {baseline}; interims of {n} seeds a method from seed {first}, at most"
        f" {design.max_interims}: {runs_first:,} runs first, {runs_first * design.max_interims:,} at most (about"
        f" {cost} at most, {basis}); α = {design.alpha} family-wise per study; a seed: {target.describe()}",
        markup=False,
        highlight=False,
    )
    comparisons, can = _first_look(grid, design)
    if can is not None and can > 1:
        out.print(
            f"note: interim 1 cannot decide anything ({_holm(design, comparisons)}, which {n} seeds a method"
            f" reach from interim {can})",
            markup=False,
            highlight=False,
        )
    if len(grid.seeds) > 1:
        out.print(
            f"note: the file's seeds ({len(grid.seeds)} of them) are not queued: --decide queues seeds {n} at a time"
            f" from seed {first}, as the decision needs them",
            markup=False,
            highlight=False,
        )
    if store is not None:
        _check_made_before(store, grid.name, tasks, design, target, first)
    if dry_run:
        if store is not None:
            store.close()
        return
    jobs_, address, checkpoint_dir = settings
    configure(store, jobs_, where, address, checkpoint_dir)
    from offpoc_tui.specs import record_plugins

    with write(store):
        record_plugins(store)
    made, ids = [], []
    for (algo, env), arms in tasks.items():
        ordered = {baseline: arms[baseline], **{m: s for m, s in arms.items() if m != baseline}}
        study_id, queued = create_study(
            store,
            name=grid.name,
            design=design,
            estimand=target,
            arms=ordered,
            comparisons=[(m, baseline) for m in ordered if m != baseline],
            first_seed=first,
            backend=where,
            once=True,
        )
        made.append(study_id)
        ids += queued
        said = f"queued its first interim, {len(queued)} runs" if queued else "made before: nothing queued"
        out.print(f"study {study_id}: {algo} {env}, {said}", markup=False, highlight=False)
    if not ids:
        from store.studies import state, studies

        running = [s.id for s in studies(store, status="running") if s.id in made and not state(store, s).holds]
        store.close()
        out.print(f"sweep {grid.name} --decide: every study exists already (offpoc dashboard shows them)")
        if follow_ and running:
            follow_runs(db, [], running)
        return
    RunFiles.of(store, db).ensure()
    limit = start_runs(db, store, where)
    out.print(f"queued {len(ids)} run{'s' if len(ids) > 1 else ''} (id {id_list(ids)}); {limit}", markup=False)
    if follow_:
        follow_runs(db, ids, made)
    else:
        out.print(f"watch: offpoc follow{db_flag(db)}  ·  offpoc dashboard{db_flag(db)}", markup=False)


def _retry(db: Path, store: Any, name: str, runs: list[RunRow]) -> None:
    """``sweep --retry``: resume the sweep's failed, lost and stopped runs (each from its own checkpoint)."""
    from offpoc_tui.runtime.stop_resume import resume

    if store is None:
        fail(f"no store at {db}: nothing to retry")
    broken = [r["id"] for r in runs if r["status"] in ("failed", "lost", "stopped")]
    if not broken:
        out.print(f"sweep {name}: none of its {len(runs)} runs failed, was lost or stopped; nothing to retry")
        return
    for run_id in broken:
        try:
            out.print(resume(db, store, run_id), highlight=False)
        except ControlError as error:
            err.print(f"run {run_id}: {error}", highlight=False)
    out.print(f"watch: offpoc follow {id_list(broken)}{db_flag(db)}", highlight=False)
