"""What the tests share: driving the real CLI in processes (``processes``) or in this one (``cli``), filling
a store through the real writer without training (``storefill``), hand-made batches and small agents for
update tests (``batches``), and driving the dashboard through Textual's Pilot (``pilot``)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The project's root: the folder holding ``pyproject.toml``, ``sweeps/`` and ``README.md``."""
