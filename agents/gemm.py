"""Which library runs the hand-written passes' wide matrix products on a CPU: oneDNN where torch has it, else MKL.

torch's own float32 products on a CPU (``F.linear``, ``mm``, ``bmm``) call MKL's sgemm. On AMD processors MKL
runs its AVX2 kernels even where the core has AVX-512: on the AMD EPYC VM of ``benchmarks/README.md`` one
thread's 256×256×256 product runs at about 111 GFLOP/s through MKL and 235–240 GFLOP/s through oneDNN's brgemm
kernels (AVX-512), which torch ships too. torch reaches oneDNN's float32 products only through a private
operator, ``torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")`` (x·weightᵀ + bias; inductor's
CPU code calls it for linear layers). So the products whose sides are all at least :data:`WIDE` long (the
hidden layers') go through it; the thin ones (a first layer's few inputs, a last layer's few outputs) stay
with MKL, which runs them as fast or faster.

**What it changes in a run.** oneDNN sums a product's terms in another order than MKL, so a seeded run's numbers
differ from MKL's by float32 rounding after its first update, a difference that training then amplifies (as
it amplifies any rounding: another machine's MKL rounds differently too). ``OFFPOC_GEMM=mkl`` in the
environment keeps every product with MKL (the code's arithmetic before oneDNN, to the bit); ``OFFPOC_GEMM=onednn``
asks for oneDNN and fails where torch lacks it; unset, oneDNN is used where it is available. It is read once,
as this module is imported: a run's worker takes the value of the scheduler that started it. A oneDNN
product of two rows or more rounds each row the same whatever rows sit beside it (``tests/agents/test_gemm.py``),
which SAC's backward on each critic's own rows relies on (:meth:`agents.networks.TwinCritic.min_action_grad`).

**What it costs a maintainer.** A private operator: its name or signature may change in a torch release. The
constraints file pins torch; the operator is looked up once here, and where it is missing or refuses the
call, unset ``OFFPOC_GEMM`` falls back to MKL; ``tests/agents/test_gemm.py`` fails at the pinned version
if the lookup stops finding it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from agents.config import ConfigError

WIDE = 64
"""A product goes to oneDNN when its inner size and its result's columns are both at least this..."""
ROWS = 8
"""... and its result has at least this many rows (per lane). Fewer rows take oneDNN 13-19 µs against MKL's 4-16 for
one to seven rows of a 256-wide product (a last layer's weight gradient: one row for a critic, an action's few for
an actor). Not above :data:`agents.networks.FEW_ROWS`: a product on a critic's own rows then goes where the whole
batch's does."""
BACKENDS = ("onednn", "mkl")


def _find_onednn() -> Callable[..., Tensor] | None:
    """oneDNN's linear operator, if this torch has it and it runs."""
    try:
        if not torch.backends.mkldnn.is_available():
            return None
        op: Callable[..., Tensor] = torch.ops.mkldnn._linear_pointwise
        x, w = torch.ones(2, WIDE), torch.ones(WIDE, WIDE)
        if not torch.equal(op(x, w, None, "none", [], ""), torch.full((2, WIDE), float(WIDE))):
            return None
        return op
    except (AttributeError, RuntimeError):
        return None


def _choose(asked: str, available: bool) -> tuple[bool, str | None]:
    """(use oneDNN, the error to raise) for the ``OFFPOC_GEMM`` value ``asked``."""
    asked = asked.strip().lower()
    if asked not in ("", *BACKENDS):
        return False, f"OFFPOC_GEMM must be one of {', '.join(BACKENDS)} (or unset), not {asked!r}"
    if asked == "onednn" and not available:
        return False, f"OFFPOC_GEMM=onednn: this torch ({torch.__version__}) has no usable oneDNN linear operator"
    return asked != "mkl" and available, None


def _count_flops(op: Callable[..., Tensor]) -> None:
    """Teach torch's FLOP counter (``torch.utils.flop_counter``) oneDNN's linear, which it does not know: the
    benchmarks' rates and the tests' FLOP budgets count the products that run."""
    from torch.utils.flop_counter import flop_registry, register_flop_formula

    if op in flop_registry:
        return

    @register_flop_formula(op)
    def _(x_shape: list[int], w_shape: list[int], *args: object, **kwargs: object) -> int:
        return 2 * math.prod(x_shape[:-1]) * w_shape[0] * w_shape[1]


_ONEDNN = _find_onednn()
if _ONEDNN is not None:
    _count_flops(_ONEDNN)
USE_ONEDNN, _ERROR = _choose(os.environ.get("OFFPOC_GEMM", ""), _ONEDNN is not None)
"""Whether wide products go to oneDNN (tests and benchmarks switch it to compare)."""


def check() -> None:
    """Raise :class:`~agents.config.ConfigError` where ``OFFPOC_GEMM`` asks for what cannot be."""
    if _ERROR is not None:
        raise ConfigError(_ERROR)


def backend() -> str:
    """The library the wide products go to: ``onednn`` or ``mkl``."""
    return "onednn" if USE_ONEDNN else "mkl"


def _to_onednn(a: Tensor, b: Tensor, rows: int, inner: int, columns: int, bias: Tensor | None = None) -> bool:
    """Whether a·b (+ bias) goes to oneDNN: wide, of :data:`ROWS` rows or more, float32 on a CPU, not recorded by
    autograd (the operator has no backward: autograd would drop the gradients through it, warning once), and a
    contiguous bias (the operator reads a bias as contiguous whatever its strides)."""
    return (
        USE_ONEDNN
        and inner >= WIDE
        and columns >= WIDE
        and rows >= ROWS
        and a.device.type == "cpu"
        and a.dtype == torch.float32
        and not (
            torch.is_grad_enabled()
            and (a.requires_grad or b.requires_grad or (bias is not None and bias.requires_grad))
        )
        and (bias is None or bias.is_contiguous())
    )


def linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """x·weightᵀ + bias, as ``F.linear``."""
    if _to_onednn(x, weight, math.prod(x.shape[:-1]), weight.shape[1], weight.shape[0], bias):
        assert _ONEDNN is not None
        return _ONEDNN(x, weight, bias, "none", [], "")
    return F.linear(x, weight, bias)


def mm(a: Tensor, b: Tensor) -> Tensor:
    """a·b, as ``a.mm(b)``. An outer product (one inner term) is a broadcast multiply: each entry is the one
    product either way, so the values are MKL's to the bit, and it skips a product call that MKL runs slowly."""
    if a.shape[-1] == 1 and b.shape[0] == 1 and a.ndim == b.ndim == 2:
        return a * b
    if _to_onednn(a, b, a.shape[0], b.shape[0], b.shape[1]):
        assert _ONEDNN is not None
        return _ONEDNN(a, b.t(), None, "none", [], "")
    return a.mm(b)


def lane_linear(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """Each lane's x·weightᵀ + bias, for (K, B, in) ``x``, (K, out, in) ``weight``, (K, out) ``bias``."""
    if _to_onednn(x, weight, x.shape[1], weight.shape[2], weight.shape[1], bias):
        assert _ONEDNN is not None
        return torch.stack([_ONEDNN(x[k], weight[k], bias[k], "none", [], "") for k in range(len(x))])
    return torch.baddbmm(bias.unsqueeze(-2), x, weight.mT)


def lane_mm(a: Tensor, b: Tensor) -> Tensor:
    """Each lane's a·b, for (K, m, n) ``a`` and (K, n, p) ``b``, as ``a.bmm(b)``; an outer product (n = 1) as
    :func:`mm`'s, a broadcast multiply (a quarter of ``bmm``'s time for K = 4 lanes of a critic's last layer): the
    same values, but for a zero's sign (``bmm`` of two or more lanes writes +0 where the product is −0)."""
    if a.shape[-1] == 1 and b.shape[1] == 1 and a.shape[0] == b.shape[0] and a.ndim == b.ndim == 3:
        return a * b
    if _to_onednn(a, b, a.shape[1], b.shape[1], b.shape[2]):
        assert _ONEDNN is not None
        return torch.stack([_ONEDNN(a[k], b[k].t(), None, "none", [], "") for k in range(len(a))])
    return a.bmm(b)
