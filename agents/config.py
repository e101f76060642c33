"""The run configuration: one frozen dataclass, the single source of defaults.

Fields left ``None`` take the algorithm's default (spec table) when the config
is resolved; the resolved config is what gets stored with a run. The CLI's
``--set key=value`` addresses these field names (see :func:`with_overrides`).
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any

from agents.corrections.divergences import DIVERGENCES

ALGORITHMS: tuple[str, ...] = ("ddpg", "td3", "sac")
BACKENDS: tuple[str, ...] = ("auto", "autograd", "fast")


class ConfigError(ValueError):
    """A config value is missing, malformed or out of range; the message says which."""


@dataclass(frozen=True)
class AlgorithmDefaults:
    """Per-algorithm defaults for the fields a ``TrainConfig`` leaves ``None``."""

    start_steps: int
    tau: float
    actor_lr: float
    critic_lr: float
    critic_weight_decay: float
    hidden: tuple[int, ...]
    correction_delay: int
    """Correction starts at ``correction_delay × start_steps`` env steps."""


ALGORITHM_DEFAULTS: dict[str, AlgorithmDefaults] = {
    "ddpg": AlgorithmDefaults(1_000, 0.001, 1e-4, 1e-3, 1e-2, (400, 300), 1),
    "td3": AlgorithmDefaults(25_000, 0.005, 3e-4, 3e-4, 0.0, (256, 256), 1),
    "sac": AlgorithmDefaults(10_000, 0.005, 3e-4, 3e-4, 0.0, (256, 256), 5),
}


@dataclass(frozen=True)
class TrainConfig:
    """One training run."""

    algo: str = "td3"
    """Algorithm: ddpg, td3 or sac."""
    env_id: str = "Hopper-v4"
    """Any gymnasium id with a Box action space."""
    correction: str = "none"
    """Registered correction name: none, acoffpoc, or a competitor (ace, geoff-pac, ipg, ris-off-pac)."""
    divergence: str = "jsd"
    """AC-Off-POC divergence: jsd (Monte Carlo, the paper), symkl (the authors' code) or kl."""
    ref_std: float | None = None
    """Reference std on the covariance diagonal (deterministic variant); None = exploration_std."""
    correction_start: int | None = None
    """Env step at which the correction starts; None = start_steps (DDPG/TD3), 5 × start_steps (SAC)."""
    acoffpoc_ratio: str = "sampled"
    """AC-Off-POC (SAC): where λ_i's clip π/η is evaluated: sampled (a fresh action of the current policy,
    Theorem 1 and the authors' code) or stored (the stored action, Section 4.2 and Algorithm 1: measured to
    collapse SAC on HalfCheetah, docs/results.md)."""
    ris_beta: float = 0.2
    """RIS-Off-PAC: β of the relative importance weight w = ρ/(βρ + 1 − β) ∈ [0, 1/β], in (0, 1)."""
    ris_apply_to: str = "actor"
    """RIS-Off-PAC: the losses w weights: actor (the method's) or actor+critic."""
    ris_weighting: str = "importance"
    """RIS-Off-PAC: how w enters a loss: importance (L = mean_i w_i ℓ_i, the method as written) or
    normalised (L = Σ w_i ℓ_i / Σ w_i, weighted importance sampling: the baseline's step size)."""
    ipg_nu: float = 1.0
    """IPG: ν, the likelihood-ratio share; ν = 1 (the paper's) is the only one implemented."""
    ipg_state_source: str = "window"
    """IPG: the actor's states: window (B drawn from the newest ipg_window transitions, its on-policy batch),
    recent (exactly the B newest) or replay (the uniform batch: the baseline)."""
    ipg_window: int = 5_000
    """IPG: the newest transitions the actor's states are drawn from (rllab++'s on-policy batch size)."""
    ace_lambda1: float = 0.0
    """ACE: λ₁ of the emphatic weighting, in [0, 1]; 0 (the paper's) makes ACE Off-PAC."""
    pg_form: str = "dpg"
    """ACE and Geoff-PAC: the actor gradient's form: dpg (the baseline's policy gradient weighted by the
    emphasis M; it samples no action, so no ratio corrects one: ACE at λ₁ = 0 is the baseline), dpg-is
    (weighted by ρ̄·M) or lr (the original methods' likelihood-ratio estimator through a Gaussian surrogate)."""
    pg_signal: str = "td"
    """ACE and Geoff-PAC with pg_form=lr: the learning signal: td (δ = y − V(s)) or q (Q(s, a) − V(s))."""
    geoff_lambda1: float = 0.7
    """Geoff-PAC: λ₁, the weight of the trace F1 in the emphasis M1."""
    geoff_lambda2: float = 0.6
    """Geoff-PAC: λ₂, the weight of the trace F2 in M2."""
    geoff_gamma_hat: float = 0.2
    """Geoff-PAC: γ̂ of the density ratio C and of M2 (0: no M2, C ≡ 1)."""
    geoff_m2_baseline: str = "state"
    """Geoff-PAC: what M2 subtracts from V(s_i) in the term of a predecessor's action: state (V of the state
    that action was taken in), mean (the batch's leave-one-out mean of V) or none (the method as written).
    A baseline leaves M2's expectation unchanged; state removes the most variance."""
    geoff_m2: str = "off"
    """Geoff-PAC: the M2 term: off (none: measured to stop DDPG and SAC learning, docs/competitors.md; C still
    learns with γ̂), one (one predecessor per transition, drawn ∝ κ and weighted by Σκ: unbiased) or all
    (every predecessor in the window)."""
    geoff_traces: str = "cached"
    """Geoff-PAC: the predecessors' ρ̄ and C in the traces: cached (as of each slot's last replay, as the
    original's online traces keep the ratios of their time) or fresh (recomputed under the current policy)."""
    trace_window: int = 16
    """ACE (λ₁ > 0) and Geoff-PAC: predecessors of each replayed transition their traces run over."""
    seed: int = 0
    """Seeds torch, numpy and the env; the evaluation env uses seed + 100."""
    total_steps: int = 1_000_000
    """Environment steps to train for."""
    start_steps: int | None = None
    """Uniform-random steps before learning; None = the algorithm's default."""
    batch_size: int = 256
    """Transitions per update."""
    sampler: str = "uniform"
    """Replay sampler: uniform, cer (B − 1 uniform and the newest), per (prioritised, LAP-PAL's PER_TD3)
    or ero (a learned replay policy masks the buffer)."""
    per_alpha: float = 0.6
    """PER: priorities are |TD error|^α."""
    per_beta0: float = 0.4
    """PER: the importance-weight exponent β at the first batch."""
    per_beta_increment: float = 2e-7
    """PER: β's rise per batch, capped at 1."""
    ero_hidden: int = 64
    """ERO: the replay policy's hidden width (3 → h → h → 1)."""
    ero_lr: float = 1e-4
    """ERO: the replay policy's Adam learning rate."""
    ero_sample: int = 1024
    """ERO: transitions drawn uniformly for each REINFORCE step."""
    ero_every: int = 1
    """ERO: training episodes between REINFORCE steps and mask redraws."""
    buffer_size: int = 1_000_000
    """Replay capacity in slots (≈ transitions)."""
    eval_freq: int = 1000
    """Env steps between evaluations (plus one before training)."""
    eval_episodes: int = 10
    """Episodes per evaluation."""
    exploration_std: float = 0.1
    """Gaussian exploration noise std in normalised action units (DDPG, TD3)."""
    gamma: float = 0.99
    """Discount."""
    tau: float | None = None
    """Soft target update rate; None = the algorithm's default."""
    actor_lr: float | None = None
    """Actor Adam learning rate; None = the algorithm's default."""
    critic_lr: float | None = None
    """Critic Adam learning rate; None = the algorithm's default."""
    critic_weight_decay: float | None = None
    """Critic Adam L2 weight decay; None = the algorithm's default (DDPG 1e-2)."""
    hidden: tuple[int, ...] | None = None
    """Hidden layer sizes of every network; None = the algorithm's default."""
    layer_norm: bool = False
    """A LayerNorm after each hidden layer of every network (the fast backend does not cover it)."""
    backend: str = "auto"
    """How the update gets its gradients: autograd on the losses, or fast (backward passes written
    out for Linear/ReLU/Tanh networks, same results); auto picks fast wherever it applies. The
    resolved config, stored with a run, names the one used."""
    policy_delay: int = 2
    """TD3: critic updates per actor and target update."""
    target_noise: float = 0.2
    """TD3: target policy smoothing noise std."""
    noise_clip: float = 0.5
    """TD3: target policy smoothing noise clip."""
    stats_every: int = 1000
    """Env steps between training statistics reports."""
    weights_block: int = 1000
    """Updates per reported block of per-batch weights."""
    histogram_bins: int = 50
    """Bins of the λ histogram reported with each evaluation."""
    checkpoint_every: int = 50_000
    """Env steps between checkpoints when a checkpoint path is given; 0 = only on stop."""
    checkpoint_buffer: bool = True
    """Include the replay buffer in checkpoints (exact resume; large for big envs)."""
    threads: int = 1
    """torch intra-op threads."""
    device: str = "cpu"
    """torch device for the networks."""

    def resolved(self) -> TrainConfig:
        """Validated copy with every algorithm default filled in."""
        if self.algo not in ALGORITHM_DEFAULTS:
            raise ConfigError(f"unknown algorithm {self.algo!r}: choose one of {', '.join(ALGORITHMS)}")
        d = ALGORITHM_DEFAULTS[self.algo]
        start_steps = d.start_steps if self.start_steps is None else self.start_steps
        config = dataclasses.replace(
            self,
            start_steps=start_steps,
            tau=d.tau if self.tau is None else self.tau,
            actor_lr=d.actor_lr if self.actor_lr is None else self.actor_lr,
            critic_lr=d.critic_lr if self.critic_lr is None else self.critic_lr,
            critic_weight_decay=d.critic_weight_decay if self.critic_weight_decay is None else self.critic_weight_decay,
            hidden=d.hidden if self.hidden is None else tuple(self.hidden),
            ref_std=self.exploration_std if self.ref_std is None else self.ref_std,
            correction_start=d.correction_delay * start_steps
            if self.correction_start is None
            else self.correction_start,
            backend=self._backend(),
        )
        config._validate()
        return config

    def _backend(self) -> str:
        """The backend ``auto`` stands for: fast unless a network needs what it does not cover,
        or the correction writes its own actor loss."""
        from agents.corrections import own_actor_loss

        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r}: choose one of {', '.join(BACKENDS)}")
        if self.backend == "fast" and self.layer_norm:
            raise ConfigError(
                "backend fast covers Linear, ReLU and Tanh networks only; layer_norm needs backend=autograd (or auto)"
            )
        if self.backend == "fast" and own_actor_loss(self.correction, self):
            raise ConfigError(
                f"correction {self.correction} writes its own actor loss, which backend fast does not cover:"
                " use backend=autograd (or auto)"
            )
        if self.backend == "auto":
            return "autograd" if self.layer_norm or own_actor_loss(self.correction, self) else "fast"
        return self.backend

    def _validate(self) -> None:
        from agents.corrections import names as correction_names

        if self.correction not in correction_names():
            raise ConfigError(f"unknown correction {self.correction!r}: choose one of {', '.join(correction_names())}")
        from agents.samplers import names as sampler_names

        if self.sampler not in sampler_names():
            raise ConfigError(f"unknown sampler {self.sampler!r}: choose one of {', '.join(sampler_names())}")
        if not 0 <= self.per_alpha <= 1 or not 0 <= self.per_beta0 <= 1 or not 0 <= self.per_beta_increment <= 1:
            raise ConfigError(
                f"per_alpha, per_beta0 and per_beta_increment must be in [0, 1], got "
                f"{self.per_alpha}, {self.per_beta0}, {self.per_beta_increment}"
            )
        for name in ("ero_hidden", "ero_sample", "ero_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not (math.isfinite(self.ero_lr) and self.ero_lr > 0):
            raise ConfigError(f"ero_lr must be a positive number, got {self.ero_lr}")
        if self.divergence not in DIVERGENCES:
            raise ConfigError(f"unknown divergence {self.divergence!r}: choose one of {', '.join(DIVERGENCES)}")
        positive = ["total_steps", "batch_size", "eval_freq", "eval_episodes", "stats_every", "weights_block"]
        positive += ["histogram_bins", "threads", "policy_delay"]
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ["start_steps", "checkpoint_every", "correction_start"]:
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be at least 0, got {getattr(self, name)}")
        if self.batch_size < 2:
            raise ConfigError(f"batch_size must be at least 2 (a covariance needs two samples), got {self.batch_size}")
        if self.buffer_size < self.batch_size:
            raise ConfigError(f"buffer_size ({self.buffer_size}) must be at least batch_size ({self.batch_size})")
        for name in ["ref_std", "actor_lr", "critic_lr", "tau"]:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a positive number, got {value}")
        for name in ["exploration_std", "target_noise", "noise_clip", "critic_weight_decay"]:
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a non-negative number, got {value}")
        if not 0 <= self.gamma <= 1:
            raise ConfigError(f"gamma must be in [0, 1], got {self.gamma}")
        if self.tau is not None and self.tau > 1:
            raise ConfigError(f"tau must be in (0, 1], got {self.tau}")
        self._validate_competitors()
        self._validate_ranges()
        if not self.hidden or any(h < 1 for h in self.hidden):
            raise ConfigError(f"hidden must be positive layer sizes, got {self.hidden}")
        if self.algo == "ddpg" and len(self.hidden) != 2:
            raise ConfigError(f"ddpg needs exactly two hidden sizes, got {self.hidden}")

    def _validate_ranges(self) -> None:
        """Whole numbers a store can hold (SQLite's 64 bits) and a device offpoc can train on."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            values = value if isinstance(value, tuple) else (value,)
            for item in values:
                if isinstance(item, int) and not isinstance(item, bool) and not -(2**63) <= item < 2**63:
                    raise ConfigError(f"{field.name} {item} is out of range (at most 2^63 - 1)")
        if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", self.device):
            raise ConfigError(f"device {self.device!r} is not one offpoc trains on: cpu, cuda, cuda:N or mps")

    def _validate_competitors(self) -> None:
        """The competitors' options (docs/competitors.md), checked whatever the correction."""
        choices = {"acoffpoc_ratio": ("sampled", "stored"),
                   "ris_apply_to": ("actor", "actor+critic"), "ris_weighting": ("importance", "normalised"),
                   "ipg_state_source": ("window", "recent", "replay"),
                   "pg_form": ("dpg", "dpg-is", "lr"), "pg_signal": ("td", "q"),
                   "geoff_m2_baseline": ("state", "mean", "none"), "geoff_m2": ("off", "one", "all"),
                   "geoff_traces": ("cached", "fresh")}  # fmt: skip
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        for name in ("ace_lambda1", "geoff_lambda1", "geoff_lambda2"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not 0 <= self.geoff_gamma_hat < 1:
            raise ConfigError(f"geoff_gamma_hat must be in [0, 1), got {self.geoff_gamma_hat}")
        for name in ("trace_window", "ipg_window"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0 < self.ris_beta < 1:
            raise ConfigError(f"ris_beta must be in (0, 1), got {self.ris_beta}")
        if self.ipg_nu != 1:
            raise ConfigError(f"ipg_nu {self.ipg_nu}: only ν = 1 (the paper's IPG) is implemented")
        competitor = self.correction in ("ace", "ris-off-pac", "geoff-pac")
        if competitor and self.algo != "sac" and not self.exploration_std > 0:
            raise ConfigError(f"{self.correction} needs exploration_std > 0 (its behaviour density) for {self.algo}")

    def differences(self, other: TrainConfig) -> dict[str, tuple[Any, Any]]:
        """Fields whose values differ, in field order: name → (this config's, ``other``'s)."""
        return {
            f.name: (getattr(self, f.name), getattr(other, f.name))
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of the public fields."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict` for a stored config (a run's, a checkpoint's); unknown keys are an
        error, and a field added since it was stored takes its :data:`LEGACY_VALUES` entry."""
        unknown = set(data) - set(field_names())
        if unknown:
            raise ConfigError(f"unknown config field(s): {', '.join(sorted(unknown))}")
        values = {**LEGACY_VALUES, **data}
        if values.get("hidden") is not None:
            values["hidden"] = tuple(values["hidden"])
        return cls(**values)


LEGACY_VALUES: dict[str, Any] = {
    "acoffpoc_ratio": "stored",
    "geoff_m2": "all",
    "geoff_traces": "fresh",
}
"""Fields added after runs were stored, with the value that reproduces how such a run trained (the
behaviour before the field existed), where that differs from today's default: a stored config that
lacks one resumes, compares and shows as what it ran, not as today's default."""


def field_names() -> tuple[str, ...]:
    """Config fields that ``--set`` accepts."""
    return tuple(f.name for f in dataclasses.fields(TrainConfig))


def field_docs() -> dict[str, str]:
    """Each field's docstring (the string under it in :class:`TrainConfig`), as one line."""
    import ast
    import inspect

    body = ast.parse(inspect.getsource(TrainConfig)).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    for field, doc in zip(body.body, body.body[1:], strict=False):
        if not (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)):
            continue
        text = doc.value.value if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) else None
        if isinstance(text, str):
            docs[field.target.id] = " ".join(text.split())
    return docs


def field_type(name: str) -> str:
    """A field's type as a user writes its value: ``int``, ``float or default``, ``ints, comma-separated``."""
    annotation = typing.get_type_hints(TrainConfig)[name]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = type(None) in typing.get_args(annotation)
    target = args[0] if optional else annotation
    text = "ints, comma-separated" if typing.get_origin(target) is tuple else getattr(target, "__name__", str(target))
    return f"{text} or default" if optional else text


def _parse_int(text: str) -> int:
    """Accepts 1000, 1_000 and integral scientific notation such as 1e6."""
    cleaned = text.strip().replace("_", "")
    try:
        return int(cleaned)
    except ValueError:
        value = float(cleaned)
        if not value.is_integer():
            raise
        return int(value)


def _parse(name: str, annotation: Any, text: str) -> Any:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(
        annotation
    )
    if optional and text.strip().lower() in ("none", "default", ""):
        return None
    target = args[0] if optional else annotation
    try:
        if target is bool:
            lowered = text.strip().lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return lowered in ("true", "1", "yes")
        if target is int:
            return _parse_int(text)
        if target is float:
            return float(text)
        if typing.get_origin(target) is tuple:  # 64,64 or [64, 64] or (64, 64)
            return tuple(int(part) for part in text.strip().strip("[]()").replace(" ", "").split(",") if part)
        return text
    except ValueError:
        kind = getattr(target, "__name__", str(target))
        raise ConfigError(f"{name} expects {kind}, got {text!r}") from None


def with_overrides(config: TrainConfig, overrides: dict[str, str]) -> TrainConfig:
    """Apply ``{"field": "text"}`` overrides (the CLI's ``--set``), parsing each by its field type."""
    hints = typing.get_type_hints(TrainConfig)
    values: dict[str, Any] = {}
    for name, text in overrides.items():
        if name not in field_names():
            import difflib

            close = difflib.get_close_matches(name, field_names(), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown config field {name!r}{hint}: `offpoc config` lists every field")
        values[name] = _parse(name, hints[name], text)
    return dataclasses.replace(config, **values)
