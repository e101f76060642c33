"""A trainer's full state for its checkpoint, and putting it back (:meth:`agents.training.Trainer.state_dict`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

Trainer = Any
"""An :class:`agents.training.Trainer` (not imported, even for typing: the two modules would import each other)."""


def state_dict(trainer: Trainer, elapsed: float) -> dict[str, Any]:
    """Everything a resumed run needs (see :mod:`agents.checkpoint`, which adds the config and owner and
    writes the file): counters and ``elapsed`` seconds of training, every network, optimiser and learned
    tensor (the correction's too), the RNG states, the logged quantities' open interval, the sampler's
    state and, with ``checkpoint_buffer``, the replay buffer."""
    agent, correction = trainer.agent, trainer.correction
    return {
        "counters": {
            "step": trainer.step,
            "episode": trainer.episode,
            "updates": agent.updates,
            "elapsed": elapsed,
            "last_eval_step": trainer.last_eval_step,
        },
        "modules": {name: module.state_dict() for name, module in agent.modules().items()},
        "optimizers": {name: opt.state_dict() for name, opt in agent.optimizers().items()},
        "tensors": {name: tensor.detach().cpu() for name, tensor in agent.tensors().items()},
        "rng": {
            "torch": trainer.generator.get_state(),
            "numpy": trainer.rng.bit_generator.state,
            "env": trainer.env.np_random.bit_generator.state,
            # At an episode boundary: the env's RNG before the reset that began the episode now starting.
            "env_reset": trainer.reset_rng if trainer.episode_length == 0 else None,
        },
        "correction": {
            "modules": {name: module.state_dict() for name, module in correction.modules().items()},
            "optimizers": {name: opt.state_dict() for name, opt in correction.optimizers().items()},
            "state": correction.state_dict(),
        },
        "weights": trainer.quantities.state_dict(),  # the key of checkpoints written before the rename
        "buffer": trainer.buffer.state_dict() if trainer.config.checkpoint_buffer else None,
        "sampler": trainer.sampler.state_dict(),
    }


def load_state_dict(trainer: Trainer, state: Mapping[str, Any]) -> None:
    """Put :func:`state_dict`'s state (as every checkpoint format holds it) into ``trainer``, built from
    the same config. Raises KeyError, TypeError, RuntimeError or ValueError where it does not fit."""
    from agents.checkpoint import BIT_GENERATORS

    agent = trainer.agent
    for name, module in agent.modules().items():
        module.load_state_dict(state["modules"][name])
    for name, optimizer in agent.optimizers().items():
        optimizer.load_state_dict(state["optimizers"][name])
    with torch.no_grad():
        for name, tensor in agent.tensors().items():
            tensor.copy_(state["tensors"][name])
    counters = state["counters"]
    trainer.step = counters["step"]
    trainer.episode = counters["episode"]
    trainer.elapsed = counters["elapsed"]
    trainer.last_eval_step = counters["last_eval_step"]
    agent.updates = counters["updates"]
    trainer.generator.set_state(state["rng"]["torch"])
    trainer.rng.bit_generator.state = state["rng"]["numpy"]
    # At an episode boundary the reset that began the new episode is replayed from the RNG state it
    # started from: same observation, same simulator state, same RNG after it. Mid-episode the
    # simulator's state is not saved (Box2D cannot give it): a fresh episode starts instead.
    boundary = state["rng"].get("env_reset")
    env_state = boundary if boundary is not None else state["rng"]["env"]
    if env_state["bit_generator"] not in BIT_GENERATORS:
        raise ValueError(f"the environment RNG {env_state['bit_generator']!r} is not one of NumPy's")
    env_rng = np.random.Generator(getattr(np.random, env_state["bit_generator"])())
    env_rng.bit_generator.state = env_state
    trainer.env.np_random = env_rng
    trainer.reset_rng = dict(env_state)  # where this reset starts: a checkpoint before the next step replays it
    trainer.obs, _ = trainer.env.reset()
    own = state.get("correction", {"modules": {}, "optimizers": {}, "state": {}})
    correction = trainer.correction
    for name, module in correction.modules().items():
        module.load_state_dict(own["modules"][name])
    for name, optimizer in correction.optimizers().items():
        optimizer.load_state_dict(own["optimizers"][name])
    correction.load_state_dict(own["state"])
    trainer.quantities.load_state_dict(state["weights"], legacy_per_transition=agent.policy_kind == "stochastic")
    if state["buffer"] is not None:
        trainer.buffer.load_state_dict(state["buffer"])
    trainer.sampler.load_state_dict(state.get("sampler", {}), buffer_restored=state["buffer"] is not None)
