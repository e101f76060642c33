"""Per-update quantities that training records: λ, and whatever a correction or algorithm adds.

A quantity is declared once, where it is computed (a correction's or algorithm's
``quantities``), and its values travel as ``UpdateStats.logged`` → the recorder →
``QuantityBlock``/``QuantityHistogram`` records → the store → the Quantities view and
``offpoc export --table quantities``: nothing on that path names a quantity.

Each value is a 0-d tensor (one per update: recorded as is) or a (B, 1) tensor (one
per transition: recorded as its mean, min, max and quantiles). Histograms cover
[low, high]; values outside fall into the end bins.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Quantity:
    """What a per-update value is called and where its histogram lies."""

    name: str
    """Identifier in the store and exports: lowercase letters, digits and ``_``."""
    label: str
    """How views print it, e.g. ``λ`` or ``ρ̄``."""
    low: float = 0.0
    high: float = 1.0
    """Histogram range; values outside it count in the end bins. A quantity on exactly [0, 1]
    is a weight: its values must lie there, and the store keeps them to 16 bits (error ≤ 7.7e-6);
    any other is stored as float32."""

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"quantity name {self.name!r}: use lowercase letters, digits and _")
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError(
                f"quantity {self.name!r}: its range needs finite low < high, got [{self.low}, {self.high}]"
            )


LAMBDA = Quantity("lambda", "λ")
"""AC-Off-POC's similarity weight, in [0, 1]."""
