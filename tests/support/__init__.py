"""What the tests share: driving the real CLI in processes (``processes``) and filling a store through the real
writer without training (``storefill``); ``ROOT`` is the project's root."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The project's root: the folder holding ``pyproject.toml``, ``sweeps/`` and ``README.md``."""
