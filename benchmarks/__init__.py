"""Benchmarks: run as scripts (``python benchmarks/throughput.py``); see benchmarks/README.md."""
