"""Tags and notes: set from the CLI, stored in the real store, filtered on by every reading command."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from store import open_store, where
from store.reader import list_runs
from tests.support.cli import cli
from tests.support.processes import offpoc


def ids(db: Path, *args: str) -> list[int]:
    return [run["id"] for run in json.loads(cli(db, "ps", "--all", "--json", *args).stdout)]


def test_tag_note_and_filter_every_reading_command(filled_store: Path) -> None:
    db = filled_store
    assert cli(db, "tag", "1-2", "+ablation", "+draft").stdout.splitlines() == [
        "run 1: ablation draft",
        "run 2: ablation draft",
    ]
    assert cli(db, "tag", "2", "-draft", "+v2").stdout == "run 2: ablation v2\n"  # -draft: a tag, not an option
    assert cli(db, "tag", "2").stdout == "run 2: ablation v2\n"
    assert cli(db, "tag", "2", "+Ablation", "-hard").stdout == "run 2: ablation v2\n"  # one tag in any case
    assert ids(db, "--tag", "ABLATION") == [1, 2]
    assert ids(db, "--tag", "ablation") == [1, 2] and ids(db, "--tag", "ablation", "--tag", "v2") == [2]
    assert cli(db, "ps", "--all", "--tag", "nothing").stdout == "no run carries the tag nothing\n"

    cli(db, "note", "2", "buffer 1e5: \x1b[31mtoo small")
    assert cli(db, "note", "2").stdout == "buffer 1e5: \\x1b[31mtoo small\n"  # an escape shows, never acts
    shown = cli(db, "show", "2").stdout
    assert "ablation v2" in shown and "buffer 1e5: \\x1b[31mtoo small" in shown
    assert json.loads(cli(db, "show", "2", "--json").stdout)["tags"] == ["ablation", "v2"]

    runs = list(csv.DictReader(io.StringIO(cli(db, "export", "--table", "runs", "--format", "csv").stdout)))
    assert [(r["run_id"], r["tags"], r["note"]) for r in runs] == [
        ("1", "ablation draft", ""),
        ("2", "ablation v2", "buffer 1e5: \x1b[31mtoo small"),
        ("3", "", ""),
    ]
    evaluations = cli(db, "export", "--table", "evaluations", "--format", "csv", "--tag", "v2").stdout
    assert {row["run_id"] for row in csv.DictReader(io.StringIO(evaluations))} == {"2"}
    summary = cli(db, "export", "--table", "summary", "--format", "json", "--tag", "draft").stdout
    assert [row["correction"] for row in json.loads(summary)] == ["none"]  # run 1 alone
    once = cli(db, "dashboard", "--once", "--tag", "v2").stdout
    assert once.startswith("1 runs")

    cli(db, "note", "2", "")
    assert cli(db, "note", "2").stdout == "run 2 has no note\n"
    cli(db, "rm", "1", "--yes")
    store = open_store(db)
    assert store.execute("SELECT run_id, tag FROM tags ORDER BY tag").fetchall() == [(2, "ablation"), (2, "v2")]
    store.close()


def test_bad_tags_are_refused_and_change_nothing(filled_store: Path) -> None:
    db = filled_store
    cli(db, "tag", "1", "+keep")
    for args, message in [
        (["tag", "1", "+bad tag"], "tag 'bad tag': letters, digits and _ . : / @ - only"),
        (["tag", "1", "+ok", "+-x"], "tag '-x': letters, digits"),
        (["tag", "+x"], "name the runs first"),
        (["tag", "1", "+x", "-x"], "tag 'x' is both added and removed"),
        (["tag", "1", *(f"+t{i}" for i in range(40))], "run 1 would carry 41 tags; at most 32"),
        (["tag", "9", "+x"], "no run 9"),
        (["run", "td3", "Hopper-v4", "--tag", "a,b"], "tag 'a,b'"),
        (["note", "1", "x" * 10_001], "the note is 10,001 characters; at most 10,000"),
    ]:
        result = cli(db, *args, check=False)
        assert result.returncode == 2 and result.stderr.startswith("error: ") and message in result.stderr, args
        assert len(result.stderr.splitlines()) == 1
    assert cli(db, "tag", "1").stdout == "run 1: keep\n"
    assert len(list_runs(open_store(db))) == 3  # the refused run was never queued


@pytest.mark.process
def test_runs_and_sweeps_are_tagged_when_queued(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    small = ["--steps", "3000", "--set", "start_steps=500"]
    offpoc(db, "run", "td3", "Hopper-v4", *small, "--tag", "first", "--tag", "b/2", "--tag", "first")
    (tmp_path / "grid.toml").write_text(
        'name = "grid"\nalgos = ["td3"]\nenvs = ["Hopper-v4"]\nseeds = [0, 1]\nsteps = 3000\ntags = ["grid"]\n'
        '[set]\nstart_steps = 500\n[[methods]]\ncorrection = "none"\n'
    )
    offpoc(db, "sweep", str(tmp_path / "grid.toml"), "--tag", "extra")
    offpoc(db, "stop", "--all")
    assert ids(db, "--tag", "first") == [1] and ids(db, "--tag", "grid", "--tag", "extra") == [2, 3]
    assert json.loads(offpoc(db, "ps", "--all", "--json").stdout)[0]["tags"] == ["b/2", "first"]


def test_the_dashboard_filter_takes_tags() -> None:
    runs = [{"id": 1, "tags": ["ablation"]}, {"id": 2, "tags": ["v2", "Ablation-b"]}, {"id": 3, "tags": []}]
    keep = where.parse("tag=ablation")
    assert [run["id"] for run in runs if keep(run)] == [1]  # a tag matches whole, not as a part of another
    either = where.parse("tag=ablation,v2")
    assert [run["id"] for run in runs if either(run)] == [1, 2]


@pytest.mark.process
@pytest.mark.parametrize("command", [["tag", "3", "+keep"], ["note", "3", "kept"]])
def test_a_run_removed_while_tag_waits_is_refused_and_leaves_no_row(filled_store: Path, command: list[str]) -> None:
    """Issue 69, item 12: ``tag`` (or ``note``) resolves its runs, then waits for the write lock that ``rm``
    holds; ``rm`` deletes the run and commits. The command then refuses in one line, exit 2, and writes no tag
    row of the deleted run (before: "run 3: orphan", exit 0, a tag row of a run that was gone)."""
    import sqlite3
    import subprocess
    import sys
    import time

    remover = sqlite3.connect(filled_store, isolation_level=None)
    remover.execute("BEGIN IMMEDIATE")  # rm's transaction: it holds the write lock from here
    waiting = subprocess.Popen(
        [sys.executable, "-m", "offpoc_tui.cli", *command, "--db", str(filled_store)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(3)  # it resolves run 3 (a read, not blocked) and waits for the lock
    assert waiting.poll() is None, waiting.communicate()
    for table in ("tags", "evaluations"):
        remover.execute(f"DELETE FROM {table} WHERE run_id = 3")
    remover.execute("DELETE FROM runs WHERE id = 3")
    remover.execute("COMMIT")
    stdout, stderr = waiting.communicate(timeout=60)
    assert waiting.returncode == 2, (stdout, stderr)
    assert stderr.startswith("error: run 3 is no longer in the store") and len(stderr.splitlines()) == 1, stderr
    assert remover.execute("SELECT COUNT(*) FROM tags WHERE run_id = 3").fetchone() == (0,)
    remover.close()
