"""Side-by-side benchmarks: the same workloads on keepgoing and on its peers, in one run.

``make bench-peers`` builds ``.venv-peers`` (keepgoing plus the peers' packages,
which are never dependencies of keepgoing) and runs ``python -m bench.peers``.
Each repetition runs every workload on every system, alternating, each in a
fresh subprocess on a fresh SQLite file in WAL mode with ``synchronous=FULL``.
"""
