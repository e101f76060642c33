"""AdamStep: the fused kernel called directly gives what torch.optim.Adam.step() gives, subnormals flushed."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from agents.optim import AdamStep, FlushSubnormals, flushing_subnormals


def pair(weight_decay: float = 0.0) -> tuple[nn.Module, torch.optim.Adam, nn.Module, torch.optim.Adam]:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
    twin = copy.deepcopy(net)
    make = lambda m: torch.optim.Adam(m.parameters(), lr=1e-3, weight_decay=weight_decay, fused=True)  # noqa: E731
    return net, make(net), twin, make(twin)


def set_grads(module: nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    for p in module.parameters():
        p.grad = torch.randn(p.shape, generator=g)


def step_both(net: nn.Module, opt: torch.optim.Adam, twin: nn.Module, step: AdamStep, seeds: range) -> None:
    """The same gradients into both; Adam.step() on one, AdamStep on the other."""
    for i in seeds:
        set_grads(net, i)
        opt.step()
        set_grads(twin, i)
        step()


def assert_same_parameters(net: nn.Module, twin: nn.Module) -> None:
    for a, b in zip(net.parameters(), twin.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("weight_decay", [0.0, 1e-2])
def test_adam_step_is_bit_identical_to_optimizer_step(weight_decay: float) -> None:
    net, opt, twin, twin_opt = pair(weight_decay)
    step = AdamStep(twin_opt)
    step_both(net, opt, twin, step, range(5))
    assert_same_parameters(net, twin)
    for a, b in zip(opt.state.values(), twin_opt.state.values()):
        assert all(torch.equal(a[k], b[k]) for k in ("exp_avg", "exp_avg_sq", "step"))
    assert float(next(iter(twin_opt.state.values()))["step"]) == 5


def test_adam_step_follows_a_loaded_state() -> None:
    net, opt, twin, twin_opt = pair()
    step = AdamStep(twin_opt)
    step_both(net, opt, twin, step, range(3))
    # Restore both from the first one's checkpoint: the shortcut must use the new state tensors.
    twin.load_state_dict(net.state_dict())
    twin_opt.load_state_dict(copy.deepcopy(opt.state_dict()))  # as from a checkpoint file: no shared tensors
    step_both(net, opt, twin, step, range(3, 6))
    assert_same_parameters(net, twin)


def test_adam_step_skips_parameters_without_gradient_like_step_does() -> None:
    net, opt, twin, twin_opt = pair()
    step = AdamStep(twin_opt)
    step_both(net, opt, twin, step, range(2))
    net[0].weight.grad = twin[0].weight.grad = None
    opt.step()
    step()
    assert_same_parameters(net, twin)
    # Each parameter keeps its own step count, through the shortcut's shared counter too.
    step_both(net, opt, twin, step, range(2, 4))
    assert_same_parameters(net, twin)
    steps = [float(s["step"]) for s in twin_opt.state.values()]
    assert steps == [float(s["step"]) for s in opt.state.values()]
    assert steps == [4.0, 5.0, 5.0, 5.0]


def test_adam_step_state_survives_a_checkpoint_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    net, opt, twin, twin_opt = pair()
    step = AdamStep(twin_opt)
    step_both(net, opt, twin, step, range(3))
    torch.save(twin_opt.state_dict(), tmp_path / "opt.pt")
    twin_opt.load_state_dict(torch.load(tmp_path / "opt.pt"))
    step_both(net, opt, twin, step, range(3, 6))
    assert_same_parameters(net, twin)
    assert [float(s["step"]) for s in twin_opt.state.values()] == [6.0] * 4


SMALLEST_SUBNORMAL = 2.0**-149
"""The smallest positive float32: where Adam's first moment of a unit without gradient ends up."""

flush_supported = pytest.mark.skipif(
    not torch.set_flush_denormal(False), reason="this CPU has no flush-to-zero mode for torch to set"
)


def stuck_moment(flush_subnormals: bool) -> tuple[float, float]:
    """(first moment before, after) one step with a zero gradient, from the smallest subnormal."""
    _, _, net, opt = pair()
    step = AdamStep(opt, flush_subnormals=flush_subnormals)
    for seed in range(2):  # the first step creates the state; the second goes through the kernel
        set_grads(net, seed)
        step()
    weight = net[0].weight
    moment = opt.state[weight]["exp_avg"]
    moment[0, 0] = SMALLEST_SUBNORMAL
    for p in net.parameters():
        p.grad = torch.zeros_like(p)
    before = float(moment[0, 0])
    step()
    return before, float(moment[0, 0])


def test_without_flushing_a_zero_gradient_leaves_the_first_moment_stuck_at_the_smallest_subnormal() -> None:
    # β₁ × 2⁻¹⁴⁹ = 0.9 × 2⁻¹⁴⁹ rounds back to 2⁻¹⁴⁹: the moment never reaches zero.
    assert stuck_moment(flush_subnormals=False) == (SMALLEST_SUBNORMAL, SMALLEST_SUBNORMAL)


@flush_supported
def test_flushing_turns_a_subnormal_first_moment_into_zero() -> None:
    assert stuck_moment(flush_subnormals=True) == (SMALLEST_SUBNORMAL, 0.0)


@flush_supported
@pytest.mark.parametrize("caller_flushes", [False, True])
def test_adam_step_leaves_the_callers_flush_mode_as_it_found_it(caller_flushes: bool) -> None:
    _, _, net, opt = pair()
    step = AdamStep(opt)
    try:
        torch.set_flush_denormal(caller_flushes)
        for seed in range(3):  # the first step goes through optimizer.step(), the others through the kernel
            set_grads(net, seed)
            step()
            assert flushing_subnormals() is caller_flushes
    finally:
        torch.set_flush_denormal(False)


@flush_supported
def test_flush_subnormals_restores_the_mode_when_the_body_raises() -> None:
    with pytest.raises(RuntimeError), FlushSubnormals():
        assert flushing_subnormals()
        raise RuntimeError("inside")
    assert not flushing_subnormals()
