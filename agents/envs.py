"""Environments: any registered gymnasium id with a Box action space, in normalised actions."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import RescaleAction


class EnvError(ValueError):
    """The environment id is unknown or unsuitable; the message says why."""


class MujocoWarning(UserWarning):
    """A warning of MuJoCo's (a deprecated model attribute, an unstable simulation...)."""


def _warn_from_mujoco(message: str) -> None:
    try:
        warnings.warn(message.strip(), MujocoWarning, stacklevel=2)
    except Warning:  # an "error" filter: no exception may cross MuJoCo's C frames, so say it plainly
        print(f"MujocoWarning: {message.strip()}", file=sys.stderr)


def route_mujoco_warnings() -> None:
    """Send MuJoCo's warnings to Python's ``warnings`` instead of ``MUJOCO_LOG.TXT``.

    MuJoCo's own handler prints each warning and appends it to ``MUJOCO_LOG.TXT`` in
    the working folder (HalfCheetah's model triggers one at every load); a warning
    callback replaces both. Process-wide, as MuJoCo's handler is; a callback the
    caller installed is kept. A no-op without MuJoCo.
    """
    if importlib.util.find_spec("mujoco") is None:
        return
    import mujoco

    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(_warn_from_mujoco)


def check_env_id(env_id: str) -> None:
    """Raise :class:`EnvError` unless ``env_id`` is a registered gymnasium id.

    gymnasium's ``module:EnvName-v0`` names a user's own environment: the module is imported first
    (it registers its environments), then the id is looked up, as ``gym.make`` does. The module must be
    importable where the run trains (installed, or on ``PYTHONPATH``, there too for Ray workers).
    """
    module, colon, name = env_id.rpartition(":")
    if colon:
        try:
            importlib.import_module(module)
        except (Exception, SystemExit) as error:  # an import error, whatever it raises while registering, an exit
            raise EnvError(f"cannot import {module!r} for environment {name!r}: {_said(error)}") from None
    try:
        gym.spec(name if colon else env_id)
    except gym.error.Error as error:
        raise EnvError(f"unknown environment {env_id!r}: {error}") from None


def make_env(env_id: str) -> gym.Env:
    """A new environment acting in [-1, 1]^d, rescaled to the env's own bounds.

    MuJoCo's warnings become :class:`MujocoWarning` (see :func:`route_mujoco_warnings`).
    Raises :class:`EnvError` for an unknown id, a non-Box or unbounded action
    space, or a non-flat observation space.
    """
    check_env_id(env_id)
    route_mujoco_warnings()
    try:
        env = gym.make(env_id)
    except (Exception, SystemExit) as error:  # a registered env whose dependencies are missing, an exit, etc.
        raise EnvError(f"cannot create environment {env_id!r}: {_said(error)}") from None
    space = env.action_space
    if not isinstance(space, gym.spaces.Box):
        env.close()
        raise EnvError(f"{env_id!r} has a {type(space).__name__} action space; offpoc needs continuous (Box) actions")
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        env.close()
        raise EnvError(f"{env_id!r} has unbounded actions; offpoc needs finite action bounds")
    obs_space = env.observation_space
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
        env.close()
        raise EnvError(f"{env_id!r} has a non-flat observation space; offpoc needs a 1-D Box observation")
    ones = np.ones(space.shape, dtype=np.float32)
    return RescaleAction(env, -ones, ones)


def env_dims(env: gym.Env) -> tuple[int, int]:
    """(obs_dim, action_dim)."""
    return int(env.observation_space.shape[0]), int(env.action_space.shape[0])  # type: ignore[index]


def _said(error: BaseException) -> str:
    """What a user's module raised, in words: ``it called sys.exit(3)`` for an exit (which said nothing)."""
    return f"it called sys.exit({error.code!r})" if isinstance(error, SystemExit) else str(error)
