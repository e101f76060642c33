"""A lane group trains each lane as its solo run would: the same draws, the same numbers up to float rounding."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from agents import TrainConfig, Trainer
from agents.checkpoint import open_checkpoint
from agents.config import ConfigError
from agents.lanes import LaneGroup, check_lanes
from agents.sink import RecordingSink, TrainStatsRecord

START, UPDATES = 50, 10
TOLERANCE = 1e-5
"""Relative: max |θ_lane − θ_solo| / max |θ_solo| over each parameter tensor."""


def _config(algo: str, seed: int, correction: str, **changes: object) -> TrainConfig:
    settings: dict[str, object] = dict(
        algo=algo, env_id="Pendulum-v1", correction=correction, seed=seed, total_steps=START + UPDATES,
        start_steps=START, correction_start=START, batch_size=32, hidden=(32, 32), eval_freq=10_000,
        eval_episodes=1, stats_every=5, weights_block=5, checkpoint_every=0,
    )  # fmt: skip
    return TrainConfig.make(**{**settings, **changes})


def _four(algo: str, **changes: object) -> list[TrainConfig]:
    """The paper's comparison in one group: two seeds, each without and with AC-Off-POC."""
    return [_config(algo, seed, correction, **changes) for seed in (1, 2) for correction in ("none", "acoffpoc")]


def _tensors(trainer: Trainer) -> dict[str, torch.Tensor]:
    agent = trainer.agent
    named = {f"{m}.{n}": p for m, module in agent.modules().items() for n, p in module.named_parameters()}
    return named | dict(agent.tensors())


def _assert_close(lane: Trainer, solo: Trainer) -> None:
    for name, expected in _tensors(solo).items():
        got = _tensors(lane)[name]
        scale = expected.abs().max().clamp_min(1e-12)
        assert ((got - expected).abs().max() / scale).item() <= TOLERANCE, name


def _solo(configs: list[TrainConfig]) -> list[Trainer]:
    trainers = [Trainer(config, RecordingSink()) for config in configs]
    for trainer in trainers:
        trainer.run()
    return trainers


@pytest.mark.parametrize("algo", ["td3", "sac"])
def test_four_lanes_equal_their_four_solo_runs(algo: str) -> None:
    """Same state, same batches: every parameter (and SAC's temperature) within 1e-5 relative after 10 updates;
    each lane's generators end in its solo run's state (the same draws, in the same order: batches, target
    and policy noise, exploration), its actions and stored transitions match, and so do its logged λ."""
    configs = _four(algo)
    solo = _solo(configs)
    lanes = [Trainer(config, RecordingSink()) for config in configs]
    ends = LaneGroup(lanes).run()
    assert [end.status for end in ends.values()] == ["finished"] * 4  # type: ignore[union-attr]
    for lane, alone in zip(lanes, solo, strict=True):
        assert lane.agent.updates == alone.agent.updates == UPDATES
        _assert_close(lane, alone)
        assert torch.equal(lane.generator.get_state(), alone.generator.get_state())
        assert lane.rng.bit_generator.state == alone.rng.bit_generator.state
        assert lane.env.np_random.bit_generator.state == alone.env.np_random.bit_generator.state
        stored, expected = lane.buffer.state_dict()["arrays"], alone.buffer.state_dict()["arrays"]
        assert stored.keys() == expected.keys()
        for key in stored:
            np.testing.assert_allclose(stored[key], expected[key], rtol=TOLERANCE, atol=1e-6)
        assert len(lane.sink.blocks) == len(alone.sink.blocks)
        for got, want in zip(lane.sink.blocks, alone.sink.blocks, strict=True):
            assert got.quantity == want.quantity and np.array_equal(got.updates, want.updates)
            np.testing.assert_allclose(got.values, want.values, rtol=TOLERANCE, atol=1e-7)
        losses = [(s.critic_loss, s.actor_loss) for s in lane.sink.stats]
        want_losses = [(s.critic_loss, s.actor_loss) for s in alone.sink.stats]
        np.testing.assert_allclose(np.array(losses, dtype=float), np.array(want_losses, dtype=float), rtol=1e-4)
    assert any(block.quantity.name == "lambda" for block in lanes[1].sink.blocks)  # AC-Off-POC was active


class FailOnNonFinite(RecordingSink):
    """Refuses a non-finite training statistic, as the store's writer does."""

    def on_train_stats(self, record: TrainStatsRecord) -> None:
        if record.critic_loss is not None and not math.isfinite(record.critic_loss):
            raise ValueError("non-finite critic loss")
        super().on_train_stats(record)


def test_a_lane_that_turns_non_finite_fails_alone() -> None:
    """A NaN in one lane's critic reaches no other lane: that lane fails, the others finish as their solo runs."""
    configs = _four("td3", total_steps=START + 30)
    solo = _solo(configs)
    lanes = [Trainer(config, FailOnNonFinite()) for config in configs]
    group = LaneGroup(lanes)
    with torch.no_grad():
        next(lanes[2].agent.critic.parameters()).fill_(math.nan)  # through the lane's view: its slice alone
    ends = group.run()
    assert isinstance(ends[2], ValueError)
    assert [ends[k].status for k in (0, 1, 3)] == ["finished"] * 3  # type: ignore[union-attr]
    for k in (0, 1, 3):
        _assert_close(lanes[k], solo[k])


def test_a_stopped_lane_checkpoints_as_its_solo_run_and_the_rest_go_on(tmp_path: Path) -> None:
    """Stopped after 10 updates, a lane's checkpoint holds what its solo run's does at that step (networks,
    its own slice of Adam's moments, the generators), at a solo run's size; it resumes solo; the other lanes
    go on to the end as their solo runs."""
    configs = _four("sac", total_steps=START + 20)
    stop_at = START + UPDATES
    solo = [Trainer(c, RecordingSink(), checkpoint_path=tmp_path / f"solo{k}.pt") for k, c in enumerate(configs)]
    solo[1]._should_stop = lambda: solo[1].step >= stop_at
    for trainer in solo:
        trainer.run()
    lanes = [Trainer(c, RecordingSink(), checkpoint_path=tmp_path / f"lane{k}.pt") for k, c in enumerate(configs)]
    lanes[1]._should_stop = lambda: lanes[1].step >= stop_at
    told: list[tuple[int, int]] = []  # (lane, lane 0's step) as each lane's end is handed over
    ends = LaneGroup(lanes, on_end=lambda k, end: told.append((k, lanes[0].step))).run()
    assert ends[1].status == "stopped" and ends[1].step == stop_at  # type: ignore[union-attr]
    assert told[0] == (1, stop_at) and sorted(k for k, _ in told) == [0, 1, 2, 3]  # at once, the others on
    _, lane_state = open_checkpoint(tmp_path / "lane1.pt")
    _, solo_state = open_checkpoint(tmp_path / "solo1.pt")
    for optimizer, state in solo_state["optimizers"].items():
        got = lane_state["optimizers"][optimizer]["state"]
        assert got.keys() == state["state"].keys() and got
        for index, moments in state["state"].items():
            for key in ("exp_avg", "exp_avg_sq"):
                scale = moments[key].abs().max().clamp_min(1e-12)
                assert ((got[index][key] - moments[key]).abs().max() / scale).item() <= 1e-4, (optimizer, key)
            assert torch.equal(got[index]["step"], moments["step"])
    assert torch.equal(lane_state["rng"]["torch"], solo_state["rng"]["torch"])
    size, solo_size = (tmp_path / "lane1.pt").stat().st_size, (tmp_path / "solo1.pt").stat().st_size
    assert size < 1.1 * solo_size  # its slice alone, not the group's stacked tensors
    for k in (0, 2, 3):
        assert ends[k].status == "finished"  # type: ignore[union-attr]
        _assert_close(lanes[k], solo[k])
    resumed = Trainer.resume(tmp_path / "lane1.pt", RecordingSink())
    assert resumed.run().status == "finished" and resumed.agent.updates == 20


@pytest.mark.parametrize("algo", ["td3", "sac"])
def test_a_stopped_group_resumes_as_a_group_equal_to_its_lanes_resumed_solo(algo: str, tmp_path: Path) -> None:
    """Every lane stopped at one step (a group stopped, or killed after a checkpoint) re-forms one group from
    the lanes' checkpoints: the stacked networks, Adam's moments and TD3's delay phase go on where they were,
    and each lane ends as its checkpoint resumed solo would, within 1e-5. Lanes checkpointed at different
    steps cannot step together, and are refused in one line."""
    configs = _four(algo, total_steps=START + 2 * UPDATES + 1)  # an odd count: TD3's actor phase carries over
    stop_at = START + UPDATES + 1
    lanes = [Trainer(c, RecordingSink(), checkpoint_path=tmp_path / f"lane{k}.pt") for k, c in enumerate(configs)]
    for lane in lanes:
        lane._should_stop = lambda lane=lane: lane.step >= stop_at
    assert all(end.status == "stopped" for end in LaneGroup(lanes).run().values())  # type: ignore[union-attr]
    for k in range(4):  # each resumed run writes its file again at its end: one copy for each way of resuming
        for way in ("solo", "group"):
            shutil.copy(tmp_path / f"lane{k}.pt", tmp_path / f"{way}{k}.pt")
    solo = [Trainer.resume(tmp_path / f"solo{k}.pt", RecordingSink()) for k in range(4)]
    for trainer in solo:
        assert trainer.step == stop_at
        trainer.run()
    group = [Trainer.resume(tmp_path / f"group{k}.pt", RecordingSink()) for k in range(4)]
    ends = LaneGroup(group).run()
    assert [end.status for end in ends.values()] == ["finished"] * 4  # type: ignore[union-attr]
    for lane, alone in zip(group, solo, strict=True):
        assert lane.agent.updates == alone.agent.updates == 2 * UPDATES + 1
        _assert_close(lane, alone)
        assert torch.equal(lane.generator.get_state(), alone.generator.get_state())
        assert lane.rng.bit_generator.state == alone.rng.bit_generator.state
    fresh = Trainer(configs[0], RecordingSink())
    with pytest.raises(ConfigError, match=f"go on from one step; these were checkpointed at steps 0, {stop_at}"):
        LaneGroup([fresh, Trainer.resume(tmp_path / "lane1.pt", RecordingSink())])


def test_what_cannot_share_a_group_is_refused_in_one_line() -> None:
    """What a group cannot stack is declared by the plug-in, not listed by name (the algorithm's networks:
    layer_norm); and lanes share every other setting."""
    with pytest.raises(ConfigError, match="not layer_norm's LayerNorm"):
        check_lanes([_config("ddpg", 1, "none", layer_norm=True, backend="autograd")])
    check_lanes([_config("td3", 1, "ace", pg_form="lr", backend="autograd")])  # its own actor loss: per lane
    with pytest.raises(ConfigError, match="every setting but the seed and correction: batch_size"):
        check_lanes([_config("td3", 1, "none"), _config("td3", 2, "acoffpoc", batch_size=64)])
    # The algorithm's own options are the stacked update's: lanes differing in them cannot share it.
    with pytest.raises(ConfigError, match="every setting but the seed and correction: policy_delay, target_noise"):
        check_lanes([_config("td3", 1, "none"), _config("td3", 2, "none", policy_delay=5, target_noise=0.3)])
    check_lanes(_four("sac"))
    for algo in ("ddpg", "td3", "sac"):
        check_lanes([_config(algo, 1, "ris-off-pac", sampler="per"), _config(algo, 2, "ace", sampler="per")])


CORRECTIONS = ("none", "acoffpoc", "ace", "geoff-pac", "ipg", "ris-off-pac")


@pytest.mark.parametrize("backend", ["fast", "autograd"])
@pytest.mark.parametrize("sampler", ["uniform", "cer", "per", "ero"])
@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_every_correction_and_sampler_trains_as_lanes_equal_to_its_solo_runs(
    algo: str, sampler: str, backend: str
) -> None:
    """One group holds every built-in correction (each lane its own weights, actor states, own networks'
    steps and importance weights; on autograd, also ACE's and Geoff-PAC's own actor losses), DDPG's critic
    decay included: each lane within 1e-5 of its solo run after 10 updates, on either gradient engine; its
    generator in its solo run's state; its logged quantities (λ, ρ̄, a sampler's priorities' weights) and its
    losses alike."""
    configs = [_config(algo, 1 + k, c, sampler=sampler, backend=backend) for k, c in enumerate(CORRECTIONS)]
    if backend == "autograd":  # and the forms that write their own actor loss, through each lane's own agent
        own = [("ace", {"pg_form": "lr"}), ("geoff-pac", {"pg_form": "lr"}), ("geoff-pac", {"geoff_m2": "one"})]
        configs += [_config(algo, 7 + k, c, sampler=sampler, backend=backend, **o) for k, (c, o) in enumerate(own)]
    solo = _solo(configs)
    lanes = [Trainer(config, RecordingSink()) for config in configs]
    ends = LaneGroup(lanes).run()
    assert [getattr(end, "status", end) for end in ends.values()] == ["finished"] * len(configs)
    for lane, alone in zip(lanes, solo, strict=True):
        assert lane.agent.updates == alone.agent.updates == UPDATES
        _assert_close(lane, alone)
        for name, module in alone.correction.modules().items():
            for key, want in module.state_dict().items():
                got = lane.correction.modules()[name].state_dict()[key]
                assert (got - want).abs().max() <= TOLERANCE * want.abs().max().clamp_min(1e-12), (name, key)
        assert torch.equal(lane.generator.get_state(), alone.generator.get_state())
        assert [b.quantity.name for b in lane.sink.blocks] == [b.quantity.name for b in alone.sink.blocks]
        for got, want in zip(lane.sink.blocks, alone.sink.blocks, strict=True):
            np.testing.assert_allclose(got.values, want.values, rtol=1e-4, atol=1e-6)
        losses = [(s.critic_loss, s.actor_loss) for s in lane.sink.stats]
        want_losses = [(s.critic_loss, s.actor_loss) for s in alone.sink.stats]
        np.testing.assert_allclose(np.array(losses, dtype=float), np.array(want_losses, dtype=float), rtol=1e-4)


def test_a_group_of_one_is_its_solo_run_to_the_bit() -> None:
    """One lane has nothing to stack: it trains through the solo loop, bit for bit its solo run."""
    config = _config("sac", 3, "acoffpoc")
    (solo,) = _solo([config])
    lane = Trainer(config, RecordingSink())
    assert LaneGroup([lane]).run()[0].status == "finished"  # type: ignore[union-attr]
    for name, expected in _tensors(solo).items():
        assert torch.equal(_tensors(lane)[name], expected), name


def test_a_lane_group_must_fit_the_machine_as_one_process(tmp_path: Path) -> None:
    """The memory check is per group: two runs that each fit alone, but not together in one process, are
    refused as a group of two in one line (exit 2), and nothing is queued; alone, they are queued."""
    from typer.testing import CliRunner

    from offpoc_tui import specs
    from offpoc_tui.cli import app

    one = specs.memory_needed(_config("td3", 0, "none", buffer_size=32, total_steps=32).resolved(), (3, 1))
    slots = int((0.6 * specs.MEMORY_SHARE * specs._memory() - one) / (4 * (3 + 1 + 2)))  # one run: 60% of it
    args = ["run", "td3", "Pendulum-v1", "--seeds", "0-1", "--steps", str(slots), "--set", f"buffer_size={slots}",
            "--set", "hidden=32,32", "--set", "batch_size=32", "--db", str(tmp_path / "s.db")]  # fmt: skip
    grouped = CliRunner().invoke(app, [*args, "--lanes", "2", "--dry-run"])
    assert grouped.exit_code == 2 and "a lane group of 2 runs needs about" in grouped.output, grouped.output
    assert len(grouped.output.strip().splitlines()) == 1 and not (tmp_path / "s.db").exists()
    alone = CliRunner().invoke(app, [*args, "--dry-run"])
    assert alone.exit_code == 0, alone.output
    sweep = tmp_path / "s.toml"  # sweep --lanes: the same check, before anything is queued
    sweep.write_text(
        f'name = "m"\nalgos = ["td3"]\nenvs = ["Pendulum-v1"]\nseeds = "0-1"\nsteps = {slots}\n[[methods]]\n'
        f'correction = "none"\n[set]\nbuffer_size = {slots}\nhidden = [32, 32]\nbatch_size = 32\n'
    )
    for dry in (["--dry-run"], []):
        swept = CliRunner().invoke(app, ["sweep", str(sweep), "--lanes", "2", *dry, "--db", str(tmp_path / "s.db")])
        assert swept.exit_code == 2 and "a lane group of 2 runs needs about" in swept.output, swept.output
    if (tmp_path / "s.db").exists():  # the real sweep opened its store: nothing was queued in it
        import sqlite3

        assert sqlite3.connect(tmp_path / "s.db").execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)
