"""Where runs run: ``--backend local`` (worker processes on this machine) or ``ray`` (tasks on a cluster).

The choice is per run (``runs.backend``); the cluster's address and a shared checkpoint
folder are the store's (``meta``), read by its scheduler when it connects
(:mod:`offpoc_tui.runtime.ray_backend`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated

import typer

from offpoc_tui.specs import UsageError

BACKENDS = ("local", "ray")
RAY_PIN = "offpoc[ray]"

BackendOption = Annotated[str, typer.Option(help="local (worker processes here) or ray (tasks on a Ray cluster).")]
AddressOption = Annotated[
    str | None,
    typer.Option(help="Ray cluster: auto, or HOST:PORT [default: a running one, else one started for the runs]."),
]
CheckpointDirOption = Annotated[
    Path | None,
    typer.Option(help="Ray runs: shared storage for checkpoints [default: the store's run files, via the head]."),
]


def check_backend(backend: str, address: str | None, checkpoint_dir: Path | None) -> str | None:
    """The backend as stored (None: local); raises :class:`UsageError` for a bad choice or a missing Ray."""
    if backend not in BACKENDS:
        raise UsageError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "local":
        if address is not None or checkpoint_dir is not None:
            flag = "--address" if address is not None else "--checkpoint-dir"
            raise UsageError(f"{flag} is for --backend ray")
        return None
    if importlib.util.find_spec("ray") is None:
        raise UsageError(f"--backend ray needs Ray, which is not installed: pip install '{RAY_PIN}'")
    if checkpoint_dir is not None and not checkpoint_dir.is_dir():
        raise UsageError(f"--checkpoint-dir {checkpoint_dir} is not a directory")
    return "ray"
