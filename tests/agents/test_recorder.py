"""QuantityRecorder: every batch's weight in blocks, its summary, and one λ histogram per interval."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.recorder import _QUANTILES, QuantityRecorder
from agents.sink import QuantityBlock, QuantityHistogram

BINS = 20


def _record(per_transition: bool, weights: list[torch.Tensor], block: int, histogram_at: set[int]):
    """Feed ``weights`` one update at a time; histograms after the updates in ``histogram_at``."""
    recorder = QuantityRecorder(per_transition, block=block, bins=BINS, device=torch.device("cpu"))
    blocks: list[QuantityBlock] = []
    histograms: list[tuple[int, QuantityHistogram | None]] = []
    for i, w in enumerate(weights, start=1):
        full = recorder.add(update=i, step=10 + i, weight=w)
        if full is not None:
            blocks.append(full)
        if i in histogram_at:
            histograms.append((i, recorder.histogram(step=10 + i)))
    last = recorder.flush()
    if last is not None:
        blocks.append(last)
    return recorder, blocks, histograms


def _expected_counts(weights: list[torch.Tensor]) -> np.ndarray:
    values = np.concatenate([w.reshape(-1).numpy() for w in weights]).astype(np.float64)
    return np.histogram(values, bins=BINS, range=(0.0, 1.0))[0]


def _summary(weight: torch.Tensor) -> np.ndarray:
    """Mean, min, max and the quantiles of the λ_i, by torch's own reductions."""
    flat = weight.reshape(-1)
    expected = torch.cat([flat.mean().reshape(1), flat.min().reshape(1), flat.max().reshape(1)])
    return torch.cat([expected, torch.quantile(flat, torch.tensor(_QUANTILES))]).numpy()


@pytest.mark.parametrize("per_transition", [False, True])
def test_histograms_count_each_interval_once_across_block_boundaries(per_transition: bool) -> None:
    g = torch.Generator().manual_seed(0)
    shape = (256, 1) if per_transition else ()
    weights = [torch.rand(shape, generator=g) for _ in range(40)]
    # Blocks of 7 end inside every interval, and the interval ends at 10 and 30 fall inside blocks.
    recorder, blocks, histograms = _record(per_transition, weights, block=7, histogram_at={10, 11, 30})

    bounds = [0, 10, 11, 30]
    for (end, histogram), start in zip(histograms, bounds):
        assert histogram is not None and histogram.step == 10 + end
        np.testing.assert_array_equal(histogram.counts, _expected_counts(weights[start:end]))
    # What follows the last interval is still pending, and a checkpoint's state holds it.
    np.testing.assert_array_equal(recorder.state_dict()["counts"].numpy(), _expected_counts(weights[30:]))

    assert [len(b.updates) for b in blocks] == [7, 7, 7, 7, 7, 5]
    np.testing.assert_array_equal(np.concatenate([b.updates for b in blocks]), np.arange(1, 41))
    if not per_transition:
        lam = np.concatenate([b.values[:, 0] for b in blocks])
        np.testing.assert_array_equal(lam, torch.stack(weights).numpy())


def test_a_histogram_with_nothing_recorded_is_none_and_a_checkpointed_count_carries_over() -> None:
    recorder = QuantityRecorder(False, block=5, bins=BINS, device=torch.device("cpu"))
    assert recorder.histogram(step=0) is None
    recorder.add(1, 1, torch.tensor(0.25))
    state = recorder.state_dict()

    resumed = QuantityRecorder(False, block=5, bins=BINS, device=torch.device("cpu"))
    resumed.load_state_dict(state)
    resumed.add(2, 2, torch.tensor(0.75))
    histogram = resumed.histogram(step=2)
    assert histogram is not None
    np.testing.assert_array_equal(histogram.counts, _expected_counts([torch.tensor(0.25), torch.tensor(0.75)]))


@pytest.mark.parametrize("n", [1, 2, 7, 256])
def test_per_transition_summary_matches_torch_quantile(n: int) -> None:
    g = torch.Generator().manual_seed(n)
    recorder = QuantityRecorder(True, block=3, bins=BINS, device=torch.device("cpu"))
    weights = [torch.rand(n, 1, generator=g) for _ in range(3)]
    block = None
    for i, w in enumerate(weights):
        block = recorder.add(i, i, w)
    assert block is not None and block.columns == ("mean", "min", "max", "p10", "p25", "p50", "p75", "p90")
    for row, w in zip(block.values, weights, strict=True):
        np.testing.assert_allclose(row, _summary(w), rtol=0, atol=1e-6)


def test_a_change_of_batch_size_inside_a_block_loses_no_per_transition_weight() -> None:
    g = torch.Generator().manual_seed(1)
    weights = [torch.rand(n, 1, generator=g) for n in (256, 256, 100, 100, 256, 7)]
    _, blocks, histograms = _record(True, weights, block=4, histogram_at={3, 6})
    assert [len(b.updates) for b in blocks] == [4, 2]
    for (end, histogram), start in zip(histograms, [0, 3]):
        assert histogram is not None
        np.testing.assert_array_equal(histogram.counts, _expected_counts(weights[start:end]))
    summaries = np.concatenate([b.values for b in blocks])
    for row, w in zip(summaries, weights, strict=True):
        np.testing.assert_allclose(row, _summary(w), rtol=0, atol=1e-6)
