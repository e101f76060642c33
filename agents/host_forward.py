"""A policy's forward pass on one observation in NumPy, for acting on a CPU.

The training loop asks the actor for one action per environment step. On one
observation the arithmetic is tiny, and eager PyTorch spends its time per
operation instead: dispatch, wrapping, and, right after an update has filled the
caches with its own code and data, cache misses on all of it. NumPy's
per-operation path is shorter (``benchmarks/diagnostics/update_profile.py`` times one action
both ways, alone and right after an update).

The arrays are views of the parameters' own memory, so optimiser steps, soft
updates and ``load_state_dict`` (all in place) show through without a copy. If a
parameter's storage is ever replaced, the views are rebuilt on the next call.

NumPy's BLAS (OpenBLAS) runs products of this size on one thread: it spreads a
matrix-vector product over threads only from millions of elements (a 4096 × 4096
layer), far beyond the 256-unit layers here.
"""

from __future__ import annotations

import numpy as np

from agents.backprop import LinearChain


class HostForward:
    """What ``chain(obs)`` computes, for one (in,) observation, as an (out,) float32 array.

    Only for chains whose parameters live on the CPU (NumPy reads their memory).
    """

    def __init__(self, chain: LinearChain) -> None:
        self.chain = chain
        self._storage: tuple[int, ...] = ()
        """The parameters' data pointers when the views were taken."""
        self._layers: list[tuple[np.ndarray, np.ndarray]] = []
        """(weightᵀ, bias) of each layer: views of the parameters."""

    def _views(self) -> list[tuple[np.ndarray, np.ndarray]]:
        storage = tuple(t.data_ptr() for layer in self.chain.layers for t in layer)
        if storage != self._storage:
            self._layers = [(w.detach().numpy().T, b.detach().numpy()) for w, b in self.chain.layers]
            self._storage = storage
        return self._layers

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self._forward(np.asarray(obs, dtype=np.float32).reshape(1, -1))[0]

    def rows(self, obs: np.ndarray) -> np.ndarray:
        """What ``self(o)`` returns for each row ``o`` of an (n, in) batch, bit for bit, as (n, out).

        One product of the n rows would round differently from the rows alone (another BLAS kernel, another
        summation order), and a chaotic task turns a last-bit difference into another return. The stacked
        form ``X[:, None, :] @ W`` is NumPy's matmul loop over n products of one row each, the same BLAS
        call the single observation makes; the rest is elementwise, each element computed alone whatever
        the array's shape (``tests/agents/test_evaluation.py`` holds the whole evaluation to its bits).
        """
        return self._forward(np.asarray(obs, dtype=np.float32)[:, None, :])[:, 0]

    def _forward(self, x: np.ndarray) -> np.ndarray:
        """The chain on (..., 1, in) rows."""
        for (weight_t, bias), relu in zip(self._views(), self.chain.relu_after):
            x = x @ weight_t
            x += bias
            if relu:
                np.maximum(x, 0.0, out=x)
        if self.chain.tanh:
            np.tanh(x, out=x)
        return x
