"""Replay samplers (docs/competitors.md, "Replay samplers"): the sum tree, PER, CER, their runs and records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats
from typer.testing import CliRunner

from agents import ConfigError, RecordingSink, TrainConfig, Trainer
from agents.replay import ReplayBuffer
from agents.samplers import CombinedReplay, ExperienceReplayOptimisation, Prioritised, SumTree, make_sampler
from offpoc_tui.cli import app
from tests.support.batches import agent, batch, params, same

OBS, ACT = 3, 2


def filled(capacity: int, count: int, episode_every: int = 0, random_phase: int = 0) -> ReplayBuffer:
    """A buffer after ``count`` transitions, an episode ending every ``episode_every`` (0: never)."""
    buffer = ReplayBuffer(capacity, OBS, ACT)
    rng = np.random.default_rng(0)
    for t in range(count):
        end = bool(episode_every) and (t + 1) % episode_every == 0
        obs = rng.normal(size=OBS).astype(np.float32)
        buffer.add(obs, rng.uniform(-1, 1, ACT), float(t), obs + 1, False, end, random_phase=t < random_phase)
    return buffer


def prioritised(buffer_capacity: int, count: int, **options: float) -> Prioritised:
    """A PER sampler that heard every transition of a fresh buffer, as the trainer calls it."""
    sampler = Prioritised(**options)
    sampler.attach(ReplayBuffer(buffer_capacity, OBS, ACT))
    rng = np.random.default_rng(0)
    for t in range(count):
        obs = rng.normal(size=OBS).astype(np.float32)
        sampler.buffer.add(obs, rng.uniform(-1, 1, ACT), 0.0, obs, False, (t + 1) % 7 == 0, random_phase=t < 5)
        sampler.added(sampler.buffer.last_slot)
    return sampler


# ---- the sum tree -------------------------------------------------------------------------------------
def test_the_tree_total_is_the_sum_of_its_leaves_and_a_repeated_index_takes_its_last_value() -> None:
    tree = SumTree(1000)
    rng = np.random.default_rng(1)
    leaves = np.zeros(1000)
    for _ in range(50):
        index = rng.integers(0, 1000, 64)
        values = rng.exponential(size=64)
        tree.set(index, values)
        for i, v in zip(index, values, strict=True):  # the reference: one at a time, the last one stays
            leaves[i] = v
        assert tree.total == pytest.approx(leaves.sum(), rel=1e-12)
        np.testing.assert_array_equal(tree[np.arange(1000)], leaves)
    node = np.arange(1, tree.leaves)
    np.testing.assert_allclose(tree.nodes[node], tree.nodes[2 * node] + tree.nodes[2 * node + 1], rtol=1e-12)


def test_sampling_frequency_is_proportional_to_priority() -> None:
    sampler = prioritised(64, 60)
    slots = np.flatnonzero(sampler.buffer.starts_transition)
    priorities = np.random.default_rng(2).uniform(0.05, 3.0, len(slots))
    sampler.td_errors(slots, torch.from_numpy(priorities ** (1 / sampler.alpha)).unsqueeze(1))
    generator = torch.Generator().manual_seed(3)
    drawn = np.concatenate([sampler.sample(256, generator).slots for _ in range(400)])  # type: ignore[misc]
    counts = np.bincount(drawn, minlength=64)
    assert counts[~sampler.buffer.starts_transition].sum() == 0  # next-observation slots: priority 0
    expected = priorities / priorities.sum() * len(drawn)
    assert stats.chisquare(counts[slots], expected).pvalue > 1e-3


def test_new_transitions_get_the_running_maximum_priority() -> None:
    sampler = prioritised(64, 20)
    assert sampler.tree[np.array([sampler.buffer.last_slot])][0] == 1.0  # the maximum starts at 1
    sampler.td_errors(np.array([0, 1]), torch.tensor([[9.0], [0.5]]))
    assert sampler.max_priority == pytest.approx(9.0**0.6)
    sampler.buffer.add(np.zeros(OBS, np.float32), np.zeros(ACT), 0.0, np.zeros(OBS, np.float32), False, False)
    sampler.added(sampler.buffer.last_slot)
    assert sampler.tree[np.array([sampler.buffer.last_slot])][0] == pytest.approx(9.0**0.6)
    assert sampler.tree[np.array([sampler.buffer.ptr])][0] == 0.0  # its next observation's slot starts nothing


def test_importance_weights_are_p_to_minus_beta_over_the_max_and_beta_rises_exactly() -> None:
    sampler = prioritised(128, 100, beta=0.4, beta_increment=0.25)
    slots = np.flatnonzero(sampler.buffer.starts_transition)
    sampler.td_errors(slots, torch.from_numpy(np.linspace(0.1, 4.0, len(slots))).unsqueeze(1))
    generator = torch.Generator().manual_seed(0)
    for beta in (0.4, 0.65, 0.9, 1.0, 1.0):
        b = sampler.sample(32, generator)
        assert b.importance is not None and b.slots is not None
        p = sampler.tree[b.slots]
        np.testing.assert_allclose(b.importance[:, 0].numpy(), (p**-beta / (p**-beta).max()).astype(np.float32))
        assert float(sampler.logged()["per_beta"]) == pytest.approx(beta)
    default = Prioritised()
    assert (default.alpha, default.beta, default.beta_increment) == (0.6, 0.4, 2e-7)


def test_excluded_start_phase_transitions_get_priority_zero() -> None:
    sampler = prioritised(64, 40)
    generator = torch.Generator().manual_seed(0)
    drawn = np.concatenate([sampler.sample(64, generator, exclude_random_phase=True).slots for _ in range(50)])  # type: ignore[misc]
    assert not sampler.buffer.random_phase[drawn].any()
    assert sampler.tree[np.flatnonzero(sampler.buffer.random_phase)].sum() == 0.0


# ---- CER ----------------------------------------------------------------------------------------------
def test_cer_puts_the_newest_transition_in_every_batch_across_wrap_around() -> None:
    sampler = CombinedReplay()
    buffer = ReplayBuffer(11, OBS, ACT)
    sampler.attach(buffer)
    generator = torch.Generator().manual_seed(0)
    for t in range(60):  # the 11-slot ring wraps five times; an episode ends every 4 steps
        obs = np.full(OBS, t, np.float32)
        buffer.add(obs, np.zeros(ACT), float(t), obs + 0.5, False, (t + 1) % 4 == 0)
        sampler.added(buffer.last_slot)
        b = sampler.sample(5, generator)
        assert b.obs.shape[0] == 5 and b.slots is not None and b.slots[-1] == buffer.last_slot
        assert float(b.reward[-1, 0]) == t and buffer.starts_transition[b.slots].all()


# ---- ERO -----------------------------------------------------------------------------------------------
def heard(capacity: int, count: int, episode_every: int = 5) -> ExperienceReplayOptimisation:
    """An ERO sampler that heard every transition and episode end of a fresh buffer, as the trainer calls it."""
    sampler = ExperienceReplayOptimisation(hidden=16, sample=64)
    sampler.attach(ReplayBuffer(capacity, OBS, ACT))
    generator = torch.Generator().manual_seed(0)
    rng = np.random.default_rng(0)
    for t in range(count):
        end = (t + 1) % episode_every == 0
        obs = rng.normal(size=OBS).astype(np.float32)
        sampler.buffer.add(obs, rng.uniform(-1, 1, ACT), float(rng.normal()), obs, False, end, random_phase=t < 5)
        sampler.added(sampler.buffer.last_slot)
        if end:
            sampler.episode_end(float(t % 7), generator)
    return sampler


def test_ero_counts_its_kept_transitions_incrementally_across_wrap_around() -> None:
    sampler = heard(50, 230)  # the ring wraps four times, episodes of 5 end every 5 steps, masks redrawn
    assert sampler.episodes == 46 and 0 < sampler.n_kept < sampler.n_transitions
    kept, transitions = sampler.n_kept, sampler.n_transitions
    sampler._recount()
    assert (sampler.n_kept, sampler.n_transitions) == (kept, transitions) == (kept, len(sampler.buffer))


def test_ero_never_samples_a_masked_slot_and_an_all_ones_mask_is_uniform_replay() -> None:
    sampler = heard(400, 390)
    generator = torch.Generator().manual_seed(1)
    drawn = np.concatenate([sampler.sample(32, generator).slots for _ in range(200)])  # type: ignore[misc]
    assert sampler.mask[drawn].all() and sampler.buffer.starts_transition[drawn].all() and not sampler.fallback
    assert len(np.unique(drawn)) > 0.9 * sampler.n_kept  # every kept transition can come up
    sampler.mask[:] = True
    sampler._recount()
    ours = sampler.sample(32, torch.Generator().manual_seed(2))
    uniform = sampler.buffer.sample(32, torch.Generator().manual_seed(2))
    np.testing.assert_array_equal(ours.slots, uniform.slots)  # type: ignore[arg-type]


def test_ero_falls_back_to_the_whole_buffer_when_fewer_than_b_are_kept_and_says_so() -> None:
    sampler = heard(400, 390)
    sampler.mask[:] = False
    sampler._recount()
    b = sampler.sample(32, torch.Generator().manual_seed(0))
    assert sampler.fallback and float(sampler.logged()["ero_fallback"]) == 1.0 and b.obs.shape[0] == 32


def test_a_zero_replay_reward_gives_a_zero_gradient() -> None:
    sampler = heard(400, 100)
    features = torch.randn(64, 3, generator=torch.Generator().manual_seed(0))
    kept = torch.rand(64, generator=torch.Generator().manual_seed(1)) < 0.5
    sampler.step(features, kept, 0.0)
    assert all(float(p.grad.abs().max()) == 0.0 for p in sampler.policy.parameters())  # type: ignore[union-attr]
    sampler.step(features, kept, 1.0)
    assert any(float(p.grad.abs().max()) > 0.0 for p in sampler.policy.parameters())  # type: ignore[union-attr]


# ---- the update: importance weights on the critic alone ----------------------------------------------
@pytest.mark.parametrize("backend", ["fast", "autograd"])
def test_importance_weights_scale_the_critic_loss_alone(backend: str) -> None:
    w = torch.rand(32, 1, generator=torch.Generator().manual_seed(5)) + 0.1
    ones, plain = agent("ddpg", backend=backend), agent("ddpg", backend=backend)
    b = batch(0)
    ones.update(b._replace(importance=torch.ones(32, 1)))
    plain.update(b)
    assert same(params(ones.critic), params(plain.critic)) and same(params(ones.actor), params(plain.actor))

    # With the critic frozen (lr 0), the actor step sees the same critic: the weights must not reach it.
    frozen = [agent("ddpg", backend=backend) for _ in range(2)]
    for a in frozen:
        for group in a.critic_optimizer.param_groups:
            group["lr"] = 0.0
    with torch.no_grad():
        q = frozen[0].critic(b.obs, b.action)[0]
        y = frozen[0].target(b)
    weighted = frozen[0].update(b._replace(importance=w))
    unweighted = frozen[1].update(b)
    assert float(weighted.critic_loss) == pytest.approx(float((w * (q - y).square()).mean()), rel=1e-5)
    assert float(unweighted.critic_loss) == pytest.approx(float((q - y).square().mean()), rel=1e-5)
    assert same(params(frozen[0].actor), params(frozen[1].actor))


def test_fast_and_autograd_apply_importance_weights_alike() -> None:
    w = torch.rand(32, 1, generator=torch.Generator().manual_seed(6)) + 0.1
    for algo in ("td3", "sac"):
        fast, auto = agent(algo, backend="fast"), agent(algo, backend="autograd")
        for seed in range(4):
            b = batch(seed)._replace(importance=w)
            fast.update(b)
            auto.update(b)
        for x, y in zip(params(fast.critic), params(auto.critic), strict=True):
            torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)


# ---- runs ---------------------------------------------------------------------------------------------
FAST = dict(
    env_id="Hopper-v4",
    hidden=(64, 64),
    batch_size=64,
    start_steps=500,
    eval_freq=500,
    eval_episodes=2,
    stats_every=500,
)


@pytest.mark.parametrize("sampler", ["cer", "per", "ero"])
@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_smoke_a_thousand_steps(algo: str, sampler: str) -> None:
    sink = RecordingSink()
    correction = "acoffpoc" if algo != "ddpg" else "ris-off-pac"  # every sampler beside a correction
    config = TrainConfig.make(algo=algo, sampler=sampler, correction=correction, total_steps=1000, **FAST)  # type: ignore[arg-type]
    result = Trainer(config, sink).run()
    assert result.status == "finished" and result.updates == 500
    assert all(np.isfinite(s.critic_loss) for s in sink.stats if s.critic_loss is not None)
    logged = {b.quantity.name for b in sink.blocks}
    assert ({"per_beta", "per_weight"} <= logged) == (sampler == "per")
    assert ({"ero_kept", "ero_reward", "ero_fallback"} <= logged) == (sampler == "ero")
    if sampler == "per":
        beta = np.concatenate([b.values[:, 0] for b in sink.blocks if b.quantity.name == "per_beta"])
        np.testing.assert_allclose(beta, 0.4 + 2e-7 * np.arange(500), rtol=1e-6)


def test_per_resumes_its_priorities_and_beta_exactly(tmp_path: Path) -> None:
    path = tmp_path / "run.pt"
    options = dict(env_id="Pendulum-v1", hidden=(32, 32), total_steps=400, start_steps=200, batch_size=32,
                   eval_freq=400, eval_episodes=1, checkpoint_every=0, sampler="per")  # fmt: skip
    first = Trainer(TrainConfig.make(algo="td3", **options), checkpoint_path=path)  # type: ignore[arg-type]
    first.run()
    shutil.copy(path, tmp_path / "b.pt")
    resumed = [Trainer.resume(p, RecordingSink(), total_steps=700) for p in (path, tmp_path / "b.pt")]
    before = first.sampler
    assert isinstance(before, Prioritised)
    for trainer in resumed:
        sampler = trainer.sampler
        assert isinstance(sampler, Prioritised)
        assert sampler.beta == before.beta and sampler.max_priority == before.max_priority
        np.testing.assert_array_equal(sampler.tree.nodes, before.tree.nodes)
        trainer.run()
    one, two = (t.sampler for t in resumed)
    np.testing.assert_array_equal(one.tree.nodes, two.tree.nodes)  # type: ignore[attr-defined]
    assert same(params(resumed[0].agent.critic), params(resumed[1].agent.critic))


def test_ero_resumes_its_policy_optimiser_and_mask_exactly(tmp_path: Path) -> None:
    path = tmp_path / "run.pt"
    options = dict(env_id="Pendulum-v1", hidden=(32, 32), total_steps=600, start_steps=200, batch_size=32,
                   eval_freq=600, eval_episodes=1, checkpoint_every=0, sampler="ero", ero_sample=128)  # fmt: skip
    first = Trainer(TrainConfig.make(algo="sac", **options), checkpoint_path=path)  # type: ignore[arg-type]
    first.run()
    before = first.sampler
    assert isinstance(before, ExperienceReplayOptimisation) and before.episodes == 3
    shutil.copy(path, tmp_path / "b.pt")
    resumed = [Trainer.resume(p, RecordingSink(), total_steps=1000) for p in (path, tmp_path / "b.pt")]
    for trainer in resumed:
        sampler = trainer.sampler
        assert isinstance(sampler, ExperienceReplayOptimisation)
        np.testing.assert_array_equal(sampler.mask, before.mask)
        assert same(params(sampler.policy), params(before.policy)) and sampler.n_kept == before.n_kept
        trainer.run()
    one, two = (t.sampler for t in resumed)
    assert isinstance(one, ExperienceReplayOptimisation) and isinstance(two, ExperienceReplayOptimisation)
    np.testing.assert_array_equal(one.mask, two.mask)
    assert one.episodes == 5 and same(params(one.policy), params(two.policy))
    assert one.optimiser.state_dict()["state"][0]["step"] == two.optimiser.state_dict()["state"][0]["step"]


def test_bad_sampler_settings_are_one_line() -> None:
    for options, message in [({"sampler": "ero2"}, "unknown sampler 'ero2'"),
                             ({"sampler": "per", "per_alpha": 1.5}, "per_alpha must be in"),
                             ({"sampler": "per", "per_beta0": -0.1}, "per_beta0 must be in"),
                             ({"sampler": "ero", "ero_sample": 0}, "ero_sample must be at least 1"),
                             ({"sampler": "ero", "ero_lr": -1.0}, "ero_lr must be a positive"),
                             ({"per_alpha": 0.5}, "per_alpha is an option of per: this run is td3")]:  # fmt: skip
        with pytest.raises(ConfigError, match=message):
            TrainConfig.make(**options).resolved()
    with pytest.raises(ValueError, match="unknown sampler"):
        make_sampler("nope", TrainConfig.make())


# ---- the store and the CLI ----------------------------------------------------------------------------
runner = CliRunner()


def test_runs_record_their_sampler_and_compare_keeps_it_apart(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    bad = runner.invoke(app, ["run", "td3", "Pendulum-v1", "--sampler", "zipf", "--db", str(db)])
    assert bad.exit_code == 2 and "unknown sampler 'zipf'" in bad.stderr and not db.exists()
    from store import open_store
    from store.runs import create_runs
    from tests.support.storefill import fill_learning, spec

    store = open_store(db, create=True)
    specs = [spec(correction="none", seed=s) for s in (0, 1)] + [spec(correction="acoffpoc", seed=s) for s in (0, 1)]
    specs += [spec(correction="none", seed=s) for s in (0, 1)]
    for s in specs:  # as every stored config names its sampler
        s.config["sampler"] = "uniform"
    for s in specs[4:]:
        s.config["sampler"] = "per"
    specs[2].config["sampler"] = specs[3].config["sampler"] = "per"
    ids = create_runs(store, specs)
    store.close()
    for run_id in ids:
        fill_learning(db, run_id, 6000, gain=1.0)
    from offpoc_tui.dashboard.groups import compare, group_runs
    from store.reader import configs, list_runs

    store = open_store(db)
    runs = list_runs(store)
    assert [r["sampler"] for r in runs] == ["uniform", "uniform", "per", "per", "per", "per"]
    groups = group_runs(runs)
    assert len(groups) == 3  # the uniform baseline, AC-Off-POC with PER, the PER baseline
    curves = {r["id"]: (np.arange(7) * 1000, np.arange(7.0)) for r in runs}
    rows, *_ = compare(groups, curves, configs(store, [r["id"] for r in runs]))
    by_method = {r.key[2] + "/" + r.key[5]: r for r in rows}
    assert by_method["acoffpoc/per"].config_diff == ""  # beside the PER baseline: only the correction differs
    store.close()

    uniform_only = tmp_path / "u.db"
    shutil.copy(db, uniform_only)
    store = open_store(uniform_only)
    store.execute("DELETE FROM runs WHERE id IN (5, 6)")
    store.conn.commit()
    runs = list_runs(store)
    rows, *_ = compare(group_runs(runs), curves, configs(store, [r["id"] for r in runs]))
    per_row = next(r for r in rows if r.key[2] == "acoffpoc")
    assert "sampler=per" in per_row.config_diff  # beside the uniform baseline, the difference is named
    store.close()

    exported = runner.invoke(app, ["export", "--table", "summary", "--format", "json", "--db", str(db)])
    assert {(r["correction"], r["sampler"]) for r in json.loads(exported.stdout)} == {
        ("none", "uniform"), ("acoffpoc", "per"), ("none", "per"),
    }  # fmt: skip


def test_the_dashboards_runs_table_names_a_sampler_other_than_uniform() -> None:
    from offpoc_tui.dashboard.runs_table import COLUMNS, cells

    run = {"id": 1, "name": "n", "algo": "td3", "env": "Hopper-v4", "correction": "acoffpoc", "divergence": "jsd",
           "seed": 0, "status": "finished", "steps": 10, "total_steps": 10, "sps": 100.0, "last_return": 1.0,
           "best_return": 1.0, "mean_lambda": 0.9, "sampler": "per"}  # fmt: skip
    column = [c[0] for c in COLUMNS].index("correction")
    assert str(cells(run, False)[column]) == "acoffpoc+per"
    assert str(cells({**run, "sampler": "uniform"}, False)[column]) == "acoffpoc"


@pytest.mark.parametrize(("option", "value"), [("sampler", "ero"), ("correction", "geoff-pac")])
def test_a_run_with_networks_of_its_own_repeats_exactly_from_its_seed(option: str, value: str) -> None:
    """ERO's replay policy and Geoff-PAC's density ratio start from the run's seed, like the agent."""
    options = dict(env_id="Pendulum-v1", hidden=(32, 32), total_steps=600, start_steps=300, batch_size=32,
                   eval_freq=600, eval_episodes=1, correction_start=300)  # fmt: skip
    if value == "ero":
        options["ero_sample"] = 64
    first, second = (Trainer(TrainConfig.make(algo="td3", **{option: value}, **options)) for _ in range(2))
    own = "policy" if option == "sampler" else "c"
    holder = (lambda t: t.sampler) if option == "sampler" else (lambda t: t.correction)
    assert same(params(getattr(holder(first), own)), params(getattr(holder(second), own)))
    for trainer in (first, second):
        trainer.run()
    assert same(params(first.agent.critic), params(second.agent.critic))
    assert same(params(getattr(holder(first), own)), params(getattr(holder(second), own)))
