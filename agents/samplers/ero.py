"""Experience replay optimisation (Zha et al. 2019), as docs/competitors.md ("Replay samplers") states it.

A replay policy φ(f) ∈ (0, 1) (an MLP over each transition's standardised features f = (reward,
|δ| as of its last replay, age in transitions)) keeps each stored transition with probability φ:
a Bernoulli mask over the buffer, redrawn at the end of every ``ero_every``-th training episode.
Batches are uniform over the kept transitions (over the whole buffer, logged, while fewer than B
are kept); transitions stored since the last redraw are kept. Before each redraw the policy takes
one REINFORCE step on ``ero_sample`` transitions drawn uniformly, with their mask bits as its
actions and the replay reward R = the mean return of the training episodes since the last step
minus that of the step before (0 at the first):

    L(θ) = −R · mean_i [m_i log φ_θ(f_i) + (1 − m_i) log(1 − φ_θ(f_i))]

Evaluation returns never feed it. The paper's exact features and cadence could not be checked:
every number here is a recorded config value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from agents.options import Options
from agents.quantities import Quantity
from agents.replay import Batch, ReplayBuffer
from agents.samplers.base import Sampler

ERO_KEPT = Quantity("ero_kept", "ERO kept fraction", 0.0, 1.0)
ERO_REWARD = Quantity("ero_reward", "ERO replay reward", -1000.0, 1000.0)
ERO_FALLBACK = Quantity("ero_fallback", "ERO whole-buffer fallback", 0.0, 1.0)
_MIN_KEPT_SHARE = 0.01
"""Rejection sampling draws at most 1/this candidates per batch row before listing the kept slots."""


class ReplayPolicy(nn.Module):
    """φ(f) ∈ (0, 1): 3 → hidden → hidden → 1, ReLU, a sigmoid head (returned as its logit)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        layers = [nn.Linear(3, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)]
        self.net = nn.Sequential(*layers)

    def forward(self, features: Tensor) -> Tensor:
        return self.net(features)


@dataclass(frozen=True)
class EROOptions(Options):
    prefix: ClassVar[str] = "ero"

    hidden: int = 64
    """The replay policy's hidden width (3 → h → h → 1)."""
    lr: float = 1e-4
    """The replay policy's Adam learning rate."""
    sample: int = 1024
    """Transitions drawn uniformly for each REINFORCE step."""
    every: int = 1
    """Training episodes between REINFORCE steps and mask redraws."""

    def validate(self) -> None:
        for name in ("hidden", "sample", "every"):
            if getattr(self, name) < 1:
                raise ValueError(f"ero_{name} must be at least 1, got {getattr(self, name)}")
        for name, most in (("hidden", 4_096), ("sample", 1_000_000)):  # a small policy, a batch that fits memory
            if getattr(self, name) > most:
                raise ValueError(f"ero_{name} must be at most {most:,}, got {getattr(self, name):,}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"ero_lr must be a positive number, got {self.lr}")


class ExperienceReplayOptimisation(Sampler):
    name = "ero"
    quantities = (ERO_KEPT, ERO_REWARD, ERO_FALLBACK)
    hears_td_errors = True

    def __init__(self, hidden: int = 64, lr: float = 1e-4, sample: int = 1024, every: int = 1) -> None:
        self.policy = ReplayPolicy(hidden)
        self.optimiser = torch.optim.Adam(self.policy.parameters(), lr=lr)
        self.sample_size, self.every = sample, every
        self.transitions = 0
        self.episodes = 0
        self.returns: list[float] = []
        """Training-episode returns since the last step."""
        self.previous: float | None = None
        """The mean of those at the last step."""
        self.reward = 0.0
        self.fallback = False

    def attach(self, buffer: ReplayBuffer) -> None:
        super().attach(buffer)
        self.mask = np.ones(buffer.capacity, dtype=bool)
        """The last Bernoulli draw (transitions stored since: kept)."""
        self.td = np.zeros(buffer.capacity, dtype=np.float32)
        self.born = np.zeros(buffer.capacity, dtype=np.int64)
        self._recount()

    def _recount(self) -> None:
        """Which slots hold kept transitions, and how many of all transitions they are (O(capacity):
        at a redraw or a load; :meth:`added` keeps them current in O(1))."""
        self.eligible = self.mask & self.buffer.starts_transition
        self.n_kept = int(self.eligible.sum())
        self.n_transitions = int(self.buffer.starts_transition.sum())
        self._transition = self.buffer.starts_transition.copy()
        """Which slots started a transition before the latest add (the buffer's own flags, one add behind)."""

    def added(self, slot: int) -> None:
        following = (slot + 1) % self.buffer.capacity  # now holds the next observation: starts nothing
        self.n_transitions += 1 - int(self._transition[slot]) - int(self._transition[following])
        self.n_kept += 1 - int(self.eligible[slot]) - int(self.eligible[following])
        self.mask[slot], self.eligible[slot], self.eligible[following] = True, True, False
        self._transition[slot], self._transition[following] = True, False
        self.td[slot], self.born[slot] = 0.0, self.transitions
        self.transitions += 1

    def td_errors(self, slots: np.ndarray, td_error: Tensor) -> None:
        self.td[slots] = td_error.reshape(-1).cpu().numpy()

    # ---- sampling ---------------------------------------------------------------------------------
    @property
    def kept_share(self) -> float:
        """The kept fraction of the stored transitions."""
        return self.n_kept / max(self.n_transitions, 1)

    def sample(self, batch_size: int, generator: torch.Generator, exclude_random_phase: bool = False) -> Batch:
        """Uniform over the kept transitions, by rejection (exact); the whole buffer while fewer than B are kept."""
        self.fallback = self.n_kept < batch_size
        if self.fallback or self.n_kept == self.n_transitions:  # nothing masked: uniform replay itself
            return self.buffer.sample(batch_size, generator, exclude_random_phase=exclude_random_phase)
        eligible, random_phase, filled = self.eligible, self.buffer.random_phase, self.buffer.filled
        slots = np.empty(0, dtype=np.int64)
        draws = int(np.ceil(1.5 * batch_size / max(self.kept_share, _MIN_KEPT_SHARE)))
        for _ in range(4):
            candidates = torch.randint(filled, (draws,), generator=generator, device=generator.device).cpu().numpy()
            accepted = eligible.take(candidates)
            if exclude_random_phase:
                accepted &= ~random_phase.take(candidates)
            slots = np.concatenate([slots, candidates[accepted]])
            if len(slots) >= batch_size:
                return self.buffer.gather(slots[:batch_size])
        allowed = eligible[:filled] & ~random_phase[:filled] if exclude_random_phase else eligible[:filled]
        listed = np.flatnonzero(allowed)  # very few kept: draw from their list
        if not len(listed):
            self.fallback = True
            return self.buffer.sample(batch_size, generator, exclude_random_phase=exclude_random_phase)
        pick = torch.randint(len(listed), (batch_size,), generator=generator, device=generator.device)
        return self.buffer.gather(listed[pick.cpu().numpy()])

    # ---- learning the replay policy --------------------------------------------------------------------
    def features(self, slots: np.ndarray) -> Tensor:
        """(reward, |δ|, age) of ``slots``, each standardised over them."""
        raw = np.stack(
            [self.buffer.reward[slots, 0], self.td[slots], (self.transitions - self.born[slots]).astype(np.float32)], 1
        )
        return torch.from_numpy(((raw - raw.mean(0)) / (raw.std(0) + 1e-6)).astype(np.float32))

    def episode_end(self, episode_return: float, generator: torch.Generator) -> None:
        """A training episode ended: every ``every``-th, one REINFORCE step, then a new mask."""
        self.returns.append(episode_return)
        self.episodes += 1
        if self.episodes % self.every:
            return
        slots = np.flatnonzero(self.buffer.starts_transition[: self.buffer.filled])
        if not len(slots):
            return
        current = float(np.mean(self.returns))
        self.reward = 0.0 if self.previous is None else current - self.previous
        self.previous, self.returns = current, []
        features = self.features(slots)  # standardised over the whole buffer, computed once
        device = generator.device  # the CPU for a run's generator; the replay policy is small and stays there too
        drawn = torch.randint(len(slots), (min(self.sample_size, len(slots)),), generator=generator, device=device)
        pick = drawn.cpu().numpy()
        self.step(features[pick], torch.from_numpy(self.mask[slots[pick]]), self.reward)
        with torch.no_grad():
            keep = torch.sigmoid(self.policy(features))[:, 0]
        self.mask[slots] = (torch.rand(len(slots), generator=generator, device=device).cpu() < keep).numpy()
        self._recount()

    def step(self, features: Tensor, kept: Tensor, reward: float) -> None:
        """One REINFORCE step: −R · mean log-likelihood of the mask bits ``kept`` under φ(features)."""
        logits = self.policy(features)[:, 0]
        log_likelihood = -nn.functional.binary_cross_entropy_with_logits(logits, kept.float(), reduction="mean")
        loss = -reward * log_likelihood
        self.optimiser.zero_grad()
        loss.backward()
        self.optimiser.step()

    def logged(self) -> Mapping[str, Tensor]:
        return {
            ERO_KEPT.name: torch.tensor(self.kept_share),
            ERO_REWARD.name: torch.tensor(self.reward),
            ERO_FALLBACK.name: torch.tensor(float(self.fallback)),
        }

    def state_dict(self) -> dict[str, Any]:
        filled = self.buffer.filled
        return {
            "policy": self.policy.state_dict(),
            "optimiser": self.optimiser.state_dict(),
            "mask": self.mask[:filled].copy(),
            "td": self.td[:filled].copy(),
            "born": self.born[:filled].copy(),
            "counters": {
                "transitions": self.transitions,
                "episodes": self.episodes,
                "returns": list(self.returns),
                "previous": self.previous,
                "reward": self.reward,
            },
        }

    def load_state_dict(self, state: dict[str, Any], buffer_restored: bool = True) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimiser.load_state_dict(state["optimiser"])
        counters = state["counters"]
        self.transitions, self.episodes = counters["transitions"], counters["episodes"]
        self.returns, self.previous, self.reward = list(counters["returns"]), counters["previous"], counters["reward"]
        if buffer_restored:
            filled = len(state["mask"])
            self.mask[:filled], self.td[:filled], self.born[:filled] = state["mask"], state["td"], state["born"]
        self._recount()
