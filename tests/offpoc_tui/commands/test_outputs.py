"""Where `export -o`, `plot -o` and standard output lead: a symlink, a FIFO, a device, a full disk.

Real `offpoc` processes on a real store. A review found `-o link.csv` replacing the link with a regular file
(its target left as it was), `-o /dev/stdout` and `-o /dev/full` replacing the machine's own entries with
regular files, and every printing command ending in a traceback on a full disk behind `>`.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.processes import immutable, offpoc


def _full_device(folder: Path) -> Path:
    """A device like /dev/full (every write fails: no space left) made in ``folder``; skips where it cannot."""
    device = folder / "full.png"  # a suffix plot takes; export writes its CSV there alike
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except OSError:
        pytest.skip("mknod of a character device needs root")
    return device


@pytest.mark.parametrize("command", [["export", "--format", "csv"], ["plot"]], ids=["export", "plot"])
def test_an_output_through_a_symlink_is_written_where_it_points_and_the_link_stays(
    filled_store: Path, tmp_path: Path, command: list[str]
) -> None:
    suffix = ".csv" if command[0] == "export" else ".png"
    target, link = tmp_path / f"real{suffix}", tmp_path / f"link{suffix}"
    target.write_text("old\n")
    link.symlink_to(target.name)
    offpoc(filled_store, *command, "-o", str(link))
    assert link.is_symlink() and os.readlink(link) == target.name
    written = target.read_bytes()
    assert written.startswith(b"run_id,name" if command[0] == "export" else b"\x89PNG"), written[:20]
    dangling = tmp_path / f"to-be{suffix}"
    (tmp_path / f"new-link{suffix}").symlink_to(dangling.name)  # as a shell's `>` does: the file it names is made
    offpoc(filled_store, *command, "-o", str(tmp_path / f"new-link{suffix}"))
    assert dangling.is_file() and (tmp_path / f"new-link{suffix}").is_symlink()


def test_an_output_that_is_a_fifo_is_written_into_not_replaced(filled_store: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "rows.csv"
    os.mkfifo(fifo)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_bytes()), daemon=True)
    reader.start()
    try:
        offpoc(filled_store, "export", "--format", "csv", "-o", str(fifo))
        reader.join(timeout=60)
    finally:
        if reader.is_alive() and stat.S_ISFIFO(fifo.lstat().st_mode):  # never written into: end the reader's wait
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert read and read[0].startswith(b"run_id,name") and read[0].count(b"\n") > 3


def test_a_device_that_fails_every_write_is_one_line_and_stays_a_device(filled_store: Path, tmp_path: Path) -> None:
    device = _full_device(tmp_path)
    for command in (["export", "--format", "csv"], ["plot"]):
        result = offpoc(filled_store, *command, "-o", str(device), check=False)
        assert (result.returncode, result.stderr.splitlines()[-1:]) == (
            1,
            [f"error: cannot write {device}: No space left on device"],
        ), result.stderr
        assert stat.S_ISCHR(device.lstat().st_mode)


@pytest.mark.parametrize(
    "command",
    [["ps", "--all"], ["export"], ["show", "1"], ["dashboard", "--once"], ["tag", "1"], ["config"]],
    ids=lambda c: c[0],
)
def test_a_full_disk_behind_standard_output_is_one_line_not_a_traceback(
    filled_store: Path, tmp_path: Path, command: list[str]
) -> None:
    device = _full_device(tmp_path)
    with device.open("w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "offpoc_tui.cli", *command, *([] if command == ["config"] else ["--db"])]
            + ([] if command == ["config"] else [str(filled_store)]),
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    lines = [line for line in result.stderr.splitlines() if not line.startswith("reading ")]  # a stage's line
    assert (result.returncode, lines) == (1, ["error: No space left on device"]), result.stderr


def test_a_figure_that_cannot_be_written_is_one_line(filled_store: Path, tmp_path: Path) -> None:
    figure = tmp_path / "fig.png"
    figure.write_bytes(b"")
    with immutable(figure):
        result = offpoc(filled_store, "plot", "-o", str(figure), check=False)
    assert (
        result.returncode == 1
        and result.stderr.splitlines()[-1] == f"error: cannot write {figure}: Operation not permitted"
    )
    assert "Traceback" not in result.stderr


def test_an_output_through_links_in_a_loop_is_one_line(filled_store: Path, tmp_path: Path) -> None:
    (tmp_path / "a.csv").symlink_to("b.csv")
    (tmp_path / "b.csv").symlink_to("a.csv")
    result = offpoc(filled_store, "export", "-o", str(tmp_path / "a.csv"), check=False)
    assert (result.returncode, result.stderr.strip()) == (
        2,
        f"error: cannot write {tmp_path / 'a.csv'}: too many levels of symbolic links",
    )


def test_links_looping_in_the_stores_own_paths_do_not_refuse_an_ordinary_output(
    filled_store: Path, tmp_path: Path
) -> None:
    """The store's run-files folder a link loop: an ordinary new output is written, not blamed for the loop."""
    runs = filled_store.with_name(filled_store.name + "-runs")
    if runs.exists():
        import shutil

        shutil.rmtree(runs)
    runs.symlink_to(runs.name + "-2")
    runs.with_name(runs.name + "-2").symlink_to(runs.name)
    offpoc(filled_store, "export", "--table", "summary", "-o", str(tmp_path / "out.csv"))
    assert (tmp_path / "out.csv").read_text().startswith("algo,env")


def test_a_command_started_with_standard_output_closed_is_no_traceback(filled_store: Path, tmp_path: Path) -> None:
    """`offpoc export >&-` ended in a TypeError (sys.stdout is None): what it prints goes nowhere, as asked."""
    result = subprocess.run(
        [sys.executable, "-m", "offpoc_tui.cli", "export", "--table", "summary", "--db", str(filled_store)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.close(1),  # the child's own descriptor, closed before it runs Python
    )
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
