"""The CLI's tables on real terminals of 80 and 160 columns: columns left out whole, by priority, and said."""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from store import open_store
from tests.support.processes import offpoc_in_terminal


@pytest.fixture
def ended_store(filled_store: Path) -> Path:
    """The filled store with one run failed: nothing queued, so no command starts a scheduler."""
    db = open_store(filled_store)
    db.execute("UPDATE runs SET status = 'failed', error = 'RuntimeError: boom' WHERE id = 2")
    db.conn.commit()
    db.close()
    return filled_store


@pytest.mark.parametrize(("columns", "lines"), [(80, 24), (160, 45)])
def test_ps_keeps_whole_columns_by_priority(
    ended_store: Path, snapshot: SnapshotAssertion, columns: int, lines: int
) -> None:
    screen = offpoc_in_terminal(ended_store, "ps", "--all", columns=columns, lines=lines)
    rows = screen.splitlines()
    assert all(len(row) <= columns for row in rows), screen
    assert "…" not in screen  # no value cut: a column is shown whole or left out and named
    header = rows[0].split()
    assert header[0] == "id" and "status" in header and "return" in header
    failed = next(row for row in rows if row.lstrip().startswith("2 "))
    assert "failed" in failed.split() and "302.0" in failed
    if columns == 80:
        assert header == ["id", "algo", "env", "correction", "seed", "status", "progress", "return"]
        assert rows[-1] == "not shown at 80 columns: name, div, steps, SPS, where; see --json"
    else:
        assert header[-3:] == ["SPS", "return", "where"] and "not shown" not in screen
    assert screen == snapshot


def test_the_weights_header_never_shows_a_negative_interval() -> None:
    from offpoc_tui.dashboard.quantities_pane import interval_text

    assert interval_text(-1) == "latest" and interval_text(-3) == "earlier (its step in the title)"


def test_ps_shows_long_names_whole_where_there_is_room_and_tags_before_counters(ended_store: Path) -> None:
    """Issue 69, item 8: names were cut at 24 characters even at 160 columns, and tags were the first column
    dropped on a narrow terminal. The room the kept columns leave widens the names; tags come before the
    counters (steps, SPS, where) and the names (the id names a run whole)."""
    from store.tags import add_tags

    name = "a-rather-long-experiment-name-for-ablation-7"  # 44 characters
    db = open_store(ended_store)
    db.execute("UPDATE runs SET name = ?", [name])
    add_tags(db, [1, 2, 3], ["ablation"])
    db.conn.commit()
    db.close()
    wide = offpoc_in_terminal(ended_store, "ps", "--all", columns=160, lines=45)
    assert wide.count(name) == 3 and "…" not in wide, wide
    narrow = offpoc_in_terminal(ended_store, "ps", "--all", columns=100, lines=24)
    header = narrow.splitlines()[0].split()
    assert "tags" in header and "steps" not in header and "where" not in header, narrow
    assert all(len(row) <= 100 for row in narrow.splitlines())
    eighty = offpoc_in_terminal(ended_store, "ps", "--all", columns=80, lines=24)  # tags kept, before names
    header = eighty.splitlines()[0].split()
    assert header[-1] == "tags" and eighty.count("ablation") == 3, eighty
    assert eighty.splitlines()[-1].startswith("not shown at 80 columns: name,")


@pytest.mark.parametrize("group", [[], ["import"]])
def test_help_lists_each_commands_whole_summary_at_100_columns(group: list[str]) -> None:
    """Issue 69, item 14: ``offpoc --help`` cut every summary with "..." (click's one-line listing); each is now
    its help's whole first sentence, wrapped, in lines of at most 100 columns."""
    import os
    import subprocess
    import sys

    from offpoc_tui.cli import app
    from offpoc_tui.console import summary_of

    env = {**os.environ, "COLUMNS": "100"}
    shown = subprocess.run([sys.executable, "-m", "offpoc_tui.cli", *group, "--help"], env=env, text=True,
                           capture_output=True, check=True).stdout  # fmt: skip
    listing = shown.split("Commands:")[1]
    assert "..." not in listing and all(len(line) <= 100 for line in shown.splitlines())
    flat = " ".join(listing.split())
    commands = app.registered_commands if not group else next(g.typer_instance for g in app.registered_groups)
    for command in getattr(commands, "registered_commands", commands):
        summary = summary_of(command.callback.__doc__ or "")  # type: ignore[union-attr]
        assert summary and " ".join(summary.split()) in flat, summary


def test_help_names_what_each_option_takes_in_words_not_types() -> None:
    """Issue 69, item 14: help printed types (``--algo <list[str]>``, ``--tail <int range>``); each value is now a
    word (``--algo ALGO``, ``-n, --tail N``, ``--db PATH``), every command's; ``tag --help`` names ``-h``."""
    import re

    from typer.testing import CliRunner

    from offpoc_tui.cli import app

    commands = ["run", "sweep", "config", "jobs", "follow", "ps", "show", "logs", "stop", "resume", "rm",
                "duplicates", "export", "dashboard", "merge", "tag", "note", "plot", "import reference", "import zoo",
                "analyze weights"]  # fmt: skip
    for command in commands:
        shown = CliRunner().invoke(app, [*command.split(), "--help"], env={"COLUMNS": "120"})
        assert shown.exit_code == 0, (command, shown.output)
        assert not re.search(r"<[a-z]", shown.output), (command, shown.output)
    export = CliRunner().invoke(app, ["export", "--help"], env={"COLUMNS": "120"}).output
    assert "--algo ALGO" in export and "--db PATH" in export and "--last N" in export
    assert "-n, --tail N" in CliRunner().invoke(app, ["logs", "--help"], env={"COLUMNS": "120"}).output
    assert "-h alone (or --help) shows this help" in CliRunner().invoke(app, ["tag", "--help"]).output
