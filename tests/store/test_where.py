"""One filter grammar (issue 69, item 6): any setting, tags and results, in the dashboard, ps, export and plot."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from store import open_store
from store.runs import RunSpec, create_runs
from store.where import FilterError, matching_ids, number, parse
from tests.support.cli import cli
from tests.support.storefill import fill, spec


def _spec(seed: int, correction: str, **settings: object) -> RunSpec:
    base = spec(correction=correction, seed=seed)
    config = {**base.config, "start_steps": 500, "batch_size": 256, "actor_lr": 3e-4, "layer_norm": False,
              "hidden": [64, 64], "label": "a"}  # fmt: skip
    return RunSpec(base.name, base.algo, base.env, base.correction, base.divergence, seed, 3000, {**config, **settings})


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """Four runs: 1 and 2 finished (returns 300 and 800 at 3,000 steps), 3 and 4 stopped with nothing yet.
    None queued: a command reading a store with queued runs and no scheduler starts one, which would train them and
    add a note to the stderr the tests read (it did, in one CI run in many, as its scheduler came and went)."""
    path = tmp_path / "s.db"
    db = open_store(path, create=True)
    create_runs(
        db,
        [
            _spec(0, "none"),
            _spec(1, "acoffpoc", batch_size=128, actor_lr=1e-3, hidden=[256, 256]),
            _spec(2, "acoffpoc", start_steps=1000, layer_norm=True, label="x,y"),
            _spec(3, "ace", batch_size=64),
        ],
    )
    db.execute("UPDATE runs SET status = CASE WHEN id IN (1, 2) THEN 'finished' ELSE 'stopped' END")
    db.close()
    fill(path, 1)
    fill(path, 2, offset=500.0)
    return path


def _ids(path: Path, text: str) -> list[int]:
    db = open_store(path)
    try:
        return matching_ids(db, text)
    finally:
        db.close()


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("start_steps=500", [1, 2, 4]),
        ("start_steps!=500", [3]),
        ("batch_size>=128", [1, 2, 3]),
        ("batch_size<128", [4]),
        ("actor_lr=1e-3", [2]),  # numbers as numbers: 0.001 is 1e-3
        ("actor_lr=0.0003", [1, 3, 4]),
        ("layer_norm=true", [3]),
        ("return>500", [2]),  # run 2's latest evaluation: 800; runs 3 and 4 have none and meet no comparison
        ("return<=300", [1]),
        ("steps<1e3", [3, 4]),
        ("steps>=3k", [1, 2]),
        ("correction=acoffpoc batch_size>100", [2, 3]),
        ("correction!=acoffpoc", [1, 4]),
        ("seed=0,3", [1, 4]),
        ("id>2", [3, 4]),
        ("hopper", [1, 2, 3, 4]),
        ("hidden=256,256", [2]),  # a list setting, whole
        ("hidden=[256,256]", [2]),
        ("hidden=64,64", [1, 3, 4]),
        ("label=x,y", [3]),  # a text with a comma, whole (no run has x or y)
        ("seed=0.0", [1]),
        ("", [1, 2, 3, 4]),
    ],
)
def test_a_filter_keeps_runs_by_any_setting_result_or_column(store: Path, text: str, ids: list[int]) -> None:
    assert _ids(store, text) == ids


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nosuch=1", "unknown filter key 'nosuch': use a run's algo, correction, divergence, env, id, name, note,"),
        ("batch_size>big", "batch_size> needs a number, not 'big'"),
        ("algo>2", "algo is text: compare it with = or !="),
        ("return>1,2", "return> takes one number, not a list"),
        ("seed=", "seed= needs a value"),
        ("=5", "cannot read '=5': write key=value, key>number or a bare word"),
    ],
)
def test_a_filter_it_cannot_read_is_one_line_naming_what_there_is(store: Path, text: str, message: str) -> None:
    with pytest.raises(FilterError) as raised:
        _ids(store, text)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    if text.startswith("nosuch"):  # the keys that exist, settings of this store's runs among them
        assert "a result: return, best, steps, budget, updates, lambda, sps" in str(raised.value)
        assert str(raised.value).endswith(
            "a setting: actor_lr, batch_size, env_id, hidden, label, layer_norm, start_steps, total_steps"
        )


def test_numbers_read_with_suffixes_and_nothing_else() -> None:
    assert [number(t) for t in ("1e5", "100k", "1.5M", "2_000", "nan", "inf", "x")] == [
        1e5, 1e5, 1.5e6, 2000.0, None, None, None,
    ]  # fmt: skip


def test_the_dashboard_reads_the_same_grammar_on_rows_with_their_configs() -> None:
    runs = [
        {"id": 1, "name": "a", "algo": "td3", "env": "Hopper-v4", "correction": "none", "last_return": 1200.0,
         "config": {"start_steps": 500}},
        {"id": 2, "name": "b", "algo": "td3", "env": "Hopper-v4", "correction": "none", "last_return": None,
         "config": {"start_steps": 1000}},
    ]  # fmt: skip
    keep = parse("start_steps=500 return>1000", {"start_steps"})
    assert [r["id"] for r in runs if keep(r)] == [1] and keep.settings == {"start_steps"}
    with pytest.raises(FilterError, match="unknown filter key 'start_step'"):
        parse("start_step=500", {"start_steps"})


def test_ps_export_and_plot_take_the_filter(store: Path, tmp_path: Path) -> None:
    listed = json.loads(cli(store, "ps", "--all", "--json", "--where", "batch_size>=128 return>500").stdout)
    assert [run["id"] for run in listed] == [2]
    exported = cli(store, "export", "--table", "runs", "--where", "start_steps=500 steps<1e3").stdout
    assert [int(row["run_id"]) for row in csv.DictReader(io.StringIO(exported))] == [4]
    figure = tmp_path / "f.png"
    done = cli(store, "plot", "-o", str(figure), "-w", "correction=acoffpoc return>0")
    assert figure.stat().st_size > 0 and done.stderr.endswith("1 panel, 1 curve from 1 run\n")
    refused = cli(store, "ps", "--where", "start_step=500", check=False)
    assert refused.returncode == 2 and refused.stderr.startswith(
        "error: unknown filter key 'start_step' (did you mean start_steps?): use a run's algo,"
    )
    assert len(refused.stderr.strip().splitlines()) == 1
    subset = cli(store, "export", "--table", "runs", "--run", "1", "--where", "layer_norm!=true").stdout
    assert [int(row["run_id"]) for row in csv.DictReader(io.StringIO(subset))] == [1]  # keys: the store's, not --run's
    none = cli(store, "export", "--where", "return>1e6", check=False)
    assert none.returncode == 1 and "no run matches --where 'return>1e6'" in none.stderr


def test_compare_reads_a_filter_whose_setting_is_gone_as_keeping_no_run() -> None:
    """Compare reads the table's filter again each poll; once no run has the setting it names (every such run
    deleted), it keeps no run, as the table does, never every run as though there were no filter."""
    from offpoc_tui.dashboard.request import filtered

    left = {"id": 2, "name": "b", "algo": "td3", "env": "Hopper-v4", "correction": "none", "config": {}}
    assert not filtered("start_steps=500")(left)
    assert filtered("")(left)
