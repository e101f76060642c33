"""Lanes on a GPU train what the same lanes train on the CPU, up to float rounding (skipped without a GPU).

Run on a GPU machine by ``benchmarks/gpu_check.sh``. Every draw a run makes comes from its CPU generator
whatever the device (``agents/training.py``), so the two groups see the same batches and the same noise;
what differs is how the GPU rounds its products and sums.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents import TrainConfig, Trainer
from agents.lanes import LaneGroup
from agents.sink import RecordingSink

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device here (benchmarks/gpu_check.sh runs this on a GPU)"
)

START, UPDATES = 100, 10
TOLERANCE = 1e-4
"""Relative: max |θ_gpu − θ_cpu| / max |θ_cpu| over each parameter tensor, after ``UPDATES`` updates."""


def _lanes(algo: str, device: str) -> list[Trainer]:
    """The paper's comparison as one group: two seeds, each without and with AC-Off-POC, its networks the paper's."""
    settings = dict(
        algo=algo, env_id="Hopper-v4", total_steps=START + UPDATES, start_steps=START, correction_start=START,
        eval_freq=10_000, eval_episodes=1, stats_every=5, weights_block=5, checkpoint_every=0, device=device,
    )  # fmt: skip
    configs = [
        TrainConfig(correction=correction, seed=seed, **settings)  # type: ignore[arg-type]
        for seed in (1, 2)
        for correction in ("none", "acoffpoc")
    ]
    return [Trainer(config, RecordingSink()) for config in configs]


def _tensors(trainer: Trainer) -> dict[str, torch.Tensor]:
    agent = trainer.agent
    named = {f"{m}.{n}": p for m, module in agent.modules().items() for n, p in module.named_parameters()}
    return {name: t.detach().cpu() for name, t in (named | dict(agent.tensors())).items()}


@pytest.mark.parametrize("algo", ["td3", "sac"])
def test_lanes_on_the_gpu_equal_the_same_lanes_on_the_cpu(algo: str) -> None:
    groups = {device: _lanes(algo, device) for device in ("cpu", "cuda")}
    for lanes in groups.values():
        ends = LaneGroup(lanes).run()
        assert [getattr(end, "status", end) for end in ends.values()] == ["finished"] * 4
    for cpu, gpu in zip(groups["cpu"], groups["cuda"], strict=True):
        assert next(gpu.agent.modules()["actor"].parameters()).is_cuda
        assert gpu.agent.updates == cpu.agent.updates == UPDATES
        assert torch.equal(gpu.generator.get_state(), cpu.generator.get_state())  # the same draws, as many
        expected = _tensors(cpu)
        for name, got in _tensors(gpu).items():
            scale = expected[name].abs().max().clamp_min(1e-12)
            assert ((got - expected[name]).abs().max() / scale).item() <= TOLERANCE, name
        assert len(gpu.sink.blocks) == len(cpu.sink.blocks) > 0
        for got_block, want in zip(gpu.sink.blocks, cpu.sink.blocks, strict=True):
            assert got_block.quantity == want.quantity
            np.testing.assert_allclose(got_block.values, want.values, rtol=TOLERANCE, atol=1e-6)
