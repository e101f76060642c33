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
