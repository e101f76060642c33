"""The policy's output on this update's batch, computed once for the correction and the actor loss."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from agents.networks import DeterministicActor, GaussianPolicy


class PolicyMemo:
    """Shares one forward pass of the actor between the correction and the actor loss.

    The correction asks for the policy on the batch (π(s), or SAC's mean and
    log-std) before the critic step; the actor loss needs the same output (the
    actor has not changed in between) and the tape to back-propagate through.
    When the actor steps in this update, the first request runs the taped
    forward pass and the actor loss reuses it; otherwise it runs the plain one.
    """

    def __init__(self, actor: DeterministicActor | GaussianPolicy, taped: bool = True) -> None:
        self.actor = actor
        self.taped = taped
        """False under the autograd backend: the actor loss runs its own forward pass."""
        self._obs: Tensor | None = None
        self._result: tuple[Any, Any] | None = None
        self.last_output: Tensor | None = None
        """The actor's output in this update's actor loss, detached (DDPG's and TD3's logged share at the
        bounds reads it); None until then."""

    def for_correction(self, obs: Tensor, actor_due: bool) -> Any:
        """The actor's output on ``obs``."""
        if not (actor_due and self.taped):
            return self.actor(obs)
        self._obs, self._result = obs, self.actor.forward_tape(obs)
        return self._result[0]

    def for_actor_loss(self, obs: Tensor) -> tuple[Any, Any]:
        """The actor's (output, tape) on ``obs``, reused when the correction computed it."""
        result = self._result if self._obs is obs else None
        self._obs = self._result = None
        return result if result is not None else self.actor.forward_tape(obs)
