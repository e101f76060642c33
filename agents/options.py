"""A plug-in's options: a frozen dataclass with defaults, one docstring per field and ``validate()``.

A correction or sampler declares its options beside its code and names the class when it
registers (:mod:`agents.plugins`). Users address a field by its flat name, the group's
``prefix``, an underscore and the field (``ris_beta`` is :class:`~agents.corrections.ris.RISOptions`'s
``beta``): the spelling of ``--set``, sweep files and stored configs. A group may be shared by
several plug-ins (ACE's and Geoff-PAC's policy-gradient form).

    @dataclass(frozen=True)
    class RISOptions(Options):
        prefix: ClassVar[str] = "ris"

        beta: float = 0.2
        \"\"\"β of the relative importance weight, in (0, 1).\"\"\"

        def validate(self) -> None:
            if not 0 < self.beta < 1:
                raise ValueError(f"beta must be in (0, 1), got {self.beta}")
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, Self

__all__ = ["Options", "choice", "docstrings"]


class Options:
    """Base of an option group; subclasses are frozen dataclasses."""

    prefix: ClassVar[str]
    """Flat names are ``<prefix>_<field>``."""
    unprefixed: ClassVar[frozenset[str]] = frozenset()
    """Fields whose flat name is the field's own: options that were common fields before they moved to
    their plug-in (AC-Off-POC's ``divergence``), so stored configs, sweep files and ``--set`` keep them."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the field (by its flat name) and the accepted values."""

    def resolve(self, config: Any) -> Self:
        """The options with what defaults to a common field filled in from the run's ``config`` (a
        ``TrainConfig``); called before :meth:`validate` when a config is resolved."""
        return self

    @classmethod
    def flat_names(cls) -> dict[str, str]:
        """Flat name → field name, in field order."""
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        return {f.name if f.name in cls.unprefixed else f"{cls.prefix}_{f.name}": f.name for f in fields}

    def flat(self) -> dict[str, Any]:
        """Flat name → value."""
        return {flat: getattr(self, name) for flat, name in self.flat_names().items()}

    @classmethod
    def from_flat(cls, values: Mapping[str, Any]) -> Self:
        """The group with the flat-named ``values`` given (others at their defaults); unknown names are ignored."""
        return cls(**{name: values[flat] for flat, name in cls.flat_names().items() if flat in values})

    @classmethod
    def docs(cls) -> dict[str, str]:
        """Flat name → the field's docstring, on one line."""
        fields = docstrings(cls)
        return {flat: fields.get(name, "") for flat, name in cls.flat_names().items()}

    @classmethod
    def annotation(cls, flat: str) -> Any:
        """The type of the field a flat name addresses."""
        return typing.get_type_hints(cls)[cls.flat_names()[flat]]


def choice(options: Options, field: str, allowed: tuple[str, ...]) -> None:
    """Raise ``ValueError`` when ``options.<field>`` is not one of ``allowed``, naming the flat field."""
    value = getattr(options, field)
    if value not in allowed:
        flat = next(k for k, v in options.flat_names().items() if v == field)
        raise ValueError(f"{flat} must be one of {', '.join(allowed)}, got {value!r}")


def docstrings(cls: type) -> dict[str, str]:
    """A dataclass's field docstrings (the string literal under each field), each on one line."""
    try:
        body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    except (OSError, TypeError):  # defined where no source is kept (an interactive session)
        return {}
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    for field, doc in zip(body.body, body.body[1:], strict=False):
        if not (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)):
            continue
        text = doc.value.value if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) else None
        if isinstance(text, str):
            docs[field.target.id] = " ".join(text.split())
    return docs
