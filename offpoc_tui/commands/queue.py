"""``offpoc run``: queue one algorithm on one task (seeds, a comparison, a study), and what queueing shares
with ``offpoc sweep`` (:mod:`.sweeps`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from offpoc_tui.commands.backend_options import AddressOption, BackendOption, CheckpointDirOption, check_backend
from offpoc_tui.commands.watch import follow_runs
from offpoc_tui.console import (
    DEFAULT_DB,
    DbOption,
    db_flag,
    fail,
    id_list,
    open_db,
    out,
)
from offpoc_tui.params import count
from store import StoreError
from store.db import check_writable, write
from store.files import RunFiles
from store.files import check_usable as check_run_files
from store.queue import jobs_problem, record_backend
from store.runs import create_runs

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
    typer.Option(
        parser=count,
        help="--decide, final: over the last N steps [default: the last 10 evaluations, within the last"
        " 10% of steps]; never at or before learning starts.",
    ),
]


def run(
    algo: Annotated[str, typer.Argument(help="ddpg, td3, sac, or another registered one (offpoc config).")],
    env: Annotated[
        str,
        typer.Argument(
            help="A gymnasium id with a Box action space, e.g. Hopper-v4; or module:Env-v0, a module in this folder"
            " (or on PYTHONPATH) that registers it."
        ),
    ],
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
    lanes: Annotated[
        int,
        typer.Option(
            help="Train up to K of these runs as one lane group: one worker process, their updates stacked"
            " (any algorithm, correction and sampler; not layer_norm). Each is still a run of its own.",
            metavar="K",
        ),
    ] = 1,
    threads: Annotated[int, typer.Option(help="torch threads per worker.")] = 1,
    backend: BackendOption = "local",
    address: AddressOption = None,
    checkpoint_dir: CheckpointDirOption = None,
    name: Annotated[str | None, typer.Option(help="A name for these runs.")] = None,
    tag: TagOption = None,
    follow_: Annotated[bool, typer.Option("--follow", help="Show progress bars until they finish.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be queued (with --decide: the design) and its CPU-hours.")
    ] = False,
    again: Annotated[
        bool, typer.Option("--again", help="--decide: start a study though the same one exists (it spends α again).")
    ] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Queue training runs; the store's scheduler runs them in the background (at most --jobs at a time)."""
    from offpoc_tui.specs import (
        RunRequest,
        UsageError,
        assign_lanes,
        build_specs,
        check_groups,
        check_name,
        parse_seeds,
        parse_sets,
        random_only,
        record_plugins,
    )

    try:
        if seed is not None and seeds is not None:
            raise UsageError("use --seed or --seeds, not both")
        if seed is not None and seed < 0:
            raise UsageError(f"--seed must be at least 0, got {seed}")
        if threads < 1 or lanes < 1:
            raise UsageError(f"--{'threads' if threads < 1 else 'lanes'} must be at least 1")
        if jobs is not None and (problem := jobs_problem(jobs, "--jobs")) is not None:
            raise UsageError(problem)
        where = check_backend(backend, address, checkpoint_dir)
        if lanes > 1 and decide_:
            raise UsageError(
                "--lanes trains lane groups without --decide (a study's seeds are queued interim by interim)"
            )
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
        if again and study is None:
            raise UsageError("--again applies to --decide")
        specs = assign_lanes(build_specs(request), lanes)
        if where is None:
            check_groups(specs)
        random = random_only(specs[0].config["start_steps"], specs[0].total_steps)
        if study is not None and not again:  # a dry run says so too: it shows what the command would do
            _refuse_a_second_study(db, specs, study)
        if dry_run:
            _dry_run(db, specs, study)
            return
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
        first = design.first_possible_decision()
        if first is not None and first > 1:
            out.print(
                f"note: interim 1 cannot decide ({design.interim_seeds} seeds a method cannot reach α·1/"
                f"{design.max_interims} = {design.alpha / design.max_interims:.3g}); the first that can is interim"
                f" {first}",
                markup=False,
                highlight=False,
            )
    with write(store):  # agents is loaded already: build_specs checked the configs
        record_plugins(store)
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


def _dry_run(db: Path, specs: list[Any], study: tuple[Any, Any] | None) -> None:
    """``run --dry-run``: the runs (with --decide, the design: its first interim that can decide, its seeds at
    most) and their CPU-hours at the store's measured speed; nothing written."""
    from offpoc_tui.sweep import cpu_hours

    store = open_db(db) if db.exists() else None
    if study is None:
        planned = specs
        said = f"would queue {len(specs)} run{'s' if len(specs) > 1 else ''}"
    else:
        design, target = study
        planned = [spec for spec in specs for _ in range(design.seeds_at_most)]  # one spec a method: n·K seeds each
        correction = next(spec.correction for spec in specs if spec.correction != "none")
        said = (
            f"would start a study: {correction} vs none, interims of {design.interim_seeds} seeds a method, at"
            f" most {design.max_interims}, α = {design.alpha}; the first interim that can decide:"
            f" {design.first_possible_decision()}; {len(specs) * design.interim_seeds} runs first,"
            f" {len(planned)} at most ({design.seeds_at_most} seeds a method); a seed's statistic: {target.describe()}"
        )
    hours, basis = cpu_hours(store, planned)
    cost = f"{hours:,.1f} CPU-hours" if hours >= 1 else f"{hours * 60:.0f} CPU-minutes"
    if store is not None:
        store.close()
    out.print(f"{said}; about {cost}{' at most' if study else ''} ({basis}); nothing written", markup=False)


def _refuse_a_second_study(db: Path, specs: list[Any], study: tuple[Any, Any]) -> None:
    """The same ``run --decide`` twice would make a second study of the same seeds, spending α again: refused
    in one line naming the first, unless --again."""
    from dataclasses import asdict

    from store.studies import studies

    if not db.exists():
        return
    store = open_db(db)
    design, target = study
    asked = {spec.correction: asdict(spec) for spec in specs}
    for made in studies(store):
        same = (made.algo, made.env, made.first_seed) == (specs[0].algo, specs[0].env, specs[0].seed)
        if same and declared_alike(made, design, target, asked) and made.status not in ("abandoned", "failed"):
            store.close()
            fail(
                f"study {made.id} ({made.name}) is this study, {made.status}: offpoc follow or the dashboard shows it;"
                " --again starts another (spending α again)"
            )
    store.close()


def declared_alike(made: Any, design: Any, target: Any, arms: dict[str, Any]) -> bool:
    """Whether the stored study ``made`` was declared with this design, estimand (one declared before the
    window's cap compared as it was then) and arms. Each arm's config is read by today's config, as its runs
    are (a setting added since: the value it trained with; a plug-in's option it did not use: dropped), so a
    study stored by an older offpoc is still the same study."""
    from dataclasses import replace

    declared = replace(target, share=None) if made.estimand.share is None else target
    return (made.design, made.estimand) == (design, declared) and _as_read(arms) == _as_read(made.arms)


def _as_read(arms: dict[str, Any]) -> dict[str, Any]:
    """Arms as stored (JSON), each config read by today's :class:`agents.config.TrainConfig`, the seed left out
    (set per run)."""
    from agents.config import TrainConfig

    return {
        m: {**arm, "config": TrainConfig.from_dict(arm["config"]).to_dict(), "seed": None}
        for m, arm in json.loads(json.dumps(arms)).items()
    }


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
