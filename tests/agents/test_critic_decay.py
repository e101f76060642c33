"""Where the critic's weight decay enters (issue 49): inside the weighted loss (``critic_decay_form``
loss, the default), so that a correction's weight scales it as it scales the TD term, or as Adam's L2
outside the weights (adam, the authors' code), where a weight λ < 1 makes the decay 1/λ times as strong
relative to the TD gradient.

Adam divides each step by the gradient's running scale, so a constant factor on the whole gradient
barely moves a step: with the decay inside the loss, one update under λ is the plain update; with
Adam's L2 it is not."""

from __future__ import annotations

import pytest
import torch

from agents import TrainConfig
from agents.algorithms import make_algorithm
from agents.algorithms.base import DECAY_SHARE, ActorCritic
from agents.config import ConfigError
from agents.corrections import Weights
from tests.support.batches import ACT, OBS, ConstantWeight, batch


def agent(backend: str, form: str, **overrides: object) -> ActorCritic:
    """A DDPG agent whose config names a correction (else the form would not matter and resolve to loss);
    each test passes its own weights to ``update``."""
    config = TrainConfig.make(
        algo="ddpg", correction="acoffpoc", hidden=(32, 32), backend=backend, critic_decay_form=form, **overrides
    )
    torch.manual_seed(0)
    return make_algorithm(config.resolved(), OBS, ACT, torch.Generator().manual_seed(0))


def critic(a: ActorCritic) -> list[torch.Tensor]:
    return [p.detach().clone() for p in a.critic.parameters()]


def close(x: list[torch.Tensor], y: list[torch.Tensor], **tolerance: float) -> bool:
    return all(torch.allclose(p, q, **tolerance) for p, q in zip(x, y, strict=True))


@pytest.mark.parametrize("backend", ["fast", "autograd"])
def test_without_a_weight_both_forms_are_the_same_update(backend: str) -> None:
    """Σ c_i = 1 for the plain mean: the decay in the loss is Adam's L2, to the bit."""
    loss, adam = agent(backend, "loss"), agent(backend, "adam")
    undecayed = agent(backend, "loss", critic_weight_decay=0.0)
    for step in range(4):
        for a in (loss, adam, undecayed):
            a.update(batch(seed=step))
    assert all(torch.equal(p, q) for p, q in zip(critic(loss), critic(adam), strict=True))
    assert not close(critic(loss), critic(undecayed), rtol=0, atol=1e-7)  # the decay is there


def step_of(a: ActorCritic, correction: ConstantWeight | None) -> torch.Tensor:
    """The critic's change over one update, flattened."""
    before = critic(a)
    a.update(batch(seed=1), correction)
    return torch.cat([(p - q).flatten() for p, q in zip(critic(a), before, strict=True)])


@pytest.mark.parametrize("backend", ["fast", "autograd"])
def test_a_weight_scales_the_decay_with_the_loss_in_the_loss_form_only(backend: str) -> None:
    """One update under λ = 0.3 (Adam's first step is g/(|g| + ε), whatever the gradient's scale): with the
    decay in the loss, λ·(g + wd·θ) steps as the plain g + wd·θ does, but for ε; with Adam's L2,
    λ·g + wd·θ leans towards the decay and steps elsewhere (measured: 0.3% and 67% of the step)."""
    weight = ConstantWeight(torch.tensor(0.3))
    for form, most in (("loss", 0.01), ("adam", None)):
        plain, weighted = step_of(agent(backend, form), None), step_of(agent(backend, form), weight)
        apart = float((weighted - plain).norm() / plain.norm())
        assert apart < 0.01 if most else apart > 0.3, (form, apart)


@pytest.mark.parametrize("backend", ["fast", "autograd"])
def test_a_zero_weight_leaves_the_critic_where_it_is_in_the_loss_form(backend: str) -> None:
    zero = ConstantWeight(torch.tensor(0.0))
    for form, moves in (("loss", False), ("adam", True)):
        a = agent(backend, form)
        before = critic(a)
        a.update(batch(seed=2), zero)
        assert (not close(before, critic(a), rtol=0, atol=0)) is moves, form


def test_per_transition_weights_keep_the_decay_of_the_plain_mean() -> None:
    """A normalised per-transition weighting sums to 1: the decay is the plain mean's, whatever the λ_i."""
    small = ConstantWeight(torch.full((32, 1), 1e-3))
    decayed, plain = agent("autograd", "loss"), agent("autograd", "loss")
    decayed.update(batch(seed=3), small)
    plain.update(batch(seed=3))
    assert close(critic(decayed), critic(plain), rtol=1e-5, atol=1e-6)


def test_the_form_is_checked_and_old_stored_configs_read_as_what_they_ran() -> None:
    with pytest.raises(ConfigError, match="unknown critic_decay_form 'l2': choose one of loss, adam"):
        TrainConfig.make(algo="ddpg", critic_decay_form="l2").resolved()
    stored = TrainConfig.make(algo="ddpg", correction="acoffpoc").resolved().to_dict()
    assert stored["critic_decay_form"] == "loss"
    del stored["critic_decay_form"]  # a run stored before the field existed trained with Adam's L2
    assert TrainConfig.from_dict(stored).critic_decay_form == "adam"


@pytest.mark.parametrize(("algo", "correction"), [("td3", "acoffpoc"), ("sac", "acoffpoc"), ("ddpg", "none")])
def test_where_the_form_changes_nothing_it_is_not_stored(algo: str, correction: str) -> None:
    """No decay (TD3, SAC) or no weight (plain DDPG): both forms are the same update, so a run stores no
    form, as runs did before the field existed; old and new runs of one method stay one method (tables
    pool their seeds, a sweep does not queue them again)."""
    for form in ("loss", "adam"):
        config = TrainConfig.make(algo=algo, correction=correction, critic_decay_form=form).resolved()
        assert config.critic_decay_form == "loss" and "critic_decay_form" not in config.to_dict()
        assert TrainConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize("backend", ["fast", "autograd"])
def test_the_decay_share_shows_what_a_weight_does_to_the_decay(backend: str) -> None:
    """‖d‖ / (‖g‖ + ‖d‖): the plain update's in both forms; under λ = 0.3 the same in the loss form (λ scales
    both terms), higher with Adam's L2 (λ shrinks g alone): d / (λ‖g‖ + d)."""
    weight = ConstantWeight(torch.tensor(0.3))
    share = {}
    for form in ("loss", "adam"):
        for name, correction in (("plain", None), ("weighted", weight)):
            logged = agent(backend, form).update(batch(seed=1), correction).logged
            share[form, name] = float(logged[DECAY_SHARE.name])
    plain = share["loss", "plain"]
    assert 0 < plain < 1 and share["adam", "plain"] == pytest.approx(plain, rel=1e-5)
    assert share["loss", "weighted"] == pytest.approx(plain, rel=1e-5)
    g, d = 1 - plain, plain  # in units of ‖g‖ + ‖d‖
    assert share["adam", "weighted"] == pytest.approx(d / (0.3 * g + d), rel=1e-4)


def test_no_decay_no_decay_share() -> None:
    assert DECAY_SHARE.name not in agent("fast", "loss", critic_weight_decay=0.0).update(batch(seed=1)).logged


class Unnormalised(ConstantWeight):
    """Per-transition weights taken as L = mean_i λ_i ℓ_i (importance weights), not a weighted mean."""

    def weights(self, batch: object, agent: object) -> Weights:
        return Weights(self.value, self.value, {}, normalised=False)


def critic_gradient(a: ActorCritic, correction: ConstantWeight) -> list[torch.Tensor]:
    """The gradient the critic's Adam receives in one update."""
    seen: list[list[torch.Tensor]] = []
    step = a.critic_step

    def spy() -> None:
        seen.append([p.grad.clone() for p in a.critic.parameters()])  # type: ignore[union-attr]
        step()

    a.critic_step = spy  # type: ignore[method-assign,assignment]
    a.update(batch(seed=4), correction)
    return seen[0]


@pytest.mark.parametrize(
    ("correction", "total"),
    [
        (ConstantWeight(torch.zeros(32, 1)), 0.0),  # a weighted mean of nothing: no loss, no decay
        (ConstantWeight(torch.full((32, 1), 1e-3)), 1.0),  # a weighted mean: Σ c_i = 1 whatever the λ_i
        (Unnormalised(torch.full((32, 1), 0.25)), 0.25),  # mean_i λ_i ℓ_i: Σ c_i = mean λ_i
    ],
)
def test_per_transition_weights_scale_the_decay_by_their_total(correction: ConstantWeight, total: float) -> None:
    """The decay's part of the critic's gradient is (Σ_i c_i)·wd·θ: the gradient with the decay less the
    same update's without it."""
    decayed, undecayed = agent("autograd", "loss"), agent("autograd", "loss", critic_weight_decay=0.0)
    theta = [p.detach().clone() for p in decayed.critic.parameters()]
    with_decay, without = critic_gradient(decayed, correction), critic_gradient(undecayed, correction)
    for g, h, t in zip(with_decay, without, theta, strict=True):
        torch.testing.assert_close(g - h, total * 0.01 * t, rtol=1e-4, atol=1e-7)
