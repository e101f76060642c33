"""The training loop, usable without any UI: build, seed, explore, update, evaluate, report.

    trainer = Trainer(TrainConfig(algo="td3", env_id="Hopper-v4", correction="acoffpoc"), sink)
    result = trainer.run()

Reports go to a sink (see :mod:`agents.sink`). ``should_stop`` (a callable or a
``threading.Event``) asks the loop to stop at the next step; it then checkpoints
(when a path is set) and returns with status ``stopped``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from gymnasium.utils import seeding
from torch import Tensor

from agents import gemm
from agents.algorithms import make_algorithm
from agents.algorithms.base import UpdateStats
from agents.config import ConfigError, TrainConfig
from agents.corrections import Collected, Correction, CorrectionSettings, make_correction
from agents.envs import env_dims, make_env
from agents.evaluation import Evaluator, eval_at_bound
from agents.recorder import QuantityRecorders, StatsAccumulator
from agents.replay import Batch, ReplayBuffer
from agents.samplers import make_sampler
from agents.sink import (
    CheckpointRecord,
    CheckpointSaved,
    EpisodeRecord,
    EvalRecord,
    QuantityBlock,
    QuantityHistogram,
    Record,
    emit,
)

if TYPE_CHECKING:
    from agents.checkpoint import CheckpointInfo

EVAL_SEED_OFFSET = 100


@dataclass(frozen=True)
class TrainResult:
    status: Literal["finished", "stopped"]
    step: int
    updates: int
    episodes: int
    wall_time: float
    """Seconds of training, across resumes."""
    checkpoint: Path | None


class Trainer:
    """One run: environment, agent, buffer, correction and the loop around them."""

    def __init__(
        self,
        config: TrainConfig,
        sink: Any = None,
        checkpoint_path: str | Path | None = None,
        should_stop: Callable[[], bool] | Any = None,
        owner: Mapping[str, Any] | None = None,
    ) -> None:
        gemm.check()  # OFFPOC_GEMM asks for a library torch cannot reach: no run starts
        self.config = c = config.resolved()
        self.sink = sink
        self.checkpoint_path = Path(checkpoint_path) if checkpoint_path is not None else None
        self.owner = dict(owner) if owner is not None else None
        """Saved in every checkpoint, for whoever loads it to check whose it is (JSON-like values)."""
        self._should_stop = getattr(should_stop, "is_set", should_stop) or (lambda: False)
        torch.set_num_threads(c.threads)
        self.device = torch.device(c.device)

        self.env = make_env(c.env_id)
        self.evaluator = Evaluator(c.env_id, c.eval_episodes)
        obs_dim, action_dim = env_dims(self.env)

        # Seeding: networks from a forked global RNG (the caller's stays untouched),
        # everything else from generators this run owns.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(c.seed)
            # On the CPU whatever the device: a seed draws the same batches and noise on a GPU as here.
            self.generator = torch.Generator().manual_seed(c.seed)
            self.agent = make_algorithm(c, obs_dim, action_dim, self.generator)
        self.rng = np.random.default_rng(c.seed)

        assert c.start_steps is not None and c.correction_start is not None
        self.correction = make_correction(
            c.correction,
            CorrectionSettings(
                policy_kind=self.agent.policy_kind,
                start_step=max(c.correction_start, c.start_steps),
                config=c,
            ),
        )
        if self.agent.fast and self.correction.overrides_actor_loss:
            raise ConfigError(f"correction {c.correction!r} writes its own actor loss: use backend=auto or autograd")
        self.buffer = ReplayBuffer(
            c.buffer_size,
            obs_dim,
            action_dim,
            behaviour_params=self.correction.needs_behaviour_params,
            device=self.device,
            fields=self.correction.fields,
        )
        with torch.random.fork_rng(devices=[]):  # a correction's or sampler's own networks, from the run's seed
            torch.manual_seed(c.seed + 1)
            self.correction.attach(self.agent, self.buffer)
            self.sampler = make_sampler(c.sampler, c)
            self.sampler.attach(self.buffer)
        self.quantities = QuantityRecorders(
            (*self.correction.quantities, *self.agent.quantities, *self.sampler.quantities),
            block=c.weights_block,
            bins=c.histogram_bins,
            device=self.device,
        )
        self.stats = StatsAccumulator(self.device)

        self.step = 0
        self.episode = 0
        self.episode_return = 0.0
        self.episode_length = 0
        self.elapsed = 0.0
        self._clock: float | None = None
        """When the current :meth:`run` started (``perf_counter``); None outside one."""
        self.last_eval_step = -1
        self.checkpoint_step = -1
        """The step of the last checkpoint this trainer wrote."""
        self._interval = (0.0, 0)
        """(clock, step) where the current training statistics' interval began (its steps/s)."""
        self.before_checkpoint: Callable[[], None] | None = None
        """Called before each checkpoint's state is taken (a lane group hands the lane its optimiser state)."""
        self.place_checkpoint: Callable[[Path, Path], None] | None = None
        """How a checkpoint written to a temporary file is put at the checkpoint path (default a rename): an
        app that must check something at that moment (offpoc: that the run is still this worker's) and
        record it with the file does the rename itself. Raising leaves the file unplaced."""
        self.reset_rng: dict[str, Any] = dict(seeding.np_random(c.seed)[0].bit_generator.state)
        """The training env's RNG state just before its last reset: a checkpoint at an episode boundary
        replays that reset, so a resumed run starts the next episode exactly as an uninterrupted one. The
        first reset is seeded: its state is the one ``reset(seed=...)`` gives the env before it draws."""
        self.obs, _ = self.env.reset(seed=c.seed)

    # ---- reporting -------------------------------------------------------------------
    def _emit(self, record: Record | None) -> None:
        if record is not None:
            emit(self.sink, record)

    def _emit_all(self, records: Sequence[QuantityBlock | QuantityHistogram]) -> None:
        for record in records:
            emit(self.sink, record)

    def _evaluate(self, clock: float) -> None:
        c = self.config
        returns, lengths, at_bound = self.evaluator.evaluate(self.agent, c.seed + EVAL_SEED_OFFSET)
        self._emit_all(self.quantities.histograms(self.step))
        self._emit_all(eval_at_bound(at_bound, self.step, self.agent.updates, c.histogram_bins))
        self._emit(
            EvalRecord(
                step=self.step,
                wall_time=self.elapsed + time.perf_counter() - clock,
                return_mean=float(np.mean(returns)),
                return_std=float(np.std(returns)),
                returns=tuple(returns),
                lengths=tuple(lengths),
            )
        )
        self.last_eval_step = self.step

    # ---- the loop --------------------------------------------------------------------
    def _env_step(self) -> None:
        c = self.config
        random_phase = self.step < c.start_steps  # type: ignore[operator]
        if random_phase:
            action = self.rng.uniform(-1.0, 1.0, self.agent.action_dim).astype(np.float32)
            behaviour = None
        else:
            action, behaviour = self.agent.act(self.obs, explore=True, rng=self.rng)
        next_obs, reward, terminated, truncated, _ = self.env.step(action)
        episode_end = terminated or truncated
        extra = None
        if self.correction.fields:
            collected = Collected(self.step, self.episode_length == 0, random_phase, action, behaviour)
            extra = self.correction.collect(collected)
        self.buffer.add(
            self.obs, action, float(reward), next_obs, terminated, episode_end, random_phase, behaviour, extra
        )
        self.sampler.added(self.buffer.last_slot)
        self.episode_return += float(reward)
        self.episode_length += 1
        self.step += 1
        if episode_end:
            self._emit(EpisodeRecord(self.step, self.episode, self.episode_return, self.episode_length))
            self.sampler.episode_end(self.episode_return, self.generator)
            self.episode += 1
            self.episode_return, self.episode_length = 0.0, 0
            self.reset_rng = dict(self.env.np_random.bit_generator.state)
            self.obs, _ = self.env.reset()
        else:
            self.obs = next_obs

    def _update(self) -> None:
        batch, correction = self.sample()
        self.record_update(batch, self.agent.update(batch, correction))

    def sample(self) -> tuple[Batch, Correction | None]:
        """This update's batch, from the run's generator, and the correction when it is active now."""
        correction = self.correction if self.correction.active(self.step) else None
        exclude_random = correction is not None and correction.excludes_random_phase
        batch = self.sampler.sample(self.config.batch_size, self.generator, exclude_random_phase=exclude_random)
        return batch, correction

    def record_update(self, batch: Batch, stats: UpdateStats, td_error: Tensor | None = None) -> None:
        """Account an update's statistics and logged quantities (and a prioritised sampler's TD errors: the
        agent's last, or ``td_error``, (B, 1), where the update ran elsewhere: a lane group's)."""
        self.stats.add(stats)
        logged = stats.logged
        if self.sampler.hears_td_errors:
            assert batch.slots is not None
            self.sampler.td_errors(batch.slots, td_error if td_error is not None else self.agent.last_td_error())
        if self.sampler.quantities:
            logged = {**logged, **self.sampler.logged()}
        if logged:
            self._emit_all(self.quantities.add(self.agent.updates, self.step, logged))

    def run(self) -> TrainResult:
        """Train to ``total_steps`` (or until asked to stop)."""
        clock = self.begin()
        while self.step < self.config.total_steps:
            if self._should_stop():
                return self.finish("stopped", clock)
            learning = self.learning
            self.env_step()
            if learning:
                self._update()
            self.end_step(clock)
        return self.finish("finished", clock)

    # The loop's parts, which a lane group (agents.lanes) runs for each of its lanes in lockstep.
    def begin(self) -> float:
        """Start a :meth:`run` (or a lane group's): the clock, and the first evaluation of a fresh run."""
        clock = self._clock = time.perf_counter()
        self._interval = (clock, self.step)
        if self.last_eval_step < 0:
            self._evaluate(clock)
        return clock

    def should_stop(self) -> bool:
        """Whether whoever runs this trainer asked it to stop (asked before every step)."""
        return bool(self._should_stop())

    @property
    def learning(self) -> bool:
        """Whether the next step updates the agent (its start phase is over)."""
        return self.step >= self.config.start_steps  # type: ignore[operator]

    def env_step(self) -> None:
        """One environment step: act, store the transition, account the episode."""
        self._env_step()

    def end_step(self, clock: float) -> None:
        """After a step: evaluate, report training statistics and checkpoint, when each is due."""
        c = self.config
        if self.step % c.eval_freq == 0:
            self._evaluate(clock)
        if self.step % c.stats_every == 0:
            now = time.perf_counter()
            interval_clock, interval_step = self._interval
            sps = (self.step - interval_step) / max(now - interval_clock, 1e-9)
            self._emit(self.stats.record(self.step, self.agent.updates, sps, self.agent.policy_kind == "stochastic"))
            self._interval = (now, self.step)
        if c.checkpoint_every and self.step % c.checkpoint_every == 0 and self.checkpoint_path is not None:
            self.save_checkpoint(clock=clock)

    @property
    def training_time(self) -> float:
        """Seconds spent training so far, over every :meth:`run` (resumed runs included)."""
        return self.elapsed + (time.perf_counter() - self._clock if self._clock is not None else 0.0)

    def finish(self, status: Literal["finished", "stopped"], clock: float) -> TrainResult:
        """End a run: the last evaluation of a finished one, a checkpoint and the pending quantities."""
        if status == "finished" and self.last_eval_step != self.step:
            self._evaluate(clock)
        path = self.checkpoint_path
        if path is not None and self.checkpoint_step != self.step:  # not twice at the same step
            self.save_checkpoint(clock=clock)
        self._emit_all(self.quantities.flush())
        self.elapsed += time.perf_counter() - clock
        self._clock = None
        return TrainResult(status, self.step, self.agent.updates, self.episode, self.elapsed, path)

    # ---- checkpoints -----------------------------------------------------------------
    def save_checkpoint(self, path: str | Path | None = None, clock: float | None = None) -> Path:
        """Write the full state (see :mod:`agents.checkpoint`); pending weights are reported first."""
        from agents.checkpoint import save

        if self.before_checkpoint is not None:
            self.before_checkpoint()
        self._emit_all(self.quantities.flush())
        target = Path(path) if path is not None else self.checkpoint_path
        if target is None:
            raise ValueError("no checkpoint path given")
        elapsed = self.elapsed + (time.perf_counter() - clock if clock is not None else 0.0)
        there = target.parent.is_dir()
        self._emit(CheckpointRecord(self.step, str(target)))
        place = self.place_checkpoint if target == self.checkpoint_path else None
        state = self.state_dict(elapsed)
        try:
            save(target, state, self.config, self.owner, place or os.replace)
        except OSError:
            if not there or target.parent.is_dir():  # never there, or still there: a real error
                raise
            # Its folder, there before, went while the file was written (deleted by hand): announced once more,
            # so that a sink that makes the folder (offpoc's run files) makes it again, then written once more.
            self._emit(CheckpointRecord(self.step, str(target)))
            save(target, state, self.config, self.owner, place or os.replace)
        if target == self.checkpoint_path:
            self.checkpoint_step = self.step
        self._emit(CheckpointSaved(self.step, str(target)))
        return target

    def state_dict(self, elapsed: float) -> dict[str, Any]:
        """Everything a resumed run needs (see :mod:`agents.checkpoint`, which adds the config and owner and
        writes the file): counters and ``elapsed`` seconds of training, every network, optimiser and learned
        tensor (the correction's too), the RNG states, the logged quantities' open interval, the sampler's
        state and, with ``checkpoint_buffer``, the replay buffer."""
        agent, correction = self.agent, self.correction
        return {
            "counters": {
                "step": self.step,
                "episode": self.episode,
                "updates": agent.updates,
                "elapsed": elapsed,
                "last_eval_step": self.last_eval_step,
            },
            "modules": {name: module.state_dict() for name, module in agent.modules().items()},
            "optimizers": {name: opt.state_dict() for name, opt in agent.optimizers().items()},
            "tensors": {name: tensor.detach().cpu() for name, tensor in agent.tensors().items()},
            "rng": {
                "torch": self.generator.get_state(),
                "numpy": self.rng.bit_generator.state,
                "env": self.env.np_random.bit_generator.state,
                # At an episode boundary: the env's RNG before the reset that began the episode now starting.
                "env_reset": self.reset_rng if self.episode_length == 0 else None,
            },
            "correction": {
                "modules": {name: module.state_dict() for name, module in correction.modules().items()},
                "optimizers": {name: opt.state_dict() for name, opt in correction.optimizers().items()},
                "state": correction.state_dict(),
            },
            "weights": self.quantities.state_dict(),  # the key of checkpoints written before the rename
            "buffer": self.buffer.state_dict() if self.config.checkpoint_buffer else None,
            "sampler": self.sampler.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Put :func:`state_dict`'s state (as every checkpoint format holds it) into this trainer, built from
        the same config. Raises KeyError, TypeError, RuntimeError or ValueError where it does not fit."""
        from agents.checkpoint import BIT_GENERATORS

        agent = self.agent
        for name, module in agent.modules().items():
            module.load_state_dict(state["modules"][name])
        for name, optimizer in agent.optimizers().items():
            optimizer.load_state_dict(state["optimizers"][name])
        with torch.no_grad():
            for name, tensor in agent.tensors().items():
                tensor.copy_(state["tensors"][name])
        counters = state["counters"]
        self.step = counters["step"]
        self.episode = counters["episode"]
        self.elapsed = counters["elapsed"]
        self.last_eval_step = counters["last_eval_step"]
        agent.updates = counters["updates"]
        self.generator.set_state(state["rng"]["torch"])
        self.rng.bit_generator.state = state["rng"]["numpy"]
        # At an episode boundary the reset that began the new episode is replayed from the RNG state it
        # started from: same observation, same simulator state, same RNG after it. Mid-episode the
        # simulator's state is not saved (Box2D cannot give it): a fresh episode starts instead.
        boundary = state["rng"].get("env_reset")
        env_state = boundary if boundary is not None else state["rng"]["env"]
        if env_state["bit_generator"] not in BIT_GENERATORS:
            raise ValueError(f"the environment RNG {env_state['bit_generator']!r} is not one of NumPy's")
        env_rng = np.random.Generator(getattr(np.random, env_state["bit_generator"])())
        env_rng.bit_generator.state = env_state
        self.env.np_random = env_rng
        self.reset_rng = dict(env_state)  # where this reset starts: a checkpoint before the next step replays it
        self.obs, _ = self.env.reset()
        own = state.get("correction", {"modules": {}, "optimizers": {}, "state": {}})
        correction = self.correction
        for name, module in correction.modules().items():
            module.load_state_dict(own["modules"][name])
        for name, optimizer in correction.optimizers().items():
            optimizer.load_state_dict(own["optimizers"][name])
        correction.load_state_dict(own["state"])
        self.quantities.load_state_dict(state["weights"], legacy_per_transition=agent.policy_kind == "stochastic")
        if state["buffer"] is not None:
            self.buffer.load_state_dict(state["buffer"])
        self.sampler.load_state_dict(state.get("sampler", {}), buffer_restored=state["buffer"] is not None)

    @classmethod
    def resume(
        cls,
        path: str | Path,
        sink: Any = None,
        should_stop: Callable[[], bool] | Any = None,
        total_steps: int | None = None,
        *,
        check: Callable[[CheckpointInfo], None] | None = None,
        owner: Mapping[str, Any] | None = None,
        checkpoint_path: str | Path | None = None,
    ) -> Trainer:
        """A trainer restored from a checkpoint, continuing at its step (optionally longer).

        ``check`` sees who wrote the file and with which config before anything is
        restored, and raises (:class:`~agents.checkpoint.CheckpointMismatch`) to refuse
        it. The trainer keeps the file's owner unless ``owner`` is given, and checkpoints
        to ``checkpoint_path`` (default: the file it was restored from).
        """
        from agents.checkpoint import does_not_fit, open_checkpoint

        info, state = open_checkpoint(Path(path), check)
        config = info.config if total_steps is None else dataclasses.replace(info.config, total_steps=total_steps)
        trainer = cls(
            config,
            sink=sink,
            checkpoint_path=Path(checkpoint_path) if checkpoint_path is not None else Path(path),
            should_stop=should_stop,
            owner=dict(owner) if owner is not None else info.owner,
        )
        try:
            trainer.load_state_dict(state)
        except (KeyError, TypeError, RuntimeError, ValueError) as error:  # the right config, the wrong insides
            raise does_not_fit(Path(path), error) from None
        return trainer
