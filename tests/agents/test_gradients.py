"""The hand-written gradients of the update against autograd on the same losses.

The fast backend's update never calls autograd (see ``agents/backprop.py``); these
tests rebuild each loss the plain way, with autograd, and compare the gradients the
optimisers were given: critic and actor for every algorithm, SAC's temperature,
unweighted and with per-batch and per-transition weights. ``tests/agents/test_backends.py``
then trains both backends side by side.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
import torch
from pytest import MonkeyPatch
from torch import nn

from agents import backprop, gemm
from agents.backprop import LinearChain
from agents.networks import mlp, squashed_sample
from tests.support.batches import ACT, B, ConstantWeight, batch
from tests.support.batches import agent as make


def reference_reduce(per_sample: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """The paper's reductions, written independently of ``loss_coefficients``."""
    if weight is None:
        return per_sample.mean()
    if weight.ndim == 0:
        return weight * per_sample.mean()
    return (weight * per_sample).sum() / weight.sum()


def grads(module: nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() for p in module.parameters()]  # type: ignore[union-attr]


def assert_grads_close(ours: list[torch.Tensor], reference: tuple[torch.Tensor, ...]) -> None:
    assert len(ours) == len(reference)
    for mine, theirs in zip(ours, reference):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-6)


WEIGHTS = {
    "plain": None,
    "per-batch": torch.tensor(0.7),
    "per-transition": torch.rand(B, 1, generator=torch.Generator().manual_seed(3)) + 0.05,
}


@pytest.mark.parametrize("weighting", WEIGHTS)
@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_update_gradients_equal_autograd(algo: str, weighting: str) -> None:
    agent, b, weight = make(algo), batch(terminated_every=5), WEIGHTS[weighting]
    agent.updates = 1  # the next update steps the actor too (TD3's delay)
    reference = copy.deepcopy(agent)
    state = agent.generator.get_state()
    stats = agent.update(b, ConstantWeight(weight) if weight is not None else None)  # type: ignore[arg-type]

    # Critic: Σ_k (Q_k − y)², reduced, back-propagated by autograd; DDPG's weight decay is a term of the
    # same weighted loss, wd/2·‖θ‖² under each transition's weight (Σ of the weights: λ per batch, else 1).
    r = reference
    r.generator.set_state(state)
    y = r.target(b)
    critic_loss = reference_reduce((r.critic(b.obs, b.action) - y).square().sum(0), weight)
    decay = float(r.config.critic_weight_decay or 0.0) / 2 * sum(p.square().sum() for p in r.critic.parameters())
    total = weight if weight is not None and weight.ndim == 0 else 1.0
    decayed = critic_loss + total * decay
    assert_grads_close(grads(agent.critic), torch.autograd.grad(decayed, list(r.critic.parameters())))
    torch.testing.assert_close(stats.critic_loss, critic_loss.detach(), rtol=1e-5, atol=1e-6)

    # Actor, against the critic as the update left it (same noise stream for SAC).
    r.critic.load_state_dict(agent.critic.state_dict())
    actor_params = list(r.actor.parameters())
    if algo == "sac":
        mean, log_std = r.actor(b.obs)
        noise = torch.randn(mean.shape, generator=r.generator)
        action, log_pi = squashed_sample(mean, log_std, noise)
        alpha = r.log_alpha.detach().exp()
        per_sample = alpha * log_pi - r.critic(b.obs, action).min(0).values
    else:  # DDPG and TD3: the (first) critic at π(s)
        per_sample = -r.critic(b.obs, r.actor(b.obs))[0]
    actor_loss = reference_reduce(per_sample, weight)
    assert_grads_close(grads(agent.actor), torch.autograd.grad(actor_loss, actor_params))
    assert stats.actor_loss is not None
    torch.testing.assert_close(stats.actor_loss, actor_loss.detach(), rtol=1e-5, atol=1e-6)

    if algo == "sac":
        alpha_loss = -(r.log_alpha * (log_pi.detach() - ACT)).mean()
        (expected,) = torch.autograd.grad(alpha_loss, [r.log_alpha])
        torch.testing.assert_close(agent.log_alpha.grad, expected)


def test_critic_parameters_get_no_gradient_from_the_actor_loss() -> None:
    agent = make("td3")
    agent.updates = 1
    agent.update(batch())
    critic_grads = grads(agent.critic)
    # A second actor backward leaves the critic's gradients (from its own step) untouched.
    agent.actor_backward(batch(1).obs, 1.0 / B)
    for before, after in zip(critic_grads, grads(agent.critic)):
        assert torch.equal(before, after)


@pytest.mark.parametrize(
    "modules",
    [
        pytest.param(lambda: mlp([4, 8, 8, 3], nn.Tanh()), id="tanh-output"),
        pytest.param(lambda: mlp([4, 8, 1]), id="linear-output"),
        pytest.param(lambda: [nn.Linear(4, 8), nn.ReLU()], id="relu-output"),
        # Wide enough for the plain products too (narrow results are computed transposed).
        pytest.param(lambda: [nn.Linear(4, 48), nn.ReLU(), nn.Linear(48, 40), nn.ReLU()], id="wide"),
    ],
)
@pytest.mark.parametrize("transposed_input_gradient", [True, False], ids=["transposed", "plain"])
def test_linear_chain_matches_autograd(modules, transposed_input_gradient, monkeypatch) -> None:
    # Both layouts of the narrow input gradient, whichever this machine's CPU picks.
    monkeypatch.setattr(backprop, "TRANSPOSE_NARROW_INPUT_GRADIENT", transposed_input_gradient)
    torch.manual_seed(1)
    layers = nn.Sequential(*modules())
    chain = LinearChain(layers)
    x = torch.randn(16, 4, requires_grad=True)
    reference = layers(x)
    g = torch.randn_like(reference)
    g_before = g.clone()
    expected = torch.autograd.grad(reference, [x, *layers.parameters()], g)
    with torch.no_grad():
        out, tape = chain.forward(x.detach())
    x_grad = chain.backward(tape, g, input_grad=True)  # with autograd on: backward turns it off itself
    assert torch.equal(g, g_before)  # the in-place ReLU backward works on the chain's own tensors only
    torch.testing.assert_close(out, reference.detach())
    torch.testing.assert_close(chain(x.detach()), reference.detach())
    assert x_grad is not None and not x_grad.requires_grad
    torch.testing.assert_close(x_grad, expected[0])
    assert_grads_close([p.grad for p in layers.parameters()], expected[1:])  # type: ignore[misc]


@pytest.mark.parametrize("transposed_input_gradient", [True, False], ids=["transposed", "plain"])
def test_linear_chain_input_columns_are_a_slice_of_the_input_gradient(transposed_input_gradient, monkeypatch) -> None:
    monkeypatch.setattr(backprop, "TRANSPOSE_NARROW_INPUT_GRADIENT", transposed_input_gradient)
    torch.manual_seed(2)
    chain = LinearChain(mlp([6, 40, 1]))
    with torch.no_grad():
        _, tape = chain.forward(torch.randn(16, 6))
        g = torch.randn(16, 1)
        full = chain.backward(tape, g, params=False, input_grad=True)
        action = chain.backward(tape, g, params=False, input_grad=True, input_columns=slice(-2, None))
    assert full is not None and action is not None
    torch.testing.assert_close(action, full[:, -2:])


def test_linear_chain_rejects_what_it_cannot_differentiate() -> None:
    with pytest.raises(TypeError, match="Sigmoid"):
        LinearChain([nn.Linear(2, 2), nn.Sigmoid()])
    with pytest.raises(ValueError, match="need a bias"):
        LinearChain([nn.Linear(2, 2, bias=False)])
    with pytest.raises(ValueError, match="Tanh may only end"):
        LinearChain([nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 2)])


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_target_networks_compute_with_their_own_parameters(algo: str) -> None:
    agent, b = make(algo), batch()
    target = agent.critic_target
    before = target(b.obs, b.action).clone()
    with torch.no_grad():
        for p in agent.critic.parameters():
            p.add_(1.0)  # the online critic moves; its deep copy must not
    torch.testing.assert_close(target(b.obs, b.action), before, rtol=0, atol=0)
    assert not torch.allclose(agent.critic(b.obs, b.action), before)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One torch thread, as a run has by default."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _twin_critic_backwards(
    action_dim: int, rows_of_first: int, coefficient: str
) -> tuple[torch.Tensor, torch.Tensor, float, float]:
    """A twin critic's ∂L/∂action for L = Σ_i g_i min_k Q_k, by :meth:`TwinCritic.min_action_grad` and by the
    masked backward, with the rows split ``rows_of_first`` / the rest; their FLOPs; (Humanoid's 17 observations)."""
    from torch.utils.flop_counter import FlopCounterMode

    from agents.networks import TwinCritic

    torch.manual_seed(rows_of_first + 1000 * action_dim)
    obs_dim, batch_size = 17, 256
    critic = TwinCritic(obs_dim, action_dim, (256, 256))
    obs, action = torch.randn(batch_size, obs_dim), torch.rand(batch_size, action_dim) * 2 - 1
    member = torch.ones(batch_size, 1, dtype=torch.long)
    member[torch.randperm(batch_size)[:rows_of_first]] = 0
    grad: torch.Tensor | float = {
        "number": -1 / batch_size,
        "0-d": torch.tensor(-0.3 / batch_size),
        "per row": -torch.rand(batch_size, 1) / batch_size,
    }[coefficient]
    with torch.no_grad():
        _, tapes = critic.forward_tape(obs, action)
        with FlopCounterMode(display=False) as masked_flops:
            masked = critic.backward(tapes, (member == torch.arange(2).view(2, 1, 1)) * grad, False, True)
        with FlopCounterMode(display=False) as own_flops:
            own = critic.min_action_grad(tapes, member, grad)
    assert masked is not None
    return own, masked, float(own_flops.get_total_flops()), float(masked_flops.get_total_flops())


@pytest.mark.parametrize("action_dim", [2, 3, 6, 17])
@pytest.mark.parametrize("rows_of_first", [0, 1, 3, 7, 8, 9, 100, 128, 255, 256])
@pytest.mark.parametrize("coefficient", ["number", "0-d", "per row"])
@pytest.mark.parametrize("gemm_library", ["onednn", "mkl"])
def test_min_action_grad_is_the_masked_backward_to_the_bit_with_about_half_its_flops(
    action_dim: int, rows_of_first: int, coefficient: str, gemm_library: str, one_thread: None, monkeypatch: MonkeyPatch
) -> None:
    """SAC's actor step back-propagates min_k Q_k: each member on its own rows equals the masked backward of both
    members on the whole batch, bit for bit, on one thread, for every split of the batch (a member with a handful of
    rows included, which MKL rounds otherwise when alone) and action sizes from 2 to Humanoid's 17 (whose last,
    narrow product MKL rounds by a row's place in it), with the wide products in oneDNN or MKL (agents.gemm);
    once both members have 8 rows or more, or one has none, it costs half the masked backward's FLOPs but for
    the narrow product, which each member runs on the whole batch."""
    monkeypatch.setattr(gemm, "USE_ONEDNN", gemm_library == "onednn")
    own, masked, own_flops, masked_flops = _twin_critic_backwards(action_dim, rows_of_first, coefficient)
    assert torch.equal(own, masked)
    narrow = 2 * 256 * 256 * action_dim  # one member's input-gradient product into the action's columns
    if rows_of_first in (0, 256):
        assert own_flops == masked_flops / 2
    elif min(rows_of_first, 256 - rows_of_first) >= 8:
        assert own_flops == masked_flops / 2 + narrow


def test_min_action_grad_on_several_threads_is_still_the_masked_backward() -> None:
    """MKL splits a product's rows between threads, so on more than one a member's own rows would round otherwise
    (9 rows do here): there the masked backward runs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for rows_of_first in (9, 100, 247):
            own, masked, own_flops, masked_flops = _twin_critic_backwards(6, rows_of_first, "per row")
            assert torch.equal(own, masked) and own_flops == masked_flops
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("splits", [(120, 128, 136), (0, 10, 256), (4, 250, 128)])
def test_a_lane_groups_min_action_grad_is_the_masked_backward_on_fewer_rows(splits: tuple[int, ...]) -> None:
    """A lane group's critics (stacked (K, ...) parameters) back-propagate min_k Q_k on each member's rows of every
    lane, padded to the lane with the most: the masked backward's values (to float32 rounding), with each member's
    FLOPs in proportion to its most rows in a lane."""
    from torch.utils.flop_counter import FlopCounterMode

    from agents.networks import TwinCritic

    torch.manual_seed(sum(splits))
    lanes, obs_dim, batch_size = len(splits), 11, 256
    critic = TwinCritic(obs_dim, ACT, (256, 256))
    for param in critic.parameters():  # each lane its own parameters, as agents.lanes stacks them
        param.data = torch.stack([torch.randn_like(param) / param.shape[-1] ** 0.5 for _ in range(lanes)])
    obs, action = torch.randn(lanes, batch_size, obs_dim), torch.rand(lanes, batch_size, ACT) * 2 - 1
    member = torch.ones(lanes, batch_size, 1, dtype=torch.long)
    for lane, rows_of_first in enumerate(splits):
        member[lane, torch.randperm(batch_size)[:rows_of_first]] = 0
    grad = -torch.rand(lanes, batch_size, 1) / batch_size
    with torch.no_grad():
        _, tapes = critic.forward_tape(obs, action)
        with FlopCounterMode(display=False) as masked_flops:
            masked = critic.backward(tapes, (member == torch.arange(2).view(2, 1, 1, 1)) * grad, False, True)
        with FlopCounterMode(display=False) as own_flops:
            own = critic.min_action_grad(tapes, member, grad)
    assert masked is not None
    torch.testing.assert_close(own, masked)
    most = max(splits) + max(batch_size - n for n in splits)  # each member's rows in its fullest lane, summed
    assert own_flops.get_total_flops() == pytest.approx(masked_flops.get_total_flops() * most / (2 * batch_size))
