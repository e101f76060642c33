"""Checkpoints: the full state of a :class:`~agents.training.Trainer`, written atomically.

Saved: the resolved config, step/update/episode counters and the training clock,
every network, optimiser and learned tensor, the RNG states (torch generator,
numpy generator, training env), the λ histogram of the open interval, and,
with ``checkpoint_buffer``, the replay buffer.

Not saved: the simulator's physical state, which gymnasium cannot capture for
every environment (Box2D). A resumed run therefore starts a fresh training
episode at the checkpointed step; the interrupted partial episode is dropped.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from agents.config import TrainConfig

if TYPE_CHECKING:
    from agents.training import Trainer

FORMAT_VERSION = 1


def save(trainer: Trainer, path: Path, elapsed: float) -> None:
    agent = trainer.agent
    state: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "config": trainer.config.to_dict(),
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
        },
        "weights": trainer.weights.state_dict(),
        "buffer": trainer.buffer.state_dict() if trainer.config.checkpoint_buffer else None,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load(cls: type[Trainer], path: Path, sink: Any, should_stop: Any, total_steps: int | None) -> Trainer:
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as error:
        raise ValueError(f"cannot read checkpoint {path}: {error}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT_VERSION:
        raise ValueError(f"{path} is not an offpoc checkpoint (format {FORMAT_VERSION})")
    config = TrainConfig.from_dict(state["config"])
    if total_steps is not None:
        config = dataclasses.replace(config, total_steps=total_steps)
    trainer = cls(config, sink=sink, checkpoint_path=path, should_stop=should_stop)
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
    env_state = state["rng"]["env"]
    env_rng = np.random.Generator(getattr(np.random, env_state["bit_generator"])())
    env_rng.bit_generator.state = env_state
    trainer.env.np_random = env_rng
    trainer.obs, _ = trainer.env.reset()
    trainer.weights.load_state_dict(state["weights"])
    if state["buffer"] is not None:
        trainer.buffer.load_state_dict(state["buffer"])
    return trainer
