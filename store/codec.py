"""Compact encodings for what a run writes often: logged quantities' values (λ per batch, ...) and histograms.

Weights in [0, 1] (λ) are quantised to 16 bits (round(λ · 65535), error ≤ 7.7e-6);
other logged quantities (ratios, emphases) are kept as float32. Either way the
values are row-major (updates × columns), little-endian, zlib-compressed, and the
decoder tells the two apart by the size of a row. A block covers
consecutive updates at consecutive steps, so only its first update and step are
stored. One million TD3 updates take about 2 MB; one million SAC summaries
(8 columns) about 15 MB.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

SCALE = 65535
MAX_ERROR = 0.5 / SCALE
"""Largest absolute difference between a stored and a decoded weight."""


def encode_values(values: np.ndarray, unit: bool = True) -> bytes:
    """(n, columns) floats → compressed blob: 16-bit when ``unit`` (values in [0, 1]), else float32."""
    array = np.asarray(values, dtype=np.float64)
    if not unit:
        return zlib.compress(array.astype("<f4").tobytes(), 6)
    quantised = np.rint(np.clip(array, 0.0, 1.0) * SCALE).astype("<u2")
    return zlib.compress(quantised.tobytes(), 6)


def decode_values(blob: bytes, columns: int, count: int) -> np.ndarray:
    """Inverse of :func:`encode_values` for ``count`` rows: (count, columns) float64."""
    raw = zlib.decompress(blob)
    if len(raw) == 4 * count * columns:
        return np.frombuffer(raw, dtype="<f4").reshape(count, columns).astype(np.float64)
    quantised = np.frombuffer(raw, dtype="<u2")
    return quantised.reshape(count, columns).astype(np.float64) / SCALE


def encode_episodes(returns: Sequence[float], lengths: Sequence[int]) -> tuple[str, str]:
    """An evaluation's per-episode returns (to 3 decimals) and lengths, as JSON lists."""
    return json.dumps([round(float(r), 3) for r in returns]), json.dumps([int(n) for n in lengths])


def encode_counts(counts: np.ndarray) -> str:
    """Histogram counts as a JSON list (bins on [0, 1] are implied by their number)."""
    return json.dumps([int(c) for c in counts])


def decode_counts(text: str) -> np.ndarray:
    return np.asarray(json.loads(text), dtype=np.int64)


def regular_runs(updates: np.ndarray, steps: np.ndarray) -> list[tuple[slice, int]]:
    """(rows, stride) of maximal runs of rows whose updates and steps both advance by one stride k ≥ 1 from
    row to row: every update (k = 1), or every other one (what TD3 logs at its actor steps, k = 2). A block
    stores its first update, first step and stride; its rows' own follow."""
    runs: list[tuple[slice, int]] = []
    start, n = 0, len(updates)
    while start < n:
        end, stride = start + 1, 1
        if end < n and updates[end] - updates[start] == steps[end] - steps[start] >= 1:
            stride = int(updates[end] - updates[start])
            while end < n and updates[end] - updates[end - 1] == stride == steps[end] - steps[end - 1]:
                end += 1
        runs.append((slice(start, end), stride))
        start = end
    return runs


def json_text(value: Any, indent: int | None = None) -> str:
    """``value`` as strict JSON: a non-finite float (from an older store or another tool's file) is ``null``,
    never ``NaN`` or ``Infinity``, which JSON parsers other than Python's refuse."""
    return json.dumps(_finite(value), indent=indent, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
