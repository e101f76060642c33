"""The policy's output on this update's batch, computed once for the correction and the actor loss."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn


def _detach(output: Any) -> Any:
    return tuple(t.detach() for t in output) if isinstance(output, tuple) else output.detach()


class PolicyMemo:
    """Shares one forward pass of the actor between the correction and the actor loss.

    The correction asks for the policy on the batch (π(s), or SAC's mean and
    log-std) before the critic step; the actor loss needs the same output (the
    actor has not changed in between) with gradient. When the actor steps in this
    update, the first request runs the forward pass with gradient and the actor
    loss reuses it; otherwise it runs without gradient.
    """

    def __init__(self, actor: nn.Module) -> None:
        self.actor = actor
        self._obs: Tensor | None = None
        self._output: Any = None

    def for_correction(self, obs: Tensor, actor_due: bool) -> Any:
        """The actor's output on ``obs``, detached."""
        if not actor_due:
            with torch.no_grad():
                return self.actor(obs)
        self._obs, self._output = obs, self.actor(obs)
        return _detach(self._output)

    def for_actor_loss(self, obs: Tensor) -> Any:
        """The actor's output on ``obs`` with gradient, reused when the correction computed it."""
        output = self._output if self._obs is obs else None
        self._obs = self._output = None
        return output if output is not None else self.actor(obs)
