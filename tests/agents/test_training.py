"""The training loop on real MuJoCo environments, in-process: smoke runs, stop, checkpoint/resume."""

from __future__ import annotations

import contextlib
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from agents import CheckpointRecord, RecordingSink, TrainConfig, Trainer
from tests.support.processes import limit_memory

# Small networks and batches keep these runs to seconds; the loop, env and algorithms are the real ones.
FAST = dict(env_id="Hopper-v4", hidden=(64, 64), batch_size=64, start_steps=500, eval_freq=1000, eval_episodes=2,
            stats_every=500)  # fmt: skip


@pytest.mark.parametrize("correction", ["none", "acoffpoc"])
@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_smoke_two_thousand_steps(algo: str, correction: str) -> None:
    sink = RecordingSink()
    config = TrainConfig(algo=algo, correction=correction, total_steps=2000, correction_start=1000, **FAST)
    result = Trainer(config, sink).run()

    assert result.status == "finished" and result.step == 2000
    assert result.updates == 1500  # one update per step after the 500 random steps
    assert [e.step for e in sink.evals] == [0, 1000, 2000]
    assert all(len(e.returns) == 2 and np.isfinite(e.return_mean) for e in sink.evals)
    assert sum(ep.length for ep in sink.episodes) <= 2000 and len(sink.episodes) > 5
    stats = [s for s in sink.stats if s.critic_loss is not None]
    assert [s.step for s in stats] == [1000, 1500, 2000] and all(np.isfinite(s.critic_loss) for s in stats)
    assert all(s.sps > 0 for s in sink.stats)
    weights = sink.quantity_values()
    own = {"at_bound"} if algo != "sac" else set()  # DDPG's and TD3's share of actions at the bounds
    own |= {"eval_at_bound"}  # every algorithm's, per evaluation
    own |= {"decay_share"} if algo == "ddpg" else set()  # DDPG's critic has a weight decay
    assert [int(b.steps[0]) for b in sink.blocks if b.quantity.name == "eval_at_bound"] == [0, 1000, 2000]
    assert {h.quantity.name for h in sink.histograms} - {"lambda", "lambda_ess"} == own
    if correction == "none":
        assert weights.shape[0] == 0 and {h.quantity.name for h in sink.histograms} == own
        return
    # Every batch from the correction's start (the update in step 1000) has its weight recorded.
    active = 1001
    assert weights.shape[0] == active
    assert np.all((weights >= 0) & (weights <= 1)) and np.isfinite(weights).all()
    steps = np.concatenate([block.steps for block in sink.blocks if block.quantity.name == "lambda"])
    assert steps[-1] == 2000 and np.all(np.diff(steps) == 1)
    lambdas = [h for h in sink.histograms if h.quantity.name == "lambda"]
    assert sum(int(h.counts.sum()) for h in lambdas) == active * (config.batch_size if algo == "sac" else 1)
    if algo == "sac":  # and how many transitions each update rested on: (Σλ)²/Σλ² ∈ [1, B]
        ess = sink.quantity_values("lambda_ess")[:, 0]
        assert len(ess) == active and np.all((ess >= 1) & (ess <= config.batch_size + 1e-3))


def test_same_seed_same_run_and_a_different_seed_differs() -> None:
    def returns(seed: int) -> list[float]:
        sink = RecordingSink()
        Trainer(TrainConfig(algo="td3", total_steps=1000, seed=seed, **FAST), sink).run()
        return [e.return_mean for e in sink.evals]

    assert returns(3) == returns(3)
    assert returns(3) != returns(4)


def test_stop_checkpoints_and_resume_continues_from_the_same_step(tmp_path: Path) -> None:
    path = tmp_path / "run.pt"
    stop = threading.Event()

    class StopAt(RecordingSink):
        def on_episode(self, record) -> None:  # type: ignore[no-untyped-def]
            super().on_episode(record)
            if record.step >= 1200:
                stop.set()

    config = TrainConfig(algo="sac", correction="acoffpoc", total_steps=2000, correction_start=1000, **FAST)
    first = Trainer(config, StopAt(), checkpoint_path=path, should_stop=stop)
    result = first.run()
    assert result.status == "stopped" and path.exists()
    stopped_at = result.step
    assert 1200 <= stopped_at < 2000

    saved = torch.load(path, weights_only=False)
    resumed = Trainer.resume(path, RecordingSink())
    assert resumed.step == stopped_at and resumed.agent.updates == result.updates
    # The same RNG streams pick up where they left off.
    assert torch.equal(resumed.generator.get_state(), first.generator.get_state())
    assert resumed.rng.bit_generator.state == first.rng.bit_generator.state
    assert saved["rng"]["env"] == first.env.np_random.bit_generator.state
    for name, module in first.agent.modules().items():
        for x, y in zip(module.parameters(), resumed.agent.modules()[name].parameters()):
            assert torch.equal(x, y), name
    assert torch.equal(resumed.agent.log_alpha, first.agent.log_alpha)  # type: ignore[attr-defined]
    assert resumed.buffer.filled == first.buffer.filled
    np.testing.assert_array_equal(resumed.buffer.obs, first.buffer.obs)

    # Resuming twice from one checkpoint gives the same continuation, and it finishes the run.
    # (A resumed trainer keeps checkpointing to its file, so each resume gets its own copy.)
    copies = [tmp_path / "a.pt", tmp_path / "b.pt"]
    for copy in copies:
        shutil.copy(path, copy)
    sinks = [RecordingSink(), RecordingSink()]
    results = [Trainer.resume(copy, sink).run() for copy, sink in zip(copies, sinks)]
    assert all(r.status == "finished" and r.step == 2000 for r in results)
    assert [e.return_mean for e in sinks[0].evals] == [e.return_mean for e in sinks[1].evals]
    assert [e.step for e in sinks[0].evals] == [2000]  # no evaluation step is repeated
    np.testing.assert_array_equal(sinks[0].quantity_values(), sinks[1].quantity_values())
    first_update = next(b for b in sinks[0].blocks if b.quantity.name == "lambda").updates[0]
    assert first_update == result.updates + 1


def test_a_run_stopped_at_step_zero_resumes_to_the_uninterrupted_run(tmp_path: Path) -> None:
    """A stop before the first step checkpoints at step 0: the resumed run replays the first episode's seeded
    reset (its observation, the simulator's state) and trains as if it had never stopped."""
    config = TrainConfig(algo="td3", total_steps=1200, seed=5, **FAST)
    whole = RecordingSink()
    Trainer(config, whole).run()

    path = tmp_path / "run.pt"
    result = Trainer(config, RecordingSink(), checkpoint_path=path, should_stop=lambda: True).run()
    assert result.status == "stopped" and result.step == 0
    resumed = RecordingSink()
    Trainer.resume(path, resumed).run()
    assert [(e.step, e.return_mean) for e in resumed.evals] == [(e.step, e.return_mean) for e in whole.evals][1:]
    assert [(e.step, e.ret) for e in resumed.episodes] == [(e.step, e.ret) for e in whole.episodes]


def test_periodic_checkpoints_and_resume_to_a_longer_total(tmp_path: Path) -> None:
    path = tmp_path / "run.pt"
    config = TrainConfig(algo="td3", total_steps=1000, checkpoint_every=500, checkpoint_buffer=False, **FAST)
    assert Trainer(config, checkpoint_path=path).run().checkpoint == path
    sink = RecordingSink()
    resumed = Trainer.resume(path, sink, total_steps=1500)
    assert resumed.buffer.filled == 0  # buffer left out of this checkpoint
    result = resumed.run()
    assert result.step == 1500 and [e.step for e in sink.evals] == [1500]


def test_a_corrupt_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        Trainer.resume(bad)


READ = """
import os, sys
from pathlib import Path
from agents.checkpoint import CheckpointMismatch, read_state
before = set(os.listdir("/proc/self/fd"))
for _ in range(3):
    try:
        read_state(Path(sys.argv[1]))
    except CheckpointMismatch as error:
        said = str(error)
    else:
        said = "read"
assert set(os.listdir("/proc/self/fd")) == before, "a file descriptor left open"
print(said)
"""


@pytest.mark.parametrize(
    "hostile", ["a FIFO", "a FIFO holding data", "a link to /dev/zero", "a folder", "a link to a file"]
)
def test_a_checkpoint_is_read_only_as_a_regular_file(tmp_path: Path, hostile: str) -> None:
    """A FIFO in the checkpoint's place hung the reader (a resumed run's worker, then `stop` waiting on it; `analyze
    weights`) until someone wrote to it; a FIFO holding data, a device or a folder is no checkpoint either: each is
    one line at once, and no file descriptor is left open. A link to a regular file is read (a user's path to a
    checkpoint may be one). In a process of its own (2 GiB, 60 s), so a hang fails the test, not the run."""
    import os
    import subprocess
    import sys

    config = TrainConfig(algo="td3", total_steps=300, checkpoint_every=300, checkpoint_buffer=False, **FAST)
    saved = tmp_path / "saved.pt"
    Trainer(config, checkpoint_path=saved).run()
    path, held = tmp_path / "checkpoint.pt", None
    if hostile.startswith("a FIFO"):
        os.mkfifo(path)
        if hostile == "a FIFO holding data":  # a whole checkpoint in the pipe: still not a file
            held = os.open(path, os.O_RDWR)
            os.set_blocking(held, False)
            with contextlib.suppress(BlockingIOError):
                os.write(held, saved.read_bytes()[:60_000])  # what a pipe holds
    elif hostile == "a folder":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero" if "zero" in hostile else saved)

    try:
        done = subprocess.run(
            [sys.executable, "-c", READ, str(path)], capture_output=True, text=True, timeout=60, preexec_fn=limit_memory
        )
    finally:
        if held is not None:
            os.close(held)
    expected = {"a link to a file": "read", "a folder": f"cannot read checkpoint {path}: a folder, not a file"}
    said = f"cannot read checkpoint {path}: not a regular file (a FIFO or a device)"
    assert (done.returncode, done.stdout.strip()) == (0, expected.get(hostile, said)), done.stderr[-2000:]


def test_a_checkpoint_folder_deleted_while_the_file_is_written_is_announced_again_and_written(
    tmp_path: Path,
) -> None:
    """The folder is there when the run starts, and the sink makes it on each announced checkpoint; the first
    time, it goes before the file is written (a user deleting run files at that moment): the trainer announces
    once more and saves. A folder that was never there is an error, announced once."""
    folder = tmp_path / "runs" / "1"
    folder.mkdir(parents=True)
    announced: list[int] = []

    class Makes(RecordingSink):
        def on_checkpoint(self, record: CheckpointRecord) -> None:
            announced.append(record.step)
            folder.mkdir(parents=True, exist_ok=True)
            if len(announced) == 1:
                shutil.rmtree(tmp_path / "runs")  # made, then deleted before the save

    config = TrainConfig(algo="td3", total_steps=600, checkpoint_every=500, checkpoint_buffer=False, **FAST)
    result = Trainer(config, Makes(), checkpoint_path=folder / "checkpoint.pt").run()
    assert result.step == 600 and announced == [500, 500, 600]
    assert Trainer.resume(folder / "checkpoint.pt").step == 600

    class Counts(RecordingSink):
        def on_checkpoint(self, record: CheckpointRecord) -> None:
            announced.append(record.step)

    announced.clear()
    nowhere = Trainer(config, Counts(), checkpoint_path=tmp_path / "missing" / "1" / "checkpoint.pt")
    with pytest.raises(FileNotFoundError):
        nowhere.run()
    assert announced == [500]
