"""``offpoc export --format tensorboard``: event files read back with TensorBoard's own reader."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from store import open_store
from store.links import rewind
from store.runs import create_runs
from store.writer import RunWriter
from tests.support.processes import SMALL, gated_env, offpoc, read_until, run_row
from tests.support.storefill import spec


def read(folder: Path) -> EventAccumulator:
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "histograms": 0})
    events.Reload()
    return events


def test_every_record_reads_back_in_tensorboard(filled_store: Path, tmp_path: Path) -> None:
    db = filled_store
    out = tmp_path / "tb"
    result = offpoc(db, "export", "--format", "tensorboard", "-o", str(out))
    assert "of 3 runs to" in result.stderr
    folders = sorted(str(p.relative_to(out)) for p in out.glob("*/*/*/*"))
    assert folders == ["sac/Hopper-v4/acoffpoc-jsd/seed1", "td3/Hopper-v4/acoffpoc-jsd/seed0",
                       "td3/Hopper-v4/none/seed0"]  # fmt: skip

    store = open_store(db)
    for run_id, folder in ((1, "td3/Hopper-v4/none/seed0"), (3, "sac/Hopper-v4/acoffpoc-jsd/seed1")):
        events = read(out / folder)
        tags = events.Tags()
        stored = store.execute("SELECT step, return_mean FROM evaluations WHERE run_id = ? ORDER BY step", [run_id])
        returns = [(e.step, e.value) for e in events.Scalars("eval/return_mean")]
        assert returns == [(step, pytest.approx(value)) for step, value in stored]
        train = store.execute("SELECT step, critic_loss FROM train WHERE run_id = ? ORDER BY step", [run_id])
        assert [(e.step, e.value) for e in events.Scalars("train/critic_loss")] == [
            (step, pytest.approx(value)) for step, value in train
        ]
        assert ("train/alpha" in tags["scalars"]) == (run_id == 3)  # TD3 has no α: left out, not zeros
        means = store.execute(
            "SELECT mean FROM quantity_blocks WHERE run_id = ? ORDER BY first_step", [run_id]
        ).fetchall()
        quantity = (
            "lambda"
            if run_id == 1
            else next(iter(store.execute("SELECT quantity FROM quantity_blocks WHERE run_id = 3")))[0]
        )
        block = [e.value for e in events.Scalars(f"{quantity}/block_mean")]
        assert block == [pytest.approx(m) for (m,) in means]
        (histogram,) = events.Histograms(f"{quantity}/histogram")
        assert histogram.step == 3000 and histogram.histogram_value.num == np.arange(50).sum()
        assert histogram.histogram_value.bucket == list(range(50))
        times = [e.wall_time for e in events.Scalars("eval/return_mean")]
        assert times == sorted(times) and times[-1] - times[0] == pytest.approx(30.0)  # 3,000 steps at wall = step/100
    store.close()


def test_only_the_runs_asked_and_never_into_what_is_not_its_own(filled_store: Path, tmp_path: Path) -> None:
    db = filled_store
    offpoc(db, "tag", "2", "+keep")
    out = tmp_path / "tb"
    offpoc(db, "export", "--format", "tensorboard", "--tag", "keep", "-o", str(out))
    assert [str(p.relative_to(out)) for p in out.glob("*/*/*/*")] == ["td3/Hopper-v4/acoffpoc-jsd/seed0"]
    missing = offpoc(db, "export", "--format", "tensorboard", check=False)
    assert missing.returncode == 2 and "name it with -o DIR" in missing.stderr
    for args, message in ((["--source", "bogus"], "unknown source 'bogus'"), (["--last", "3"], "drop --last"),
                          (["--table", "runs"], "drop --table")):  # fmt: skip
        refused = offpoc(db, "export", "--format", "tensorboard", "-o", str(tmp_path / "tb2"), *args, check=False)
        assert refused.returncode == 2 and message in refused.stderr and not (tmp_path / "tb2").exists()
    # Issue 69, item 10: never into the store's own run files (the next run would train beside the export, and
    # `rm` would delete it), never into a folder of other files, never over another store's export.
    for target in (tmp_path / "offpoc.db-runs" / "tb", tmp_path / "offpoc.db-runs" / "2"):
        refused = offpoc(db, "export", "--format", "tensorboard", "-o", str(target), check=False)
        assert refused.returncode == 2 and "in the store's run files (offpoc.db-runs)" in refused.stderr
        assert not target.exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    refused = offpoc(db, "export", "--format", "tensorboard", "-o", str(tmp_path / "mine"), check=False)
    assert refused.returncode == 2 and "is not an offpoc TensorBoard export" in refused.stderr
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    other = tmp_path / "other.db"
    store = open_store(other, create=True)
    create_runs(store, [spec()])
    store.close()
    refused = offpoc(other, "export", "--format", "tensorboard", "-o", str(out), check=False)
    assert refused.returncode == 2 and "holds another store's TensorBoard export" in refused.stderr
    follow = offpoc(db, "export", "--follow", check=False)
    assert follow.returncode == 2 and "--follow keeps a TensorBoard export current" in follow.stderr


def _steps(folder: Path, tag: str = "eval/return_mean") -> list[int]:
    """The steps TensorBoard reads for ``tag``, in step order (event files of one second may be read in either
    order), each as often as it is there."""
    return sorted(e.step for e in read(folder).Scalars(tag))


def test_a_second_export_adds_what_is_new_and_a_rewound_run_is_written_again(
    filled_store: Path, tmp_path: Path
) -> None:
    """Issue 69, item 10: exports repeat. The second writes only what was recorded since (no step twice); a run the
    store rewound (a resume past its checkpoint) is written again whole, its old values gone; an event file left by
    an export killed before its manifest is dropped, not shown twice."""
    db, out = filled_store, tmp_path / "tb"
    first = offpoc(db, "export", "--format", "tensorboard", "-o", str(out)).stderr
    assert "new events of 3 of 3 runs" in first
    run1 = out / "td3/Hopper-v4/none/seed0"
    assert _steps(run1) == [0, 1000, 2000, 3000]
    store = open_store(db)
    writer = RunWriter(store, 1)
    for step in (4000, 5000):
        writer.add_eval(step, step / 100, 900.0 + step / 100, 1.0, [900.0] * 3, [100] * 3)
    writer.flush(5000, 4500)
    store.close()
    again = offpoc(db, "export", "--format", "tensorboard", "-o", str(out)).stderr
    assert again.startswith("wrote 6 new events of 1 of 3 runs")  # 2 evaluations × 3 scalars, run 1 alone
    assert _steps(run1) == [0, 1000, 2000, 3000, 4000, 5000]
    assert "wrote 0 new events of 0 of 3 runs" in offpoc(db, "export", "--format", "tensorboard", "-o", str(out)).stderr

    store = open_store(db)
    rewind(store, 1, 2000, checkpoint=2000)  # as a resume from step 2,000 does: what came after is replaced
    writer = RunWriter(store, 1)
    writer.add_eval(3000, 30.0, -5.0, 1.0, [-5.0] * 3, [100] * 3)
    writer.flush(3000, 2500)
    store.close()
    rewritten = offpoc(db, "export", "--format", "tensorboard", "-o", str(out)).stderr
    assert "runs 1 written again whole (records replaced, or their folder gone)" in rewritten
    returns = [(e.step, e.value) for e in read(run1).Scalars("eval/return_mean")]
    assert [s for s, _ in returns] == [0, 1000, 2000, 3000] and returns[-1][1] == -5.0

    (extra,) = [f for f in (out / "td3/Hopper-v4/acoffpoc-jsd/seed0").glob("events.out.tfevents.*")]
    shutil.copy(extra, extra.with_name(extra.name + ".killed"))  # an export killed before its manifest
    offpoc(db, "export", "--format", "tensorboard", "-o", str(out))
    assert _steps(out / "td3/Hopper-v4/acoffpoc-jsd/seed0") == [0, 1000, 2000, 3000]


def test_settings_tags_and_notes_reach_the_hparams_dashboard(filled_store: Path, tmp_path: Path) -> None:
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    db, out = filled_store, tmp_path / "tb"
    offpoc(db, "tag", "1", "+baseline")
    offpoc(db, "note", "1", "the plain TD3")
    offpoc(db, "export", "--format", "tensorboard", "-o", str(out))

    def hparams(folder: Path) -> dict[str, object]:
        contents = read(folder).PluginTagToContent("hparams")
        data = HParamsPluginData.FromString(contents["_hparams_/session_start_info"])
        values = data.session_start_info.hparams
        return {k: getattr(v, v.WhichOneof("kind")) for k, v in values.items()}

    run1 = out / "td3/Hopper-v4/none/seed0"
    found = hparams(run1)
    assert found["algo"] == "td3" and found["correction"] == "none" and found["total_steps"] == 3000
    assert found["tags"] == "baseline" and found["note"] == "the plain TD3" and found["run"] == 1
    assert hparams(out / "td3/Hopper-v4/acoffpoc-jsd/seed0")["correction"] == "acoffpoc/jsd"
    offpoc(db, "tag", "1", "+kept")
    said = offpoc(db, "export", "--format", "tensorboard", "-o", str(out)).stderr
    assert "runs 1 written again whole (new tags, note or settings)" in said
    assert hparams(run1)["tags"] == "baseline kept" and _steps(run1) == [0, 1000, 2000, 3000]


@pytest.mark.process
def test_follow_keeps_the_export_current_while_a_run_trains_then_ends(tmp_path: Path) -> None:
    """``--follow`` exports what is new every second while the run is queued or running, says it is still
    training, and ends by itself once the run has: the last evaluation is in TensorBoard, every step once."""
    import subprocess
    import sys

    db, out = tmp_path / "offpoc.db", tmp_path / "tb"
    env_id, gate = gated_env(tmp_path, after=700)  # the run waits, 700 env steps in, for the gate
    offpoc(db, "run", "td3", env_id, *SMALL, "--steps", "1200", "--eval-freq", "200")
    following = subprocess.Popen(
        [sys.executable, "-m", "offpoc_tui.cli", "export", "--format", "tensorboard", "-o", str(out), "--follow",
         "--every", "1", "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
    )  # fmt: skip
    seen = read_until(following, "still training: run 1 at step", stream="stderr")  # the run is held: live
    gate.touch()
    _, rest = following.communicate(timeout=120)  # it ends by itself once the run has
    lines = (seen + rest.decode()).strip().splitlines()
    assert following.returncode == 0 and len(lines) >= 2 and "still training: run 1 at step" in lines[0], lines
    assert "still training" not in lines[-1]
    assert run_row(db, 1)["status"] == "finished"
    (folder,) = out.glob("td3/*/none/seed0")
    assert _steps(folder) == list(range(0, 1201, 200))


def test_exports_at_once_are_one_after_the_other_and_a_manifest_is_trusted_only_inside(
    filled_store: Path, tmp_path: Path
) -> None:
    """Two exports into one folder at once (``--follow`` in one terminal, a one-off in another) take turns: no
    step twice. A manifest naming a folder outside the export is refused, nothing deleted; a run deleted from
    the store leaves the export; a run folder deleted by hand is written again."""
    import json
    import threading
    import time

    from store.reader import list_runs
    from store.tensorboard import ExportRefused, export_runs

    db, out = filled_store, tmp_path / "tb"
    offpoc(db, "export", "--format", "tensorboard", "-o", str(out))
    store = open_store(db)
    writer = RunWriter(store, 1)
    writer.add_eval(4000, 40.0, 950.0, 1.0, [950.0] * 3, [100] * 3)
    writer.flush(4000, 3500)
    import store.tensorboard as tensorboard

    write = tensorboard._write
    slow = threading.Event()

    def slow_first(*args: object, **kwargs: object) -> object:  # the first export dawdles in its first run
        if not slow.is_set():
            slow.set()
            time.sleep(0.5)
        return write(*args, **kwargs)

    def export() -> None:
        mine = open_store(db)
        export_runs(mine, list_runs(mine), out)
        mine.close()

    threads = [threading.Thread(target=export) for _ in range(2)]
    tensorboard._write = slow_first  # type: ignore[assignment]
    try:
        threads[0].start()
        slow.wait(10)
        threads[1].start()  # while the first is inside its export, past reading the manifest
        for thread in threads:
            thread.join(60)
    finally:
        tensorboard._write = write  # type: ignore[assignment]
    run1 = out / "td3/Hopper-v4/none/seed0"
    assert _steps(run1) == [0, 1000, 2000, 3000, 4000]

    shutil.rmtree(out / "td3/Hopper-v4/acoffpoc-jsd/seed0")  # by hand
    offpoc(db, "rm", "3", "--yes")
    said = offpoc(db, "export", "--format", "tensorboard", "-o", str(out)).stderr
    assert "runs 2 written again whole" in said and "runs 3 removed (deleted from the store)" in said
    assert _steps(out / "td3/Hopper-v4/acoffpoc-jsd/seed0") == [0, 1000, 2000, 3000]
    assert not (out / "sac").exists() or not any((out / "sac").rglob("events.out.tfevents.*"))

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("mine")
    manifest = json.loads((out / "offpoc-tensorboard.json").read_text())
    manifest["runs"]["1"]["folder"] = "../victim"
    manifest["runs"]["1"]["revision"] = 99
    (out / "offpoc-tensorboard.json").write_text(json.dumps(manifest))
    refused = offpoc(db, "export", "--format", "tensorboard", "-o", str(out), check=False)
    assert refused.returncode == 2 and "is not as offpoc writes it" in refused.stderr
    assert (victim / "precious").read_text() == "mine"
    with pytest.raises(ExportRefused):
        export_runs(store, list_runs(store), out)
    store.close()


def test_a_symlink_in_the_export_is_never_written_or_deleted_through(filled_store: Path, tmp_path: Path) -> None:
    """The export writes and deletes only in files and folders of its own. A symlink at the manifest's temporary
    name (to the store itself: the export once wrote its manifest over the store) is replaced; one on the way to
    a run's folder is refused in one line, before anything is written where the manifest names it (exit 2) or as
    a new run's folder is made (exit 1), and nothing is written or deleted where it points."""
    import hashlib
    import json

    db, out = filled_store, tmp_path / "tb"
    offpoc(db, "export", "--format", "tensorboard", "--run", "1", "-o", str(out))
    before = hashlib.md5(db.read_bytes()).hexdigest()
    (out / ".offpoc-tensorboard.json.tmp").symlink_to(db)
    offpoc(db, "export", "--format", "tensorboard", "--run", "1", "-o", str(out))
    assert hashlib.md5(db.read_bytes()).hexdigest() == before  # the store: never written
    assert not (out / ".offpoc-tensorboard.json.tmp").exists() and not (out / "offpoc-tensorboard.json").is_symlink()
    assert (
        json.loads((out / "offpoc-tensorboard.json").read_text())["runs"]["1"]["folder"] == "td3/Hopper-v4/none/seed0"
    )

    victim = tmp_path / "victim"
    (victim / "none" / "seed0").mkdir(parents=True)
    (victim / "none" / "seed0" / "events.out.tfevents.mine").write_text("mine")  # an unlisted event file
    shutil.rmtree(out / "td3" / "Hopper-v4")
    (out / "td3" / "Hopper-v4").symlink_to(victim, target_is_directory=True)
    refused = offpoc(db, "export", "--format", "tensorboard", "--run", "1", "-o", str(out), check=False)
    assert refused.returncode == 2 and "Hopper-v4 is a symlink or a file, not a folder of this export" in refused.stderr
    assert [str(p.relative_to(victim)) for p in sorted(victim.rglob("*"))] == [
        "none",
        "none/seed0",
        "none/seed0/events.out.tfevents.mine",
    ]
    (out / "td3" / "Hopper-v4").unlink()
    offpoc(db, "export", "--format", "tensorboard", "--run", "1", "-o", str(out))  # the link gone: written again
    (out / "sac").symlink_to(victim, target_is_directory=True)  # where run 3's new folder would be made
    written = sorted(out.rglob("events.out.tfevents.*"))
    refused = offpoc(db, "export", "--format", "tensorboard", "-o", str(out), check=False)
    assert refused.returncode == 1 and "sac is a symlink or a file, not a folder of this export" in refused.stderr
    assert [p.name for p in victim.iterdir()] == ["none"]
    assert sorted(out.rglob("events.out.tfevents.*")) == written  # refused before run 2's folder was written too
    (out / "sac").unlink()
    (out / "offpoc-tensorboard.json").rename(tmp_path / "manifest.json")
    (out / "offpoc-tensorboard.json").symlink_to(tmp_path / "manifest.json")
    refused = offpoc(db, "export", "--format", "tensorboard", "-o", str(out), check=False)
    assert refused.returncode == 2 and "offpoc-tensorboard.json is a symlink: not read, nor written" in refused.stderr


@pytest.mark.parametrize("every", ["nan", "inf", "0", "-1", "1e308"])
def test_follow_takes_a_number_of_seconds(filled_store: Path, tmp_path: Path, every: str) -> None:
    refused = offpoc(
        filled_store, "export", "--format", "tensorboard", "-o", str(tmp_path / "tb"), "--follow", "--every", every,
        check=False,
    )  # fmt: skip
    assert refused.returncode == 2 and "--every must be a number of seconds" in refused.stderr
    assert not (tmp_path / "tb").exists() and "Traceback" not in refused.stderr


def test_follow_does_not_wait_on_a_run_whose_worker_died(filled_store: Path, tmp_path: Path) -> None:
    import socket

    store = open_store(filled_store)
    store.execute("UPDATE runs SET status = 'running', pid = 999999, host = ?, heartbeat = 0 WHERE id = 1",
                  [socket.gethostname()])  # fmt: skip
    store.conn.commit()
    store.close()
    done = offpoc(filled_store, "export", "--format", "tensorboard", "-o", str(tmp_path / "tb"), "--follow",
                  "--every", "1")  # fmt: skip
    assert "still training" not in done.stderr and run_row(filled_store, 1)["status"] == "lost"
