"""Benchmarks and evidence scripts, each run from the repository root as `python -m benchmarks.NAME`."""
