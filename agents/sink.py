"""How training reports: typed records handed to a sink.

A sink is any object with some of the ``on_*`` methods below (missing ones are
skipped), or a plain callable, which receives every record. :class:`Sink` is a
convenient no-op base and :class:`RecordingSink` keeps everything in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.quantities import LAMBDA, Quantity


@dataclass(frozen=True)
class EvalRecord:
    """One evaluation of the deterministic policy."""

    step: int
    """Environment steps trained so far."""
    wall_time: float
    """Seconds since training started (resumed runs continue the clock)."""
    return_mean: float
    return_std: float
    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    """Episode lengths in steps."""


@dataclass(frozen=True)
class EpisodeRecord:
    """One finished training episode."""

    step: int
    """Environment step at which it ended."""
    episode: int
    """Episode index, from 0."""
    ret: float
    """Undiscounted return."""
    length: int
    """Steps."""


@dataclass(frozen=True)
class TrainStatsRecord:
    """Training statistics averaged over the updates of one interval."""

    step: int
    updates: int
    """Updates done so far."""
    critic_loss: float | None
    """None when no update happened in the interval (random start phase)."""
    actor_loss: float | None
    """None when no actor step happened in the interval."""
    q_mean: float | None
    alpha: float | None
    """SAC's temperature."""
    sps: float
    """Environment steps per second over the interval, updates included."""


@dataclass(frozen=True)
class QuantityBlock:
    """A logged quantity (λ, or one a correction declares) at every update of a run of consecutive updates.

    One value per update: one column named after the quantity (``lambda``). One value
    per transition: a summary of the batch's values per row (mean, min, max and quantiles).
    """

    columns: tuple[str, ...]
    updates: np.ndarray
    """(n,) int64 update indices, counting from 1."""
    steps: np.ndarray
    """(n,) int64 environment step of each update."""
    values: np.ndarray
    """(n, len(columns)) float32."""
    quantity: Quantity = LAMBDA


@dataclass(frozen=True)
class QuantityHistogram:
    """Histogram of a logged quantity over one evaluation interval (every value recorded in it)."""

    step: int
    """The evaluation step closing the interval."""
    edges: np.ndarray
    """(bins + 1,) bin edges on the quantity's [low, high]."""
    counts: np.ndarray
    """(bins,) int64."""
    quantity: Quantity = LAMBDA


@dataclass(frozen=True)
class CheckpointRecord:
    """A checkpoint at ``step`` is about to be written to ``path``.

    Sent before the file is written, after every record up to ``step``: a sink
    that persists records makes them durable here, so no checkpoint is ever
    ahead of what was stored (a resumed run repeats the steps after it). A sink
    may raise to refuse the checkpoint (a worker that no longer owns its run).
    Sent once more for the same step when the file's folder, there before the
    save, went while it was written: a sink that makes the folder makes it again.
    """

    step: int
    path: str


@dataclass(frozen=True)
class CheckpointSaved:
    """The checkpoint at ``step`` is durably in place at ``path`` (written, synced, renamed): a sink may
    now record that it exists; never before, so a store never names a step its file does not hold."""

    step: int
    path: str


Record = (
    EvalRecord
    | EpisodeRecord
    | TrainStatsRecord
    | QuantityBlock
    | QuantityHistogram
    | CheckpointRecord
    | CheckpointSaved
)

_METHODS: dict[type, str] = {
    EvalRecord: "on_eval",
    EpisodeRecord: "on_episode",
    TrainStatsRecord: "on_train_stats",
    QuantityBlock: "on_quantities",
    QuantityHistogram: "on_quantity_histogram",
    CheckpointRecord: "on_checkpoint",
    CheckpointSaved: "on_checkpoint_saved",
}


class Sink:
    """No-op base; override what you need."""

    def on_eval(self, record: EvalRecord) -> None: ...
    def on_episode(self, record: EpisodeRecord) -> None: ...
    def on_train_stats(self, record: TrainStatsRecord) -> None: ...
    def on_quantities(self, record: QuantityBlock) -> None: ...
    def on_quantity_histogram(self, record: QuantityHistogram) -> None: ...
    def on_checkpoint(self, record: CheckpointRecord) -> None: ...
    def on_checkpoint_saved(self, record: CheckpointSaved) -> None: ...


@dataclass
class RecordingSink(Sink):
    """Keeps every record, by kind (tests, notebooks)."""

    evals: list[EvalRecord] = field(default_factory=list)
    episodes: list[EpisodeRecord] = field(default_factory=list)
    stats: list[TrainStatsRecord] = field(default_factory=list)
    blocks: list[QuantityBlock] = field(default_factory=list)
    histograms: list[QuantityHistogram] = field(default_factory=list)

    def on_eval(self, record: EvalRecord) -> None:
        self.evals.append(record)

    def on_episode(self, record: EpisodeRecord) -> None:
        self.episodes.append(record)

    def on_train_stats(self, record: TrainStatsRecord) -> None:
        self.stats.append(record)

    def on_quantities(self, record: QuantityBlock) -> None:
        self.blocks.append(record)

    def on_quantity_histogram(self, record: QuantityHistogram) -> None:
        self.histograms.append(record)

    def quantity_values(self, quantity: str = LAMBDA.name) -> np.ndarray:
        """One quantity's blocks stacked, (n_updates, columns)."""
        blocks = [b.values for b in self.blocks if b.quantity.name == quantity]
        return np.concatenate(blocks) if blocks else np.zeros((0, 1), np.float32)


def emit(sink: Any, record: Record) -> None:
    """Deliver a record to a sink object (its ``on_*`` method, if any) or a callable."""
    if sink is None:
        return
    method: Callable[[Any], None] | None = getattr(sink, _METHODS[type(record)], None)
    if method is not None:
        method(record)
    elif callable(sink) and not isinstance(sink, Sink):
        sink(record)
