"""keepgoing benchmarks: run with ``python -m bench`` (see docs/benchmarks.md)."""
