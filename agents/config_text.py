"""Config values as people type them: ``--set key=value``, sweep files' strings, counts such as ``1M``.

One parser for counts (:func:`parse_count`) serves the CLI's ``--steps`` and every integer field, so
``--steps 1M`` and ``--set total_steps=1M`` read alike. Also what ``offpoc config`` prints and a store
records of the fields: each one's docstring (:func:`field_docs`) and default (:func:`config_defaults`).
"""

from __future__ import annotations

import decimal
import re
import types
import typing
from typing import Any

from agents import plugins
from agents.config import COMMON_FIELDS, ConfigError, TrainConfig, field_names, unknown_field
from agents.options import docstrings

_SUFFIX = {"k": 1_000, "m": 1_000_000}
_COUNT = re.compile(r"^\s*([+-]?[0-9_]*\.?[0-9_]+(?:e[+-]?\d+)?)\s*([km]?)\s*$", re.IGNORECASE)


class CountOutOfRange(ValueError):
    """A whole number a store cannot hold (SQLite's 64 bits)."""


def parse_count(text: str) -> int:
    """A whole number written as ``1000000``, ``1_000_000``, ``1e6``, ``1M`` or ``250k``; ValueError otherwise."""
    match = _COUNT.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a whole number (1000000, 1_000_000, 1e6 and 1M are)")
    number, suffix = match.group(1).replace("_", ""), match.group(2).lower()
    written = decimal.Decimal(number)
    if written and written.adjusted() > 30:  # before any arithmetic, which overflows (or underflows) past 1e999999
        raise CountOutOfRange(f"{text!r} is out of range (at most 2^63 - 1)")
    if written and written.adjusted() < -30:
        raise ValueError(f"{text!r} is not a whole number (1000000, 1_000_000, 1e6 and 1M are)")
    value = written * _SUFFIX.get(suffix, 1)  # exact: a seed of 2^53 + 1 stays itself
    if value != value.to_integral_value():
        raise ValueError(f"{text!r} is not a whole number (1000000, 1_000_000, 1e6 and 1M are)")
    if not -(2**63) <= value < 2**63:
        raise CountOutOfRange(f"{text!r} is out of range (at most 2^63 - 1)")
    return int(value)


def annotation_of(name: str) -> Any:
    if name in COMMON_FIELDS:
        return typing.get_type_hints(TrainConfig)[name]
    group = plugins.group_of(name)
    if group is None:
        raise ConfigError(unknown_field(name))
    return group.annotation(name)


def field_type(name: str) -> str:
    """A field's type as a user writes its value: ``int``, ``float or default``, ``ints, comma-separated``."""
    annotation = annotation_of(name)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = type(None) in typing.get_args(annotation)
    target = args[0] if optional else annotation
    text = "ints, comma-separated" if typing.get_origin(target) is tuple else getattr(target, "__name__", str(target))
    return f"{text} or default" if optional else text


def parse_value(name: str, annotation: Any, text: str) -> Any:
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
            try:
                return parse_count(text)
            except CountOutOfRange as error:
                raise ConfigError(f"{name} {error}") from None
        if target is float:
            return float(text)
        if typing.get_origin(target) is tuple:  # 64,64 or [64, 64] or (64, 64)
            return tuple(parse_count(part) for part in text.strip().strip("[]()").replace(" ", "").split(",") if part)
        return text
    except ConfigError:
        raise
    except ValueError:
        kind = getattr(target, "__name__", str(target))
        raise ConfigError(f"{name} expects {kind}, got {text!r}") from None


def with_overrides(config: TrainConfig, overrides: dict[str, str]) -> TrainConfig:
    """Apply ``{"name": "text"}`` overrides (the CLI's ``--set``), parsing each by its field's type."""
    values: dict[str, Any] = {}
    for name, text in overrides.items():
        if name == "options" or name not in field_names():
            raise ConfigError(unknown_field(name))
        values[name] = parse_value(name, annotation_of(name), text)
    return config.replace(**values)


def config_defaults() -> dict[str, Any]:
    """``{"algorithms": {algo: resolved common fields}, "options": {flat name: default}}``, JSON-ready. An option
    that defaults to a common field (AC-Off-POC's ``ref_std``: the exploration std) is recorded resolved under
    the common fields' defaults, as a run that leaves it unset stores it."""
    common = {
        a: {k: v for k, v in TrainConfig(algo=a).resolved().to_dict().items() if k in COMMON_FIELDS}
        for a in plugins.algorithm_names()
    }
    base = TrainConfig()
    options = {flat: value for group in plugins.groups() for flat, value in group().resolve(base).flat().items()}
    return {"algorithms": common, "options": options}


def field_docs() -> dict[str, str]:
    """Each flat name's docstring (the string under its field), as one line."""
    docs = {k: v for k, v in docstrings(TrainConfig).items() if k in COMMON_FIELDS}
    for group in plugins.groups():
        docs.update(group.docs())
    return docs
