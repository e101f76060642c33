"""Runs as TensorBoard event files: a folder per run, ``algo/env/correction/seedN``, that TensorBoard,
``wandb sync`` and Aim's converters read.

Each run's folder holds event files written with TensorBoard's own protos and writer (the
``tensorboard`` extra), with these tags, at the environment step they were recorded:

- ``eval/return_mean``, ``eval/return_std``, ``eval/length_mean``: each evaluation;
- ``train/critic_loss``, ``train/actor_loss``, ``train/q_mean``, ``train/alpha``, ``train/sps``: each
  training-statistics block (a value the algorithm has not, such as TD3's α, is left out);
- ``QUANTITY/block_mean`` (``lambda/block_mean`` for AC-Off-POC's λ): the mean over each stored block of
  updates, at the block's last step;
- ``QUANTITY/histogram``: each histogram the run stored, over the quantity's range.

An export repeats: the folder's ``offpoc-tensorboard.json`` (its manifest) names the store it belongs to and,
per run, its folder, its event files, the store revision they show and the last step of each kind of record
written; the next export writes a new event file per run with only what came since. A run whose records the
store replaced (a resume past its checkpoint bumps its revision), or whose tags, note or settings changed
(TensorBoard reads a run's first HParams record only), is written again whole; an event file the manifest does
not list (an export killed before saving it) is deleted first. Each run's settings, tags and note are its
HParams (a ``session_start_info``), so TensorBoard's HParams dashboard lists them beside ``eval/return_mean``.

Event times are the run's start plus its training time at each evaluation (steps between evaluations
take times in proportion); an imported curve, with no times, gets its import time. The folder name
adds ``-SOURCE`` for imported curves (``seed0-published``), the divergence to AC-Off-POC's correction
(``acoffpoc-jsd``), and ``-runID`` where two runs would share a folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils

from store.codec import decode_counts
from store.db import store_id
from store.files import write_new
from store.reader import configs
from store.runs import RunRow
from store.tasks import source_of

TRAIN_TAGS = ("critic_loss", "actor_loss", "q_mean", "alpha", "sps")
UNSAFE = re.compile(r"[^A-Za-z0-9_.+=@-]+")


class TensorBoardMissing(RuntimeError):
    """The ``tensorboard`` package is not installed."""


def _writer_parts() -> tuple[Any, Any, Any, Any]:
    try:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError:
        raise TensorBoardMissing(
            "--format tensorboard needs the tensorboard package: pip install -c constraints.txt -e '.[tensorboard]'"
        ) from None
    return Event, HistogramProto, Summary, EventFileWriter


def folder_names(runs: list[RunRow]) -> dict[int, Path]:
    """Each run's folder, relative: ``algo/env/correction/seedN``, told apart where two would meet."""

    def safe(text: str) -> str:
        return UNSAFE.sub("_", text).strip("._") or "_"

    names: dict[int, Path] = {}
    for run in runs:
        method = run["correction"] + (f"-{run['divergence']}" if run.get("divergence") else "")
        source = source_of(run)
        leaf = f"seed{run['seed']}" + ("" if source == "offpoc" else f"-{source}")
        names[run["id"]] = Path(safe(run["algo"]), safe(run["env"]), safe(method), safe(leaf))
    counts: dict[Path, int] = {}
    for path in names.values():
        counts[path] = counts.get(path, 0) + 1
    return {i: p.with_name(f"{p.name}-run{i}") if counts[p] > 1 else p for i, p in names.items()}


MANIFEST = "offpoc-tensorboard.json"
"""In an export's folder: whose export it is (the store's identity) and, per run, its folder, the event files
written for it, the store revision they show and the last step of each kind of record in them."""


class ExportRefused(ValueError):
    """The folder holds something this export must not write into (another store's export, files not ours)."""


@dataclass
class Exported:
    """What one export wrote."""

    events: int = 0
    runs: int = 0
    """Runs with something new."""
    rewritten: list[int] = field(default_factory=list)
    """Runs whose records were replaced in the store (a resume past its checkpoint), or whose folder was deleted:
    written again whole."""
    removed: list[int] = field(default_factory=list)
    """Runs deleted from the store since: their folders removed from the export."""
    relabelled: list[int] = field(default_factory=list)
    """Runs whose tags, note or settings changed: written again whole (TensorBoard reads a run's first HParams)."""
    live: list[tuple[int, int]] = field(default_factory=list)
    """(run, step) of the runs still queued or running: exported up to that step; more to come."""


def read_manifest(root: Path, store_id: str) -> dict[str, Any]:
    """The export's manifest in ``root`` (a new one for an empty or missing folder); :class:`ExportRefused`
    for another store's export, or a folder with files and no manifest."""
    path = root / MANIFEST
    if path.is_symlink():
        raise ExportRefused(f"{path} is a symlink: not read, nor written through")
    if path.is_file():
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise ExportRefused(f"{path} is not readable ({error}): not written into") from None
        if not isinstance(manifest, dict) or manifest.get("store_id") != store_id:
            raise ExportRefused(f"{root} holds another store's TensorBoard export: write this one elsewhere")
        if not _well_formed(manifest):
            raise ExportRefused(f"{path} is not as offpoc writes it (a run without its folder in {root}): not used")
        for entry in manifest["runs"].values():
            _own(root, entry["folder"])  # a symlink on the way to a run's folder: refused before anything is written
        return manifest
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ExportRefused(f"{root} exists and is not an offpoc TensorBoard export (no {MANIFEST} in it)")
    return {"store_id": store_id, "runs": {}}


def _well_formed(manifest: dict[str, Any]) -> bool:
    """Every run's entry a mapping naming a folder inside the export (relative, no ``..``): the export deletes and
    writes only there."""
    runs = manifest.get("runs")
    if not isinstance(runs, dict):
        return False
    for entry in runs.values():
        folder = entry.get("folder") if isinstance(entry, dict) else None
        if not isinstance(folder, str) or not folder or Path(folder).is_absolute() or ".." in Path(folder).parts:
            return False
    return True


def _own(root: Path, folder: str) -> Path:
    """``root / folder``, a run's folder in the export, where nothing on the way down from ``root`` is a symlink
    or a file: the export writes and deletes only in folders of its own, never through a link to elsewhere (the
    store's run files, another export, a user's folder). :class:`ExportRefused` otherwise."""
    path = root
    for part in Path(folder).parts:
        path = path / part
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise ExportRefused(
                f"{path} is a symlink or a file, not a folder of this export: nothing written through it"
            )
    return path


@contextlib.contextmanager
def _exporting(root: Path) -> Iterator[None]:
    """One export at a time into ``root`` (made if missing): a flock on the folder, let go if the process dies.
    Two at once would each write the same new records, and TensorBoard would show them twice."""
    root.mkdir(exist_ok=True)
    handle = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def _save_manifest(root: Path, manifest: dict[str, Any]) -> None:
    """The manifest, written as a new file and renamed into place: a symlink at either name is replaced, never
    written through (one to the store would have had the manifest written over the store)."""
    tmp = root / f".{MANIFEST}.tmp"
    write_new(tmp, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, root / MANIFEST)


def export_runs(
    db: sqlite_utils.Database,
    runs: list[RunRow],
    root: Path,
    done: Callable[[RunRow, int], None] = lambda *_: None,
) -> Exported:
    """Write what each run recorded since the last export into ``root`` (made if missing), a new event file per
    run with something new, and its settings, tags and note as TensorBoard HParams. A run the store rewound
    since (its revision moved) is written again whole. Event files not in the manifest (an export killed
    before it saved the manifest) are deleted first: nothing is shown twice. ``done`` hears each run."""
    parts = _writer_parts()
    with _exporting(root):
        return _export(db, runs, root, read_manifest(root, store_id(db)), parts, done)


def _export(
    db: sqlite_utils.Database,
    runs: list[RunRow],
    root: Path,
    manifest: dict[str, Any],
    parts: tuple[Any, Any, Any, Any],
    done: Callable[[RunRow, int], None],
) -> Exported:
    known: dict[str, Any] = manifest["runs"]
    taken = {entry["folder"] for entry in known.values()}
    fresh = folder_names(runs)
    new: dict[int, str] = {}  # the folder of each run the export has not held yet, checked before any is written
    for run in runs:
        if str(run["id"]) not in known:
            folder = str(fresh[run["id"]])
            new[run["id"]] = folder = folder if folder not in taken else f"{folder}-run{run['id']}"
            taken.add(folder)
            _own(root, folder)
    report = Exported()
    settings = configs(db, [r["id"] for r in runs])
    for run in runs:
        entry = known.get(str(run["id"]))
        revision = run.get("revision") or 0
        hparams = _hparams(run, settings.get(run["id"], {}))
        gone = entry is not None and not _own(root, entry["folder"]).is_dir()  # deleted by hand: written again
        if entry is not None and (entry.get("revision") != revision or gone):
            shutil.rmtree(_own(root, entry["folder"]), ignore_errors=True)  # the store replaced what was exported
            report.rewritten.append(run["id"])
            entry = {"folder": entry["folder"]}
        elif entry is not None and entry.get("hparams") not in (None, _digest(hparams)):
            # TensorBoard keeps a run's first HParams record: new tags or a new note need the run written anew.
            shutil.rmtree(_own(root, entry["folder"]), ignore_errors=True)
            report.relabelled.append(run["id"])
            entry = {"folder": entry["folder"]}
        if entry is None:
            entry = {"folder": new[run["id"]]}
        entry["revision"] = revision
        path = _own(root, entry["folder"])
        path.mkdir(parents=True, exist_ok=True)
        listed = set(entry.get("files", []))
        for stale in path.glob("events.out.tfevents.*"):
            if stale.name not in listed:
                stale.unlink()  # from an export killed before its manifest: written again below
        events, through = _write(db, run, path, dict(entry.get("through", {})), hparams, entry.get("hparams"), parts)
        if events:
            entry["files"] = sorted(f.name for f in path.glob("events.out.tfevents.*"))  # the listed and the new
            entry["through"], entry["hparams"] = through, _digest(hparams)
            report.events += events
            report.runs += 1
        known[str(run["id"])] = entry
        if run["status"] in ("queued", "running"):
            report.live.append((run["id"], int(run.get("steps") or 0)))
        done(run, events)
    exported = [int(i) for i in known]
    marks = ", ".join("?" * len(exported))
    present = {i for (i,) in db.execute(f"SELECT id FROM runs WHERE id IN ({marks})", exported)}
    for run_id in sorted(set(exported) - present):  # deleted from the store (offpoc rm): gone from the export too
        shutil.rmtree(_own(root, known.pop(str(run_id))["folder"]), ignore_errors=True)
        report.removed.append(run_id)
    _save_manifest(root, manifest)
    return report


def _digest(hparams: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(hparams, sort_keys=True).encode()).hexdigest()[:16]


def _hparams(run: RunRow, config: dict[str, Any]) -> dict[str, Any]:
    """The run's settings as HParams values (numbers, text, booleans; lists and None as text), with its
    method, tags and note."""
    values: dict[str, Any] = {"run": run["id"], "algo": run["algo"], "env": run["env"]}
    values["correction"] = run["correction"] + (f"/{run['divergence']}" if run.get("divergence") else "")
    for key, value in sorted(config.items()):
        if key in values or key in ("env_id",):
            continue
        values[key] = value if isinstance(value, bool | int | float | str) else json.dumps(value)
    values["tags"] = " ".join(run.get("tags") or [])
    values["note"] = run.get("note") or ""
    return values


def _plugin_summary(Summary: Any, tag: str, data: Any) -> Any:
    from tensorboard.compat.proto.summary_pb2 import SummaryMetadata

    content = SummaryMetadata.PluginData(plugin_name="hparams", content=data.SerializeToString())
    return Summary(value=[Summary.Value(tag=tag, metadata=SummaryMetadata(plugin_data=content))])


def _write(
    db: sqlite_utils.Database,
    run: RunRow,
    path: Path,
    through: dict[str, Any],
    hparams: dict[str, Any],
    written_hparams: str | None,
    parts: tuple[Any, Any, Any, Any],
) -> tuple[int, dict[str, Any]]:
    """One new event file in ``path`` with the run's records past ``through``, and its HParams where they are new
    or changed; the events written and the new ``through``."""
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData, SessionStartInfo

    Event, HistogramProto, Summary, EventFileWriter = parts
    writer = None
    events = 0
    for wall, step, value, mark in _events(db, run, Summary, HistogramProto, through):
        writer = writer or EventFileWriter(str(path))
        writer.add_event(Event(wall_time=wall, step=step, summary=Summary(value=[value])))
        kind, name, position = mark
        if name is None:
            through[kind] = max(through.get(kind, -1), position)
        else:
            through.setdefault(kind, {})[name] = max(through.get(kind, {}).get(name, -1), position)
        events += 1
    if _digest(hparams) != written_hparams:
        start = SessionStartInfo(start_time_secs=float(run.get("started") or run.get("created") or 0.0))
        for key, value in hparams.items():
            if isinstance(value, bool):
                start.hparams[key].bool_value = value
            elif isinstance(value, int | float):
                start.hparams[key].number_value = float(value)
            else:
                start.hparams[key].string_value = str(value)
        writer = writer or EventFileWriter(str(path))
        summary = _plugin_summary(Summary, "_hparams_/session_start_info", HParamsPluginData(session_start_info=start))
        writer.add_event(Event(wall_time=time.time(), step=0, summary=summary))
        events += 1
    if writer is not None:
        writer.close()
    return events, through


def _events(
    db: sqlite_utils.Database, run: RunRow, Summary: Any, HistogramProto: Any, through: dict[str, Any] | None = None
) -> Iterator[tuple[float, int, Any, tuple[str, str | None, int]]]:
    """(wall time, step, Summary.Value, mark) of what the run recorded past ``through`` (each kind's last step
    exported, per quantity for blocks and histograms; all without it). A mark says what an event moves on:
    (kind, quantity or None, the step ``through`` keeps)."""
    run_id = run["id"]
    seen = through or {}
    evaluations = db.execute(
        "SELECT step, wall_time, return_mean, return_std, length_mean FROM evaluations WHERE run_id = ? ORDER BY step",
        [run_id],
    ).fetchall()
    start = float(run.get("started") or run.get("created") or 0.0)
    timed = [(step, wall) for step, wall, *_ in evaluations if wall is not None]
    steps_known = np.asarray([s for s, _ in timed], dtype=np.float64)
    walls_known = np.asarray([w for _, w in timed], dtype=np.float64)

    def when(step: int) -> float:
        if not len(steps_known):
            return start
        return start + float(np.interp(step, steps_known, walls_known))

    def scalar(tag: str, value: float) -> Any:
        return Summary.Value(tag=tag, simple_value=float(value))

    for step, _, mean, std, length in evaluations:
        if step <= seen.get("eval", -1):
            continue
        for tag, value in (("eval/return_mean", mean), ("eval/return_std", std), ("eval/length_mean", length)):
            if value is not None:
                yield when(step), step, scalar(tag, value), ("eval", None, step)
    columns = ", ".join(TRAIN_TAGS)
    for step, *values in db.execute(
        f"SELECT step, {columns} FROM train WHERE run_id = ? AND step > ? ORDER BY step",
        [run_id, seen.get("train", -1)],
    ):
        for tag, value in zip(TRAIN_TAGS, values, strict=True):
            if value is not None:
                yield when(step), step, scalar(f"train/{tag}", value), ("train", None, step)
    blocks = seen.get("blocks", {})
    for quantity, first_step, count, stride, mean in db.execute(
        "SELECT quantity, first_step, count, stride, mean FROM quantity_blocks WHERE run_id = ?"
        " ORDER BY quantity, first_step",
        [run_id],
    ):
        if first_step <= blocks.get(quantity, -1):
            continue
        last = first_step + (count - 1) * stride
        yield when(last), last, scalar(f"{quantity}/block_mean", mean), ("blocks", quantity, first_step)
    ranges = {
        name: (low, high)
        for name, low, high in db.execute("SELECT name, low, high FROM quantities WHERE run_id = ?", [run_id])
    }
    histograms = seen.get("hist", {})
    for quantity, step, text in db.execute(
        "SELECT quantity, step, counts FROM histograms WHERE run_id = ? ORDER BY quantity, step", [run_id]
    ):
        if step <= histograms.get(quantity, -1):
            continue
        counts = np.asarray(decode_counts(text), dtype=np.float64)
        low, high = ranges.get(quantity, (0.0, 1.0))
        edges = np.linspace(low, high, len(counts) + 1)
        centres = (edges[:-1] + edges[1:]) / 2
        histogram = HistogramProto(
            min=float(low), max=float(high), num=float(counts.sum()), sum=float((centres * counts).sum()),
            sum_squares=float((centres**2 * counts).sum()), bucket_limit=edges[1:].tolist(), bucket=counts.tolist(),
        )  # fmt: skip
        yield when(step), step, Summary.Value(tag=f"{quantity}/histogram", histo=histogram), ("hist", quantity, step)
