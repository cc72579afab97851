"""Benchmarks: one command each (``python -m bench.<name>``); see bench/README.md."""
