"""Config resolution and validation, ``--set``-style overrides, environment checks."""

from __future__ import annotations

import pytest

from agents import ConfigError, EnvError, TrainConfig, make_env, with_overrides
from agents.algorithms import TD3Options
from agents.config import field_names
from agents.corrections.acoffpoc import ACOffPOCOptions
from agents.exploration import exploration_std


def test_defaults_resolve_per_algorithm_as_in_the_spec() -> None:
    ddpg, td3, sac = (TrainConfig.make(algo=a).resolved() for a in ("ddpg", "td3", "sac"))
    assert (ddpg.hidden, ddpg.tau, ddpg.actor_lr, ddpg.critic_lr, ddpg.critic_weight_decay) == (
        (400, 300),
        0.001,
        1e-4,
        1e-3,
        1e-2,
    )
    assert (td3.hidden, td3.tau, td3.start_steps, td3.option(TD3Options).policy_delay) == ((256, 256), 0.005, 25_000, 2)
    assert (sac.start_steps, sac.correction_start) == (10_000, 50_000)
    corrected = TrainConfig.make(algo="td3", correction="acoffpoc", exploration_std=0.2).resolved()
    assert corrected.option(ACOffPOCOptions).ref_std == exploration_std(corrected) == 0.2  # None = exploration_std
    assert all(c.batch_size == 256 and c.buffer_size == 1_000_000 and c.gamma == 0.99 for c in (ddpg, td3, sac))


def test_the_cli_field_names_exist() -> None:
    required = {"start_steps", "batch_size", "buffer_size", "total_steps", "eval_freq", "eval_episodes"}
    required |= {"exploration_std", "divergence", "ref_std", "seed", "checkpoint_every"}
    assert required <= set(field_names())


def test_overrides_parse_by_field_type() -> None:
    config = with_overrides(
        TrainConfig.make(correction="acoffpoc"),
        {
            "total_steps": "1e5",
            "batch_size": "128",
            "ref_std": "0.2",
            "hidden": "64,64",
            "checkpoint_buffer": "false",
            "start_steps": "1_000",
            "tau": "default",
        },
    )
    ref_std = config.option(ACOffPOCOptions).ref_std
    assert (config.total_steps, config.batch_size, ref_std, config.hidden) == (100_000, 128, 0.2, (64, 64))
    assert config.checkpoint_buffer is False and config.start_steps == 1000 and config.tau is None


def test_set_reads_counts_as_steps_does() -> None:
    """One count parser: ``--set total_steps=1M`` reads as ``--steps 1M`` does, and so do a sweep's strings."""
    config = with_overrides(TrainConfig.make(), {"total_steps": "1M", "eval_freq": "5k", "hidden": "0.25k,64"})
    assert (config.total_steps, config.eval_freq, config.hidden) == (1_000_000, 5_000, (250, 64))
    exact = with_overrides(TrainConfig.make(), {"seed": "9007199254740993"})  # 2^53 + 1: no float on the way
    assert exact.seed == 9_007_199_254_740_993
    assert with_overrides(TrainConfig.make(), {"seed": "9223372036854775807"}).seed == 2**63 - 1
    with pytest.raises(ConfigError, match=r"eval_freq expects int, got '2\.5'"):
        with_overrides(TrainConfig.make(), {"eval_freq": "2.5"})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"nope": "1"}, "unknown config field 'nope'"),
        ({"batch_size": "many"}, "batch_size expects int, got 'many'"),
        ({"total_steps": "1.5"}, "total_steps expects int"),
        ({"ref_std": "x"}, "ref_std expects float"),
    ],
)
def test_malformed_overrides_are_clear_errors(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        with_overrides(TrainConfig.make(), overrides)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"algo": "ppo"}, "unknown algorithm 'ppo'"),
        ({"correction": "retrace"}, "unknown correction 'retrace'"),
        ({"correction": "acoffpoc", "divergence": "tv"}, "^divergence must be one of jsd, symkl, kl, got 'tv'"),
        ({"divergence": "kl"}, "divergence is an option of acoffpoc: this run is td3 with correction none"),
        ({"total_steps": 0}, "total_steps must be at least 1"),
        ({"start_steps": -1}, "start_steps must be at least 0"),
        ({"batch_size": 1}, "batch_size must be at least 2"),
        ({"buffer_size": 10}, "buffer_size"),
        ({"correction": "acoffpoc", "ref_std": 0.0}, "ref_std must be a positive number"),
        ({"correction": "acoffpoc", "exploration_std": -1.0}, "exploration_std must be a non-negative number"),
        ({"gamma": 1.5}, "gamma must be in"),
        ({"algo": "ddpg", "hidden": (64, 64, 64)}, "ddpg needs exactly 2 hidden sizes"),
        ({"policy_delay": 0}, "policy_delay must be a whole number of at least 1, got 0"),
        ({"target_noise": -0.1}, "target_noise must be a non-negative number"),
        # An algorithm's own options: refused for another algorithm, as a correction's are for another correction.
        ({"algo": "sac", "policy_delay": 5}, "^policy_delay is an option of td3: this run is sac with correction none"),
        ({"algo": "ddpg", "target_noise": 0.3}, "^target_noise is an option of td3: this run is ddpg"),
        ({"algo": "sac", "exploration_std": 0.4}, "^exploration_std is an option of ddpg and td3: this run is sac"),
    ],
)
def test_invalid_configs_are_rejected_with_the_reason(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainConfig.make(**fields).resolved()


def test_a_config_holding_another_plugins_option_is_never_made() -> None:
    """Refused where the config is made, not only when it is resolved: ``make`` of SAC with TD3's target noise
    used to return a config holding TD3's options, refused only later."""
    with pytest.raises(ConfigError, match=r"^target_noise is an option of td3: this run is sac"):
        TrainConfig.make(algo="sac", target_noise=0.3)
    with pytest.raises(ConfigError, match=r"^divergence is an option of acoffpoc: this run is td3"):
        TrainConfig.make(divergence="kl")
    with pytest.raises(ConfigError, match=r"^policy_delay is an option of td3: this run is sac"):
        TrainConfig.make(policy_delay=3).replace(algo="sac", policy_delay=3)
    assert TrainConfig.make(policy_delay=3).replace(algo="sac").resolved().algo == "sac"  # dropped with td3
    with pytest.raises(ConfigError, match="unknown"):  # an unknown plug-in: resolved() names it
        TrainConfig.make(algo="nosuch", target_noise=0.3).resolved()


def test_config_round_trips_through_a_dict() -> None:
    config = TrainConfig.make(algo="sac", hidden=(32, 32)).resolved()
    assert TrainConfig.from_dict(config.to_dict()).resolved() == config
    with pytest.raises(ConfigError, match="unknown config field"):
        TrainConfig.from_dict({"bogus": 1})


OLD_STORED = (  # a run's config as stored before the plug-ins owned their options (every option, some missing)
    '{"algo": "sac", "env_id": "HalfCheetah-v4", "correction": "acoffpoc", "divergence": "jsd", "ref_std": 0.1,'
    ' "correction_start": 50000, "ris_beta": 0.2, "ris_apply_to": "actor", "ipg_nu": 1.0,'
    ' "ipg_state_source": "recent", "ace_lambda1": 0.0, "pg_form": "lr", "pg_signal": "td", "geoff_lambda1": 0.7,'
    ' "geoff_lambda2": 0.6, "geoff_gamma_hat": 0.2, "geoff_m2_baseline": "none", "trace_window": 16, "seed": 0,'
    ' "total_steps": 100000, "start_steps": 10000, "batch_size": 256, "sampler": "uniform", "per_alpha": 0.6,'
    ' "per_beta0": 0.4, "per_beta_increment": 2e-07, "ero_hidden": 64, "ero_lr": 0.0001, "ero_sample": 1024,'
    ' "ero_every": 1, "buffer_size": 1000000, "eval_freq": 5000, "eval_episodes": 10, "exploration_std": 0.1,'
    ' "gamma": 0.99, "tau": 0.005, "actor_lr": 0.0003, "critic_lr": 0.0003, "critic_weight_decay": 0.0,'
    ' "hidden": [256, 256], "layer_norm": false, "backend": "fast", "policy_delay": 2, "target_noise": 0.2,'
    ' "noise_clip": 0.5, "stats_every": 1000, "weights_block": 1000, "histogram_bins": 50,'
    ' "checkpoint_every": 50000, "checkpoint_buffer": true, "threads": 1, "device": "cpu"}'
)


def test_a_config_stored_before_options_moved_reads_as_what_it_ran() -> None:
    """An old stored config keeps its own plug-in's options (an option added since takes the value it ran
    with, not today's default) and loses the others', which never touched the run."""
    import json

    from agents.config import LEGACY_VALUES
    from agents.corrections.acoffpoc import ACOffPOCOptions
    from agents.corrections.geoff_pac import GeoffOptions
    from agents.corrections.ris import RISOptions

    read = TrainConfig.from_dict(json.loads(OLD_STORED))
    # acoffpoc_ratio came later: it ran "stored"; divergence and ref_std were common fields then, and read as its
    assert read.options == (ACOffPOCOptions(divergence="jsd", ref_std=0.1, ratio="stored"),)
    assert "ris_beta" not in read.to_dict() and read.resolved() == read
    for other in ("none", "ris-off-pac"):  # every run held divergence and ref_std: another correction's drop them
        old = TrainConfig.from_dict({**json.loads(OLD_STORED), "correction": other, "correction_start": 0})
        assert "divergence" not in old.to_dict() and "ref_std" not in old.to_dict() and old.resolved() == old
    geoff = {**TrainConfig.make(algo="sac", correction="geoff-pac").resolved().to_dict(), "ris_beta": 0.2}
    del geoff["geoff_m2"], geoff["geoff_traces"]
    assert TrainConfig.from_dict(geoff).option(GeoffOptions) == GeoffOptions(m2="all", traces="fresh")
    defaults = {k: v for g in (ACOffPOCOptions, GeoffOptions, RISOptions) for k, v in g().flat().items()}
    assert all(LEGACY_VALUES[name] != defaults[name] for name in LEGACY_VALUES)  # else not needed
    fresh = TrainConfig.make(algo="sac", correction="geoff-pac").resolved()
    assert TrainConfig.from_dict(fresh.to_dict()) == fresh  # today's configs are untouched


def test_options_belong_to_their_plug_ins() -> None:
    config = TrainConfig.make(correction="ris-off-pac", ris_beta=0.3).resolved()
    assert config.to_dict()["ris_beta"] == 0.3 and "per_alpha" not in config.to_dict()
    with pytest.raises(ConfigError, match="ris_beta is an option of ris-off-pac: this run is td3 with correction ace"):
        TrainConfig.make(correction="ace", ris_beta=0.3).resolved()
    with pytest.raises(ConfigError, match="pg_form is an option of ace and geoff-pac"):
        with_overrides(TrainConfig(), {"pg_form": "lr"}).resolved()
    # changing the correction keeps the options the new one shares and drops the others
    ace = TrainConfig.make(correction="geoff-pac", pg_form="lr", geoff_lambda1=0.5).replace(correction="ace")
    assert ace.resolved().to_dict()["pg_form"] == "lr" and "geoff_lambda1" not in ace.resolved().to_dict()


@pytest.mark.parametrize(
    "env_id",
    ["Hopper-v4", "Hopper-v5", "HalfCheetah-v4", "Swimmer-v5", "BipedalWalker-v3", "LunarLanderContinuous-v3"],
)
def test_paper_environments_build_with_normalised_actions(env_id: str) -> None:
    env = make_env(env_id)
    assert (env.action_space.low == -1).all() and (env.action_space.high == 1).all()
    env.close()


@pytest.mark.parametrize(
    ("env_id", "message"),
    [
        ("Hopper-v99", "unknown environment 'Hopper-v99'"),
        ("NoSuchEnv-v0", "unknown environment 'NoSuchEnv-v0'"),
        ("CartPole-v1", "'CartPole-v1' has a Discrete action space"),
        ("LunarLander-v3", "'LunarLander-v3' has a Discrete action space"),
    ],
)
def test_unsuitable_environments_are_rejected_by_name(env_id: str, message: str) -> None:
    with pytest.raises(EnvError, match=message):
        make_env(env_id)
