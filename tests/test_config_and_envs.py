"""Config resolution and validation, ``--set``-style overrides, environment checks."""

from __future__ import annotations

import pytest

from agents import ConfigError, EnvError, TrainConfig, make_env, with_overrides
from agents.config import field_names


def test_defaults_resolve_per_algorithm_as_in_the_spec() -> None:
    ddpg, td3, sac = (TrainConfig(algo=a).resolved() for a in ("ddpg", "td3", "sac"))
    assert (ddpg.hidden, ddpg.tau, ddpg.actor_lr, ddpg.critic_lr, ddpg.critic_weight_decay) == (
        (400, 300),
        0.001,
        1e-4,
        1e-3,
        1e-2,
    )
    assert (td3.hidden, td3.tau, td3.start_steps, td3.policy_delay) == ((256, 256), 0.005, 25_000, 2)
    assert (sac.start_steps, sac.correction_start) == (10_000, 50_000)
    assert td3.ref_std == td3.exploration_std == 0.1
    assert all(c.batch_size == 256 and c.buffer_size == 1_000_000 and c.gamma == 0.99 for c in (ddpg, td3, sac))


def test_the_cli_field_names_exist() -> None:
    required = {"start_steps", "batch_size", "buffer_size", "total_steps", "eval_freq", "eval_episodes"}
    required |= {"exploration_std", "divergence", "ref_std", "seed", "checkpoint_every"}
    assert required <= set(field_names())


def test_overrides_parse_by_field_type() -> None:
    config = with_overrides(
        TrainConfig(),
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
    assert (config.total_steps, config.batch_size, config.ref_std, config.hidden) == (100_000, 128, 0.2, (64, 64))
    assert config.checkpoint_buffer is False and config.start_steps == 1000 and config.tau is None


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
        with_overrides(TrainConfig(), overrides)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"algo": "ppo"}, "unknown algorithm 'ppo'"),
        ({"correction": "retrace"}, "unknown correction 'retrace'"),
        ({"divergence": "tv"}, "unknown divergence 'tv'"),
        ({"total_steps": 0}, "total_steps must be at least 1"),
        ({"start_steps": -1}, "start_steps must be at least 0"),
        ({"batch_size": 1}, "batch_size must be at least 2"),
        ({"buffer_size": 10}, "buffer_size"),
        ({"ref_std": 0.0}, "ref_std must be a positive number"),
        ({"gamma": 1.5}, "gamma must be in"),
        ({"algo": "ddpg", "hidden": (64, 64, 64)}, "ddpg needs exactly two hidden sizes"),
    ],
)
def test_invalid_configs_are_rejected_with_the_reason(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**fields).resolved()


def test_config_round_trips_through_a_dict() -> None:
    config = TrainConfig(algo="sac", hidden=(32, 32)).resolved()
    assert TrainConfig.from_dict(config.to_dict()).resolved() == config
    with pytest.raises(ConfigError, match="unknown config field"):
        TrainConfig.from_dict({"bogus": 1})


def test_a_config_stored_before_a_field_existed_reads_as_what_it_ran() -> None:
    """Fields added since a run was stored take the value that reproduces how it trained, not today's default."""
    from agents.config import LEGACY_VALUES

    stored = TrainConfig(algo="sac", correction="geoff-pac").resolved().to_dict()
    for name in LEGACY_VALUES:
        del stored[name]
    read = TrainConfig.from_dict(stored)
    assert (read.acoffpoc_ratio, read.geoff_m2, read.geoff_traces) == ("stored", "all", "fresh")
    assert all(LEGACY_VALUES[name] != getattr(TrainConfig(), name) for name in LEGACY_VALUES)  # else not needed
    fresh = TrainConfig(algo="sac", correction="geoff-pac").resolved()
    assert TrainConfig.from_dict(fresh.to_dict()) == fresh  # today's configs are untouched


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
