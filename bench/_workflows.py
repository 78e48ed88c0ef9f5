"""The workflows the benchmarks run.

Worker subprocesses load this file with ``keepgoing worker bench/_workflows.py``;
the benchmark process imports it as ``bench._workflows`` so the client can
trigger the same definitions (same names, same code version).
"""

from __future__ import annotations

import asyncio
import os
import time

from keepgoing import task, workflow

__all__ = [
    "WORKFLOWS_FILE",
    "block_until",
    "blocked",
    "napper",
    "one_step",
    "steps",
    "trivial",
]

WORKFLOWS_FILE = os.path.abspath(__file__)


@task
def trivial(i: int) -> int:
    """The cheapest possible step: a sync function that returns its input."""
    return i


@workflow
async def steps(n: int) -> int:
    """``n`` sequential trivial steps."""
    total = 0
    for i in range(n):
        total += await trivial(i)
    return total


@workflow
async def one_step() -> int:
    """A single trivial step: the unit of latency and throughput."""
    return await trivial(1)


@workflow
async def napper(nap: float) -> int:
    """Two trivial steps with an optional durable ``asyncio.sleep`` between them."""
    first = await trivial(1)
    if nap > 0:
        await asyncio.sleep(nap)
    return first + await trivial(2)


@task
def block_until(folder: str) -> int:
    """Record this attempt's start (pid and ``time.time()``), then wait for a marker file.

    Each attempt appends one line ``<attempt> <pid> <start time>`` to
    ``folder/starts``; the step ends when ``folder/release`` exists.
    """
    started = time.time()
    path = os.path.join(folder, "starts")
    attempt = 1
    if os.path.exists(path):
        with open(path, encoding="utf-8") as seen:
            attempt += sum(1 for _ in seen)
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{attempt} {os.getpid()} {started!r}\n")
        out.flush()
        os.fsync(out.fileno())
    release = os.path.join(folder, "release")
    while not os.path.exists(release):
        time.sleep(0.005)
    return attempt


@workflow
async def blocked(folder: str) -> int:
    """One step that blocks until released: the victim of the recovery benchmark."""
    return await block_until(folder)
