"""Forward and backward passes of an MLP written out, for the update's hot path.

The update computes its gradients without autograd: every loss in it is simple
enough to differentiate by hand (see :mod:`agents.algorithms.base`), and
skipping the graph's bookkeeping (nodes, saved tensors, gradient accumulation)
is what brings the update close to the time of its matrix products on a CPU
(``benchmarks/diagnostics/update_profile.py``). The arithmetic is autograd's own kernels
(``addmm``/``mm``/``sum``, ``threshold_backward``, ``tanh_backward``), except that the
wide products go to oneDNN where torch has it (:mod:`agents.gemm`), so the
gradients match autograd's to float32 rounding, which ``tests/agents/test_gradients.py``
checks for every algorithm.

A chain is a view of existing ``nn.Linear`` layers' parameters, not a module:
networks keep their ``nn.Sequential`` structure, state-dict keys and
initialisation. It holds the parameter tensors themselves, which stay the same
objects through optimiser steps, ``load_state_dict`` and ``copy.deepcopy`` of
the owning network (the copy's chain holds the copy's parameters).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import torch
from torch import Tensor, nn

from agents import gemm

NARROW = 32
"""Products whose result has fewer columns than this are computed transposed (input gradients:
only where :data:`TRANSPOSE_NARROW_INPUT_GRADIENT`)."""


TRANSPOSE_NARROW_INPUT_GRADIENT = False
"""Whether narrow input gradients g·W (a critic's action gradient, a narrow hidden layer's) are
computed transposed too. They are not: whole updates took as long either way where it was measured
(``benchmarks/diagnostics/input_gradient_layout.py``; figures in ``benchmarks/README.md``), so one layout
serves every machine (the products' rounding still depends on the kernels a machine's libraries pick). Alone,
the plain product can be the slower: the AMD EPYC's Hopper action gradient took 53 µs against 36 transposed,
half a call an update for TD3. Tests and the diagnostics switch it to compare.
Solo chains only: a lane group's narrow input gradient is always transposed, 1.5-3.5x faster than ``bmm``.
"""

ALL_COLUMNS = slice(None)
"""``LinearChain.backward``'s default ``input_columns``: the whole input gradient."""


def narrow_mm(a: Tensor, b: Tensor) -> Tensor:
    """a @ b, for a b with few columns (under :data:`NARROW`), as (bᵀaᵀ)ᵀ, contiguous; each lane's, for (K, m, n)
    ``a`` and (K, n, p) ``b`` (``bmm``).

    Single-threaded MKL can run such products several times slower than the same product
    transposed, while from 64 columns on the plain one wins
    (``benchmarks/diagnostics/gemm_layouts.py``). They are the first layer's weight gradients,
    where the input (state, or state and action) is narrow, and a lane group's action gradient.
    """
    if a.ndim == 3:
        return b.mT.bmm(a.mT).mT.contiguous()
    return b.t().mm(a.t()).t().contiguous()


def _mm(a: Tensor, b: Tensor, transpose_narrow: bool = True) -> Tensor:
    """a @ b, transposed when the result is narrow (and ``transpose_narrow``); a wide one by :mod:`agents.gemm`."""
    return narrow_mm(a, b) if transpose_narrow and b.shape[1] < NARROW else gemm.mm(a, b)


class Tape(NamedTuple):
    """What a chain's backward needs from its forward."""

    inputs: list[Tensor]
    """Each layer's input: the chain's input, then each hidden ReLU output."""
    output: Tensor
    """The chain's output (after its Tanh, when it has one)."""


class LinearChain:
    """Linear layers (with biases), each optionally followed by a ReLU, the last optionally by a Tanh.

    Built from the modules of an MLP in order, e.g. ``LinearChain(mlp([4, 8, 2]))``
    (a ReLU between layers), or ``LinearChain([*trunk, head])``.
    """

    def __init__(self, modules: Iterable[nn.Module]) -> None:
        modules = list(modules)
        self.layers: list[tuple[Tensor, Tensor]] = []
        """(weight, bias) of each layer: the parameters themselves, looked up once."""
        self.relu_after: list[bool] = []
        self.tanh = False
        for i, module in enumerate(modules):
            if isinstance(module, nn.Linear):
                if module.bias is None:
                    raise ValueError("a LinearChain's Linear layers need a bias")
                self.layers.append((module.weight, module.bias))
                nxt = modules[i + 1] if i + 1 < len(modules) else None
                self.relu_after.append(isinstance(nxt, nn.ReLU))
            elif isinstance(module, nn.Tanh):
                if i != len(modules) - 1:
                    raise ValueError("a Tanh may only end a LinearChain")
                self.tanh = True
            elif not isinstance(module, nn.ReLU):
                raise TypeError(f"a LinearChain holds Linear, ReLU and a final Tanh, not {type(module).__name__}")

    def __call__(self, x: Tensor) -> Tensor:
        """The output alone (inference, targets): what the ``nn.Sequential`` computes."""
        return self.forward(x)[0]

    def forward(self, x: Tensor) -> tuple[Tensor, Tape]:
        """The output and the tape for :meth:`backward`. Run under ``torch.no_grad()``.

        A lane group's chain (:mod:`agents.lanes`) holds (K, out, in) weights and (K, out) biases, and ``x``
        is (K, B, in): lane k's input meets lane k's layer alone, and every pass below keeps the lanes apart.
        """
        inputs = []
        for (weight, bias), relu in zip(self.layers, self.relu_after):
            inputs.append(x)
            x = gemm.linear(x, weight, bias) if weight.ndim == 2 else gemm.lane_linear(x, weight, bias)
            if relu:
                x = x.relu_()
        if self.tanh:
            x = torch.tanh(x)
        return x, Tape(inputs, x)

    @torch.no_grad()
    def backward(
        self,
        tape: Tape,
        grad: Tensor,
        params: bool = True,
        input_grad: bool = False,
        input_columns: slice = ALL_COLUMNS,
        rows_of: tuple[Tensor, int] | None = None,
    ) -> Tensor | None:
        """Back-propagate ``grad`` (∂L/∂output) through the chain.

        With ``params``, sets every layer's ``weight.grad`` and ``bias.grad`` (replacing,
        not accumulating). Returns ∂L/∂input when ``input_grad``, else None; only
        its ``input_columns`` (e.g. a critic's action part) when given. Runs without
        autograd whether or not its caller does.

        ``rows_of`` (rows, n): the tape and ``grad`` hold those distinct rows of an n-row batch (2-D
        chains; ignored otherwise). The input gradient then comes out for the whole batch, zero in the
        other rows: its product runs on all n rows, since MKL rounds a row of a narrow product (a few
        columns) by where the row sits in it, so each row rounds as in the whole batch's product.
        """
        if self.tanh:
            grad = torch.ops.aten.tanh_backward(grad, tape.output)
        last = len(self.layers) - 1
        for i in range(last, -1, -1):
            (weight, bias), x = self.layers[i], tape.inputs[i]
            if self.relu_after[i] and i == last:
                grad = torch.ops.aten.threshold_backward(grad, tape.output, 0.0)
            if weight.ndim == 3:  # a lane group's stacked layer: one product per lane (agents.lanes)
                if params:  # narrow inputs transposed, as _mm does (measured 2.3x faster for 14 columns)
                    weight.grad = narrow_mm(grad.mT, x) if x.shape[-1] < NARROW else gemm.lane_mm(grad.mT, x)
                    bias.grad = grad.sum(-2)
                if i == 0:
                    if not input_grad:
                        return None
                    # narrow (a critic's action part): always transposed, 1.5-3.5x faster than bmm for K = 2-8 lanes
                    columns = weight[..., input_columns]
                    return narrow_mm(grad, columns) if columns.shape[-1] < NARROW else grad.bmm(columns)
                grad = gemm.lane_mm(grad, weight)
            else:
                if params:
                    weight.grad = _mm(grad.t(), x)
                    bias.grad = grad.sum(0)
                if i == 0:
                    if not input_grad:
                        return None
                    if rows_of is not None:
                        rows, n = rows_of
                        grad = grad.new_zeros(n, grad.shape[1]).index_copy_(0, rows, grad)
                    return _mm(grad, weight[:, input_columns], TRANSPOSE_NARROW_INPUT_GRADIENT)
                grad = _mm(grad, weight, TRANSPOSE_NARROW_INPUT_GRADIENT)
            if self.relu_after[i - 1]:
                # x is the previous layer's ReLU output: it passes the gradient where positive.
                # In place: grad is this loop's own product, and a fresh output tensor per
                # layer made whole updates measurably slower.
                grad = torch.ops.aten.threshold_backward.grad_input(grad, x, 0.0, grad_input=grad)
        return grad
