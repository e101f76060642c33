"""An algorithm is one subclass and a ``register()``: here TD3 with a Huber critic loss, in a few lines. The
config, ``offpoc config`` and the backends take it from the registry, and it trains into a real store."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from torch import Tensor
from typer.testing import CliRunner

from agents import RecordingSink, Trainer
from agents.algorithms import TD3, register, td3, unregister
from agents.config import ConfigError, TrainConfig
from agents.options import Options
from offpoc_tui.cli import app
from offpoc_tui.runtime.lifecycle import StoreSink
from store import RunSpec, open_store
from store.runs import create_runs
from store.writer import RunWriter


# ---- what a user writes -------------------------------------------------------------------------
@dataclass(frozen=True)
class HuberOptions(Options):
    prefix: ClassVar[str] = "huber"

    delta: float = 1.0
    """Where the Huber loss turns from quadratic to linear."""

    def validate(self) -> None:
        if not self.delta > 0:
            raise ValueError(f"huber_delta must be positive, got {self.delta}")


class HuberTD3(TD3):
    """TD3 whose critics learn with a Huber loss (δ: its own option) instead of the squared TD error."""

    def critic_loss(self, q: Tensor, y: Tensor) -> Tensor:
        delta = self.config.option(HuberOptions).delta
        return torch.nn.functional.huber_loss(q, y.expand_as(q), reduction="none", delta=delta).sum(0)


@pytest.fixture
def huber() -> Iterator[None]:
    register("td3-huber", HuberTD3, summary="TD3 with a Huber critic loss", defaults=td3.DEFAULTS,
             options=(*td3.OPTIONS, HuberOptions), title="TD3 (Huber)")  # fmt: skip
    yield
    unregister("td3-huber")


# ---- what offpoc does with it -------------------------------------------------------------------
SMALL: dict[str, Any] = dict(env_id="Pendulum-v1", hidden=(32, 32), total_steps=600, start_steps=200, batch_size=32,
                             eval_freq=300, eval_episodes=1)  # fmt: skip


def test_its_option_is_its_own_and_td3s_options_are_its_too(huber: None) -> None:
    """huber_delta reads, stores and validates like a correction's option; a run of another algorithm is
    refused it in one line, through the CLI too; TD3's own options (declared again) are its."""
    config = TrainConfig.make(algo="td3-huber", huber_delta=2.0, policy_delay=3).resolved()
    assert config.option(HuberOptions).delta == 2.0 and config.to_dict()["huber_delta"] == 2.0
    assert TrainConfig.from_dict(config.to_dict()) == config and config.to_dict()["policy_delay"] == 3
    with pytest.raises(ConfigError, match=r"^huber_delta must be positive, got 0\.0$"):
        TrainConfig.make(algo="td3-huber", huber_delta=0.0).resolved()
    with pytest.raises(ConfigError, match=r"^huber_delta is an option of td3-huber: this run is td3 with correction"):
        TrainConfig.make(algo="td3", huber_delta=2.0).resolved()
    refused = CliRunner().invoke(app, ["run", "td3", "Pendulum-v1", "--set", "huber_delta=2", "--dry-run"])
    assert refused.exit_code == 2 and "huber_delta is an option of td3-huber: this run is td3" in refused.output


def test_its_title_recorded_by_a_submission_is_what_another_process_shows(huber: None, tmp_path: Path) -> None:
    """Tables and figures name it by its declared title; the store records it with the submission, so a reader
    that never registered it (another process: the dashboard, an export) names it so too."""
    import subprocess
    import sys

    from offpoc_tui.specs import record_plugins
    from store.db import write

    store = open_store(tmp_path / "t.db", create=True)
    with write(store):
        record_plugins(store)
    store.close()
    code = (
        "import sys; from store import open_store; from store.summary import method_label; open_store(sys.argv[1]);"
        " print(method_label('td3-huber', 'acoffpoc', 'jsd'), method_label('td3', 'none', None))"
    )
    shown = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t.db")], capture_output=True, text=True)
    assert shown.stdout.strip() == "TD3 (Huber) + AC-Off-POC TD3", shown.stderr


def test_the_config_and_the_listing_take_it_from_the_registry(huber: None) -> None:
    config = TrainConfig(algo="td3-huber").resolved()
    assert (config.start_steps, config.tau, config.hidden) == (25_000, 0.005, (256, 256)), "TD3's defaults"
    assert config.backend == "autograd", "auto: the fast backend's critic gradient is the squared TD error's"
    with pytest.raises(ConfigError, match="algorithm td3-huber has losses without hand-written gradients"):
        TrainConfig(algo="td3-huber", backend="fast").resolved()
    listing = CliRunner().invoke(app, ["config"], prog_name="offpoc").stdout
    row = next(line for line in listing.splitlines() if line.strip().startswith("td3-huber "))
    assert "TD3 with a Huber critic loss" in row and "no: autograd" in row


def test_the_fast_backend_is_offered_only_where_its_gradients_are_the_losses() -> None:
    """A subclass that changes the actor loss and inherits TD3's hand-written actor gradient, or that has a
    critic loss of its own, trains with autograd: the fast backend would train the parent's losses."""
    from agents.algorithms.base import hand_written

    class OwnActorLoss(TD3):
        def actor_loss(self, obs: Tensor) -> Tensor:
            return -2 * super().actor_loss(obs)

    assert hand_written(TD3) and not hand_written(HuberTD3) and not hand_written(OwnActorLoss)


def test_it_trains_end_to_end_into_a_store_with_its_own_critic_loss(huber: None, tmp_path: Path) -> None:
    """Same seed, same batches: only the critic loss differs from TD3's, and the critics end elsewhere."""
    db = tmp_path / "h.db"
    store = open_store(db, create=True)
    config = TrainConfig.make(algo="td3-huber", **SMALL)
    resolved = config.resolved()
    (run_id,) = create_runs(store, [RunSpec("huber", "td3-huber", "Pendulum-v1", "none", None, 0, 600,
                                            resolved.to_dict())])  # fmt: skip
    writer = RunWriter(store, run_id)
    trainer = Trainer(config, StoreSink(writer))
    trainer.run()
    writer.flush(600, 400)
    plain = Trainer(TrainConfig.make(algo="td3", backend="autograd", **SMALL), RecordingSink())
    plain.run()
    ours, theirs = trainer.agent.critic.parameters(), plain.agent.critic.parameters()
    assert not all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True)), "the Huber loss trained them"
    connection = sqlite3.connect(db)
    query = "SELECT step FROM evaluations WHERE run_id = ? ORDER BY step"
    assert [s for (s,) in connection.execute(query, (run_id,))] == [0, 300, 600]
    stored = connection.execute("SELECT config FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
    assert TrainConfig.from_dict(json.loads(stored)).algo == "td3-huber"


@pytest.mark.parametrize("name", ["ddpg", "td3", "sac"])
def test_what_the_catalogue_says_of_its_networks_is_what_it_builds(name: str) -> None:
    """The memory check and the hidden-sizes check read the catalogue, never an algorithm's name: its critic
    count, target actor and layer count are the networks it builds."""
    from agents import plugins
    from agents.algorithms import make_algorithm

    entry = plugins.algorithm(name)
    assert entry is not None
    config = TrainConfig(algo=name, env_id="Pendulum-v1", hidden=(8, 8)).resolved()
    agent = make_algorithm(config, 3, 1, torch.Generator().manual_seed(0))
    heads = [m for m in agent.critic.modules() if isinstance(m, torch.nn.Linear) and m.out_features == 1]
    assert len(heads) == entry.critics
    assert (agent.actor_target is not None) == entry.keeps_target_actor
    if entry.hidden_layers is not None:
        with pytest.raises(ConfigError, match=f"{name} needs exactly {entry.hidden_layers} hidden sizes"):
            TrainConfig(algo=name, hidden=(8,) * (entry.hidden_layers + 1)).resolved()


@pytest.mark.parametrize("name", ["HuberTD3", "td3 huber", ""])
def test_a_name_the_cli_could_not_choose_is_refused(name: str) -> None:
    from agents import corrections

    with pytest.raises(ValueError, match="use lower-case letters"):
        register(name, TD3, summary="", defaults=td3.DEFAULTS)
    with pytest.raises(ValueError, match="use lower-case letters"):
        corrections.register(name, lambda settings: corrections.Correction())
    assert name not in corrections.names()


def test_it_trains_as_lanes_equal_to_its_solo_runs(huber: None) -> None:
    """Nothing but its registration: a lane group stacks its update (its own critic loss and option, on the
    autograd engine), each lane within 1e-5 of its solo run, and ``run --lanes`` takes it."""
    from agents.lanes import LaneGroup

    small = {**SMALL, "total_steps": 230, "start_steps": 200, "eval_freq": 10_000}
    configs = [
        TrainConfig.make(algo="td3-huber", huber_delta=0.5, seed=seed, correction=correction, **small)
        for seed, correction in ((0, "none"), (1, "acoffpoc"))
    ]
    solo = [Trainer(config, RecordingSink()) for config in configs]
    for trainer in solo:
        trainer.run()
    lanes = [Trainer(config, RecordingSink()) for config in configs]
    assert [getattr(end, "status", end) for end in LaneGroup(lanes).run().values()] == ["finished"] * 2
    for lane, alone in zip(lanes, solo, strict=True):
        assert lane.agent.updates == alone.agent.updates == 30
        for got, want in zip(lane.agent.critic.parameters(), alone.agent.critic.parameters(), strict=True):
            assert (got - want).abs().max() <= 1e-5 * want.abs().max()
    submitted = CliRunner().invoke(app, ["run", "td3-huber", "Pendulum-v1", "--compare", "--correction", "acoffpoc",
                                         "--lanes", "2", "--dry-run"])  # fmt: skip
    assert submitted.exit_code == 0, submitted.output
