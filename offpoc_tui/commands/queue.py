"""Commands that queue runs: ``run``, ``sweep``, and the settings behind them, ``config`` and ``jobs``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from offpoc_tui.commands.backend_options import AddressOption, BackendOption, CheckpointDirOption, check_backend
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
    tables_out,
)
from offpoc_tui.params import count
from offpoc_tui.runtime.stop_resume import ControlError
from store import StoreError
from store.db import check_writable, write
from store.files import RunFiles
from store.files import check_usable as check_run_files
from store.queue import record_backend
from store.reader import list_runs
from store.runs import RunRow, create_runs, reap_lost
from store.variants import record_catalogue

JobsOption = Annotated[
    int | None,
    typer.Option(help="Runs at once on this machine, for the whole store [default: as set, else the CPU cores]."),
]

AlphaOption = Annotated[float, typer.Option(help="--decide: family-wise error over a study's comparisons.")]
InterimSeedsOption = Annotated[int, typer.Option(help="--decide: seeds per method in each interim (n).")]
MaxInterimsOption = Annotated[int, typer.Option(help="--decide: interims at most (K).")]
EstimandOption = Annotated[
    str, typer.Option(help="--decide: a seed's statistic, final (mean of its last evaluations) or auc.")
]
TagOption = Annotated[
    list[str] | None, typer.Option("--tag", help="Tag the runs, repeatable (offpoc tag changes tags later).")
]
LastStepsOption = Annotated[
    int | None,
    typer.Option(parser=count, help="--decide, final: over the last N steps [default: the last 10 evaluations]."),
]


def run(
    algo: Annotated[str, typer.Argument(help="ddpg, td3, sac, or another registered one (offpoc config).")],
    env: Annotated[str, typer.Argument(help="A gymnasium id with a Box action space, e.g. Hopper-v4.")],
    correction: Annotated[
        str, typer.Option(help="A registered correction, e.g. acoffpoc (offpoc config lists them all).")
    ] = "none",
    divergence: Annotated[str | None, typer.Option(help="AC-Off-POC's: jsd, symkl or kl [default: jsd].")] = None,
    ref_std: Annotated[
        float | None, typer.Option(help="AC-Off-POC's reference std [default: the exploration std, 0.1].")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="One seed [default: 0].")] = None,
    seeds: Annotated[str | None, typer.Option(help="Several seeds: 0-4, 1,3,7 or 0-2,10.")] = None,
    steps: Annotated[
        int | None,
        typer.Option(parser=count, help="Environment steps per run, e.g. 1M or 1e6 [default: 1,000,000]."),
    ] = None,
    eval_freq: Annotated[
        int | None, typer.Option(parser=count, help="Steps between evaluations [default: 1,000].")
    ] = None,
    eval_episodes: Annotated[
        int | None, typer.Option(parser=count, help="Episodes per evaluation [default: 10].")
    ] = None,
    batch_size: Annotated[int | None, typer.Option(parser=count, help="Transitions per update [default: 256].")] = None,
    buffer_size: Annotated[
        int | None, typer.Option(parser=count, help="Replay capacity in transitions [default: 1,000,000].")
    ] = None,
    sampler: Annotated[
        str | None, typer.Option(help="A registered replay sampler (offpoc config lists them) [default: uniform].")
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="Any config field, repeatable (offpoc config lists them with their defaults).",
        ),
    ] = None,
    compare: Annotated[bool, typer.Option(help="Also launch the baseline (none), same seeds and settings.")] = False,
    decide_: Annotated[
        bool,
        typer.Option(
            "--decide",
            help="With --compare: a sequential study (AdaStop) that queues --interim-seeds seeds a method at a"
            " time and stops once decided (or after --max-interims).",
        ),
    ] = False,
    alpha: AlphaOption = 0.05,
    interim_seeds: InterimSeedsOption = 5,
    max_interims: MaxInterimsOption = 4,
    estimand: EstimandOption = "final",
    last_steps: LastStepsOption = None,
    jobs: JobsOption = None,
    threads: Annotated[int, typer.Option(help="torch threads per worker.")] = 1,
    backend: BackendOption = "local",
    address: AddressOption = None,
    checkpoint_dir: CheckpointDirOption = None,
    name: Annotated[str | None, typer.Option(help="A name for these runs.")] = None,
    tag: TagOption = None,
    follow_: Annotated[bool, typer.Option("--follow", help="Show progress bars until they finish.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Queue training runs; the store's scheduler runs them in the background (at most --jobs at a time)."""
    from offpoc_tui.specs import (
        RunRequest,
        UsageError,
        build_specs,
        check_name,
        parse_seeds,
        parse_sets,
        random_only,
    )

    try:
        if seed is not None and seeds is not None:
            raise UsageError("use --seed or --seeds, not both")
        if seed is not None and seed < 0:
            raise UsageError(f"--seed must be at least 0, got {seed}")
        if (jobs is not None and jobs < 1) or threads < 1:
            raise UsageError(f"--{'threads' if threads < 1 else 'jobs'} must be at least 1")
        where = check_backend(backend, address, checkpoint_dir)
        if name is not None:
            check_name(name)
        study = study_design(decide_, compare, seeds, alpha, interim_seeds, max_interims, estimand, last_steps)
        flags = {
            "total_steps": steps,
            "eval_freq": eval_freq,
            "eval_episodes": eval_episodes,
            "batch_size": batch_size,
            "buffer_size": buffer_size,
            "sampler": sampler,
            "divergence": divergence,
            "ref_std": ref_std,
            "threads": threads if threads != 1 else None,
        }
        request = RunRequest(
            algo=algo.lower(),
            env=env,
            correction=correction.lower(),
            seeds=parse_seeds(seeds) if seeds is not None else [seed or 0],
            flags=flags,
            sets=parse_sets(set_ or []),
            compare=compare,
            name=name,
            local=where is None,
            tags=checked_tags(tag),
        )
        specs = build_specs(request)
        random = random_only(specs[0].config["start_steps"], specs[0].total_steps)
        check_writable(db)
        check_run_files(db)
    except (UsageError, StoreError) as error:
        fail(str(error))

    store = open_db(db, create=True)
    configure(store, jobs, where, address, checkpoint_dir)
    if study is None:
        ids = create_runs(store, specs, where)
    else:
        from store.studies import create_study

        design, target = study
        arms = {spec.correction: spec for spec in specs}
        study_id, ids = create_study(
            store,
            name=name or f"{request.algo}-{request.env}-{request.correction}-vs-none",
            design=design,
            estimand=target,
            arms=arms,
            comparisons=[(request.correction, "none")],
            first_seed=specs[0].seed,
            backend=where,
        )
        out.print(
            f"study {study_id}: {request.correction} vs none, interims of {design.interim_seeds} seeds a method, at"
            f" most {design.max_interims}, α = {design.alpha} (AdaStop); a seed's statistic: {target.describe()}",
            markup=False,
        )
    from agents.config import config_defaults  # agents is loaded already: build_specs checked the configs
    from agents.plugins import option_owners

    with write(store):
        record_catalogue(store, option_owners(), config_defaults())
    files = RunFiles.of(store, db)
    stale = files.ensure()
    if stale is not None:
        out.print(
            f"note: {files.display(files.root)} held another store's run files"
            f" (a store of this name deleted or replaced): set aside as {files.display(stale)}",
            markup=False,
            highlight=False,
        )
    if random:
        default = "" if "start_steps" in request.sets else f"{request.algo}'s default "
        out.print(f"note: {default}{random}; lower start_steps (--set start_steps=N) to learn", markup=False)
    limit = start_runs(db, store, where)
    listed = ", ".join(str(i) for i in ids)
    out.print(f"queued {len(ids)} run{'s' if len(ids) > 1 else ''} (id {listed}) in {db}; {limit}", markup=False)
    on = db_flag(db)
    if follow_:
        follow_runs(db, ids, [study_id] if study is not None else None)
    elif study is not None:  # `follow` with no runs named follows the study's next interims too
        out.print(f"watch: offpoc follow{on}  ·  offpoc dashboard{on} (Compare: 4)", markup=False)
    else:
        out.print(
            f"watch: offpoc follow {id_list(ids)}{on}  ·  offpoc ps{on}  ·  offpoc show {ids[0]}{on}", markup=False
        )


def study_design(
    decide_: bool,
    compare: bool,
    seeds: str | None,
    alpha: float,
    interim_seeds: int,
    max_interims: int,
    estimand: str,
    last_steps: int | None,
) -> tuple[Any, Any] | None:
    """``run --decide``'s design and estimand (None without --decide); raises UsageError."""
    from offpoc_tui.specs import UsageError
    from store.sequential import Design
    from store.studies import Estimand

    given = (alpha, interim_seeds, max_interims, estimand, last_steps) != (0.05, 5, 4, "final", None)
    if not decide_:
        if given:
            raise UsageError("--alpha, --interim-seeds, --max-interims, --estimand and --last-steps need --decide")
        return None
    if not compare:
        raise UsageError("--decide compares a correction with its baseline: pass --compare too")
    if seeds is not None:
        raise UsageError("--decide queues its own seeds, an interim at a time: --seed sets the first, not --seeds")
    if estimand not in ("final", "auc"):
        raise UsageError(f"unknown --estimand {estimand!r}: choose final or auc")
    if last_steps is not None and (estimand != "final" or last_steps < 1):
        raise UsageError("--last-steps is at least 1 and applies to --estimand final only")
    design = Design(alpha=alpha, interim_seeds=interim_seeds, max_interims=max_interims)
    if problems := design.problems():
        flag = problems[0].replace("interim seeds", "interim-seeds").replace("max interims", "max-interims")
        raise UsageError(f"--{flag}")
    if design.first_possible_decision() is None:
        raise UsageError(
            f"{interim_seeds} seeds an interim, at most {max_interims} interims, can never tell two methods apart"
            f" at --alpha {alpha}: give more --interim-seeds or --max-interims"
        )
    return design, Estimand(kind="final" if estimand == "final" else "auc", steps=last_steps)


def sweep(
    file: Annotated[Path, typer.Argument(help="A sweep file (TOML): algos, envs, methods, seeds, steps, set.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say how many runs and CPU-hours, write nothing.")] = False,
    jobs: JobsOption = None,
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
    from offpoc_tui.specs import UsageError
    from offpoc_tui.sweep import cpu_hours, load_sweep, missing, queue_missing
    from store.reader import configs

    try:
        if jobs is not None and jobs < 1:
            raise UsageError(f"--jobs must be at least 1, got {jobs}")
        where = check_backend(backend, address, checkpoint_dir)
        study = study_design(decide_, True, None, alpha, interim_seeds, max_interims, estimand, last_steps)
        grid = load_sweep(file, checked_tags(tag))
        if study is not None and not retry:
            baseline = sweep_baseline(grid)
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
    if dry_run or not new:
        out.print(summary + unfinished, highlight=False)
        if store is not None:
            store.close()
        return
    assert store is not None
    configure(store, jobs, where, address, checkpoint_dir)
    ids = queue_missing(store, grid, where)
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

    from agents.config import TrainConfig
    from store.studies import studies

    def resolved(arms: dict[str, Any]) -> dict[str, Any]:  # as the config reads them (a field added since: its value)
        return {
            m: {**arm, "config": TrainConfig.from_dict(arm["config"]).to_dict(), "seed": None}
            for m, arm in json.loads(json.dumps(arms)).items()
        }

    for study in studies(store):
        if study.name != name or (study.algo, study.env) not in tasks:
            continue
        where = f"study {study.id} of sweep {name} ({study.algo} {study.env})"
        asked = {m: asdict(spec) for m, spec in tasks[(study.algo, study.env)].items()}
        if study.first_seed != first_seed:
            fail(f"{where} starts at seed {study.first_seed}, the file now at {first_seed}: give the sweep a new name")
        if (study.design, study.estimand) != (design, target) or resolved(asked) != resolved(study.arms):
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
    from agents.config import config_defaults
    from agents.plugins import option_owners

    with write(store):
        record_catalogue(store, option_owners(), config_defaults())
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


def configure(store: Any, jobs: int | None, where: str | None, address: str | None, path: Path | None) -> None:
    """Before the runs are recorded: the store's limit and its Ray settings, when given."""
    from store.queue import set_jobs

    if jobs is not None:
        set_jobs(store, jobs)
    record_backend(store, where, address, path)


def checked_tags(tags: list[str] | None) -> tuple[str, ...]:
    """``--tag`` values, each once; :class:`~offpoc_tui.specs.UsageError` for a malformed one."""
    from offpoc_tui.specs import UsageError
    from store.tags import TagError, check_tag

    try:
        return tuple(dict.fromkeys(check_tag(t) for t in tags or ()))
    except TagError as error:
        raise UsageError(str(error)) from None


def start_runs(db: Path, store: Any, where: str | None) -> str:
    """Close the store and start its scheduler (if it is not running); a line saying what happens next."""
    from offpoc_tui.runtime.scheduler import start_scheduler
    from store.queue import jobs_limit

    limit = jobs_limit(store)
    store.close()
    start_scheduler(db)
    if where == "ray":
        return "the store's scheduler sends them to Ray as tasks (one CPU each)"
    return f"the store's scheduler runs at most {limit} at a time (offpoc jobs N changes it)"


def config(
    algo: Annotated[
        str | None, typer.Argument(help="An algorithm (ddpg, td3, sac): show its defaults where they differ.")
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="One object per field, for scripts.")] = False,
) -> None:
    """Every run config field --set takes (and sweep files' [set]): its default, type and meaning; then
    each registered algorithm, and each correction and sampler with the options it takes."""
    from agents import plugins
    from agents.config import TrainConfig, common_names, field_docs
    from agents.config_text import field_type
    from agents.plugins import algorithm_names

    if algo is not None and algo.lower() not in algorithm_names():
        fail(f"unknown algorithm {algo!r}: choose one of {', '.join(algorithm_names())}")
    base = TrainConfig(algo=algo.lower()) if algo else TrainConfig()
    shown_config = base.resolved() if algo else base
    defaults = {name: getattr(shown_config, name) for name in common_names()}  # every field, stored or not
    docs = field_docs()
    common = [name for name in common_names() if name not in ("algo", "env_id", "correction")]  # run's arguments
    sections: list[tuple[str, list[str]]] = [("every run", common)]
    for group in plugins.groups():
        owners = ", ".join(p.name for p in plugins.owners(group))
        defaults.update(group().flat())
        sections.append((owners, list(group.flat_names())))
    if json_:
        rows = [
            {"field": name, "default": defaults[name], "type": field_type(name), "meaning": docs.get(name, ""),
             "applies_to": applies_to}
            for applies_to, names in sections
            for name in names
        ]  # fmt: skip
        typer.echo(json.dumps(rows))
        return
    from rich.table import Table

    shown = f"{algo.lower()}'s defaults" if algo else "defaults (None: the algorithm's; offpoc config ALGO shows them)"
    table = Table(title=f"Run config fields, {shown}", title_justify="left", box=None, header_style="bold")
    for column in ("field", "default", "type", "meaning"):
        table.add_column(column, overflow="fold")
    for applies_to, names in sections:
        table.add_section()
        table.add_row(f"{applies_to}:", "", "", "", style="bold")
        for name in names:
            value = defaults[name]
            shown_value = ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
            table.add_row(name, shown_value, field_type(name), docs.get(name, ""))
    console = tables_out()
    console.print(table, markup=False, highlight=False)
    algorithms = Table(title="Algorithms (offpoc run ALGO)", title_justify="left", box=None, header_style="bold")
    for column in ("name", "what it is", "fast backend"):
        algorithms.add_column(column, overflow="fold")
    for name in algorithm_names():
        entry = plugins.algorithm(name)
        assert entry is not None
        algorithms.add_row(name, entry.summary, "covers it" if entry.fast else "no: autograd")
    console.print(algorithms, markup=False, highlight=False)
    for kind in ("correction", "sampler"):
        listing = Table(title=f"{kind.capitalize()}s (--{kind})", title_justify="left", box=None, header_style="bold")
        for column in ("name", "what it is", "its options"):
            listing.add_column(column, overflow="fold")
        for plugin in plugins.plugins(kind):
            options = ", ".join(f for group in plugin.options for f in group.flat_names()) or "–"
            listing.add_row(plugin.name, plugin.summary, options)
        console.print(listing, markup=False, highlight=False)


def jobs(
    limit: Annotated[int | None, typer.Argument(help="The new limit (omit to show it).")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Show or set how many runs the store's scheduler runs at once on this machine."""
    from store.queue import jobs_limit, set_jobs

    if limit is not None and limit < 1:
        fail(f"jobs must be at least 1, got {limit}")
    store = open_db(db, create=limit is not None)
    reap_lost(store)
    if limit is not None:
        set_jobs(store, limit)
    counts = Counter(r["status"] for r in list_runs(store, statuses=["queued", "running"]))
    out.print(
        f"at most {jobs_limit(store)} run{'s' if jobs_limit(store) > 1 else ''} at a time on this machine;"
        f" {counts['running']} running, {counts['queued']} queued"
    )
