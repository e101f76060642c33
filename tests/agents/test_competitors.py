"""The paper's competitors (docs/competitors.md): densities, RIS-Off-PAC, IPG and ACE, their invariants and runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agents import ConfigError, RecordingSink, TrainConfig, Trainer, plugins
from agents.algorithms import TD3Options
from agents.corrections import CorrectionSettings, make_correction
from agents.corrections.behaviour import RANDOM_PHASE
from agents.corrections.densities import (
    clipped_ratio,
    deterministic_log_prob,
    deterministic_log_ratio,
    squashed_log_prob,
    stochastic_log_ratio,
    uniform_log_density,
)
from agents.corrections.ris import relative_weight
from agents.replay import Batch, ReplayBuffer
from tests.support.batches import ACT, B, agent, batch, params, same

STD = 0.1


def with_behaviour(b: Batch, mean: torch.Tensor, log_std: torch.Tensor, random: float = 0.0) -> Batch:
    return b._replace(behaviour_mean=mean, behaviour_log_std=log_std, extra={RANDOM_PHASE: torch.full((B, 1), random)})


def own_batch(a, seed: int = 0) -> Batch:  # type: ignore[no-untyped-def]
    """Transitions the current policy would have collected: log ρ = 0 exactly."""
    b = batch(seed)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        if a.policy_kind == "deterministic":
            mean = a.actor(b.obs)
            log_std = torch.full_like(mean, math.log(STD))
            action = (mean + STD * torch.randn(mean.shape, generator=g)).clamp(-1, 1)
        else:
            mean, log_std = a.actor(b.obs)
            action = torch.tanh(mean + log_std.exp() * torch.randn(mean.shape, generator=g))
    return with_behaviour(b._replace(action=action), mean, log_std)


def off_batch(a, seed: int = 0) -> Batch:  # type: ignore[no-untyped-def]
    """The same transitions, collected by a behaviour 0.3 away from the current policy's mean: ρ ≠ 1."""
    b = own_batch(a, seed)
    assert b.behaviour_mean is not None
    return b._replace(behaviour_mean=b.behaviour_mean + 0.3)


def correction(name: str, algo: str, **options):  # type: ignore[no-untyped-def]
    config = TrainConfig.make(algo=algo, correction=name, hidden=(32, 32), **options).resolved()
    kind = "deterministic" if algo != "sac" else "stochastic"
    return make_correction(name, CorrectionSettings(kind, config=config))


# ---- densities -----------------------------------------------------------------------------------
def test_log_ratio_is_zero_when_the_behaviour_is_the_current_policy() -> None:
    g = torch.Generator().manual_seed(0)
    action, output = torch.rand(B, ACT, generator=g) * 2 - 1, torch.rand(B, ACT, generator=g) * 2 - 1
    assert torch.equal(deterministic_log_ratio(action, output, output, STD), torch.zeros(B, 1))
    mean, log_std = torch.randn(B, ACT, generator=g), torch.randn(B, ACT, generator=g).clamp(-2, 0)
    assert torch.equal(stochastic_log_ratio(action, mean, log_std, mean, log_std), torch.zeros(B, 1))


def test_deterministic_log_ratio_is_the_gaussian_density_ratio() -> None:
    g = torch.Generator().manual_seed(1)
    action, old, new = (torch.randn(B, ACT, generator=g) * 0.3 for _ in range(3))
    normal = torch.distributions.Normal
    expected = (normal(new, STD).log_prob(action) - normal(old, STD).log_prob(action)).sum(-1, keepdim=True)
    torch.testing.assert_close(deterministic_log_ratio(action, old, new, STD), expected, rtol=1e-4, atol=1e-3)
    own = normal(new, STD).log_prob(action).sum(-1, keepdim=True)
    torch.testing.assert_close(deterministic_log_prob(action, new, STD), own, rtol=1e-5, atol=1e-4)


def test_squashed_density_with_its_jacobian_is_torch_distributions() -> None:
    g = torch.Generator().manual_seed(2)
    mean, log_std = torch.randn(B, ACT, generator=g), torch.randn(B, ACT, generator=g).clamp(-2, 0)
    base = torch.distributions.Normal(mean, log_std.exp())
    squashed = torch.distributions.TransformedDistribution(base, [torch.distributions.TanhTransform()])
    action = squashed.sample()
    action = action.clamp(-1 + 1e-4, 1 - 1e-4)
    expected = squashed.log_prob(action).sum(-1, keepdim=True)
    torch.testing.assert_close(squashed_log_prob(action, mean, log_std, jacobian=True), expected, rtol=1e-4, atol=1e-3)


def test_start_phase_density_and_the_ranges_of_the_ratios() -> None:
    assert uniform_log_density(3) == pytest.approx(-3 * math.log(2))
    extreme = torch.tensor([[-1e4], [-1.0], [0.0], [1.0], [1e4], [math.inf], [-math.inf], [math.nan]])
    rho_bar, w = clipped_ratio(extreme), relative_weight(extreme, 0.2)
    assert torch.isfinite(rho_bar).all() and torch.isfinite(w).all()
    assert (rho_bar >= 0).all() and (rho_bar <= 2).all() and (w >= 0).all() and (w <= 5).all()
    assert rho_bar[2] == 1 and w[2] == 1 and rho_bar[4] == 2 and w[4] == pytest.approx(5.0)
    rho = torch.tensor([[0.5], [3.0]])
    torch.testing.assert_close(relative_weight(rho.log(), 0.2), rho / (0.2 * rho + 0.8))


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_start_phase_transitions_compare_with_the_uniform_density(algo: str) -> None:
    a = agent(algo, backend="autograd")
    ris = correction("ris-off-pac", algo)
    b = own_batch(a)
    random = b._replace(extra={RANDOM_PHASE: torch.ones(B, 1)})
    with torch.no_grad():
        if algo == "sac":
            mean, log_std = a.actor(b.obs)
            log_pi = squashed_log_prob(b.action, mean, log_std, jacobian=True)
        else:
            log_pi = deterministic_log_prob(b.action, a.actor(b.obs), STD)
    torch.testing.assert_close(ris.log_ratio(random, a), log_pi + ACT * math.log(2))
    assert torch.equal(ris.log_ratio(b, a), torch.zeros(B, 1))


# ---- each leaves the baseline where the spec says ------------------------------------------------
def step_both(algo: str, name: str, b: Batch, backend: str = "fast", **options):  # type: ignore[no-untyped-def]
    plain, corrected = agent(algo, backend=backend), agent(algo, backend=backend)
    plain.updates = corrected.updates = 1  # TD3: the actor steps
    plain.update(b)
    corrected.update(b, correction(name, algo, **options))
    return plain, corrected


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_ris_and_ace_with_unit_ratios_and_ipg_on_replay_are_the_baseline_bit_for_bit(algo: str) -> None:
    a = agent(algo)
    b = own_batch(a)
    stored = {"ris_ratio": "stored"}  # sampled draws from the agent's generator: w = 1 tested on its own
    for name, options in (("ris-off-pac", stored), ("ris-off-pac", {**stored, "ris_apply_to": "actor+critic"}),
                          ("ris-off-pac", {**stored, "ris_weighting": "normalised"}),
                          ("ipg", {"ipg_state_source": "replay"}), ("ace", {})):  # fmt: skip
        plain, corrected = step_both(algo, name, b, **options)
        assert same(params(plain.actor), params(corrected.actor)), name
        assert same(params(plain.critic), params(corrected.critic)), name


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_ris_ratio_at_a_fresh_action_is_on_average_at_least_one(algo: str) -> None:
    """``ris_ratio=sampled``: log ρ at a ~ π averages KL(π‖μ) ≥ 0, where at the stored action (a ~ μ) it
    averages −KL(μ‖π) ≤ 0; the draw comes from the agent's generator; the ESS of w is logged."""
    a, behaviour = agent(algo), agent(algo)
    with torch.no_grad():  # an earlier policy: the current one's parameters, moved
        for p in behaviour.actor.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    b = own_batch(behaviour)  # actions drawn from the behaviour μ
    stored = correction("ris-off-pac", algo, ris_ratio="stored")
    sampled = correction("ris-off-pac", algo)  # the default
    assert float(sampled.log_ratio(b, a, sampled=True).mean()) > 0 > float(stored.log_ratio(b, a).mean())
    g = a.generator.get_state()
    first = sampled.weights(b, a)
    a.generator.set_state(g)
    assert torch.equal(first.actor, sampled.weights(b, a).actor)  # the run's generator, reproducible
    assert first.critic is None  # the actor's loss alone
    ess = float(first.logged["ris_ess"])
    assert 1.0 <= ess <= B
    own = own_batch(a)  # behaviour = the current policy: w = 1 exactly, wherever ρ is evaluated
    assert torch.equal(sampled.weights(own, a).actor, torch.ones(B, 1))


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_ris_weights_the_actor_loss_only_and_by_w(algo: str) -> None:
    a = agent(algo)
    b = off_batch(a)
    plain, corrected = step_both(algo, "ris-off-pac", b, ris_ratio="stored")  # sampled: its draw moves TD3's noise
    assert same(params(plain.critic), params(corrected.critic))  # the critic is the baseline's
    assert not same(params(plain.actor), params(corrected.actor))
    w = relative_weight(correction("ris-off-pac", algo).log_ratio(b, agent(algo)), 0.2)
    assert float(w.min()) < 0.9 or float(w.max()) > 1.1
    normalised = correction("ris-off-pac", algo, ris_weighting="normalised").weights(b, agent(algo))
    assert normalised.normalised and not correction("ris-off-pac", algo).weights(b, agent(algo)).normalised
    normalised_step = step_both(algo, "ris-off-pac", b, ris_weighting="normalised", ris_ratio="stored")[1]
    assert not same(params(corrected.actor), params(normalised_step.actor))  # Σwℓ/Σw, not mean wℓ


def ipg_actor_states(**options: object) -> tuple[list[torch.Tensor], Trainer]:
    """The states IPG's actor trained on at every actor step of a short TD3 run."""
    config = TrainConfig.make(algo="td3", env_id="Pendulum-v1", correction="ipg", hidden=(32, 32), total_steps=300,
                         start_steps=100, batch_size=16, eval_freq=300, eval_episodes=1, **options)  # type: ignore[arg-type]  # fmt: skip
    trainer = Trainer(config, RecordingSink())
    seen: list[torch.Tensor] = []
    states = trainer.correction.actor_states
    trainer.correction.actor_states = lambda b: seen.append(states(b)) or seen[-1]  # type: ignore[method-assign]
    trainer.run()
    assert len(seen) == 100  # one per actor step (TD3: every other update)
    return seen, trainer


def test_ipg_trains_the_actor_on_states_drawn_from_its_on_policy_window() -> None:
    seen, trainer = ipg_actor_states(ipg_window=40)
    window = {tuple(row) for row in trainer.buffer.recent(40).obs.numpy()}
    last = [tuple(row) for row in seen[-1].numpy()]
    assert len(last) == 16 and set(last) <= window
    assert set(last) != {tuple(row) for row in trainer.buffer.recent(16).obs.numpy()}  # drawn, not the newest 16
    assert len(set(last)) > 8  # uniform over 40 with replacement: rarely this few distinct
    seen, trainer = ipg_actor_states(ipg_state_source="recent")  # the first form: exactly the B newest
    np.testing.assert_array_equal(seen[-1].numpy(), trainer.buffer.recent(16).obs.numpy())


def test_sampling_the_newest_transitions_is_uniform_across_wrap_around() -> None:
    buffer = ReplayBuffer(50, 1, 1)
    for step in range(120):  # episodes of 10: each adds a final-observation slot that starts no transition
        end = step % 10 == 9
        buffer.add(np.array([step], np.float32), np.zeros(1), 0.0, np.array([step + 1], np.float32), False, end)
    newest = buffer.recent_slots(30)
    assert [int(buffer.obs[s, 0]) for s in newest] == list(range(119, 89, -1))  # newest first, across the wrap
    drawn = buffer.sample_recent(30_000, 30, torch.Generator().manual_seed(0)).obs[:, 0].numpy().astype(int)
    counts = np.bincount(drawn - 90, minlength=30)
    assert counts.min() > 800 and counts.max() < 1200  # 1,000 each expected


def test_ipg_refuses_nu_below_one_and_bad_options_are_one_line() -> None:
    bad = [({"ipg_nu": 0.5}, "only ν = 1"), ({"ris_beta": 1.5}, "ris_beta"), ({"pg_form": "x"}, "pg_form"),
           ({"ace_lambda1": 1.5}, "ace_lambda1"), ({"geoff_gamma_hat": 1.0}, "geoff_gamma_hat"),
           ({"trace_window": 0}, "trace_window"), ({"geoff_m2_baseline": "median"}, "geoff_m2_baseline"),
           ({"geoff_m2": "two"}, "geoff_m2"), ({"geoff_traces": "stale"}, "geoff_traces"),
           ({"ipg_window": 0}, "ipg_window"), ({"ipg_state_source": "newest"}, "ipg_state_source"),
           ({"pg_form": "dpgis"}, "pg_form must be one of dpg, dpg-is, lr")]  # fmt: skip
    for options, message in bad:
        group = plugins.group_of(next(iter(options)))
        assert group is not None
        owner = plugins.owners(group)[0].name  # a run that takes the option
        with pytest.raises(ConfigError, match=message) as error:
            TrainConfig.make(correction=owner, **options).resolved()
        assert "is an option of" not in str(error.value)


# ---- ACE: ρ̄-weighted policy gradient (dpg), or the likelihood-ratio one (lr) -------------------------
@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_ace_at_lambda1_zero_is_the_baseline_and_dpg_is_weights_by_rho_bar(algo: str) -> None:
    """The DPG form samples no action, so no ratio corrects one: ACE at λ₁ = 0 (M ≡ 1) is the baseline,
    bit for bit, on the most off-policy batch; ``dpg-is`` keeps ρ̄ as importance weights, on the fast backend."""
    assert TrainConfig.make(algo=algo, correction="ace").resolved().backend == "fast"
    a = agent(algo)
    b = off_batch(a)
    plain, corrected = step_both(algo, "ace", b)
    assert same(params(plain.critic), params(corrected.critic)) and same(params(plain.actor), params(corrected.actor))
    ace = correction("ace", algo, pg_form="dpg-is")
    a.updates = 1
    with torch.no_grad():
        w = ace.weights(b, a)
    rho_bar = clipped_ratio(correction("ris-off-pac", algo).log_ratio(b, agent(algo)))
    assert w.critic is None and not w.normalised  # the critic is the baseline's; ρ̄ are importance weights
    torch.testing.assert_close(w.actor, rho_bar)
    assert float(rho_bar.min()) < 0.9
    plain, corrected = step_both(algo, "ace", b, pg_form="dpg-is")
    assert same(params(plain.critic), params(corrected.critic))
    assert not same(params(plain.actor), params(corrected.actor))
    # The same step with autograd: L = (1/B) Σ ρ̄_i ℓ_i written as a loss.
    graph = step_both(algo, "ace", b, backend="autograd", pg_form="dpg-is")[1]
    for x, y in zip(params(graph.actor), params(corrected.actor)):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("algo", ["td3", "sac"])
def test_ace_lr_is_off_pac_its_critic_is_the_baselines_and_it_trains_with_autograd(algo: str) -> None:
    assert TrainConfig.make(algo=algo, correction="ace", pg_form="lr").resolved().backend == "autograd"
    with pytest.raises(ConfigError, match="writes its own actor loss"):
        TrainConfig.make(algo=algo, correction="ace", pg_form="lr", backend="fast").resolved()
    a = agent(algo, backend="autograd")
    b = off_batch(a)
    plain, corrected = step_both(algo, "ace", b, backend="autograd", pg_form="lr")
    assert same(params(plain.critic), params(corrected.critic))
    assert not same(params(plain.actor), params(corrected.actor))


def test_ace_actor_loss_is_the_off_pac_loss_and_its_gradient_the_closed_form() -> None:
    a = agent("td3", backend="autograd")
    a.updates = 1
    ace = correction("ace", "td3", pg_form="lr")
    b = off_batch(a)
    a.update(b)  # gives the agent this batch's critic target
    with torch.no_grad():
        ace.weights(b, a)
        y = a.last_target
        signal = y - a.critic(b.obs, a.actor(b.obs), first_only=True)[0]
        rho_bar = clipped_ratio(deterministic_log_ratio(b.action, b.behaviour_mean, a.actor(b.obs), STD))
    loss = ace.actor_loss(a, b.obs, b)
    output = a.actor(b.obs)
    expected = -(rho_bar * signal) * deterministic_log_prob(b.action, output, STD)
    torch.testing.assert_close(loss, expected)
    # ∂L/∂π(s_i) = −ρ̄_i ŝ_i (a_i − π(s_i))/σ² per sample, through the actor.
    out = a.actor(b.obs)
    grad_out = torch.autograd.grad((-(rho_bar * signal) * deterministic_log_prob(b.action, out, STD)).sum(), out)[0]
    torch.testing.assert_close(grad_out, -(rho_bar * signal) * (b.action - out.detach()) / STD**2)


def test_the_likelihood_ratio_gradient_matches_the_dpg_gradient_on_a_quadratic_q() -> None:
    """On-policy samples, Q(s, a) = −‖a − a*‖²: E[(Q − V) ∇ log π] = ∇_π Q(s, π(s)) up to O(σ²), within MC error."""
    torch.manual_seed(0)
    d, n = 2, 200_000
    pi, target = torch.tensor([0.2, -0.1], requires_grad=True), torch.tensor([0.5, 0.3])
    a = pi.detach() + STD * torch.randn(n, d)
    q = -(a - target).square().sum(-1, keepdim=True)
    v = -(pi.detach() - target).square().sum() - d * STD**2  # E[Q] under N(π, σ²I)
    lr = torch.autograd.grad((-(q - v) * deterministic_log_prob(a, pi.expand(n, d), STD)).mean(), pi)[0]
    dpg = torch.autograd.grad((pi - target).square().sum(), pi)[0]  # −∇Q, the DPG loss's gradient
    standard_error = float(((q - v) * (a - pi.detach()) / STD**2).std(0).max()) / math.sqrt(n)
    torch.testing.assert_close(lr, dpg, rtol=0, atol=4 * standard_error)


# ---- real runs -----------------------------------------------------------------------------------
FAST = dict(
    env_id="Hopper-v4",
    hidden=(64, 64),
    batch_size=64,
    start_steps=250,
    eval_freq=500,
    eval_episodes=2,
    stats_every=250,
)
SHORT = dict(total_steps=1000, correction_start=500)
"""750 updates, the correction's from the update in step 500 on."""


@pytest.mark.parametrize("name", ["ace", "geoff-pac", "ipg", "ris-off-pac"])
@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_smoke_a_thousand_steps(algo: str, name: str) -> None:
    sink = RecordingSink()
    config = TrainConfig.make(algo=algo, correction=name, **SHORT, **FAST)  # type: ignore[arg-type]
    smoke(config, sink, name)


def test_ace_with_an_emphasis_runs_and_logs_it() -> None:
    sink = RecordingSink()
    config = TrainConfig.make(algo="sac", correction="ace", ace_lambda1=0.5, trace_window=4, **SHORT, **FAST)  # type: ignore[arg-type]
    smoke(config, sink, "ace-emphatic")
    assert sink.quantity_values("ace_m")[:, 0].max() > 1.0  # summaries per update: mean, min, max, ...


@pytest.mark.parametrize("name", ["ace", "geoff-pac", "ris-off-pac"])
def test_a_correction_of_the_actor_alone_sits_out_td3s_critic_only_updates(name: str) -> None:
    """TD3 steps its actor every other update; ACE, Geoff-PAC (C included) and RIS-Off-PAC's actor weights
    serve that step alone, so the updates between are the plain ones and cost nothing extra."""
    config = TrainConfig.make(algo="td3", correction=name, total_steps=600, start_steps=200, **FAST_SHORT)  # type: ignore[arg-type]
    trainer = Trainer(config)
    calls: list[int] = []
    weights = trainer.correction.weights
    trainer.correction.weights = lambda b, a: calls.append(a.updates) or weights(b, a)  # type: ignore[method-assign]
    trainer.run()
    assert trainer.agent.updates == 400 and calls == list(range(2, 401, 2))
    if name == "geoff-pac":
        assert trainer.correction.fits == 200  # type: ignore[attr-defined]
    both = TrainConfig.make(algo="td3", correction="ris-off-pac", ris_apply_to="actor+critic").resolved()
    assert not make_correction("ris-off-pac", CorrectionSettings("deterministic", config=both)).actor_only


FAST_SHORT = dict(env_id="Pendulum-v1", hidden=(32, 32), eval_freq=600, eval_episodes=1, stats_every=200)


def smoke(config: TrainConfig, sink: RecordingSink, name: str) -> None:
    """A short run finishes with finite numbers, and logs each of its quantities at every update from the
    correction's start where an actor step is (TD3: every other update; its corrections of the actor alone
    skip the rest)."""
    result = Trainer(config, sink).run()
    assert result.status == "finished" and result.updates == config.total_steps - config.start_steps
    assert all(np.isfinite(e.return_mean) for e in sink.evals)
    assert all(np.isfinite(s.critic_loss) for s in sink.stats if s.critic_loss is not None)
    own = {"at_bound", "eval_at_bound", "decay_share"}  # the algorithm's own quantities: tested elsewhere
    logged = {b.quantity.name for b in sink.blocks} - own
    expected = {
        "ace": {"rho_bar"},
        "ace-emphatic": {"rho_bar", "ace_m"},
        "geoff-pac": {"rho_bar", "geoff_c", "geoff_m1"},
        "ipg": set(),
        "ris-off-pac": {"ris_w", "ris_ess"},
    }
    assert logged == expected[name]
    for block in sink.blocks:  # M1 is unbounded: its range is the histogram's only
        if block.quantity.name not in ("geoff_m1", "ace_m"):
            assert np.all((block.values >= block.quantity.low) & (block.values <= block.quantity.high))
    start = config.correction_start
    for quantity in logged:  # every update from the correction's start (the one in its step) logged its values
        steps = np.concatenate([block.steps for block in sink.blocks if block.quantity.name == quantity])
        every = config.option(TD3Options).policy_delay if config.algo == "td3" else 1
        assert steps[-1] == config.total_steps and np.all(np.diff(steps) == every)
        assert start <= steps[0] < start + every


def test_a_competitors_runs_have_no_divergence_so_they_meet_the_published_curves() -> None:
    """The published competitor curves import with divergence None; `offpoc run` records its runs alike."""
    from offpoc_tui.specs import RunRequest, build_specs

    request = RunRequest("td3", "Hopper-v4", "ris-off-pac", [0, 1], {"divergence": None}, {}, True, None)
    specs = build_specs(request)
    assert [(s.correction, s.divergence) for s in specs] == [("none", None), ("ris-off-pac", None)] * 2
    assert specs[1].name == "td3-Hopper-v4-ris-off-pac" and specs[1].config["ris_beta"] == 0.2


# ---- Geoff-PAC ---------------------------------------------------------------------------------
def test_geoff_pac_traces_equal_the_online_recursion_along_a_trajectory() -> None:
    """Windows as long as the episode so far give DeepRL's online F1/M1 and F2/M2 (per ∇log π term)."""
    from agents.corrections.traces import traces

    g = torch.Generator().manual_seed(3)
    length, gamma, gamma_hat, lambda1, lambda2 = 12, 0.99, 0.2, 0.7, 0.6
    rho = torch.rand(length, generator=g, dtype=torch.float64) * 2
    c = torch.rand(length, generator=g, dtype=torch.float64) * 2
    f1, f2 = torch.zeros((), dtype=torch.float64), torch.zeros(length, dtype=torch.float64)
    for t in range(length):
        # Online (GeoffPAC_agent.geoff_pac_update): F1_t = γ ρ̄_{t−1} F1_{t−1} + c̄_t; F2 over the ∇log π of each step.
        f1 = gamma * rho[t - 1] * f1 + c[t] if t else c[t]
        i_t = torch.zeros(length, dtype=torch.float64)
        if t:
            i_t[t - 1] = c[t - 1] * rho[t - 1]
            f2 = gamma_hat * rho[t - 1] * f2 + i_t
        m2 = (1 - lambda2) * i_t + lambda2 * f2  # the coefficient of each ∇log π(a_j|s_j), γ̂V(s_t) aside
        window = length  # longer than the history: column k holds step t − k where it exists
        rows = [t - k for k in range(window + 1)]
        rho_row = torch.tensor([[rho[j] if j >= 0 else 7.0 for j in rows]], dtype=torch.float64)
        c_row = torch.tensor([[c[j] if j >= 0 else 7.0 for j in rows]], dtype=torch.float64)
        valid = torch.tensor([[j >= 0 for j in rows[1:]]])
        m1, kappa = traces(rho_row, c_row, valid, gamma, gamma_hat, lambda1, lambda2)
        torch.testing.assert_close(m1[0, 0], (1 - lambda1) * c[t] + lambda1 * f1)
        expected = torch.tensor([m2[t - k] if t - k >= 0 else 0.0 for k in range(1, window + 1)], dtype=torch.float64)
        torch.testing.assert_close(kappa[0], expected)


def test_geoff_pac_windows_stop_at_episode_starts_wrap_around_and_overwritten_slots() -> None:
    from agents.corrections.traces import EPISODE_START, STEP, windows

    buffer = ReplayBuffer(20, 1, ACT, fields={STEP: 1, EPISODE_START: 1})
    episode_of: dict[int, int] = {}
    step = 0
    for episode, length in enumerate(
        (5, 9, 7, 6)
    ):  # 27 transitions + 4 final observations in 20 slots: wraps, overwrites
        for t in range(length):
            end = t == length - 1
            extra = {STEP: float(step), EPISODE_START: float(t == 0)}
            buffer.add(np.array([step], np.float32), np.zeros(ACT), 0.0, np.array([step + 1], np.float32), False, end,
                       extra=extra)  # fmt: skip
            episode_of[step] = episode
            step += 1
    stored = np.flatnonzero(buffer.starts_transition[: buffer.filled])
    slots, valid = windows(buffer, stored, 8)
    step_of_slot = buffer.obs[:, 0].astype(int)  # obs = the transition's step
    alive = {int(step_of_slot[s]) for s in stored}
    for row, slot in enumerate(stored):
        t = int(step_of_slot[slot])
        for k in range(1, 9):
            should = all(t - j in alive and episode_of[t - j] == episode_of[t] for j in range(1, k + 1))
            assert valid[row, k - 1] == should, (t, k)
            if should:
                assert step_of_slot[slots[row, k - 1]] == t - k
    assert valid.any() and not valid.all()


def geoff_trainer(algo: str = "td3", **options: object) -> Trainer:
    """A Geoff-PAC run of 300 Pendulum steps, its buffer full of windows."""
    config = TrainConfig.make(algo=algo, correction="geoff-pac", env_id="Pendulum-v1", hidden=(32, 32), total_steps=300,
                         start_steps=100, batch_size=32, eval_freq=300, eval_episodes=1, **options)  # type: ignore[arg-type]  # fmt: skip
    trainer = Trainer(config)
    trainer.run()
    return trainer


def next_actor_step(a) -> None:  # type: ignore[no-untyped-def]
    """Count the agent's updates on to one where TD3 steps its actor (every other)."""
    a.updates = 2 * (a.updates // 2 + 1)
    assert a.actor_due()


def unit_density_ratio(geoff) -> None:  # type: ignore[no-untyped-def]
    """C ≡ 1: a zero last layer and softplus(bias) = 1."""
    with torch.no_grad():
        geoff.c.net[-1].weight.zero_()
        geoff.c.net[-1].bias.fill_(math.log(math.e - 1))


def ace_like(trainer: Trainer, lambda1: float):  # type: ignore[no-untyped-def]
    config = trainer.config.replace(correction="ace", ace_lambda1=lambda1)
    ace = make_correction("ace", CorrectionSettings("deterministic", config=config))
    ace.attach(trainer.agent, trainer.buffer)
    return ace


def per_sample_actor_loss(correction, a, b: Batch) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """A correction's per-sample actor loss: its own, or its weights on the baseline's."""
    with torch.no_grad():
        weights = correction.weights(b, a)
    if correction.overrides_actor_loss:
        return correction.actor_loss(a, b.obs, b)
    return a.actor_loss(b.obs) if weights.actor is None else weights.actor * a.actor_loss(b.obs)


@pytest.mark.parametrize("pg_form", ["dpg", "dpg-is", "lr"])
@pytest.mark.parametrize("lambda1", [0.0, 0.7])
def test_geoff_pac_without_gamma_hat_and_with_c_one_is_ace(lambda1: float, pg_form: str) -> None:
    """γ̂ = 0 (no M2) and C ≡ 1 leave M1 = (1 − λ₁) + λ₁ F with c ≡ 1: ACE(λ₁)'s loss, sample by sample
    (at λ₁ = 0, Off-PAC's), in either form."""
    trainer = geoff_trainer(geoff_gamma_hat=0.0, geoff_lambda1=lambda1, pg_form=pg_form, geoff_traces="fresh")
    geoff, a = trainer.correction, trainer.agent
    unit_density_ratio(geoff)
    ace = ace_like(trainer, lambda1)
    b = trainer.buffer.sample(32, torch.Generator().manual_seed(0))
    a.update(b)  # the agent's critic target for this batch
    next_actor_step(a)
    with torch.no_grad():
        logged = geoff.weights(b, a).logged
    torch.testing.assert_close(per_sample_actor_loss(geoff, a, b), per_sample_actor_loss(ace, a, b))
    if lambda1:  # the traces ran over real windows: the emphasis is not 1 everywhere
        assert float((logged["geoff_m1"] - 1).abs().max()) > 1e-3


@pytest.mark.parametrize("baseline", ["state", "mean"])
@pytest.mark.parametrize("pg_form", ["dpg", "lr"])
def test_geoff_pac_m2_baseline_cancels_m2_when_v_is_the_same_everywhere(pg_form: str, baseline: str) -> None:
    """``geoff_m2_baseline=state`` subtracts V(s_{i−k}) from V(s_i) in M2, ``mean`` the others' mean V: with
    a critic that gives every state the same value, M2 vanishes and, with C ≡ 1, the loss is ACE(λ₁)'s; the
    method's own M2 (``none``) does not vanish."""
    trainer = geoff_trainer(pg_form=pg_form, geoff_traces="fresh", geoff_m2="one", geoff_m2_baseline=baseline)
    geoff, a = trainer.correction, trainer.agent
    b = trainer.buffer.sample(32, torch.Generator().manual_seed(0))
    a.update(b)  # the critic target for this batch; then V(s) = Q₁'s bias everywhere and C ≡ 1
    with torch.no_grad():
        for member in a.critic.members:  # type: ignore[union-attr]
            member[-1].weight.zero_()
    unit_density_ratio(geoff)
    ace = ace_like(trainer, trainer.config.to_dict()["geoff_lambda1"])
    next_actor_step(a)
    expected = per_sample_actor_loss(ace, a, b)
    torch.testing.assert_close(per_sample_actor_loss(geoff, a, b), expected)
    geoff.baseline = "none"
    assert float((per_sample_actor_loss(geoff, a, b) - expected).detach().abs().max()) > 1e-3


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_geoff_pac_without_m2_is_a_weight_on_the_baselines_loss_and_trains_fast(algo: str) -> None:
    """The default (dpg, no M2): M1_i as importance weights on the baseline's actor loss (dpg-is: ρ̄_i M1_i),
    the fast backend; the M2 term (or the lr form) is a loss of its own, differentiated by autograd."""
    assert TrainConfig.make(algo=algo, correction="geoff-pac").resolved().backend == "fast"
    for options in ({"geoff_m2": "one"}, {"pg_form": "lr"}):
        assert TrainConfig.make(algo=algo, correction="geoff-pac", **options).resolved().backend == "autograd"  # type: ignore[arg-type]
    trainer = geoff_trainer(algo)
    geoff, a = trainer.correction, trainer.agent
    assert not geoff.overrides_actor_loss
    b = trainer.buffer.sample(32, torch.Generator().manual_seed(4))
    next_actor_step(a)
    with torch.no_grad():
        w = geoff.weights(b, a)
    assert w.critic is None and not w.normalised
    torch.testing.assert_close(w.actor, w.logged["geoff_m1"])
    geoff.action_ratio = True  # dpg-is
    with torch.no_grad():
        w = geoff.weights(b, a)
    torch.testing.assert_close(w.actor, geoff.rho_bar * w.logged["geoff_m1"])


def test_geoff_pac_caches_each_slots_ratios_at_its_replay_and_its_traces_read_them() -> None:
    """``geoff_traces=cached``: a replayed slot's ρ̄ and c̄ are written back; a slot never replayed holds 1 (on-policy
    when collected); where every cached value is current, the traces are the ``fresh`` ones."""
    from agents.corrections.geoff_pac import C_CACHE, RHO_CACHE

    trainer = geoff_trainer(geoff_m2="one")
    geoff, a, buffer = trainer.correction, trainer.agent, trainer.buffer
    stored = np.flatnonzero(buffer.starts_transition[: buffer.filled])
    assert np.any(buffer.extra[RHO_CACHE][stored, 0] != 1.0) and np.any(buffer.extra[RHO_CACHE][stored, 0] == 1.0)
    b = buffer.sample(32, torch.Generator().manual_seed(1))
    next_actor_step(a)
    with torch.no_grad():
        cached = geoff.weights(b, a).logged
    np.testing.assert_array_equal(buffer.extra[RHO_CACHE][b.slots], geoff.rho_bar.numpy())  # type: ignore[index]
    np.testing.assert_array_equal(buffer.extra[C_CACHE][b.slots], cached["geoff_c"].numpy())  # type: ignore[index]
    with torch.no_grad():  # bring every slot's cache up to date, as a replay of it would
        everything = buffer.gather(stored)
        buffer.extra[RHO_CACHE][stored] = clipped_ratio(geoff.log_ratio(everything, a)).numpy()
        buffer.extra[C_CACHE][stored] = geoff.c(everything.obs).clamp(0.0, 2.0).numpy()
        cached_m1, cached_kappa = geoff.weights(b, a).logged["geoff_m1"], geoff._pending.kappa  # type: ignore[union-attr]
        geoff.cached = False
        fresh_m1, fresh_kappa = geoff.weights(b, a).logged["geoff_m1"], geoff._pending.kappa  # type: ignore[union-attr]
    torch.testing.assert_close(cached_m1, fresh_m1)
    torch.testing.assert_close(cached_kappa, fresh_kappa)


def test_geoff_pac_one_predecessor_is_an_unbiased_estimate_of_the_window_sum() -> None:
    """``geoff_m2=one``: Σκ (V(s_i) − V(s_j)) log π(a_j|s_j) with j drawn ∝ κ averages to
    Σ_k κ_k (V(s_i) − V(s_{i−k})) log π(a_{i−k}|s_{i−k})."""
    trainer = geoff_trainer(geoff_m2="one")
    geoff, a = trainer.correction, trainer.agent
    b = trainer.buffer.sample(32, torch.Generator().manual_seed(2))
    next_actor_step(a)
    with torch.no_grad():
        geoff.weights(b, a)
        pending = geoff._pending  # type: ignore[union-attr]
        assert pending is not None and int((pending.kappa > 0).sum(1).max()) > 1  # windows of several terms
        value = a.state_value(b.obs)

        def term(one: bool) -> torch.Tensor:
            geoff.one_predecessor = one
            return geoff._m2_term(geoff._predecessors(pending, a), value, a)

        exact = term(False)
        draws = torch.stack([term(True) for _ in range(3000)])
    mean, error = draws.mean(0), draws.std(0) / math.sqrt(len(draws))
    assert torch.all((mean - exact).abs() <= 4 * error + 1e-4)
    assert float(draws.std(0).max()) > 0  # a real draw, not the sum itself


def test_geoff_pac_resumes_its_density_ratio_exactly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    path = tmp_path / "run.pt"
    options = dict(env_id="Pendulum-v1", hidden=(32, 32), total_steps=400, start_steps=200, batch_size=32,
                   eval_freq=400, eval_episodes=1, checkpoint_every=0, correction_start=200)  # fmt: skip
    first = Trainer(TrainConfig.make(algo="sac", correction="geoff-pac", **options), checkpoint_path=path)  # type: ignore[arg-type]
    first.run()
    shutil.copy(path, tmp_path / "b.pt")
    resumed = [Trainer.resume(p, RecordingSink(), total_steps=600) for p in (path, tmp_path / "b.pt")]
    assert resumed[0].correction.fits == first.correction.fits == 200  # type: ignore[attr-defined]
    assert same(params(resumed[0].correction.c), params(first.correction.c))  # type: ignore[attr-defined]
    for trainer in resumed:
        trainer.run()
    one, two = (t.correction for t in resumed)
    assert one.fits == two.fits == 400  # type: ignore[attr-defined]
    for name in ("c", "c_target"):
        assert same(params(getattr(one, name)), params(getattr(two, name)))
    assert one.optimiser.state_dict()["state"][0]["step"] == 400  # type: ignore[attr-defined]
    assert same(params(resumed[0].agent.actor), params(resumed[1].agent.actor))


def test_the_weights_view_says_when_a_correction_logs_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from offpoc_tui.dashboard.model import Model
    from offpoc_tui.dashboard.request import Request
    from store import open_store
    from store.reader import list_runs
    from store.runs import create_runs
    from tests.support.storefill import spec

    db = open_store(tmp_path / "s.db", create=True)
    (run_id,) = create_runs(db, [spec(correction="ipg")])
    running = Model().answer(db, list_runs(db), Request(view="quantities", cursor=run_id))
    assert "no values recorded yet" in running.histogram.title  # type: ignore[union-attr]
    db.execute("UPDATE runs SET status = 'finished', steps = 3000 WHERE id = ?", [run_id])
    done = Model().answer(db, list_runs(db), Request(view="quantities", cursor=run_id))
    assert "(ipg) recorded no per-update values: its correction logs none" in done.histogram.title  # type: ignore[union-attr]
