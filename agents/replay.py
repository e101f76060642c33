"""A preallocated float32 FIFO replay buffer with uniform sampling.

Memory layout: the buffer is a ring of *slots*, each holding one observation.
A slot that starts a transition also holds its action, reward and flags; the
transition's next observation is simply the next slot's observation, so it is
derived, not stored twice. When an episode ends, its final observation takes one
extra slot that starts no transition (it is never sampled). For Humanoid this
halves the memory of the usual (obs, next_obs) layout.

For stochastic policies the buffer also keeps the behaviour policy's pre-tanh
Gaussian (mean, log_std) per transition; log η(a|s) is derived from them and the
stored action when needed, so it is not stored. A correction may add float32
columns of its own (``fields``), sampled into ``Batch.extra``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

_NO_EXTRA: Mapping[str, Tensor] = MappingProxyType({})

_REJECTION_ROUNDS = 4
"""Redraw rounds for ineligible slots before falling back to the eligible list."""


class Batch(NamedTuple):
    """A sampled batch, every tensor with leading dimension B."""

    obs: Tensor
    """(B, obs_dim)"""
    action: Tensor
    """(B, d), normalised to [-1, 1]"""
    reward: Tensor
    """(B, 1)"""
    next_obs: Tensor
    """(B, obs_dim)"""
    not_terminated: Tensor
    """(B, 1), 0.0 where the episode terminated (bootstrap on termination only)"""
    behaviour_mean: Tensor | None = None
    """(B, d) behaviour pre-tanh mean (stochastic policies only)"""
    behaviour_log_std: Tensor | None = None
    """(B, d) behaviour pre-tanh log-std (stochastic policies only)"""
    extra: Mapping[str, Tensor] = _NO_EXTRA
    """A correction's own per-transition fields, (B, width) each"""
    slots: np.ndarray | None = None
    """(B,) the buffer slots the transitions start at (a sampled batch; None for hand-made ones)"""
    importance: Tensor | None = None
    """(B, 1) a sampler's importance weights, multiplying the critic loss only (None: all 1)"""


class ReplayBuffer:
    """Ring buffer of ``capacity`` slots (observations); see the module docstring.

    Args:
        capacity: number of slots. Each stored transition uses one slot, and each
            finished episode one more for its final observation.
        obs_dim, action_dim: sizes of the flat observation and action vectors.
        behaviour_params: also store the behaviour policy's (mean, log_std).
        device: where sampled batches are placed.
        fields: extra float32 columns per transition, name → width (``Batch.extra``).
    """

    def __init__(
        self,
        capacity: int,
        obs_dim: int,
        action_dim: int,
        behaviour_params: bool = False,
        device: torch.device | str = "cpu",
        fields: Mapping[str, int] | None = None,
    ) -> None:
        if capacity < 2:
            raise ValueError(f"replay capacity must be at least 2 slots, got {capacity}")
        self.capacity = capacity
        self.device = torch.device(device)
        self.obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.action = np.zeros((capacity, action_dim), dtype=np.float32)
        self.reward = np.zeros((capacity, 1), dtype=np.float32)
        self.not_terminated = np.zeros((capacity, 1), dtype=np.float32)
        self.starts_transition = np.zeros(capacity, dtype=bool)
        """True where a slot starts a transition whose next slot holds its next_obs."""
        self.random_phase = np.zeros(capacity, dtype=bool)
        """True for transitions collected by the uniform-random start phase."""
        self.behaviour_mean = np.zeros((capacity, action_dim), dtype=np.float32) if behaviour_params else None
        self.behaviour_log_std = np.zeros((capacity, action_dim), dtype=np.float32) if behaviour_params else None
        self.extra = {name: np.zeros((capacity, width), dtype=np.float32) for name, width in (fields or {}).items()}
        self.ptr = 0
        """Next slot to write."""
        self.last_slot = -1
        """The slot of the most recently stored transition (−1: none yet)."""
        self.filled = 0
        """Slots [0, filled) may start a transition: ptr until the first wrap, then capacity."""

    def _arrays(self) -> dict[str, np.ndarray]:
        arrays = {
            "obs": self.obs,
            "action": self.action,
            "reward": self.reward,
            "not_terminated": self.not_terminated,
            "starts_transition": self.starts_transition,
            "random_phase": self.random_phase,
        }
        if self.behaviour_mean is not None and self.behaviour_log_std is not None:
            arrays["behaviour_mean"] = self.behaviour_mean
            arrays["behaviour_log_std"] = self.behaviour_log_std
        return arrays | {f"extra.{name}": array for name, array in self.extra.items()}

    @property
    def bytes_per_slot(self) -> int:
        """Bytes one slot (≈ one transition) occupies."""
        return sum(array.itemsize * int(np.prod(array.shape[1:])) for array in self._arrays().values())

    def __len__(self) -> int:
        """Number of transitions that can be sampled (random phase included)."""
        return int(self.starts_transition[: self.filled].sum())

    def add(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: float,
        next_obs: np.ndarray,
        terminated: bool,
        episode_end: bool,
        random_phase: bool = False,
        behaviour: tuple[np.ndarray, np.ndarray] | None = None,
        extra: Mapping[str, np.ndarray | float] | None = None,
    ) -> None:
        """Store one transition (obs, action, reward, next_obs).

        ``episode_end`` is terminated or truncated: the next transition starts a
        new episode, so ``next_obs`` keeps a slot of its own. ``extra`` gives the
        value of every field the buffer was built with.
        """
        i, j = self.ptr, (self.ptr + 1) % self.capacity
        self.last_slot = i
        self.obs[i] = obs
        self.action[i] = action
        self.reward[i, 0] = reward
        self.not_terminated[i, 0] = 0.0 if terminated else 1.0
        self.starts_transition[i] = True
        self.random_phase[i] = random_phase
        if self.behaviour_mean is not None and self.behaviour_log_std is not None:
            if behaviour is None:
                self.behaviour_mean[i] = 0.0
                self.behaviour_log_std[i] = 0.0
            else:
                self.behaviour_mean[i], self.behaviour_log_std[i] = behaviour
        if self.extra:
            if extra is None or extra.keys() != self.extra.keys():
                raise ValueError(f"a transition needs the fields {sorted(self.extra)}, got {sorted(extra or {})}")
            for name, value in extra.items():
                self.extra[name][i] = value
        # The next slot holds next_obs; whatever transition it started is now gone.
        self.obs[j] = next_obs
        self.starts_transition[j] = False
        self.ptr = (j + 1) % self.capacity if episode_end else j
        if self.ptr <= i:
            self.filled = self.capacity
        elif self.filled < self.capacity:
            self.filled = self.ptr

    def sample(self, batch_size: int, generator: torch.Generator, exclude_random_phase: bool = False) -> Batch:
        """A uniform sample, with replacement, of stored transitions (see :meth:`sample_slots`)."""
        return self.gather(self.sample_slots(batch_size, generator, exclude_random_phase))

    def sample_slots(
        self, batch_size: int, generator: torch.Generator, exclude_random_phase: bool = False
    ) -> np.ndarray:
        """The slots of a uniform sample, with replacement, of stored transitions.

        Slots that start no transition (and, with ``exclude_random_phase``, the
        random-phase transitions) are rejected and redrawn, so the sample is
        exactly uniform over the eligible transitions. The slots are drawn from
        ``generator``; the rows are gathered in NumPy (``take``), whose per-call
        cost is a fraction of torch's on arrays this small.
        """
        starts, random_phase = self.starts_transition, self.random_phase

        def draw(count: int, high: int = self.filled) -> np.ndarray:
            # On the generator's device: the CPU for a run's generator (agents/training.py), whatever its device.
            return torch.randint(high, (count,), generator=generator, device=generator.device).cpu().numpy()

        def ineligible(idx: np.ndarray) -> np.ndarray:
            # Look up only the sampled slots: a whole-buffer mask would cost O(capacity).
            bad = ~starts.take(idx)
            return bad | random_phase.take(idx) if exclude_random_phase else bad

        idx = draw(batch_size)
        bad = ineligible(idx)
        for _ in range(_REJECTION_ROUNDS):
            if not bad.any():
                break
            idx[bad] = draw(int(bad.sum()))
            bad = ineligible(idx)
        else:
            # Few eligible slots (e.g. right after the random phase is excluded): draw
            # the rest from the explicit list, still uniformly.
            eligible = starts[: self.filled]
            if exclude_random_phase:
                eligible = eligible & ~random_phase[: self.filled]
            candidates = np.flatnonzero(eligible)
            if candidates.size == 0:
                raise RuntimeError("replay buffer has no eligible transition to sample")
            idx[bad] = candidates[draw(int(bad.sum()), candidates.size)]
        return idx

    def recent_slots(self, count: int) -> np.ndarray:
        """The slots of the ``count`` most recently stored transitions (fewer while the buffer holds fewer),
        newest first.

        Walks back from the write position across wrap-around, skipping slots that start no transition.
        """
        window = min(self.filled, 2 * count + 2)
        while True:
            idx = (self.ptr - 1 - np.arange(window)) % self.capacity
            idx = idx[self.starts_transition.take(idx)][:count]
            if len(idx) == count or window == self.filled:
                break
            window = min(self.filled, 2 * window)
        if idx.size == 0:
            raise RuntimeError("replay buffer has no transition yet")
        return idx

    def recent(self, count: int) -> Batch:
        """The ``count`` most recently stored transitions (fewer while the buffer holds fewer), oldest first."""
        return self.gather(self.recent_slots(count)[::-1].copy())

    def sample_recent(self, batch_size: int, window: int, generator: torch.Generator) -> Batch:
        """A uniform sample, with replacement, of the ``window`` most recently stored transitions."""
        slots = self.recent_slots(window)
        pick = torch.randint(len(slots), (batch_size,), generator=generator, device=generator.device).cpu().numpy()
        return self.gather(slots.take(pick))

    def gather(self, idx: np.ndarray) -> Batch:
        """The transitions starting at slots ``idx`` (each must start one), as a batch on the buffer's device."""
        next_idx = idx + 1
        next_idx[next_idx == self.capacity] = 0

        def rows(array: np.ndarray, at: np.ndarray = idx) -> Tensor:
            return torch.from_numpy(array.take(at, axis=0))

        mean, log_std = self.behaviour_mean, self.behaviour_log_std
        batch = Batch(
            obs=rows(self.obs),
            action=rows(self.action),
            reward=rows(self.reward),
            next_obs=rows(self.obs, next_idx),
            not_terminated=rows(self.not_terminated),
            behaviour_mean=rows(mean) if mean is not None else None,
            behaviour_log_std=rows(log_std) if log_std is not None else None,
            extra={name: rows(array) for name, array in self.extra.items()} if self.extra else _NO_EXTRA,
            slots=idx,
        )
        if self.device.type != "cpu":
            moved: dict[str, Any] = {
                name: t.to(self.device, non_blocking=True)
                for name, t in batch._asdict().items()
                if isinstance(t, Tensor)
            }
            moved["extra"] = {name: t.to(self.device, non_blocking=True) for name, t in batch.extra.items()}
            batch = batch._replace(**moved)
        return batch

    def state_dict(self) -> dict[str, Any]:
        """The stored contents (only the written slots) and the write position."""
        return {
            "ptr": self.ptr,
            "filled": self.filled,
            "last_slot": self.last_slot,
            "arrays": {name: array[: self.filled].copy() for name, array in self._arrays().items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        filled = int(state["filled"])
        if filled > self.capacity:
            raise ValueError(f"checkpointed buffer holds {filled} slots, more than the capacity {self.capacity}")
        arrays = self._arrays()
        missing = arrays.keys() - state["arrays"].keys()
        if missing:
            raise ValueError(f"checkpointed buffer lacks {', '.join(sorted(missing))}")
        for name, array in state["arrays"].items():
            arrays[name][:filled] = array
        self.ptr = int(state["ptr"])
        self.filled = filled
        self.last_slot = int(state.get("last_slot", -1))
