"""One-off diagnostics behind the benchmark figures.

Run from the repository root: ``python -m benchmarks.diagnostics.NAME``.
"""
