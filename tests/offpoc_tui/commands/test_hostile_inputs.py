"""Every command against each class of hostile input: ids, names, files, numbers, nesting.

Each case runs the real CLI in a process against a real store holding three runs, and must answer with
one line starting ``error:``, exit 2, within a time bound (no hang, no unbounded work), and leave every
file in the folder as it was (nothing written). Imports, which skip a bad file and go on, are in
test_imports.py; a run's log that is a FIFO, a device or a link (a file the store holds, not an argument:
exit 1) in test_logs.py; ``tag`` racing ``rm`` in test_tags.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from store import open_store
from store.runs import create_runs
from tests.support.storefill import fill, spec

PENDULUM = ["run", "td3", "Pendulum-v1"]
SEEDS_10000 = ", ".join(map(str, range(10_000)))
SWEEP = 'algos = ["td3"]\nenvs = ["Pendulum-v1"]\n[[methods]]\ncorrection = "none"\n'
VALUES_40 = ", ".join(f"0.{i + 1:02d}" for i in range(40))
PRODUCT = 'algos = ["td3"]\nenvs = ["Pendulum-v1"]\n[[methods]]\ncorrection = "none"\n' + "".join(
    f"{key} = [{VALUES_40}]\n" for key in ("tau", "actor_lr", "critic_lr", "gamma")
)  # 40^4 = 2.56 million methods
ALGOS_200 = ", ".join(['"td3"'] * 200)
WIDE = 'envs = ["Pendulum-v1"]\n[[methods]]\ncorrection = "none"\n'  # 200 × 1,000 seeds = 200,000 runs
CASES = [
    # ---- ids: only ASCII digits are ids; ranges are checked against the store before anything is expanded
    ("ids", ["show", "²"], "no run '²'"),
    ("ids", ["rm", "²-3", "-y"], "no run '²-3'"),
    ("ids", ["show", "1-10000000000"], "range 1-10000000000: 3 of its ids are runs"),
    ("ids", ["rm", "1-10000000000", "-y"], "no run 4 in this store"),
    ("ids", ["stop", "2-10000000000"], "no run 4 in this store"),
    ("ids", ["resume", "99999999999999999999999"], "no run 99999999999999999999999"),
    ("ids", ["follow", "3-1"], "run range '3-1' runs backwards"),
    ("ids", ["show", "1,2"], "names 2 runs"),
    ("ids", ["analyze", "weights", "1", "9"], "no run 9 "),
    ("ids", ["show", ","], "',' names no run"),
    ("ids", ["rm", "", "-y"], "'' names no run"),
    ("ids", ["export", "--table", "runs", "--run", ","], "',' names no run"),
    ("ids", ["duplicates", ","], "',' names no run"),
    ("ids", ["logs", "1,2"], "'1,2' names 2 runs"),
    ("ids", ["logs", "1-10000000000"], "range 1-10000000000: 3 of its ids are runs"),
    ("ids", ["tag", "²", "+x"], "no run '²'"),
    ("ids", ["tag", "1-10000000000", "+x"], "no run 4 in this store"),
    ("ids", ["note", ",", "text"], "',' names no run"),
    # ---- names that would read as ids
    ("names", [*PENDULUM, "--name", "1-3"], "--name '1-3' would read as run ids"),
    ("names", [*PENDULUM, "--name", "a,b"], "--name 'a,b' would read as run ids"),
    ("names", [*PENDULUM, "--name", "7"], "--name '7' would read as run ids"),
    ("names", ["sweep", "FILE:name = '2-3'\n" + SWEEP], "name '2-3' would read as run ids"),
    ("names", ["tag", "1", "+a,b"], "tag 'a,b': letters, digits and _ . : / @ - only"),
    ("names", ["tag", "1", "+" + "x" * 300], "is 300 characters; at most 64"),
    ("names", [*PENDULUM, "--name", "n" * 100_000], "--name is 100,000 characters; at most 200"),
    ("names", ["ps", "--tag", ""], "a tag cannot be empty"),
    ("names", ["import", "zoo", "x.npz", "--correction", "bo gus!"], "--correction 'bo gus!': letters, digits"),
    ("names", ["import", "zoo", "x.npz", "--env", "Not an env"], "--env 'Not an env': letters, digits"),
    ("names", ["export", "--tag", "Bad Tag"], "letters, digits and _ . : / @ - only"),
    ("names", ["dashboard", "--once", "--tag", ""], "a tag cannot be empty"),
    ("names", ["sweep", "FILE:name = '" + "n" * 1_000 + "'\n" + SWEEP], "name is 1,000 characters; at most 200"),
    # ---- files that are not what they claim
    ("files", ["ps", "--db", "FIFO"], "is not a regular file (a FIFO, device or socket)"),
    ("files", ["export", "--table", "runs", "--db", "FIFO"], "is not a regular file"),
    ("files", ["sweep", "FIFO"], "is not a regular file (a sweep is a TOML file)"),
    ("files", ["sweep", "FILE:name = 'big'\n" + "# padding\n" * 200_000 + SWEEP], "a sweep file is at most"),
    ("files", ["ps", "--db", "."], "is a directory, not an offpoc store"),
    ("files", ["export", "--format", "tensorboard", "-o", "offpoc.db"], "cannot write offpoc.db: it is the store"),
    ("files", ["export", "--format", "tensorboard", "-o", "offpoc.db-runs/tb"], "it is in the store's run files"),
    ("files", ["export", "--format", "tensorboard", "-o", "FIFO"], "FIFO exists and is not an offpoc TensorBoard"),
    ("files", ["export", "--format", "tensorboard", "-o", "FIFO/tb"], "FIFO is not a folder"),
    ("files", ["export", "--format", "tensorboard"], "--format tensorboard writes a folder: name it with -o DIR"),
    # ---- numbers beyond what the machine or the store can hold
    ("numbers", [*PENDULUM, "--set", "threads=1000000"], "threads 1,000,000 is more than this machine's"),
    ("numbers", [*PENDULUM, "--set", "hidden=100000000"], "GiB, more than 80% of this machine's"),
    ("numbers", [*PENDULUM, "--set", "buffer_size=1e11", "--steps", "1e11"], "replay slots need about"),
    ("numbers", [*PENDULUM, "--set", "exploration_std=nan"], "exploration_std must be a non-negative number"),
    ("numbers", [*PENDULUM, "--seeds", "0-999999"], "more than 1000 seeds"),
    ("numbers", ["logs", "1", "--tail", "-1"], "Invalid value for '--tail'"),
    ("numbers", ["sweep", f"FILE:name = 'many'\nseeds = [{SEEDS_10000}]\n" + SWEEP], "10,000 seeds, more than 1000"),
    ("numbers", ["sweep", "FILE:name = 'neg'\nseeds = [-1, 2]\n" + SWEEP], "seeds must be from 0 to 2^63 - 1"),
    ("numbers", ["sweep", "FILE:name = 'product'\n" + PRODUCT], "lists expand to more than 100,000 methods"),
    ("numbers", ["sweep", f"FILE:name = 'wide'\nseeds = '0-999'\nalgos = [{ALGOS_200}]\n" + WIDE], "more than 100,000"),
    ("numbers", [*PENDULUM, "--steps", "1e99999999999"], "'1e99999999999' is out of range"),
    ("numbers", [*PENDULUM, "--set", "batch_size=1e99999999999"], "is out of range"),
    ("numbers", [*PENDULUM, "--steps", "1e-99999999999"], "is not a whole number"),
    ("numbers", [*PENDULUM, "--set", "histogram_bins=1e12"], "histogram_bins must be at most 10,000"),
    ("numbers", [*PENDULUM, "--set", "eval_episodes=1e15"], "eval_episodes must be at most 1,000"),
    ("numbers", [*PENDULUM, "--sampler", "ero", "--set", "ero_sample=1e15"], "ero_sample must be at most"),
    ("numbers", [*PENDULUM, "--sampler", "ero", "--set", "ero_hidden=1e9"], "ero_hidden must be at most"),
    ("numbers", ["export", "--table", "aggregate", "--bootstrap", "999999999999"], "--bootstrap must be from 1 to"),
    ("numbers", ["plot", "--kind", "aggregate", "--bootstrap", "999999999999", "-o", "p.png"], "--bootstrap must be"),
    # ---- nesting
    ("nesting", ["sweep", "FILE:name = 'deep'\nx = " + "[" * 100_000 + "]" * 100_000 + "\n"], "nests its tables"),
]


def _folder_state(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (FIFOs by name only) with its content's hash."""
    state = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            state[str(path.relative_to(folder))] = hashlib.md5(path.read_bytes()).hexdigest()
        elif not path.is_dir():
            state[str(path.relative_to(folder))] = "special"
    return state


def _kill_what_it_started(store: Path) -> None:
    """Where a check is missing (a mutation test, a regression), the command queues a run and its scheduler
    starts training it, perhaps a network of 10^8 units: end every process serving this test's store (they
    are ours; the store's path is in their command line), so a failing case costs nothing after it."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"offpoc_tui" in b" ".join(command) and str(store).encode() in command:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with three finished runs (written through the real writer, no training)."""
    path = tmp_path_factory.mktemp("hostile") / "offpoc.db"
    db = open_store(path, create=True)
    create_runs(db, [spec(seed=seed) for seed in range(3)])
    db.execute("UPDATE runs SET status = 'finished'")
    db.conn.commit()
    db.close()
    for run_id in (1, 2, 3):
        fill(path, run_id)
    os.mkfifo(path.parent / "FIFO")
    return path


def _case_id(kind: str, args: list[str], message: str) -> str:
    shown = " ".join("FILE" if a.startswith("FILE:") else a.encode("ascii", "backslashreplace").decode() for a in args)
    return f"{kind}: {shown[:40]} ({message[:30]})"


@pytest.mark.parametrize(("kind", "args", "message"), CASES, ids=[_case_id(*case) for case in CASES])
def test_hostile_input_is_one_line_exit_2_bounded_and_writes_nothing(
    store: Path, tmp_path: Path, kind: str, args: list[str], message: str
) -> None:
    folder = store.parent
    args = list(args)
    for i, arg in enumerate(args):
        if arg.startswith("FILE:"):  # a file made for this case, outside the store's folder
            sweep = tmp_path / "sweep.toml"
            sweep.write_text(arg.removeprefix("FILE:"))
            args[i] = str(sweep)
    if "--db" not in args:
        args += ["--db", str(store)]
    before = _folder_state(folder)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "offpoc_tui.cli", *args],
            capture_output=True,
            text=True,
            cwd=folder,
            timeout=90,  # a hang, or work that grows with the input, fails here
            env={**os.environ, "COLUMNS": "200"},
        )
    finally:
        _kill_what_it_started(store)
    assert result.returncode == 2, (kind, result.stderr[-2000:])
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], (kind, result.stderr[-2000:])
    assert _folder_state(folder) == before


def test_json_output_stays_strict_json_when_the_store_holds_non_finite_numbers(tmp_path: Path) -> None:
    """A store written by an older offpoc (or edited by hand) may hold ±inf: ps, show and export still print
    JSON that strict parsers read, with null where a number is not finite."""
    import json

    from tests.support.processes import offpoc

    path = tmp_path / "offpoc.db"
    db = open_store(path, create=True)
    create_runs(db, [spec(seed=0)])
    db.close()
    fill(path, 1)
    db = open_store(path)
    db.execute("UPDATE runs SET status = 'finished', last_return = ?, best_return = ?", [float("inf"), float("-inf")])
    db.execute("UPDATE evaluations SET return_std = ? WHERE step = 1000", [float("inf")])
    db.conn.commit()
    db.close()

    def strict(text: str) -> Any:
        return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in JSON output"))

    assert strict(offpoc(path, "ps", "--all", "--json").stdout)[0]["last_return"] is None
    assert strict(offpoc(path, "show", "1", "--json").stdout)
    rows = strict(offpoc(path, "export", "--table", "evaluations", "--format", "json").stdout)
    assert [r["return_std"] for r in rows if r["step"] == 1000] == [None]
