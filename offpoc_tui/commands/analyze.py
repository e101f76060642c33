"""``offpoc analyze weights RUN...``: the paper's weight analysis over finished runs' buffers
(:mod:`agents.weight_analysis`), as a table and a figure."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer

from offpoc_tui.console import (
    DEFAULT_DB,
    DbOption,
    WholeSummaries,
    check_output,
    err,
    fail,
    open_db,
    save_figure,
)

if TYPE_CHECKING:
    from store.files import RunFiles
    from store.runs import RunRow

analyze_app = typer.Typer(
    cls=WholeSummaries,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Analyses of finished runs.",
    no_args_is_help=True,
)

COLUMNS = ("position", "mean", "ci_low", "ci_high", "n_runs")


@analyze_app.command()
def weights(
    runs: Annotated[list[str], typer.Argument(help="Finished runs of one method (ids or names), two seeds or more.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also draw the figure: .png, .svg, .pdf.")
    ] = None,
    format_: Annotated[str, typer.Option("--format", "-f", help="The table on stdout: csv, json or md.")] = "csv",
    bins: Annotated[int, typer.Option(help="Bins of the buffer's length the runs are averaged over.")] = 20,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Each run's correction weight for every batch-sized window of its replay buffer (oldest first) under its
    final policy, against the window's position: do the weights rise as the data near the final policy?"""
    from offpoc_tui.charts.curves import FORMATS as FIGURE_FORMATS
    from offpoc_tui.console import resolve_runs
    from store import StoreError
    from store.export import FORMATS, write_rows
    from store.files import RunFiles
    from store.reader import run_detail

    if format_ not in FORMATS:
        fail(f"unknown format {format_!r}: choose one of {', '.join(FORMATS)}")
    if bins < 1:
        fail(f"--bins must be at least 1, got {bins}")
    if output is not None:
        if output.suffix.lstrip(".").lower() not in FIGURE_FORMATS:
            fail(f"cannot tell the format of {output}: name it .png, .svg or .pdf")
        check_output(output, db)
    store = open_db(db)
    ids = resolve_runs(store, runs)
    if len(ids) < 2:
        fail("the weight analysis averages seeds: give two runs or more (one method, several seeds)")
    details = [run_detail(store, i) for i in ids]
    methods = {(d["algo"], d["env"], d["correction"], d["divergence"]) for d in details if d is not None}
    if len(methods) > 1:
        fail(f"the runs are of {len(methods)} methods: give seeds of one (algo, env, correction)")
    files = RunFiles.of(store, db)
    checkpoints = []
    for detail in details:
        assert detail is not None
        if detail["status"] not in ("finished", "stopped"):
            fail(
                f"run {detail['id']} is {detail['status']}, not finished: the analysis reads a run's final policy and"
                " buffer (wait for it to finish, or offpoc stop it: a stopped run's checkpoint serves)"
            )
        try:
            path = files.find_checkpoint(detail["id"])
        except StoreError as error:
            fail(str(error), code=1)
        if path is None or not detail["config"].get("checkpoint_buffer", True):
            fail(f"run {detail['id']} has no checkpoint with its replay buffer (train with checkpoint_buffer=true)")
        checkpoints.append((detail, path))
    store.close()
    found = _analyse(checkpoints, files)
    from store.stats import binned_band

    bins = min(bins, min(len(positions) for positions, _ in found.values()))  # no bin without a window
    centres, mean, half, counts = binned_band([found[d["id"]] for d, _ in checkpoints], bins)
    rows = [(round(float(c), 4), float(m), float(m - h), float(m + h), int(n))
            for c, m, h, n in zip(centres, mean, half, counts, strict=True)]  # fmt: skip
    clean = [tuple(None if isinstance(v, float) and np.isnan(v) else v for v in row) for row in rows]
    write_rows(sys.stdout, format_, COLUMNS, iter(clean))
    if output is not None:
        save_figure(_figure(found, centres, mean, half, methods.pop()), output)
        err.print(f"wrote {output}: {len(found)} runs, {bins} bins", highlight=False)


class _Unreadable(Exception):
    """A run the analysis cannot read: its line and exit status, said once the progress bar is gone."""


def _analyse(checkpoints: list[tuple[RunRow, Path]], files: RunFiles) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Each run's window weights, from its checkpoint: loaded only if it is the run's own (its store, its id,
    its config), as ``resume`` loads it; a file that is not, or is damaged, stops the analysis in one line."""
    import warnings

    from rich.progress import Progress

    from agents import TrainConfig, Trainer
    from agents.checkpoint import CheckpointMismatch
    from agents.weight_analysis import NoBuffer, window_weights
    from offpoc_tui.runtime.checkpoints import own_checkpoint

    found = {}
    try:
        with Progress(console=err, transient=True, disable=not err.is_terminal) as progress:
            task = progress.add_task("analysing buffers", total=len(checkpoints))
            for detail, path in checkpoints:
                run_id = detail["id"]
                check = own_checkpoint(detail, TrainConfig.from_dict(detail["config"]), files)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        trainer = Trainer.resume(path, check=check)
                except CheckpointMismatch as error:
                    raise _Unreadable(f"run {run_id}: {error}", 1) from None
                if len(trainer.buffer) == 0:
                    raise _Unreadable(
                        f"run {run_id}'s checkpoint holds no replay buffer (train with checkpoint_buffer=true)", 2
                    )
                try:
                    found[run_id] = window_weights(trainer)
                except NoBuffer as error:
                    raise _Unreadable(f"run {run_id}: {error}", 2) from None
                progress.advance(task)
    except _Unreadable as unreadable:
        line, code = unreadable.args
        fail(line, code=code)
    return found


def _figure(
    found: dict[int, tuple[np.ndarray, np.ndarray]],
    centres: np.ndarray,
    mean: np.ndarray,
    half: np.ndarray,
    method: Any,
) -> Any:
    from matplotlib.figure import Figure

    from offpoc_tui.charts.curves import DPI, style
    from store.methods import algorithm_title

    fig = Figure(figsize=(5.0, 3.4), dpi=DPI, layout="constrained")
    axes = fig.subplots()
    for positions, values in found.values():
        axes.plot(positions, values, color="grey", alpha=0.25, linewidth=0.6)
    ok = ~np.isnan(half)
    seen = ~np.isnan(mean)
    axes.plot(centres[seen], mean[seen], color="#d62728", linewidth=1.5, label=f"mean of {len(found)} runs")
    axes.fill_between(centres[ok], (mean - half)[ok], (mean + half)[ok], color="#d62728", alpha=0.2, linewidth=0)
    algo, env, correction, divergence = method
    title = f"{algorithm_title(algo)} + {correction}{f' ({divergence})' if divergence else ''} · {env}"
    axes.set_title(title, fontsize=9)
    style(axes, "position in the replay buffer (0: oldest, 1: newest)", "weight of the window under the final policy",
          legend=True)  # fmt: skip
    fig.suptitle("shaded: 95% Student-t band across runs", fontsize=8)
    return fig
