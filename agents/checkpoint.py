"""Checkpoints: the full state of a :class:`~agents.training.Trainer`, written atomically.

The trainer says what its state is (:meth:`~agents.training.Trainer.state_dict`, ``load_state_dict``);
this module owns the file: its format, its owner and config, the atomic write, and the checks a file
passes before anything in it is restored.

Saved: the resolved config, step/update/episode counters and the training clock,
every network, optimiser and learned tensor (the correction's own included),
the RNG states (torch generator, numpy generator, training env), the logged
quantities' histograms of the open interval, and, with ``checkpoint_buffer``,
the replay buffer.

A checkpoint also carries its owner, whatever the trainer was given as
``owner`` (the app stamps its store's identity and the run's id): with the
config, it says whose the file is. :func:`open_checkpoint` hands a :class:`CheckpointInfo`
to the caller's ``check`` before it restores anything, so a caller refuses a
file that is not its own (:class:`CheckpointMismatch`) at the cost of one read.

Not saved: the simulator's physical state, which gymnasium cannot capture for
every environment (Box2D). A checkpoint taken at an episode boundary replays the
reset that began the next episode from the RNG state it started from, so with
``checkpoint_buffer`` the resumed run is the uninterrupted one, update for update.
One taken mid-episode starts a fresh training episode at the checkpointed step;
the interrupted partial episode is dropped.
"""

from __future__ import annotations

import errno
import os
import pickle
import re
import stat
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.config import TrainConfig

FORMAT_VERSION = 3
"""2 added ``owner``; format 1 files (no owner) still load, their owner ``None``. 3 stores NumPy arrays
as tensors (:func:`_plain`), so a file loads with ``weights_only=True`` and no NumPy globals."""
READABLE_FORMATS = (1, 2, 3)

NDARRAY = "__ndarray__"
"""The key that marks a NumPy array saved as a tensor (see :func:`_plain`)."""

_LEGACY_GLOBALS: list[Any] = [
    np.ndarray,
    np.dtype,
    np._core.multiarray._reconstruct,  # type: ignore[attr-defined]
    *(type(np.dtype(kind)) for kind in ("float32", "float64", "int64", "int32", "uint8", "bool")),
]
"""What formats 1–2 need besides tensors: NumPy arrays rebuilt from their bytes, nothing that runs code."""


class CheckpointMismatch(ValueError):
    """A checkpoint that is not the one its reader expects; the message (one line) says how."""


@dataclass(frozen=True)
class CheckpointInfo:
    """Who wrote a checkpoint and where it stands: what a caller checks before loading it."""

    path: Path
    owner: dict[str, Any] | None
    """What the writing trainer was given as ``owner``; None when it had none (or format 1)."""
    config: TrainConfig
    step: int


def check_config(info: CheckpointInfo, expected: TrainConfig, name: str | None = None) -> None:
    """Raise :class:`CheckpointMismatch` unless the checkpoint's config is ``expected``, field by field.

    The message names the file as ``name`` (default: its path) and the first three differences.
    """
    differences = info.config.resolved().differences(expected.resolved())
    if differences:
        first = list(differences.items())[:3]
        shown = "; ".join(f"{field} {theirs!r}, expected {ours!r}" for field, (theirs, ours) in first)
        more = f" and {len(differences) - 3} more" if len(differences) > 3 else ""
        raise CheckpointMismatch(f"{name or info.path} was written with other settings ({shown}{more}): not loaded")


def save(
    path: Path,
    state: Mapping[str, Any],
    config: TrainConfig,
    owner: Mapping[str, Any] | None,
    place: Callable[[Path, Path], None] = os.replace,
) -> None:
    """Write a trainer's ``state`` (:meth:`~agents.training.Trainer.state_dict`) with its config and owner to a
    temporary file beside ``path``, synced, then ``place(tmp, path)`` it (a rename by default: the file is whole
    or absent, never half written)."""
    state = {"format": FORMAT_VERSION, "owner": owner, "config": config.to_dict(), **state}
    # The file's own folder only, never the folders above it: an app that keeps checkpoints in a folder it
    # marks as its own (offpoc's run files) sees a save fail, not an unmarked folder made in its place.
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")  # unique on shared storage too
    try:
        with open(tmp, "wb") as file:
            torch.save(_plain(state), file)
            file.flush()
            os.fsync(file.fileno())
    except BaseException as error:
        tmp.unlink(missing_ok=True)
        if isinstance(error, RuntimeError | OSError):
            raise OSError(f"cannot write checkpoint {path}: {_why(error)}") from None
        raise
    try:
        place(tmp, path)
    except OSError as error:
        raise OSError(f"cannot write checkpoint {path}: {_why(error)}") from None
    finally:
        tmp.unlink(missing_ok=True)  # gone once placed; else what the save wrote goes


def _why(error: BaseException) -> str:
    """A write error in words: torch's zip writer reports ENOSPC/EFBIG as an internal assertion."""
    text = str(error)
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on device"
    if isinstance(error, OSError) and error.errno == errno.EFBIG:
        return "file too large (the file size limit was reached)"
    if "inline_container" in text or "file write failed" in text or "unexpected pos" in text:
        return "the write failed: no space left on device, or the file size limit was reached"
    return text.splitlines()[0] if text else type(error).__name__


def _plain(value: Any) -> Any:
    """``value`` with every NumPy array a marked tensor, every NumPy scalar a Python number, and every tensor
    that views a larger storage copied (``torch.save`` would write the whole storage)."""
    if isinstance(value, np.ndarray):
        return {NDARRAY: torch.from_numpy(np.ascontiguousarray(value))}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, torch.Tensor) and value.untyped_storage().nbytes() > value.numel() * value.element_size():
        return value.clone()  # a view into more (a lane's slice of its group's stacked tensors): saved alone
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(item) for item in value)
    return value


def _numpy(value: Any) -> Any:
    """Undo :func:`_plain`: marked tensors back to NumPy arrays."""
    if isinstance(value, dict):
        if value.keys() == {NDARRAY}:
            return value[NDARRAY].numpy()
        return {key: _numpy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_numpy(item) for item in value)
    return value


def read_state(path: Path) -> dict[str, Any]:
    """A checkpoint file's contents, unpickled with ``weights_only=True``: tensors, numbers, strings and
    plain containers (and, for formats 1–2, NumPy arrays); anything else, or a damaged or partial file,
    raises :class:`CheckpointMismatch` (one line) without running it. Only a regular file is read (a link to
    one too): a FIFO in its place blocked the reader until someone wrote to it (a resumed run's worker hung, and
    ``stop`` waiting on it), and a device or a folder is no checkpoint either."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)  # opening a FIFO must not block
    except OSError as error:
        raise CheckpointMismatch(f"cannot read checkpoint {path}: {_first_line(error)}") from None
    try:
        mode = os.fstat(handle).st_mode
        if stat.S_ISDIR(mode):
            raise CheckpointMismatch(f"cannot read checkpoint {path}: a folder, not a file")
        if not stat.S_ISREG(mode):
            raise CheckpointMismatch(f"cannot read checkpoint {path}: not a regular file (a FIFO or a device)")
        os.set_blocking(handle, True)
        file = os.fdopen(handle, "rb")
    except BaseException:
        os.close(handle)
        raise
    with file:
        return _checked(path, _unpickled(path, file))


def _unpickled(path: Path, file: Any) -> Any:
    """The checkpoint file's pickle, loaded with ``weights_only=True``; :class:`CheckpointMismatch` otherwise."""
    try:
        with torch.serialization.safe_globals(_LEGACY_GLOBALS):
            return torch.load(file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        text = str(error)
        if "global" not in text.lower():  # not a refused class or function: a damaged or foreign file
            raise CheckpointMismatch(f"cannot read checkpoint {path}: not a checkpoint, or damaged") from None
        named = re.search(r"GLOBAL [\w.]+", text)  # what the file wanted to run, however torch words it
        reason = f"unsupported {named[0]}" if named else "a class or function, not data"
        refused = f"{path} holds more than plain data ({reason}): refused, nothing in it was run"
        raise CheckpointMismatch(refused) from None
    except OSError as error:
        raise CheckpointMismatch(f"cannot read checkpoint {path}: {_first_line(error)}") from None
    except Exception as error:  # whatever torch raises on a file it cannot read (a text file gives IndexError)
        why = f"{type(error).__name__}: {_first_line(error)}"
        raise CheckpointMismatch(f"cannot read checkpoint {path}: not a checkpoint, or damaged ({why})") from None


def _checked(path: Path, state: Any) -> dict[str, Any]:
    """The unpickled ``state``, if it is a whole offpoc checkpoint; :class:`CheckpointMismatch` otherwise."""
    if not isinstance(state, dict) or state.get("format") not in READABLE_FORMATS:
        raise CheckpointMismatch(f"{path} is not an offpoc checkpoint (format {FORMAT_VERSION}): not loaded")
    missing = [key for key in _REQUIRED if not isinstance(state.get(key), dict)]
    if missing or not isinstance(state["counters"].get("step"), int):
        raise CheckpointMismatch(f"{path} is not a whole offpoc checkpoint (no {(missing or ['step'])[0]}): not loaded")
    counters = {k: v for k, v in state["counters"].items() if k in _COUNTS}
    wrong = [
        k for k, v in counters.items() if not isinstance(v, int) or isinstance(v, bool) or not _COUNTS[k] <= v < 2**63
    ]
    if wrong:
        raise CheckpointMismatch(f"{path}: its {wrong[0]} is {counters[wrong[0]]!r}, not a count: not loaded")
    rngs = [state["rng"].get("env"), state["rng"].get("env_reset")]
    if not isinstance(rngs[0], dict) or not isinstance(rngs[1], dict | None):
        raise CheckpointMismatch(f"{path} is not a whole offpoc checkpoint (no environment RNG state): not loaded")
    generators = [r.get("bit_generator") for r in rngs if r]
    unknown = [g for g in generators if g not in BIT_GENERATORS]
    if unknown:
        raise CheckpointMismatch(f"{path}: its environment RNG {unknown[0]!r} is not one of NumPy's: not loaded")
    return dict(_numpy(state))


_COUNTS = {"step": 0, "episode": 0, "updates": 0, "last_eval_step": -1}
"""Counters that are counts, and the least each may be (``last_eval_step`` -1: no evaluation yet)."""
BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")
"""NumPy's bit generators: the only names a checkpoint's RNG state may give (looked up in ``np.random``)."""


_REQUIRED = ("config", "counters", "modules", "optimizers", "rng")
"""What every readable format holds, checked before anything is read from it."""


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _reason(error: BaseException, limit: int = 300) -> str:
    """An error's message on one line: torch's ``Error(s) in loading state_dict for X:`` says what is wrong
    on the lines after it (``size mismatch for net.0.weight: ...``), so those are kept."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    text = " ".join(lines) if lines else type(error).__name__
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def open_checkpoint(
    path: Path, check: Callable[[CheckpointInfo], None] | None = None
) -> tuple[CheckpointInfo, dict[str, Any]]:
    """Who wrote ``path`` and its state, after ``check`` (which raises to refuse the file) saw who wrote it;
    the state is what :meth:`~agents.training.Trainer.load_state_dict` takes."""
    state = read_state(path)
    try:
        stored = TrainConfig.from_dict(state["config"])
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointMismatch(
            f"{path} holds a config offpoc cannot read ({_first_line(error)}): not loaded"
        ) from None
    info = CheckpointInfo(path, state.get("owner"), stored, state["counters"]["step"])
    if check is not None:
        check(info)
    return info, state


def does_not_fit(path: Path, error: BaseException) -> CheckpointMismatch:
    """The refusal of a file whose config is right and whose insides are not (a state that does not load)."""
    return CheckpointMismatch(f"{path} does not hold what its config says ({_reason(error)}): not loaded")
