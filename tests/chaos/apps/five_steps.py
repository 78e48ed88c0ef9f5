"""The load of the many-machines tests: a workflow of five sequential steps.

Each step takes a few milliseconds of wall time, so a worker that is killed,
or a database that restarts, always catches some steps in flight.
"""

from __future__ import annotations

import time

import keepgoing


@keepgoing.task
def step(run: int, n: int) -> int:
    time.sleep(0.02)
    return run * 10 + n


@keepgoing.workflow
async def five_steps(run: int) -> list[int]:
    return [await step(run, n) for n in range(5)]
