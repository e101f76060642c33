"""The agents' tests run their small networks' products where the paper's networks run theirs.

Their networks are 32 wide (fast to train on 2 cores), under :data:`agents.gemm.WIDE` (64), so their hidden
layers' products would stay with MKL, while the paper's 256-wide ones go to oneDNN. Every test here lowers the
threshold to 16, so both backends, lanes, corrections and samplers are tested on the library that runs them
in a real run (the thin products, a few inputs or outputs wide, still stay with MKL).
"""

from __future__ import annotations

import pytest

from agents import gemm


@pytest.fixture(autouse=True)
def _wide_products_as_in_a_real_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gemm, "WIDE", 16)
