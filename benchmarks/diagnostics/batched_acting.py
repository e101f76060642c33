"""Whether an evaluation's ten episodes could share one forward pass per step and keep their bits (issue 68).

    python -m benchmarks.diagnostics.batched_acting          # a few seconds

Acting on a CPU runs the actor in NumPy one observation at a time (:mod:`agents.host_forward`). Stepping the
evaluation's episodes together would act on all of them at once. That only keeps a run's evaluations as they
are if each row of the batched product has the same bits as the row computed alone, since a chaotic task can
turn a difference in the last bit of an action into a different return. For each layer shape of TD3's actor
on Hopper-v4 (11 → 256 → 256 → 3) and ten rows, this prints:

- whether ``X @ W`` (one matrix product) equals the ten rows computed one at a time, and the largest difference;
- whether the stacked form ``X[:, None, :] @ W`` (a product per row, in one call) equals them;
- µs per call of the ten single rows, the stacked form and the one product, on one thread.
"""

from __future__ import annotations

import os
import timeit

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads OpenBLAS: acting runs on one thread

import numpy as np
from rich.console import Console
from rich.table import Table

SHAPES = ((11, 256), (256, 256), (256, 3))
"""(inputs, outputs) of each layer of TD3's actor on Hopper-v4."""
ROWS = 10
"""The paper's evaluation episodes."""


def microseconds(call: object, number: int = 2000) -> float:
    """Best of five repeats, µs per call."""
    return min(timeit.repeat(call, number=number, repeat=5)) / number * 1e6  # type: ignore[arg-type]


def main() -> None:
    rng = np.random.default_rng(0)
    table = Table(title=f"{ROWS} rows through one layer, float32, NumPy {np.__version__}")
    for column in ("layer", "one product = rows alone", "largest difference", "stacked = rows alone",
                   "rows alone (µs)", "stacked (µs)", "one product (µs)"):  # fmt: skip
        table.add_column(column, justify="left" if column == "layer" else "right")
    for inputs, outputs in SHAPES:
        weight = rng.standard_normal((inputs, outputs)).astype(np.float32)
        x = rng.standard_normal((ROWS, inputs)).astype(np.float32)
        alone = np.stack([(x[i : i + 1] @ weight)[0] for i in range(ROWS)])
        product = x @ weight
        stacked = (x[:, None, :] @ weight)[:, 0]
        table.add_row(
            f"{inputs} → {outputs}",
            "yes" if np.array_equal(product, alone) else "no",
            f"{np.abs(product - alone).max():.1e}",
            "yes" if np.array_equal(stacked, alone) else "no",
            f"{microseconds(lambda: [x[i : i + 1] @ weight for i in range(ROWS)]):.1f}",  # noqa: B023
            f"{microseconds(lambda: x[:, None, :] @ weight):.1f}",  # noqa: B023
            f"{microseconds(lambda: x @ weight):.1f}",  # noqa: B023
        )
    Console().print(table)


if __name__ == "__main__":
    main()
