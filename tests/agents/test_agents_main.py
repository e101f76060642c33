"""``python -m agents``: one line and exit 2 on bad input; a tiny real run writes its records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agents", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["td3", "CartPole-v1"], "error: 'CartPole-v1' has a Discrete action space"),
        (["td3", "NoSuchEnv-v0"], "error: unknown environment 'NoSuchEnv-v0'"),
        (["sac", "Hopper-v4", "--correction", "retrace"], "error: unknown correction 'retrace'"),
        (["td3", "Hopper-v4", "--steps", "0"], "error: total_steps must be at least 1"),
        (["td3", "Hopper-v4", "--set", "bogus=1"], "error: unknown config field 'bogus'"),
        (["td3", "Hopper-v4", "--set", "batch_size"], "error: --set takes KEY=VALUE"),
        (["td3", "Hopper-v4", "--set", "batch_size=lots"], "error: batch_size expects int"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    result = run(*args, "--records", "out.jsonl", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().startswith(message)
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_a_short_run_writes_json_records(tmp_path: Path) -> None:
    settings = ["start_steps=100", "hidden=16,16", "eval_freq=100", "eval_episodes=1", "stats_every=100"]
    args = ["td3", "Hopper-v4", "--correction", "acoffpoc", "--steps", "300", "--records", "out.jsonl"]
    result = run(*args, *(x for s in settings for x in ("--set", s)), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    evals = [r["step"] for r in records if r["type"] == "EvalRecord"]
    assert evals == [0, 100, 200, 300]
    blocks = [r for r in records if r["type"] == "QuantityBlock"]
    lams = [v for r in blocks if r["quantity"]["name"] == "lambda" for row in r["values"] for v in row]
    assert len(lams) == 200 and all(0 <= v <= 1 for v in lams)
    shares = [v for r in blocks if r["quantity"]["name"] == "at_bound" for row in r["values"] for v in row]
    assert len(shares) == 100 and all(0 <= v <= 1 for v in shares)  # TD3's actor steps every other update
