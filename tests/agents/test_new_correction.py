"""A correction with two options is one class, one options dataclass and a ``register()``: the config,
``--set``, the stored JSON and ``offpoc config`` take it from the registry, and it trains."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from typer.testing import CliRunner

from agents import Trainer
from agents.config import ConfigError, TrainConfig
from agents.config_text import with_overrides
from agents.corrections import Correction, CorrectionSettings, Weights, register, unregister
from agents.options import Options
from agents.replay import Batch
from offpoc_tui.cli import app
from offpoc_tui.runtime.lifecycle import StoreSink
from store import RunSpec, open_store
from store.runs import create_runs
from store.writer import RunWriter


# ---- what a user writes -------------------------------------------------------------------------
@dataclass(frozen=True)
class ScaleOptions(Options):
    prefix: ClassVar[str] = "scale"

    critic: float = 1.0
    """The critic loss's factor, in [0, 1]."""
    actor: float = 0.5
    """The actor loss's factor, in [0, 1]."""

    def validate(self) -> None:
        for name, value in self.flat().items():
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {value}")


class Scale(Correction):
    """Fixed factors on both losses."""

    def __init__(self, settings: CorrectionSettings) -> None:
        super().__init__(settings)
        options = settings.option(ScaleOptions)
        self.factors = torch.tensor(options.critic), torch.tensor(options.actor)

    def weights(self, batch: Batch, agent: Any) -> Weights:
        return Weights(*self.factors)


@pytest.fixture
def scale() -> Iterator[None]:
    register("scale", Scale, summary="fixed factors on both losses", options=(ScaleOptions,))
    yield
    unregister("scale")


# ---- what offpoc does with it -------------------------------------------------------------------
def test_its_options_are_config_fields_with_docs_checks_and_a_stored_form(scale: None) -> None:
    config = with_overrides(TrainConfig(correction="scale"), {"scale_actor": "0.25"}).resolved()
    assert config.option(ScaleOptions) == ScaleOptions(critic=1.0, actor=0.25)
    assert TrainConfig.from_dict(config.to_dict()) == config and config.to_dict()["scale_critic"] == 1.0
    with pytest.raises(ConfigError, match=r"^scale_actor must be in \[0, 1\], got 2.0$"):
        with_overrides(TrainConfig(correction="scale"), {"scale_actor": "2"}).resolved()
    with pytest.raises(ConfigError, match="scale_actor expects float, got 'half'"):
        with_overrides(TrainConfig(correction="scale"), {"scale_actor": "half"})
    with pytest.raises(ConfigError, match="scale_actor is an option of scale: this run is td3 with correction none"):
        with_overrides(TrainConfig(), {"scale_actor": "0.1"}).resolved()

    listing = CliRunner().invoke(app, ["config"], prog_name="offpoc").stdout
    assert "The actor loss's factor, in [0, 1]." in listing
    row = next(line for line in listing.splitlines() if line.strip().startswith("scale "))
    assert "fixed factors on both losses" in row and "scale_critic, scale_actor" in row


def test_it_trains_end_to_end_into_a_store(scale: None, tmp_path: Path) -> None:
    """scale_actor=0: the actor never moves; the critic (factor 1) learns as the baseline's does."""
    config = TrainConfig.make(algo="td3", env_id="Pendulum-v1", correction="scale", scale_actor=0.0, hidden=(32, 32),
                              total_steps=600, start_steps=200, correction_start=0, batch_size=32, eval_freq=300,
                              eval_episodes=1)  # fmt: skip
    db = tmp_path / "s.db"
    store = open_store(db, create=True)
    resolved = config.resolved()
    run = RunSpec("scale", "td3", "Pendulum-v1", "scale", None, 0, 600, resolved.to_dict())
    (run_id,) = create_runs(store, [run])
    writer = RunWriter(store, run_id)
    trainer = Trainer(config, StoreSink(writer))
    actor_before = [p.detach().clone() for p in trainer.agent.actor.parameters()]
    critic_before = [p.detach().clone() for p in trainer.agent.critic.parameters()]
    trainer.run()
    writer.flush(600, 400)
    assert all(torch.equal(a, b) for a, b in zip(actor_before, trainer.agent.actor.parameters(), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(critic_before, trainer.agent.critic.parameters(), strict=True))
    query = "SELECT step FROM evaluations WHERE run_id = ? ORDER BY step"
    assert [s for (s,) in sqlite3.connect(db).execute(query, (run_id,))] == [0, 300, 600]
    stored = sqlite3.connect(db).execute("SELECT config FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
    assert TrainConfig.from_dict(json.loads(stored)).option(ScaleOptions).actor == 0.0


def test_its_paper_name_and_method_option_are_the_stores_to_keep(tmp_path: Path) -> None:
    """Declared at ``register()``, recorded with the runs: a process that never registered it (the dashboard, a
    table) names it, keeps its method option's values apart as methods, and lists it after the built-in ones."""
    import subprocess
    import sys

    from offpoc_tui.specs import RunRequest, build_specs, record_plugins
    from store.db import write
    from store.runs import insert_runs

    with pytest.raises(ValueError, match="method_option nope of scale is none of its options"):
        register("scale", Scale, options=(ScaleOptions,), method_option="nope")
    register("scale", Scale, options=(ScaleOptions,), paper_name="Scale-PC", method_option="scale_actor")
    try:
        request = RunRequest("td3", "Pendulum-v1", "scale", [0], {"total_steps": 5000},
                             {"scale_actor": "0.25", "start_steps": "1000"},
                             compare=False, name=None)  # fmt: skip
        (spec,) = build_specs(request)
        store = open_store(tmp_path / "s.db", create=True)
        with write(store):
            record_plugins(store)
            insert_runs(store, [spec])
        store.close()
    finally:
        unregister("scale")
    assert spec.divergence == "0.25" and spec.name == "td3-Pendulum-v1-scale-0.25"
    merged = tmp_path / "merged.db"  # a merge carries the record with the runs
    open_store(merged, create=True).close()
    assert CliRunner().invoke(app, ["merge", str(tmp_path / "s.db"), "--db", str(merged)]).exit_code == 0
    code = (
        "import sys; from store import open_store; from store.summary import method_label, method_rank\n"
        "open_store(sys.argv[1])\n"
        "print(method_label('td3', 'scale', '0.25'), method_label('td3', 'scale', '0.5'), sep='|')\n"
        "print(method_rank('scale') > method_rank('ris-off-pac') > method_rank('acoffpoc') > method_rank('none'))\n"
    )
    for path in (tmp_path / "s.db", merged):
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
        assert out.stdout.split("\n")[:2] == ["TD3 + Scale-PC (0.25)|TD3 + Scale-PC", "True"], (path, out.stderr)
