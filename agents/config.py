"""The run configuration: one frozen dataclass, the single source of defaults.

:class:`TrainConfig` holds what every run has; the chosen correction's and sampler's own
options live in their option groups (:mod:`agents.options`), declared beside each plug-in and
found through the catalogue (:mod:`agents.plugins`). Every value has one flat name: a common
field's name, or an option's ``<prefix>_<field>`` (``ris_beta``). ``--set key=value``, sweep
files, :meth:`TrainConfig.make` and the stored JSON (:meth:`TrainConfig.to_dict`) all use it.

Fields left ``None`` take the algorithm's default when the config is resolved; the resolved
config, holding exactly its plug-ins' options, is what gets stored with a run.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, TypeVar

from agents import plugins
from agents.options import Options

BACKENDS: tuple[str, ...] = ("auto", "autograd", "fast")
DECAY_FORMS: tuple[str, ...] = ("loss", "adam")


class ConfigError(ValueError):
    """A config value is missing, malformed or out of range; the message says which."""


OptionsT = TypeVar("OptionsT", bound=Options)


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


def algorithm_defaults(algo: str) -> AlgorithmDefaults:
    """A registered algorithm's defaults (:func:`agents.algorithms.register`); ConfigError for an unknown one."""
    entry = plugins.algorithm(algo)
    if entry is None:
        known = ", ".join(plugins.algorithm_names())
        raise ConfigError(f"unknown algorithm {algo!r}: choose one of {known}")
    defaults: AlgorithmDefaults = entry.defaults
    return defaults


@dataclass(frozen=True)
class TrainConfig:
    """One training run."""

    algo: str = "td3"
    """A registered algorithm: ddpg, td3 and sac are built in (`offpoc config` lists them)."""
    env_id: str = "Hopper-v4"
    """Any gymnasium id with a Box action space."""
    correction: str = "none"
    """A registered correction (`offpoc config` lists them, with their options)."""
    correction_start: int | None = None
    """Env step at which the correction starts; None = start_steps (DDPG/TD3), 5 × start_steps (SAC)."""
    seed: int = 0
    """Seeds torch, numpy and the env; the evaluation env uses seed + 100."""
    total_steps: int = 1_000_000
    """Environment steps to train for."""
    start_steps: int | None = None
    """Uniform-random steps before learning; None = the algorithm's default."""
    batch_size: int = 256
    """Transitions per update."""
    sampler: str = "uniform"
    """A registered replay sampler (`offpoc config` lists them, with their options)."""
    buffer_size: int = 1_000_000
    """Replay capacity in slots (≈ transitions)."""
    eval_freq: int = 1000
    """Env steps between evaluations (plus one before training)."""
    eval_episodes: int = 10
    """Episodes per evaluation."""
    gamma: float = 0.99
    """Discount."""
    tau: float | None = None
    """Soft target update rate; None = the algorithm's default."""
    actor_lr: float | None = None
    """Actor Adam learning rate; None = the algorithm's default."""
    critic_lr: float | None = None
    """Critic Adam learning rate; None = the algorithm's default."""
    critic_weight_decay: float | None = None
    """Critic L2 weight decay wd (the gradient of wd/2·‖θ‖²); None = the algorithm's default (DDPG 1e-2)."""
    critic_decay_form: str = "loss"
    """Where the critic's weight decay enters: loss (inside the weighted loss, scaled by a correction's
    weight as the TD term is) or adam (Adam's L2, outside the weights: the authors' code). Without a decay
    or a correction the two are the same update: the resolved config then says loss, and stores nothing."""
    hidden: tuple[int, ...] | None = None
    """Hidden layer sizes of every network; None = the algorithm's default."""
    layer_norm: bool = False
    """A LayerNorm after each hidden layer of every network (the fast backend does not cover it)."""
    backend: str = "auto"
    """How the update gets its gradients: autograd on the losses, or fast (backward passes written
    out for Linear/ReLU/Tanh networks, same results); auto picks fast wherever it applies. The
    resolved config, stored with a run, names the one used."""
    stats_every: int = 1000
    """Env steps between training statistics reports."""
    weights_block: int = 1000
    """Updates per reported block of each logged quantity (λ and what a correction adds)."""
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
    options: tuple[Options, ...] = ()
    """The algorithm's, the correction's and the sampler's option groups; :meth:`resolved` adds those left
    out, at their defaults. Read one with :meth:`option`; set a value by its flat name (:meth:`make`,
    :meth:`replace`)."""

    @classmethod
    def make(cls, **values: Any) -> TrainConfig:
        """A config from flat names: common fields and plug-in options (``ris_beta=0.3``) alike."""
        common = {k: v for k, v in values.items() if k in COMMON_FIELDS}
        grouped: dict[type[Options], dict[str, Any]] = {}
        for name, value in values.items():
            if name in COMMON_FIELDS:
                continue
            group = plugins.group_of(name)
            if group is None:
                raise ConfigError(unknown_field(name))
            grouped.setdefault(group, {})[name] = value
        if common.get("hidden") is not None:
            common["hidden"] = tuple(common["hidden"])
        try:
            options = tuple(group.from_flat(flat) for group, flat in grouped.items())
        except TypeError as error:
            raise ConfigError(str(error)) from None
        config = cls(**common, options=options)
        known = config.algo in plugins.algorithm_names()
        if known and all(name in plugins.names(kind) for kind, name in config._plugins()):  # else resolved() says
            config._check_owned()
        return config

    def replace(self, **values: Any) -> TrainConfig:
        """A copy with flat-named ``values`` changed. Option groups of an algorithm, correction or sampler
        replaced here are dropped unless a value of theirs is given."""
        kept = self.options
        if {"algo", "correction", "sampler"} & set(values):
            chosen = [values.get(k, getattr(self, k)) for k in ("algo", "correction", "sampler")]
            owned = plugins.owned_groups(*chosen)
            kept = tuple(o for o in self.options if type(o) in owned)
        flat = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "options"}
        for group in kept:
            flat.update(group.flat())
        return TrainConfig.make(**{**flat, **values})

    def option(self, group: type[OptionsT]) -> OptionsT:
        """This run's options of ``group`` (its defaults when the config holds none)."""
        for options in self.options:
            if type(options) is group:
                return options
        return group()

    def resolved(self) -> TrainConfig:
        """Validated copy with every algorithm default filled in."""
        d = algorithm_defaults(self.algo)
        self._check_plugin_names()
        if self.critic_decay_form not in DECAY_FORMS:
            raise ConfigError(
                f"unknown critic_decay_form {self.critic_decay_form!r}: choose one of {', '.join(DECAY_FORMS)}"
            )
        start_steps = d.start_steps if self.start_steps is None else self.start_steps
        config = dataclasses.replace(
            self,
            start_steps=start_steps,
            tau=d.tau if self.tau is None else self.tau,
            actor_lr=d.actor_lr if self.actor_lr is None else self.actor_lr,
            critic_lr=d.critic_lr if self.critic_lr is None else self.critic_lr,
            critic_weight_decay=d.critic_weight_decay if self.critic_weight_decay is None else self.critic_weight_decay,
            hidden=d.hidden if self.hidden is None else tuple(self.hidden),
            correction_start=d.correction_delay * start_steps
            if self.correction_start is None
            else self.correction_start,
            backend=self._backend(),
            options=self._options(),
        )
        if not config.decay_form_matters():
            config = dataclasses.replace(config, critic_decay_form=DECAY_FORMS[0])
        config._validate()
        return config

    def decay_form_matters(self) -> bool:
        """Whether ``critic_decay_form`` can change training: a critic weight decay and a correction."""
        decay = self.critic_weight_decay
        if decay is None:
            entry = plugins.algorithm(self.algo)
            decay = entry.defaults.critic_weight_decay if entry is not None else 0.0
        return bool(decay) and self.correction != "none"

    def _check_owned(self) -> None:
        """Refuse an option group that none of this run's algorithm, correction and sampler takes (one line)."""
        owned = plugins.owned_groups(self.algo, self.correction, self.sampler)
        for options in self.options:
            if type(options) not in owned:
                defaults = type(options)().flat()
                given = [name for name, value in options.flat().items() if value != defaults[name]]
                flat = (given or list(defaults))[0]
                raise ConfigError(f"{flat} {owner_text(type(options))}: this run is {self.algo} with correction"
                                  f" {self.correction} and sampler {self.sampler}")  # fmt: skip

    def _options(self) -> tuple[Options, ...]:
        """Exactly the chosen plug-ins' groups, in their registration order, each checked."""
        self._check_owned()
        owned = plugins.owned_groups(self.algo, self.correction, self.sampler)
        resolved = tuple(self.option(group).resolve(self) for group in owned)
        for options in resolved:
            try:
                options.validate()
            except ValueError as error:
                raise ConfigError(str(error)) from None
        return resolved

    def _backend(self) -> str:
        """The backend ``auto`` stands for: fast unless a network needs what it does not cover,
        or the correction writes its own actor loss."""
        plugin = plugins.get("correction", self.correction)
        own_actor_loss = plugin is not None and plugin.writes_actor_loss(self)
        entry = plugins.algorithm(self.algo)
        covered = entry is None or entry.fast
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r}: choose one of {', '.join(BACKENDS)}")
        if self.backend == "fast" and self.layer_norm:
            raise ConfigError(
                "backend fast covers Linear, ReLU and Tanh networks only; layer_norm needs backend=autograd (or auto)"
            )
        if self.backend == "fast" and own_actor_loss:
            raise ConfigError(
                f"correction {self.correction} writes its own actor loss, which backend fast does not cover:"
                " use backend=autograd (or auto)"
            )
        if self.backend == "fast" and not covered:
            raise ConfigError(
                f"algorithm {self.algo} has losses without hand-written gradients, which backend fast needs:"
                " use backend=autograd (or auto)"
            )
        if self.backend == "auto":
            return "autograd" if self.layer_norm or own_actor_loss or not covered else "fast"
        return self.backend

    def _validate(self) -> None:
        positive = ["total_steps", "batch_size", "eval_freq", "eval_episodes", "stats_every", "weights_block"]
        positive += ["histogram_bins", "threads"]
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name, most in (("histogram_bins", 10_000), ("eval_episodes", 1_000)):  # work and rows grow with them
            if getattr(self, name) > most:
                raise ConfigError(f"{name} must be at most {most:,}, got {getattr(self, name):,}")
        for name in ["start_steps", "checkpoint_every", "correction_start"]:
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be at least 0, got {getattr(self, name)}")
        if self.batch_size < 2:
            raise ConfigError(f"batch_size must be at least 2 (a covariance needs two samples), got {self.batch_size}")
        if self.buffer_size < self.batch_size:
            raise ConfigError(f"buffer_size ({self.buffer_size}) must be at least batch_size ({self.batch_size})")
        for name in ["critic_weight_decay"]:
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a non-negative number, got {value}")
        for name in ["actor_lr", "critic_lr", "tau"]:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a positive number, got {value}")
        if not 0 <= self.gamma <= 1:
            raise ConfigError(f"gamma must be in [0, 1], got {self.gamma}")
        if self.tau is not None and self.tau > 1:
            raise ConfigError(f"tau must be in (0, 1], got {self.tau}")
        self._check_plugins()
        self._validate_ranges()
        if not self.hidden or any(h < 1 for h in self.hidden):
            raise ConfigError(f"hidden must be positive layer sizes, got {self.hidden}")
        entry = plugins.algorithm(self.algo)
        layers = entry.hidden_layers if entry is not None else None
        if layers is not None and len(self.hidden) != layers:
            raise ConfigError(f"{self.algo} needs exactly {layers} hidden sizes, got {self.hidden}")

    def _validate_ranges(self) -> None:
        """Whole numbers a store can hold (SQLite's 64 bits) and a device offpoc can train on."""
        for name, value in self.to_dict().items():
            values = value if isinstance(value, tuple) else (value,)
            for item in values:
                if isinstance(item, int) and not isinstance(item, bool) and not -(2**63) <= item < 2**63:
                    raise ConfigError(f"{name} {item} is out of range (at most 2^63 - 1)")
        if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", self.device):
            raise ConfigError(f"device {self.device!r} is not one offpoc trains on: cpu, cuda, cuda:N or mps")

    def _plugins(self) -> tuple[tuple[plugins.Kind, str], ...]:
        return (("correction", self.correction), ("sampler", self.sampler))

    def _check_plugin_names(self) -> None:
        for kind, name in self._plugins():
            if name not in plugins.names(kind):
                raise ConfigError(f"unknown {kind} {name!r}: choose one of {', '.join(plugins.names(kind))}")

    def _check_plugins(self) -> None:
        """The chosen plug-ins' checks of the whole config."""
        for kind, name in self._plugins():
            plugin = plugins.get(kind, name)
            if plugin is not None and plugin.check is not None:
                try:
                    plugin.check(self)
                except ValueError as error:
                    raise ConfigError(str(error)) from None

    def differences(self, other: TrainConfig) -> dict[str, tuple[Any, Any]]:
        """Values that differ, by flat name in field order: name → (this config's, ``other``'s); an option
        one of them lacks shows as None there."""
        mine, theirs = self.to_dict(), other.to_dict()
        names = list(mine) + [n for n in theirs if n not in mine]
        return {n: (mine.get(n), theirs.get(n)) for n in names if mine.get(n) != theirs.get(n)}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict by flat names: the common fields, then each option group's."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "options"}
        if self.critic_decay_form == DECAY_FORMS[0] and not self.decay_form_matters():
            del values["critic_decay_form"]  # no effect: stored as before the field existed, and read back so
        for options in self.options:
            values.update(options.flat())
        return values

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict` for a stored config (a run's, a checkpoint's); unknown keys are an
        error. Configs stored before options moved to their plug-ins (algorithms included) hold every plug-in's
        options: those of plug-ins the run did not use are dropped (they had no effect on it). An option added
        since the
        config was stored takes its :data:`LEGACY_VALUES` entry."""
        unknown = set(data) - set(field_names())
        if unknown:
            raise ConfigError(f"unknown config field(s): {', '.join(sorted(unknown))}")
        chosen = (data.get("algo", "td3"), data.get("correction", "none"), data.get("sampler", "uniform"))
        owned = {flat for group in plugins.owned_groups(*chosen) for flat in group.flat_names()}
        legacy = {k: v for k, v in LEGACY_VALUES.items() if k in owned}
        if (
            "critic_decay_form" not in data
            and TrainConfig.make(**{k: data[k] for k in _DECAY_INPUTS if k in data}).decay_form_matters()
        ):
            legacy["critic_decay_form"] = "adam"  # stored before the field existed: Adam's L2 is how it trained
        filled = {**data, **{k: v for k, v in legacy.items() if k not in data}}  # in the stored order: its groups'
        values = {k: v for k, v in filled.items() if k in COMMON_FIELDS or k in owned}
        return cls.make(**values)


LEGACY_VALUES: dict[str, Any] = {
    "acoffpoc_ratio": "stored",
    "geoff_m2": "all",
    "geoff_traces": "fresh",
    "ris_ratio": "stored",
}
"""Fields added after runs were stored, with the value that reproduces how such a run trained (the
behaviour before the field existed), where that differs from today's default: a stored config that
lacks one resumes, compares and shows as what it ran, not as today's default."""


COMMON_FIELDS: frozenset[str] = frozenset(f.name for f in dataclasses.fields(TrainConfig) if f.name != "options")
_DECAY_INPUTS = ("algo", "correction", "critic_weight_decay")
"""What :meth:`TrainConfig.decay_form_matters` reads."""


def common_names() -> tuple[str, ...]:
    """The fields every run has, in field order."""
    return tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name != "options")


def field_names() -> tuple[str, ...]:
    """Every flat name ``--set`` accepts: the common fields, then each registered plug-in's options."""
    return common_names() + tuple(flat for group in plugins.groups() for flat in group.flat_names())


def owner_text(group: type[Options]) -> str:
    """``is an option of ris-off-pac`` (or ``of ace and geoff-pac``, ``of ddpg and td3``)."""
    owners = [p.name for p in plugins.owners(group)]
    return f"is an option of {' and '.join(owners) if owners else 'no registered plug-in'}"


def applies(name: str, algo: str, correction: str, sampler: str) -> bool:
    """Whether a run of this algorithm, correction and sampler takes the field ``name`` (every common field)."""
    group = plugins.group_of(name)
    return name in COMMON_FIELDS or (group is not None and group in plugins.owned_groups(algo, correction, sampler))


def unknown_field(name: str) -> str:
    """The one-line error for a name no field has, with the closest one."""
    import difflib

    close = difflib.get_close_matches(name, field_names(), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown config field {name!r}{hint}: `offpoc config` lists every field"
