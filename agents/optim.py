"""Adam steps for the training loop: ``torch.optim.Adam``'s fused kernel without its per-call bookkeeping.

``torch.optim.Adam(fused=True).step()`` ends in one ``torch._fused_adam_`` call,
but first walks its parameter groups, regroups the tensors by device and dtype,
and runs its hooks and profiler scope, every step. Right after an update, as in
the training loop, that bookkeeping costs more than the kernel
(``benchmarks/diagnostics/update_profile.py`` times both).

:class:`AdamStep` gathers the state lists once and calls the kernel itself. It
wraps an optimiser rather than subclassing one because ``Optimizer.__init__``
wraps every subclass's ``step`` in the same profiling hook. The
``torch.optim.Adam`` it wraps still owns the state, so checkpoints and
``load_state_dict`` work as before; the result is bit-identical
(``tests/agents/test_optim.py``) wherever no subnormal float arises.

It also flushes subnormal floats to zero for the duration of the step (x86's
FTZ and DAZ, what ``torch.set_flush_denormal(True)`` sets), restoring the
caller's mode after. A ReLU unit that stops firing gets zero gradients, so
Adam's first moment of its weights decays by β₁ = 0.9 per step into the
subnormal range and then stays there: 0.9 × 2⁻¹⁴⁹ rounds back to 2⁻¹⁴⁹, the
smallest subnormal. After some training a sizeable share of the moments is stuck
there, in other libraries' optimisers as in ours, and CPUs that compute on
subnormals through microcode assists pay for every one of them at each step
(``benchmarks/diagnostics/subnormals.py`` counts them and times the step).
Flushed, those moments become the zero they were decaying to; nothing of
magnitude 1.2e-38 or more changes.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import torch
from torch import Tensor

_SMALLEST_SUBNORMAL = 5e-324
"""The smallest positive float64; a product with it comes out 0.0 when subnormals are flushed."""
_ONE = 1.0
"""A name, not a literal, so that CPython does not fold the product at compile time."""


def flushing_subnormals() -> bool:
    """Whether this thread's floating-point unit flushes subnormals to zero (x86 FTZ or DAZ)."""
    return _SMALLEST_SUBNORMAL * _ONE == 0.0


class FlushSubnormals:
    """Context in which this thread flushes subnormal floats to zero; the caller's mode is restored on exit.

    Where the CPU has no such mode (``torch.set_flush_denormal`` returns False), nothing changes.
    """

    def __enter__(self) -> None:
        self._was_flushing = flushing_subnormals()
        if not self._was_flushing:
            torch.set_flush_denormal(True)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self._was_flushing:
            torch.set_flush_denormal(False)


class AdamStep:
    """``step()`` of a single-group, fused ``torch.optim.Adam``, calling its kernel directly.

    Falls back to ``optimizer.step()`` whenever the shortcut does not apply: the
    first step (the optimiser creates its state then), after ``load_state_dict``
    replaced the state, when a parameter has no gradient, or with options the
    shortcut does not cover (AMSGrad, maximise, several groups, non-fused).
    With ``flush_subnormals`` (the default) every step runs in :class:`FlushSubnormals`.
    """

    def __init__(self, optimizer: torch.optim.Adam, flush_subnormals: bool = True) -> None:
        self.optimizer = optimizer
        self.flush_subnormals = flush_subnormals
        group = optimizer.param_groups[0]
        self._supported = (
            len(optimizer.param_groups) == 1
            and bool(group.get("fused"))
            and not group["amsgrad"]
            and not group["maximize"]
            and not group.get("decoupled_weight_decay", False)
            and hasattr(torch, "_fused_adam_")
        )
        self.params: list[Tensor] = list(group["params"])
        self._state: Any = None
        self._counter = torch.zeros(0)
        self._lists: tuple[list[Tensor], list[Tensor], list[Tensor]] | None = None

    def _gather(self) -> tuple[list[Tensor], list[Tensor], list[Tensor]] | None:
        """(exp_avgs, exp_avg_sqs, steps) of the optimiser's current state, or None if incomplete."""
        state = self.optimizer.state
        if not all(p in state for p in self.params):
            return None
        entries = [state[p] for p in self.params]
        self._state = state
        # The step counters become 0-d views of one vector, so one add_ advances them all
        # (``_foreach_add_`` on many 0-d tensors costs ten times as much).
        self._counter = torch.stack([s["step"] for s in entries])
        for i, entry in enumerate(entries):
            entry["step"] = self._counter[i]
        return [s["exp_avg"] for s in entries], [s["exp_avg_sq"] for s in entries], [s["step"] for s in entries]

    def regather(self) -> None:
        """The optimiser's state was replaced from outside (a lane's slice taken out of a stacked state): read
        it again at the next step instead of the tensors held now."""
        self._lists = None

    def __call__(self) -> None:
        if self.flush_subnormals:
            with FlushSubnormals():
                self._step()
        else:
            self._step()

    def _step(self) -> None:
        grads = [p.grad for p in self.params]
        missing = any(g is None for g in grads)  # not `None in grads`: that compares tensors with ==
        if not self._supported or self._lists is None or self._state is not self.optimizer.state or missing:
            self.optimizer.step()
            self._lists = self._gather() if self._supported else None
            return
        exp_avgs, exp_avg_sqs, steps = self._lists
        group = self.optimizer.param_groups[0]
        beta1, beta2 = group["betas"]
        self._counter.add_(1)
        torch._fused_adam_(
            self.params,
            grads,  # type: ignore[arg-type]
            exp_avgs,
            exp_avg_sqs,
            [],
            steps,
            lr=group["lr"],
            beta1=beta1,
            beta2=beta2,
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            amsgrad=False,
            maximize=False,
        )
