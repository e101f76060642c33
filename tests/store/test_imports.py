"""``offpoc import``: the paper's published curves (the real files) and SB3/zoo evaluations.npz."""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import zipfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from offpoc_tui.cli import app
from store import SCHEMA_VERSION, open_store
from store.codec import encode_values
from store.reader import histograms, quantities, quantity_rows
from store.schema import _V1
from tests.conftest import REFERENCE_CURVES, needs_reference

runner = CliRunner()


def invoke(*args: str) -> Result:
    return runner.invoke(app, list(args))


def counts(db_path: Path) -> tuple[int, int]:
    db = open_store(db_path)
    runs = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    evals = db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
    db.close()
    return runs, evals


# ---- the published curves ----------------------------------------------------------------------
@needs_reference
def test_reference_import_counts_and_metadata(reference_store: Path) -> None:
    db = open_store(reference_store)
    assert counts(reference_store) == (1440, 1440 * 1001)
    by = dict(db.execute("SELECT algo, COUNT(*) FROM runs GROUP BY algo").fetchall())
    assert by == {"ddpg": 480, "sac": 480, "td3": 480}
    by = dict(db.execute("SELECT correction, COUNT(*) FROM runs GROUP BY correction").fetchall())
    assert by == {c: 240 for c in ("none", "acoffpoc", "ace", "geoff-pac", "ipg", "ris-off-pac")}
    envs = {r[0] for r in db.execute("SELECT DISTINCT env FROM runs")}
    assert envs == {"Ant-v2", "BipedalWalker-v3", "HalfCheetah-v2", "Hopper-v2", "Humanoid-v2",
                    "LunarLanderContinuous-v2", "Swimmer-v2", "Walker2d-v2"}  # fmt: skip
    assert {r[0] for r in db.execute("SELECT DISTINCT seed FROM runs")} == set(range(10))
    assert {r[0] for r in db.execute("SELECT DISTINCT divergence FROM runs WHERE correction = 'acoffpoc'")} == {"jsd"}
    assert db.execute("SELECT COUNT(*) FROM runs WHERE status != 'finished' OR pid IS NOT NULL").fetchone()[0] == 0

    run = db.execute(
        "SELECT id, source, origin, steps, last_return, best_return FROM runs"
        " WHERE algo = 'td3' AND env = 'Hopper-v2' AND correction = 'acoffpoc' AND seed = 3"
    ).fetchone()
    file = REFERENCE_CURVES / "Learning Curves" / "TD3" / "Hopper-v2" / "AC-Off-POC_TD3_Hopper-v2_3.npy"
    raw = np.load(file)
    assert run[1] == str(file.resolve())
    assert run[2] == "reference:TD3/Hopper-v2/AC-Off-POC_TD3_Hopper-v2_3.npy"
    assert run[3] == 1_000_000 and run[4] == raw[-1] and run[5] == raw.max()
    steps, returns = zip(*db.execute("SELECT step, return_mean FROM evaluations WHERE run_id = ? ORDER BY step",
                                     [run[0]]))  # fmt: skip
    assert list(steps) == [k * 1000 for k in range(1001)]
    np.testing.assert_array_equal(returns, raw)


@needs_reference
def test_reference_import_twice_adds_nothing(tmp_path: Path) -> None:
    db = tmp_path / "ref.db"
    first = invoke("import", "reference", str(REFERENCE_CURVES / "Learning Curves"), "--db", str(db))
    assert first.exit_code == 0, first.output
    assert "imported 1,440 runs, 52 imported seeds flagged as copies in" in first.stdout
    flagged = [line for line in first.stderr.splitlines() if line.startswith("  ")]
    assert len(flagged) == 21 and flagged[-1] == "  … and 32 more (offpoc duplicates lists them all)"
    before = counts(db)
    again = invoke("import", "reference", str(REFERENCE_CURVES), "--db", str(db))  # the parent folder works too
    assert again.exit_code == 0, again.output
    assert "imported 0 runs, 1,440 already present" in again.stdout
    assert counts(db) == before == (1440, 1441440)


@needs_reference
def test_imported_runs_do_not_resume_and_show_their_source(reference_store: Path, tmp_path: Path) -> None:
    db = tmp_path / "copy.db"
    shutil.copy(reference_store, db)
    shown = invoke("show", "1", "--db", str(db))
    assert shown.exit_code == 0 and "imported from" in shown.stdout
    open_store(db).execute("UPDATE runs SET status = 'stopped' WHERE id = 1")
    result = invoke("resume", "1", "--db", str(db))
    assert result.exit_code == 2 and "was imported" in result.stderr


# ---- malformed input: reported, skipped, never half-imported ------------------------------------
def _layout(root: Path) -> Path:
    curves = root / "Learning Curves"
    good = curves / "TD3" / "Hopper-v2"
    good.mkdir(parents=True)
    for seed in range(2):
        np.save(good / f"TD3_Hopper-v2_{seed}.npy", np.linspace(0, 100 + seed, 11))
    np.save(good / "AC-Off-POC_TD3_Hopper-v2_0.npy", np.linspace(0, 120, 11))
    return curves


BAD_FILES = {
    "TD3/Hopper-v2/TD3_Hopper-v2_x.npy": ("array", "not a published curve's name"),
    "TD3/Hopper-v2/Foo_TD3_Hopper-v2_1.npy": ("array", "not a published curve's name"),
    "TD3/Walker2d-v2/TD3_Hopper-v2_5.npy": ("array", "its name says TD3/Hopper-v2"),
    "TD3/TD3_Hopper-v2_6.npy": ("array", "not a published curve's name"),
    "TD3/Hopper-v2/TD3_Hopper-v2_7.npy": ("text", "not a readable .npy array"),
    "TD3/Hopper-v2/TD3_Hopper-v2_8.npy": ("2d", "expected a 1-d array"),
    "TD3/Hopper-v2/TD3_Hopper-v2_9.npy": ("nan", "must be finite"),
}


def test_malformed_reference_files_are_reported_and_skipped(tmp_path: Path) -> None:
    curves = _layout(tmp_path / "pub")
    for rel, (kind, _) in BAD_FILES.items():
        path = curves / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "text":
            path.write_text("not numpy")
        else:
            data = {"array": np.ones(11), "2d": np.ones((3, 11)), "nan": np.array([1.0, np.nan])}[kind]
            np.save(path, data)
    db = tmp_path / "s.db"
    result = invoke("import", "reference", str(curves), "--db", str(db))
    assert result.exit_code == 1, result.output
    assert "imported 3 runs" in result.stdout and f"skipped {len(BAD_FILES)} files" in result.stdout
    skipped = [line for line in result.stderr.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == len(BAD_FILES)
    for rel, (_, reason) in BAD_FILES.items():
        assert any(rel.split("/")[-1] in line and reason in line for line in skipped), (rel, skipped)
    assert "Traceback" not in result.output
    assert counts(db) == (3, 33)  # nothing of a bad file, no evaluation without its run


@pytest.mark.parametrize(
    ("path", "message"),
    [("missing", "no file or folder"), ("empty", "no 'Learning Curves' folder"), ("bare", "no files in")],
)
def test_reference_path_problems_exit_2(tmp_path: Path, path: str, message: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "bare" / "Learning Curves").mkdir(parents=True)
    db = tmp_path / "s.db"
    result = invoke("import", "reference", str(tmp_path / path), "--db", str(db))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and message in result.stderr and len(result.stderr.splitlines()) == 1
    assert not db.exists()


def test_import_into_a_foreign_file_leaves_it_untouched(tmp_path: Path) -> None:
    foreign = tmp_path / "notes.db"
    foreign.write_text("my notes, not a database")
    result = invoke("import", "reference", str(_layout(tmp_path / "pub")), "--db", str(foreign))
    assert result.exit_code == 2 and "not an SQLite database" in result.stderr
    assert foreign.read_text() == "my notes, not a database"


# ---- rl-baselines3-zoo / SB3 evaluations.npz ----------------------------------------------------
def _zoo_file(folder: Path, evaluations: int, episodes: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(evaluations)
    steps = np.arange(1, evaluations + 1) * 10_000
    results = rng.normal(1000, 50, (evaluations, episodes)).cumsum(axis=0)
    lengths = rng.integers(100, 1000, (evaluations, episodes))
    np.savez(folder / "evaluations.npz", timesteps=steps, results=results, ep_lengths=lengths)
    return steps, results, lengths


def test_zoo_import_reads_layout_and_extends_a_run_still_training(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    steps, results, lengths = _zoo_file(logs / "td3" / "Hopper-v3_2", 6)
    _zoo_file(logs / "sac" / "Walker2d-v3_1", 4)
    db = tmp_path / "s.db"
    result = invoke("import", "zoo", str(logs), "--db", str(db))
    assert result.exit_code == 0, result.output
    assert "imported 2 runs" in result.stdout
    store = open_store(db)
    run = store.execute("SELECT id, algo, env, seed, correction, steps, name FROM runs WHERE algo = 'td3'").fetchone()
    assert run[1:] == ("td3", "Hopper-v3", 2, "none", 60_000, "zoo-Hopper-v3_2")
    rows = store.execute(
        "SELECT step, return_mean, return_std, length_mean, returns, lengths, wall_time FROM evaluations"
        " WHERE run_id = ? ORDER BY step",
        [run[0]],
    ).fetchall()
    assert [r[0] for r in rows] == steps.tolist()
    np.testing.assert_allclose([r[1] for r in rows], results.mean(axis=1))
    np.testing.assert_allclose([r[2] for r in rows], results.std(axis=1))
    np.testing.assert_allclose([r[3] for r in rows], lengths.mean(axis=1))
    assert json.loads(rows[0][5]) == lengths[0].tolist() and rows[0][6] is None

    _zoo_file(logs / "td3" / "Hopper-v3_2", 9)  # the run went on training
    again = invoke("import", "zoo", str(logs), "--db", str(db))
    assert again.exit_code == 0 and "imported 0 runs, extended 1 already imported, 1 already present" in again.stdout
    assert store.execute("SELECT COUNT(*) FROM evaluations WHERE run_id = ?", [run[0]]).fetchone()[0] == 9
    assert store.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2


def test_zoo_overrides_and_malformed_archives(tmp_path: Path) -> None:
    flat = tmp_path / "mine"
    _zoo_file(flat, 3)
    db = tmp_path / "s.db"
    unknown = invoke("import", "zoo", str(flat / "evaluations.npz"), "--db", str(db))
    assert unknown.exit_code == 1 and "pass --algo and --env" in unknown.stderr
    named = invoke("import", "zoo", str(flat), "--algo", "TD3", "--env", "Hopper-v4", "--seed", "7",
                   "--correction", "acoffpoc", "--db", str(db))  # fmt: skip
    assert named.exit_code == 0, named.output
    row = open_store(db).execute("SELECT algo, env, seed, correction FROM runs").fetchone()
    assert row == ("td3", "Hopper-v4", 7, "acoffpoc")

    broken = tmp_path / "logs" / "td3" / "Hopper-v3_1"
    broken.mkdir(parents=True)
    np.savez(broken / "evaluations.npz", timesteps=np.arange(3), results=np.ones((3, 2)))
    (tmp_path / "logs" / "td3" / "Ant-v3_1").mkdir(parents=True)
    (tmp_path / "logs" / "td3" / "Ant-v3_1" / "evaluations.npz").write_bytes(b"PK not a zip")
    result = invoke("import", "zoo", str(tmp_path / "logs"), "--db", str(db))
    assert result.exit_code == 1
    assert "missing ep_lengths" in result.stderr and "not a readable .npz archive" in result.stderr
    assert open_store(db).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def _claims(values: np.ndarray, count: int) -> bytes:
    """``values`` as .npy bytes whose header claims ``count`` values (the data is not there)."""
    buffer = io.BytesIO()
    np.save(buffer, values)
    return buffer.getvalue().replace(f"({len(values)},)".encode(), f"({count},)".encode(), 1)


T = np.arange(1, 6) * 1000
HOSTILE_ZOO = {  # name: (timesteps, results, ep_lengths), what the skip line says
    "no-episodes": ((T, np.ones((5, 0)), np.ones((5, 0))), "shapes do not fit"),
    "3d": ((T, np.ones((5, 3, 2)), np.ones((5, 3, 2))), "shapes do not fit"),
    "text-steps": ((T.astype(str), np.ones((5, 3)), np.ones((5, 3))), "timesteps: holds <U21 values, not numbers"),
    "text-results": ((T, np.full((5, 3), "1"), np.ones((5, 3))), "results: holds <U1 values, not numbers"),
    "text-lengths": ((T, np.ones((5, 3)), np.full((5, 3), "x")), "ep_lengths: holds <U1 values, not numbers"),
    "uint64-steps": ((T.astype(np.uint64) + np.uint64(2**63), np.ones((5, 3)), np.ones((5, 3))), "timesteps must be"),
    "huge-steps": ((T * 1e30, np.ones((5, 3)), np.ones((5, 3))), "timesteps must be whole numbers"),
    "nan-step": ((np.array([1e3, np.nan, 3e3, 4e3, 5e3]), np.ones((5, 3)), np.ones((5, 3))), "timesteps must be"),
    "negative-steps": ((-T[::-1], np.ones((5, 3)), np.ones((5, 3))), "timesteps must be whole numbers from 0"),
    "returns-1e308": ((T, np.full((5, 3), 1e308), np.ones((5, 3))), "results must be finite numbers within"),
    "lengths-1e300": ((T, np.ones((5, 3)), np.full((5, 3), 1e300)), "ep_lengths must be whole numbers"),
}


def test_a_folder_of_evaluations_imports_every_good_file_and_lists_each_bad_one(tmp_path: Path) -> None:
    logs = tmp_path / "logs" / "td3"
    for exp in range(20):
        _zoo_file(logs / f"Hopper-v3_{exp}", 4 + exp % 3)
    for exp, (_name, ((steps, results, lengths), _)) in enumerate(HOSTILE_ZOO.items(), start=100):
        (logs / f"Hopper-v3_{exp}").mkdir()
        np.savez(logs / f"Hopper-v3_{exp}" / "evaluations.npz", timesteps=steps, results=results, ep_lengths=lengths)
    bomb = logs / "Hopper-v3_200"
    bomb.mkdir()
    with zipfile.ZipFile(bomb / "evaluations.npz", "w") as archive:  # headers claiming 10^12 values
        for key in ("timesteps", "results", "ep_lengths"):
            archive.writestr(f"{key}.npy", _claims(np.ones(10), 10**12))
    db = tmp_path / "s.db"
    result = invoke("import", "zoo", str(tmp_path / "logs"), "--db", str(db))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"imported 20 runs, skipped {len(HOSTILE_ZOO) + 1} files in" in result.stdout
    skipped = [line for line in result.stderr.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == len(HOSTILE_ZOO) + 1
    for exp, (name, (_, reason)) in enumerate(HOSTILE_ZOO.items(), start=100):
        assert any(f"Hopper-v3_{exp}/" in line and reason in line for line in skipped), (name, skipped)
    assert any("Hopper-v3_200/" in line and "claims 1,000,000,000,000 values" in line for line in skipped)
    assert counts(db)[0] == 20
    assert "Infinity" not in invoke("ps", "--all", "--json", "--db", str(db)).stdout


def test_a_header_claiming_more_than_the_file_holds_is_refused_unread(tmp_path: Path) -> None:
    curves = _layout(tmp_path / "pub")
    (curves / "TD3" / "Hopper-v2" / "TD3_Hopper-v2_5.npy").write_bytes(_claims(np.ones(11), 1000))
    (curves / "TD3" / "Hopper-v2" / "TD3_Hopper-v2_6.npy").write_bytes(_claims(np.ones(11), 10**12))
    result = invoke("import", "reference", str(curves), "--db", str(tmp_path / "s.db"))
    assert result.exit_code == 1 and "imported 3 runs, skipped 2 files" in result.stdout
    assert "claims 1,000 values but the file holds only" in result.stderr
    assert "claims 1,000,000,000,000 values; at most" in result.stderr


BAD_SHAPES = [((-3,), "is not a shape"), ((10**30, 0), "has a side over"), ((-2, -3), "is not a shape"),
              ((3, 0, 10**30), "has a side over")]  # fmt: skip


@pytest.mark.parametrize(("shape", "reason"), BAD_SHAPES)
def test_a_header_whose_shape_is_not_one_is_refused(tmp_path: Path, shape: tuple[int, ...], reason: str) -> None:
    """The shape written over the header's padding (numpy reads the length the header states): it reads this far."""
    curves = _layout(tmp_path / "pub")
    text = _claims(np.ones(11), 11).replace(b"(11,)", str(shape).replace(" ", "").encode(), 1)
    (curves / "TD3" / "Hopper-v2" / "TD3_Hopper-v2_5.npy").write_bytes(text)
    logs = tmp_path / "logs" / "td3" / "Hopper-v3_1"
    logs.mkdir(parents=True)
    with zipfile.ZipFile(logs / "evaluations.npz", "w") as archive:
        for key in ("timesteps", "results", "ep_lengths"):
            archive.writestr(f"{key}.npy", text)
    result = invoke("import", "reference", str(curves), "--db", str(tmp_path / "s.db"))
    assert result.exit_code == 1 and "imported 3 runs, skipped 1 file" in result.stdout and reason in result.stderr
    zoo = invoke("import", "zoo", str(tmp_path / "logs"), "--db", str(tmp_path / "s.db"))
    assert zoo.exit_code == 1 and "imported 0 runs, skipped 1 file" in zoo.stdout and reason in zoo.stderr


def test_a_folder_nested_deeper_than_the_recursion_limit_is_walked(tmp_path: Path) -> None:
    deep, depth = tmp_path / "deep", 1100
    deep.mkdir()
    cwd = os.getcwd()
    os.chdir(deep)
    try:  # made relative, step by step: the absolute path is longer than some calls take
        for _ in range(depth):
            os.mkdir("d")
            os.chdir("d")
        np.savez("evaluations.npz", timesteps=T, results=np.ones((5, 3)), ep_lengths=np.ones((5, 3)))
    finally:
        os.chdir(cwd)
    try:
        result = invoke(
            "import", "zoo", str(deep), "--algo", "td3", "--env", "Hopper-v3", "--db", str(tmp_path / "s.db")
        )
        assert result.exit_code == 0, result.output
        assert "imported 1 run in" in result.stdout
    finally:  # pytest's own clean-up of old temporary folders recurses: take the tree down here
        os.chdir(deep / ("d/" * 100))
        try:
            for _ in range(depth - 100):
                os.chdir("d")
            for name in os.listdir("."):
                os.remove(name)
            for _ in range(depth):
                os.chdir("..")
                os.rmdir("d")
        finally:
            os.chdir(cwd)


def test_a_curve_the_store_refuses_is_rolled_back_alone(tmp_path: Path) -> None:
    """The last line of defence behind the checks: a write that fails skips its file, not the import."""
    from store.curve_imports import Curve, import_curves
    from store.runs import RunSpec

    db = open_store(tmp_path / "s.db", create=True)
    steps = np.arange(3, dtype=np.int64) * 1000

    def curve(seed: int, returns: np.ndarray) -> Curve:
        run = RunSpec("zoo", "td3", "Hopper-v3", "none", None, seed, 2000, {"seed": seed})
        return Curve(run, f"test:{seed}", f"file{seed}", steps, returns)

    bad = curve(1, np.array([1.0, np.nan, 2.0]))  # NaN is stored as NULL: the NOT NULL constraint refuses it
    report = import_curves(db, [curve(0, np.ones(3)), bad, curve(2, np.ones(3))])
    assert report.imported == 2 and len(report.problems) == 1 and "file1: the store refused it" in report.problems[0]
    assert [r[0] for r in db.execute("SELECT seed FROM runs ORDER BY seed")] == [0, 2]
    assert db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == 6


# ---- the schema migration that made room for imports --------------------------------------------
def test_a_version_1_store_migrates_keeping_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(_V1)
        conn.execute("PRAGMA user_version = 1")
        conn.execute("INSERT INTO meta VALUES ('app', 'offpoc')")
        conn.execute("""INSERT INTO meta VALUES ('option_owners', '{"ris_beta": ["ris-off-pac"]}')""")
        conn.execute(
            "INSERT INTO runs (name, algo, env, correction, seed, config, status, total_steps, created)"
            " VALUES ('old', 'td3', 'Hopper-v4', 'none', 0, '{}', 'finished', 1000, 0)"
        )
        conn.execute("INSERT INTO evaluations VALUES (1, 1, 1000, 12.5, 321.0, 4.0, 50.0, '[321.0]', '[50]')")
        blob = encode_values(np.array([[0.25], [0.5]]))
        conn.execute("INSERT INTO weights VALUES (1, 1, 1, 501, 2, 'lambda', 0.375, ?)", [blob])
        conn.execute("INSERT INTO histograms VALUES (1, 1, 1000, '[1, 1]')")
    db = open_store(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 14
    # Schema 12: AC-Off-POC's divergence and ref_std are its options; the store names the corrections built in.
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    assert json.loads(meta["option_owners"]) == {"ris_beta": ["ris-off-pac"], "divergence": ["acoffpoc"],
                                                 "ref_std": ["acoffpoc"]}  # fmt: skip
    names = {m["correction"]: (m["paper_name"], m["method_option"]) for m in json.loads(meta["methods"])}
    assert names["acoffpoc"] == ("AC-Off-POC", "divergence") and names["ris-off-pac"] == ("RIS-Off-PAC", None)
    # Schema 4: the weights and histograms stored are λ's.
    stored = list(quantity_rows(db, 1))
    assert [(u, step, names) for u, step, names, _ in stored] == [(1, 501, ("lambda",)), (2, 502, ("lambda",))]
    np.testing.assert_allclose([v[0] for *_, v in stored], [0.25, 0.5], atol=1e-5)
    assert [(r, step, c.tolist()) for r, step, c in histograms(db, [1])] == [(1, 1000, [1, 1])]
    assert quantities(db, [1]) == [{"name": "lambda", "label": "λ", "low": 0.0, "high": 1.0}]
    assert db.execute("SELECT origin FROM runs").fetchone() == (None,)
    assert db.execute("SELECT * FROM evaluations").fetchall() == [
        (1, 1, 1000, 12.5, 321.0, 4.0, 50.0, "[321.0]", "[50]")
    ]
    db.execute(
        "INSERT INTO evaluations (run_id, step, return_mean, returns, lengths) VALUES (1, 2000, 1.0, '[]', '[]')"
    )
    with pytest.raises(sqlite3.IntegrityError):  # still one evaluation per (run, step)
        db.execute("INSERT INTO evaluations (run_id, step, return_mean, returns, lengths) VALUES (1, 2000, 2, '', '')")


def test_a_zoo_runs_name_from_its_folder_can_be_given_back_on_a_command_line(tmp_path: Path) -> None:
    _zoo_file(tmp_path / "logs" / "td3" / "a,b\x1bc", 3)
    db = tmp_path / "s.db"
    result = invoke("import", "zoo", str(tmp_path / "logs"), "--algo", "td3", "--env", "Hopper-v3", "--db", str(db))
    assert result.exit_code == 0, result.output
    assert open_store(db).execute("SELECT name FROM runs").fetchone() == ("zoo-a_b_c",)
    assert invoke("show", "zoo-a_b_c", "--db", str(db)).exit_code == 0
