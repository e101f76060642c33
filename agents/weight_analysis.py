"""The paper's weight analysis: a trained run's correction weights along its replay buffer.

Take a run's final policy and its replay buffer in collection order, slide a window of the batch
size over it (non-overlapping, oldest first) and compute the correction's weight for each window
exactly as an update would (AC-Off-POC: λ of the window for DDPG/TD3, the mean of the window's
λ_i for SAC; a competitor: the mean of its first logged quantity), against the normalised position
of the window's centre (0: the oldest transition kept, 1: the newest). Transitions a correction
leaves out (SAC's uniform start phase) are left out here too. The paper's claim: the weights rise
towards 1 as the data get closer to the final policy.

    trainer = Trainer.resume("run.pt")              # a checkpoint that kept its buffer
    positions, values = window_weights(trainer)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from agents.replay import ReplayBuffer
    from agents.training import Trainer


class NoBuffer(ValueError):
    """The checkpoint kept no replay buffer (``checkpoint_buffer`` false) or the run logs no weight."""


def collection_order(buffer: ReplayBuffer) -> np.ndarray:
    """The slots that start transitions, oldest first (across the ring's wrap-around)."""
    slots = np.arange(buffer.filled)
    if buffer.filled == buffer.capacity:
        slots = np.roll(slots, -buffer.ptr)
    return slots[buffer.starts_transition[slots]]


def window_weights(trainer: Trainer) -> tuple[np.ndarray, np.ndarray]:
    """(positions in [0, 1], weights): one per window of ``batch_size`` transitions in collection order."""
    buffer, correction, agent = trainer.buffer, trainer.correction, trainer.agent
    if not correction.quantities:
        raise NoBuffer(f"correction {trainer.config.correction!r} logs no weight to analyse")
    slots = collection_order(buffer)
    if correction.excludes_random_phase:
        slots = slots[~buffer.random_phase[slots]]
    size = trainer.config.batch_size
    windows = len(slots) // size
    if windows < 2:
        raise NoBuffer(f"the checkpoint's buffer holds {len(slots)} transitions: fewer than two windows of {size}")
    name = correction.quantities[0].name
    positions, values = np.empty(windows), np.empty(windows)
    with torch.no_grad():
        for w in range(windows):
            batch = buffer.gather(slots[w * size : (w + 1) * size])
            values[w] = float(correction.weights(batch, agent).logged[name].float().mean())
            positions[w] = (w * size + (size - 1) / 2) / max(len(slots) - 1, 1)
    return positions, values
