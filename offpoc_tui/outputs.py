"""Writing a command's output file (`export -o`, `plot -o`, `analyze -o`): beside it and renamed into place, at
the file a symlink there points to; straight into a FIFO, a terminal or a device. Below :mod:`offpoc_tui.console`
and :mod:`offpoc_tui.charts`, which both write through it."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def output_place(path: Path) -> Path:
    """Where an output named ``path`` is made: the file a symlink there points to (made if missing, as a shell's
    ``>`` does), so the link stays a link; ``path`` itself otherwise."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def is_special(path: Path) -> bool:
    """Whether ``path`` (its link followed) is something other than a regular file: a FIFO, a device, a socket."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


@contextmanager
def written(path: Path, binary: bool = False) -> Iterator[IO[Any]]:
    """A file to write an output named ``path`` into. A regular file (or a new one) is written beside it and
    renamed into place, so a failed write leaves no half file, at the place a symlink there points to (the link
    kept); a FIFO, a terminal or ``/dev/stdout`` is written straight into, as a shell's ``>`` would: never
    replaced by a regular file of the same name."""
    mode, newline = ("wb", None) if binary else ("w", "")
    if is_special(path):
        with open(path, mode, newline=newline) as direct:
            yield direct
        return
    place = output_place(path)
    tmp = fresh_tmp(place)
    try:
        with open(tmp, mode, newline=newline) as handle:
            yield handle
        tmp.replace(place)
    finally:
        tmp.unlink(missing_ok=True)


def fresh_tmp(path: Path) -> Path:
    """A new empty file beside ``path`` (``.NAME.XXXXXXXX.tmp``), made by this call and no one else's (O_EXCL):
    where an output is written before it is renamed into place. Removing it never removes a file of
    the user's, such as a store that happens to be named like a temporary file."""
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:  # the mode an output written in place would have (mkstemp makes it private)
        os.fchmod(handle, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
    finally:
        os.close(handle)
    return Path(name)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
