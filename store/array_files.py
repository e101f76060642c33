"""Arrays from ``.npy`` and ``.npz`` files someone else wrote, read within bounds.

A ``.npy`` header states the array's shape and type before its data. Both are checked before a
byte of data is read: a number type (no objects, strings or pickles), at most :data:`MAX_VALUES`
values, and no more than the file (or the archive member) actually holds. A header claiming 10¹²
values in a 1 kB file is refused in microseconds instead of allocating until memory runs out.

    returns = load_npy(Path("TD3_Hopper-v2_0.npy"))                   # raises ArrayFileError
    arrays = load_npz(Path("evaluations.npz"), ("timesteps", "results"))
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np
from numpy.lib import format as npy

MAX_VALUES = 20_000_000
"""Values per array at most (160 MB as float64): a million-step run evaluated every step with 10 episodes
is 10 million."""
MAX_HEADER = 10_000
"""Bytes of a ``.npy`` header at most (numpy's own default limit)."""
_HEADER_READERS = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}


class ArrayFileError(ValueError):
    """A file that is not a bounded array of numbers; the message says why (one line, no file name)."""


def load_npy(file: Path) -> np.ndarray:
    """The array in a ``.npy`` file, its header checked first (see the module docstring)."""
    try:
        with open(file, "rb") as stream:
            return _read(stream, os.fstat(stream.fileno()).st_size)
    except OSError as error:
        raise ArrayFileError(f"cannot read it ({error.strerror or type(error).__name__})") from None


def load_npz(file: Path, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The arrays ``keys`` of a ``.npz`` archive that it holds (others are not read), each checked first."""
    arrays: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(file) as archive:
            members = {info.filename: info for info in archive.infolist()}
            for key in keys:
                info = members.get(f"{key}.npy")
                if info is not None:
                    with archive.open(info) as stream:
                        arrays[key] = _read(stream, info.file_size, key)
    except ArrayFileError:
        raise
    except (OSError, zipfile.BadZipFile, EOFError, NotImplementedError, RuntimeError, ValueError) as error:
        raise ArrayFileError(f"not a readable .npz archive ({_first_line(error)})") from None
    return arrays


def _read(stream: IO[bytes], size: int, key: str = "") -> np.ndarray:
    where = f"{key}: " if key else ""
    try:
        version = npy.read_magic(stream)
        reader = _HEADER_READERS.get(version)
        if reader is None:
            raise ArrayFileError(f"{where}.npy format version {version} is not one offpoc reads (1.0, 2.0)")
        shape, fortran_order, dtype = reader(stream, max_header_size=MAX_HEADER)
    except (ValueError, EOFError, SyntaxError) as error:
        if isinstance(error, ArrayFileError):
            raise
        raise ArrayFileError(f"{where}not a readable .npy array ({_first_line(error)})") from None
    if dtype.hasobject or dtype.kind not in "iuf":
        raise ArrayFileError(f"{where}holds {dtype} values, not numbers")
    if any(not isinstance(side, int) or side < 0 for side in shape):
        raise ArrayFileError(f"{where}its header's shape {shape} is not a shape")
    count = int(np.prod(shape, dtype=object))
    if count > MAX_VALUES:
        raise ArrayFileError(f"{where}its header claims {count:,} values; at most {MAX_VALUES:,} are read")
    if any(side > MAX_VALUES for side in shape):  # (10**30, 0): no values, and a side numpy cannot make
        raise ArrayFileError(f"{where}its header's shape {shape} has a side over {MAX_VALUES:,}")
    if count * dtype.itemsize > size:
        raise ArrayFileError(f"{where}its header claims {count:,} values but the file holds only {size:,} bytes")
    data = stream.read(count * dtype.itemsize)
    if len(data) != count * dtype.itemsize:
        raise ArrayFileError(f"{where}the file ends before its {count:,} values")
    values = np.frombuffer(data, dtype=dtype, count=count)
    return values.reshape(shape[::-1]).transpose() if fortran_order else values.reshape(shape)


def walk_files(root: Path) -> Iterator[Path]:
    """Every file under ``root``, sorted per folder, without recursion (a folder nested thousands deep is no
    different from a flat one) and without following links to folders (a link loop cannot trap it)."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                listed = sorted(entries, key=lambda entry: entry.name)
        except OSError:  # unreadable, or gone meanwhile: as pathlib's rglob, skipped
            continue
        children = []
        for entry in listed:
            try:
                if entry.is_dir(follow_symlinks=False):
                    children.append(Path(entry.path))
                elif entry.is_file():
                    yield Path(entry.path)
            except OSError:
                continue
        stack.extend(reversed(children))


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
