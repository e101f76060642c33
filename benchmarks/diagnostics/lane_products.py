"""A lane group's wide product, every way torch's float32 operators offer to run it (issue 68).

    python -m benchmarks.diagnostics.lane_products      # about 10 s

One torch thread, K lanes of a 256-wide hidden layer on a batch of 256 (each lane its own weights): what K
lanes cost against one solo product, in µs per call (median of 7 rounds). The lanes' step costs what a solo
step costs when no way of running K products together beats K products run one by one, and that is what this
measures (``benchmarks/README.md``, "A lane group costs what one run costs"):

- ``agents.gemm.lane_linear`` (the code's): one oneDNN call a lane, the outputs stacked into (K, B, 256);
- the same calls, not stacked: the floor under stacking (what keeping the lanes' outputs apart could save);
- ``baddbmm``: torch's batched product, MKL's kernels (AVX2 on the AMD EPYC);
- one grouped 1×1 convolution through oneDNN (``torch.ops.mkldnn._convolution_pointwise``, groups = K, the
  lanes' inputs as channels, channels-last): the only oneDNN operator in torch that takes K weights at once
  in float32 (inductor's; torch's ``bmm`` goes to oneDNN only for bfloat16, float16, or float32 at reduced
  precision).

Each way's result is checked against the first (the largest difference is printed).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from rich.console import Console
from rich.table import Table

from agents import gemm
from benchmarks.microbench import B, seconds_per_call

HIDDEN = 256


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.diagnostics.lane_products", description=__doc__)
    parser.add_argument("--lanes", type=int, default=4, help="lanes K (default 4)")
    args = parser.parse_args(argv)
    if args.lanes < 1:
        parser.error("--lanes must be at least 1")
    console = Console(width=120)
    onednn = gemm._ONEDNN
    if onednn is None:
        console.print("this torch has no usable oneDNN linear operator: nothing to compare")
        return 1
    torch.set_num_threads(1)
    k = args.lanes
    g = torch.Generator().manual_seed(0)
    x = torch.randn(k, B, HIDDEN, generator=g)
    weight, bias = torch.randn(k, HIDDEN, HIDDEN, generator=g) / 16, torch.randn(k, HIDDEN, generator=g)
    conv = torch.ops.mkldnn._convolution_pointwise
    channels_last = x.permute(1, 0, 2).contiguous().view(1, B, 1, k * HIDDEN).permute(0, 3, 1, 2)
    conv_weight, conv_bias = weight.reshape(k * HIDDEN, HIDDEN, 1, 1), bias.reshape(k * HIDDEN)

    def grouped() -> torch.Tensor:
        return conv(channels_last, conv_weight, conv_bias, [0, 0], [1, 1], [1, 1], k, "none", [], "")

    def per_lane() -> list[torch.Tensor]:
        return [onednn(x[i], weight[i], bias[i], "none", [], "") for i in range(k)]

    def code() -> torch.Tensor:  # oneDNN a lane, stacked (unless OFFPOC_GEMM=mkl: baddbmm)
        return gemm.lane_linear(x, weight, bias)

    ways: list[tuple[str, Callable[[], object], Callable[[], torch.Tensor]]] = [
        (f"the code's: gemm.lane_linear ({gemm.backend()})", code, code),
        ("oneDNN a lane, not stacked", per_lane, lambda: torch.stack(per_lane())),
        (
            "baddbmm (MKL)",
            lambda: torch.baddbmm(bias.unsqueeze(-2), x, weight.mT),
            lambda: torch.baddbmm(bias.unsqueeze(-2), x, weight.mT),
        ),
        (
            "grouped 1×1 convolution (oneDNN)",
            grouped,
            lambda: grouped().permute(0, 2, 3, 1).reshape(B, k, HIDDEN).transpose(0, 1),
        ),
    ]
    solo = seconds_per_call(lambda: onednn(x[0], weight[0], bias[0], "none", [], ""), calls=200) * 1e6
    reference = ways[0][2]()
    table = Table(title=f"{k} lanes of a {HIDDEN}-wide layer, batch {B}, one torch thread (µs per call)")
    for column in ("way", "µs", "per lane / solo", "largest difference"):
        table.add_column(column, justify="left" if column == "way" else "right")
    for name, fn, value in ways:
        micros = seconds_per_call(fn, calls=200) * 1e6
        difference = (value() - reference).abs().max().item()
        table.add_row(name, f"{micros:.1f}", f"{micros / k / solo:.2f}", f"{difference:.1e}")
    console.print(table)
    console.print(f"one solo product (oneDNN): {solo:.1f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
