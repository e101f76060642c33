"""The update's thin products, each way ``agents.gemm`` and ``agents.backprop`` could compute them (issue 68).

    python -m benchmarks.diagnostics.thin_products      # about 20 s

One torch thread, Hopper's sizes (batch 256, 256 wide, 14 inputs to a critic, 3 actions), lanes K = 4. For each
product, the code's way and the other, in µs per call (median of 7 rounds), and their ratio:

- an outer product, a critic's last-layer input gradient (B, 1)·(1, 256): torch's ``mm`` / ``bmm`` against the
  broadcast multiply ``agents.gemm`` takes (the same values);
- products of a few rows, a last layer's weight gradient gᵀx with 1 to 16 rows: MKL (torch's ``mm``) against
  oneDNN (``torch.ops.mkldnn._linear_pointwise``); ``agents.gemm.ROWS`` rows and more go to oneDNN;
- a lane group's action gradient, g·W[..., -3:] per lane: ``bmm`` against the transposed (Wᵀgᵀ)ᵀ the lanes take.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from rich.console import Console
from rich.table import Table

from agents import gemm
from benchmarks.microbench import B, seconds_per_call

HIDDEN, INPUTS, ACTIONS, LANES = 256, 14, 3, 4


def _micros(fn: Callable[[], object]) -> float:
    return seconds_per_call(fn, calls=200) * 1e6


def main() -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    onednn = gemm._ONEDNN
    table = Table(title=f"thin products, one torch thread, batch {B}, {LANES} lanes where stacked (µs per call)")
    for column in ("product", "the other way", "µs", "the code's way", "µs ", "other / code's"):
        table.add_column(column, justify="right" if "µs" in column or "/" in column else "left")

    def row(product: str, other: str, other_fn: Callable[[], object], ours: str, ours_fn: Callable[[], object]) -> None:
        theirs, mine = _micros(other_fn), _micros(ours_fn)
        table.add_row(product, other, f"{theirs:.1f}", ours, f"{mine:.1f}", f"{theirs / mine:.2f}")

    grad, head = torch.randn(B, 1, generator=g), torch.randn(1, HIDDEN, generator=g)
    row("outer product, solo", "mm", lambda: grad.mm(head), "multiply", lambda: grad * head)
    lane_grad, lane_head = torch.randn(LANES, B, 1, generator=g), torch.randn(LANES, 1, HIDDEN, generator=g)
    row("outer product, lanes", "bmm", lambda: lane_grad.bmm(lane_head), "multiply", lambda: lane_grad * lane_head)

    x = torch.randn(B, HIDDEN, generator=g)
    for rows in (1, 3, 6, 8, 16):
        out_grad = torch.randn(B, rows, generator=g)
        a, b = out_grad.t(), x
        mkl = ("MKL", lambda a=a, b=b: a.mm(b))
        dnn = ("oneDNN", lambda a=a, b=b: onednn(a, b.t(), None, "none", [], "")) if onednn is not None else None
        if dnn is None:
            continue
        taken, other = (dnn, mkl) if rows >= gemm.ROWS else (mkl, dnn)
        row(f"weight gradient, {rows} row(s)", other[0], other[1], taken[0], taken[1])

    out_grad = torch.randn(LANES, B, HIDDEN, generator=g)
    columns = torch.randn(LANES, HIDDEN, INPUTS, generator=g)[..., -ACTIONS:]
    row(
        "action gradient, lanes",
        "bmm",
        lambda: out_grad.bmm(columns),
        "transposed",
        lambda: columns.mT.bmm(out_grad.mT).mT.contiguous(),
    )
    console = Console(width=120)
    console.print(table)
    if onednn is None:
        console.print("this torch has no usable oneDNN linear operator: the few-row rows are left out")
    console.print(f"agents.gemm.ROWS = {gemm.ROWS}: products of fewer rows stay with MKL")


if __name__ == "__main__":
    main()
