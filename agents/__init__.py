"""offpoc's PyTorch library: DDPG, TD3 and SAC with the AC-Off-POC correction.

Plain PyTorch, no UI and no storage: training reports through a sink.

    from agents import TrainConfig, Trainer, RecordingSink
    sink = RecordingSink()
    Trainer(TrainConfig(algo="td3", env_id="Hopper-v4", correction="acoffpoc"), sink).run()
"""

from agents.config import ConfigError, TrainConfig
from agents.config_text import with_overrides
from agents.envs import EnvError, make_env
from agents.sink import (
    CheckpointRecord,
    CheckpointSaved,
    EpisodeRecord,
    EvalRecord,
    QuantityBlock,
    QuantityHistogram,
    RecordingSink,
    Sink,
    TrainStatsRecord,
)
from agents.training import Trainer, TrainResult

__all__ = [
    "CheckpointRecord",
    "CheckpointSaved",
    "ConfigError",
    "EnvError",
    "EpisodeRecord",
    "EvalRecord",
    "QuantityBlock",
    "QuantityHistogram",
    "RecordingSink",
    "Sink",
    "TrainConfig",
    "TrainResult",
    "TrainStatsRecord",
    "Trainer",
    "make_env",
    "with_overrides",
]
