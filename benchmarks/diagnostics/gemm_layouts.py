"""Products with a narrow result: a @ b against the transposed (bᵀaᵀ)ᵀ (the peer is a @ b).

    python -m benchmarks.diagnostics.gemm_layouts

A chain's first layer has a narrow input (Hopper's state: 11 numbers, with the
action 14), so its weight gradient gᵀx is (256, 11) and a critic's action
gradient g·W[:, -3:] is (256, 3): results with few columns. Single-threaded
MKL can be much slower on some of these shapes than on the same product
transposed, which is why ``agents.backprop`` computes narrow weight gradients
transposed. Which layout wins depends on the CPU, since MKL picks its kernels
by CPU; input gradients are computed plain everywhere
(``TRANSPOSE_NARROW_INPUT_GRADIENT``: whole updates did not differ, see
``input_gradient_layout.py``). This prints both layouts, per shape, on one
torch thread, and the layout ``agents.backprop`` uses.
"""

from __future__ import annotations

import torch
from rich.console import Console
from rich.table import Table

from agents.backprop import NARROW, TRANSPOSE_NARROW_INPUT_GRADIENT, narrow_mm
from benchmarks.microbench import B, cpu_vendor, seconds_per_call

HIDDEN = 256


def main() -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    table = Table(title=f"(m, k) @ (k, n), one torch thread; transposed when n < NARROW = {NARROW}")
    for column in ("product", "shape", "a @ b (µs)", "(bᵀaᵀ)ᵀ (µs)", "a @ b / transposed"):
        table.add_column(column, justify="left" if column in ("product", "shape") else "right")
    for fan_in in (3, 6, 11, 14, 17, 23, 35, 64):
        grad_out = torch.randn(B, HIDDEN, generator=g)
        x = torch.randn(B, fan_in, generator=g)
        weight = torch.randn(HIDDEN, fan_in, generator=g)
        cases = {
            "weight gradient gᵀx": (grad_out.t(), x),
            "input gradient g·W": (grad_out, weight),
        }
        for name, (a, b) in cases.items():
            plain = seconds_per_call(lambda a=a, b=b: a.mm(b), calls=100)
            transposed = seconds_per_call(lambda a=a, b=b: narrow_mm(a, b), calls=100)
            table.add_row(
                name,
                f"({a.shape[0]}, {a.shape[1]}) @ ({b.shape[0]}, {b.shape[1]})",
                f"{plain * 1e6:.1f}",
                f"{transposed * 1e6:.1f}",
                f"{plain / transposed:.2f}",
            )
    console = Console(width=120)
    console.print(table)
    layout = "transposed" if TRANSPOSE_NARROW_INPUT_GRADIENT else "plain (a @ b)"
    console.print(
        f"CPU {cpu_vendor() or 'of unknown vendor'}: agents.backprop computes narrow weight gradients"
        f" transposed, narrow input gradients {layout}"
    )


if __name__ == "__main__":
    main()
