"""Which library the hand-written passes' wide products go to (``agents/gemm.py``), and what it must keep."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from agents import gemm
from agents.backprop import LinearChain
from agents.config import ConfigError
from agents.networks import FEW_ROWS, mlp

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif("OFFPOC_GEMM" in os.environ, reason="OFFPOC_GEMM is set: the choice is the user's")
def test_the_pinned_torch_has_onednns_linear_and_wide_products_use_it() -> None:
    """At the constraints file's torch, on this CPU, the private operator is found and chosen: a torch that
    renamed it would fall back to MKL silently (runs twice as slow on an AMD core), so this fails instead."""
    assert gemm._ONEDNN is not None
    assert gemm.USE_ONEDNN and gemm.backend() == "onednn"


def _layer_products(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, grad: torch.Tensor
) -> dict[str, torch.Tensor]:
    """A one-layer chain's forward, and its backward of ``grad``."""
    chain = LinearChain([torch.nn.Linear(weight.shape[1], weight.shape[0])])
    chain.layers = [(weight, bias)]
    out, tape = chain.forward(x)
    input_grad = chain.backward(tape, grad, params=True, input_grad=True)
    assert input_grad is not None and weight.grad is not None
    return {"forward": out, "input gradient": input_grad, "weight gradient": weight.grad}


@pytest.mark.parametrize("use_onednn", [True, False])
def test_a_wide_layers_products_are_the_chosen_librarys_to_the_bit(
    use_onednn: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 256-wide layer's forward, input gradient and weight gradient are oneDNN's products where it is chosen and
    MKL's (torch's own ``F.linear``, ``mm``) with ``OFFPOC_GEMM=mkl``, bit for bit; the two differ (so the
    comparison tells them apart)."""
    monkeypatch.setattr(gemm, "USE_ONEDNN", use_onednn)
    torch.manual_seed(0)
    x, weight, bias = torch.randn(256, 256), torch.randn(256, 256) / 16, torch.randn(256)
    grad = torch.randn(256, 256)
    ours = _layer_products(x, weight, bias, grad)
    assert gemm._ONEDNN is not None
    onednn = {
        "forward": gemm._ONEDNN(x, weight, bias, "none", [], ""),
        "input gradient": gemm._ONEDNN(grad, weight.t(), None, "none", [], ""),
        "weight gradient": gemm._ONEDNN(grad.t(), x.t(), None, "none", [], ""),
    }
    mkl = {"forward": F.linear(x, weight, bias), "input gradient": grad.mm(weight), "weight gradient": grad.t().mm(x)}
    for name, value in ours.items():
        assert not torch.equal(onednn[name], mkl[name]), name
        assert torch.equal(value, (onednn if use_onednn else mkl)[name]), name


def test_thin_products_stay_with_mkl() -> None:
    """A first layer's few inputs and a last layer's one output: torch's own products, where MKL is as fast."""
    torch.manual_seed(2)
    x, weight, bias = torch.randn(256, 14), torch.randn(256, 14), torch.randn(256)
    assert torch.equal(gemm.linear(x, weight, bias), F.linear(x, weight, bias))
    h, head = torch.randn(256, 256), torch.randn(1, 256)
    assert torch.equal(gemm.linear(h, head, None), F.linear(h, head))


def test_products_of_few_rows_stay_with_mkl(monkeypatch: pytest.MonkeyPatch) -> None:
    """A last layer's weight gradient (one row for a critic, three for a Hopper actor) and a few-row forward: torch's
    own products, solo and per lane, where oneDNN takes up to three times MKL's time; from ``ROWS`` rows on, oneDNN."""
    monkeypatch.setattr(gemm, "USE_ONEDNN", True)
    torch.manual_seed(5)
    x, weight = torch.randn(256, 256), torch.randn(256, 256) / 16
    assert gemm._ONEDNN is not None
    for rows in range(1, gemm.ROWS):
        grad = torch.randn(256, rows)
        assert torch.equal(gemm.mm(grad.t(), x), grad.t().mm(x)), rows
        assert torch.equal(gemm.linear(x[:rows], weight, None), F.linear(x[:rows], weight)), rows
        lanes, stacked, bias = torch.randn(2, 256, rows), x.expand(2, -1, -1), torch.zeros(2, 256)
        assert torch.equal(gemm.lane_mm(lanes.mT, stacked), lanes.mT.bmm(stacked)), rows
        few = stacked[:, :rows]
        assert torch.equal(gemm.lane_linear(few, stacked, bias), torch.baddbmm(bias.unsqueeze(-2), few, stacked.mT))
    grad = torch.randn(256, gemm.ROWS)
    assert torch.equal(gemm.mm(grad.t(), x), gemm._ONEDNN(grad.t(), x.t(), None, "none", [], ""))
    assert not torch.equal(gemm.mm(grad.t(), x), grad.t().mm(x))


def test_an_outer_product_is_a_multiply_with_mkls_values() -> None:
    """A last layer's input gradient (one output: (B, 1)·(1, n)) is a broadcast multiply, solo and per lane: MKL's
    values to the bit (one term per entry either way), and no product call (``bmm`` took 4x the multiply's time)."""
    torch.manual_seed(4)
    grad, head = torch.randn(256, 1), torch.randn(1, 256)
    lane_grad, lane_head = torch.randn(4, 256, 1), torch.randn(4, 1, 256)
    with torch.profiler.profile() as prof:
        solo, lanes = gemm.mm(grad, head), gemm.lane_mm(lane_grad, lane_head)
    assert torch.equal(solo, grad.mm(head)) and torch.equal(lanes, lane_grad.bmm(lane_head))
    called = {event.key for event in prof.key_averages()}
    assert not called & {"aten::mm", "aten::bmm", "aten::addmm", "mkldnn::_linear_pointwise"}, called


def test_a_product_of_mismatched_shapes_raises_as_torchs() -> None:
    """The multiply is taken for a true outer product only: operands whose inner sizes differ raise, as ``mm`` and
    ``bmm`` do, rather than broadcast into a result of some other shape."""
    with pytest.raises(RuntimeError):
        gemm.mm(torch.randn(5, 4), torch.randn(1, 4))
    with pytest.raises(RuntimeError):
        gemm.lane_mm(torch.randn(1, 5, 1), torch.randn(3, 1, 4))


@pytest.mark.parametrize("rows", [FEW_ROWS, 13, 100, 131, 255])
def test_a_onednn_product_rounds_each_row_as_in_the_whole_batch(rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any subset of ``FEW_ROWS`` (8) or more of a batch's rows, multiplied alone, gives those rows of the whole
    batch's product to the bit (forward and input gradient): what SAC's backward on each critic's own rows assumes
    (``tests/agents/test_gradients.py`` checks that backward whole); it leaves members with fewer rows masked.
    So products of that many rows must go to oneDNN as the whole batch's do."""
    assert FEW_ROWS >= gemm.ROWS
    monkeypatch.setattr(gemm, "USE_ONEDNN", True)
    torch.manual_seed(rows)
    x, weight, bias = torch.randn(256, 256), torch.randn(256, 256) / 16, torch.randn(256)
    picked = torch.randperm(256)[:rows]
    assert torch.equal(gemm.linear(x.index_select(0, picked), weight, bias), gemm.linear(x, weight, bias)[picked])
    assert torch.equal(gemm.mm(x.index_select(0, picked), weight), gemm.mm(x, weight)[picked])


@pytest.mark.parametrize("use_onednn", [True, False])
def test_a_lane_groups_products_are_each_lanes_own(use_onednn: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stacked (K, ...) layers: lane k's product is the 2-D product of its slices, bit for bit, in oneDNN; in MKL
    (``bmm`` against ``mm``) to float32 rounding."""
    monkeypatch.setattr(gemm, "USE_ONEDNN", use_onednn)
    torch.manual_seed(3)
    x, weight, bias = torch.randn(3, 256, 256), torch.randn(3, 256, 256) / 16, torch.randn(3, 256)
    stacked = gemm.lane_linear(x, weight, bias)
    product = gemm.lane_mm(x, weight)
    for k in range(3):
        if use_onednn:
            assert torch.equal(stacked[k], gemm.linear(x[k], weight[k], bias[k]))
            assert torch.equal(product[k], gemm.mm(x[k], weight[k]))
        else:
            torch.testing.assert_close(stacked[k], gemm.linear(x[k], weight[k], bias[k]))
            torch.testing.assert_close(product[k], gemm.mm(x[k], weight[k]))


def test_the_flop_counter_counts_onednns_products() -> None:
    """The benchmarks' achieved rates and the gradient tests' FLOP budgets count the products that run."""
    net = mlp([11, 256, 256, 3])
    chain = LinearChain(net)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        chain(torch.randn(256, 11))
    assert counter.get_total_flops() == 2 * 256 * (11 * 256 + 256 * 256 + 256 * 3)


@pytest.mark.parametrize(
    ("asked", "available", "expected"),
    [
        ("", True, (True, None)),
        ("", False, (False, None)),
        ("mkl", True, (False, None)),
        (" MKL ", True, (False, None)),
        ("onednn", True, (True, None)),
        ("onednn", False, (False, "OFFPOC_GEMM=onednn: this torch")),
        ("blas", True, (False, "OFFPOC_GEMM must be one of onednn, mkl (or unset), not 'blas'")),
    ],
)
def test_offpoc_gemm_is_read_and_checked(asked: str, available: bool, expected: tuple[bool, str | None]) -> None:
    use, error = gemm._choose(asked, available)
    assert use == expected[0]
    assert (error is None) == (expected[1] is None) and (error or "").startswith(expected[1] or "")


def test_a_trainer_refuses_to_start_under_a_bad_offpoc_gemm(monkeypatch: pytest.MonkeyPatch) -> None:
    from agents import TrainConfig, Trainer

    monkeypatch.setattr(gemm, "_ERROR", "OFFPOC_GEMM must be one of onednn, mkl (or unset), not 'blas'")
    with pytest.raises(ConfigError, match="OFFPOC_GEMM"):
        Trainer(TrainConfig(algo="td3", env_id="Pendulum-v1", total_steps=10))


def test_offpoc_run_under_a_bad_offpoc_gemm_is_a_usage_error_and_writes_nothing(tmp_path: Path) -> None:
    """Read at import, in the process that reads it: a real ``offpoc run`` with the variable set."""
    env = {**os.environ, "OFFPOC_GEMM": "blas"}
    command = [sys.executable, "-c", "from offpoc_tui.cli import main; main()", "run", "td3", "Hopper-v4"]
    done = subprocess.run([*command, "--db", str(tmp_path / "x.db")], env=env, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "error: OFFPOC_GEMM must be one of onednn, mkl (or unset), not 'blas'"
    assert list(tmp_path.iterdir()) == []


def test_products_autograd_records_stay_with_torch_and_keep_their_gradients() -> None:
    """oneDNN's operator has no backward: a forward that autograd records (the autograd backend, a correction's
    own actor loss) takes torch's product, so every layer gets its gradient, equal to ``nn.Sequential``'s."""
    torch.manual_seed(4)
    net = mlp([11, 256, 256, 3])
    chain = LinearChain(net)
    obs = torch.randn(64, 11)
    (chain(obs) ** 2).sum().backward()
    ours = [p.grad.clone() for p in net.parameters()]  # type: ignore[union-attr]
    net.zero_grad()
    (net(obs) ** 2).sum().backward()
    for mine, theirs in zip(ours, [p.grad for p in net.parameters()], strict=True):
        assert theirs is not None and torch.equal(mine, theirs)


def test_a_bias_onednn_would_misread_or_autograd_would_need_keeps_torchs_product() -> None:
    """oneDNN's operator reads a bias as contiguous and has no backward: a strided bias, or one autograd
    records, goes to torch's ``F.linear``."""
    torch.manual_seed(5)
    x, weight = torch.randn(64, 256), torch.randn(256, 256) / 16
    strided = torch.randn(256, 3)[:, 1]
    assert torch.equal(gemm.linear(x, weight, strided), F.linear(x, weight, strided))
    bias = torch.randn(256, requires_grad=True)
    gemm.linear(x, weight, bias).sum().backward()
    assert bias.grad is not None and torch.equal(bias.grad, torch.full((256,), 64.0))


def test_offpoc_resume_under_a_bad_offpoc_gemm_is_a_usage_error(
    filled_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from offpoc_tui.cli import app

    monkeypatch.setattr(gemm, "_ERROR", "OFFPOC_GEMM must be one of onednn, mkl (or unset), not 'blas'")
    before = filled_store.read_bytes()
    result = CliRunner().invoke(app, ["resume", "1", "--db", str(filled_store)])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: OFFPOC_GEMM must be one of onednn, mkl (or unset), not 'blas'"
    assert filled_store.read_bytes() == before
