"""The workflows `bench.groups` deploys as a worker group."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from keepgoing import task, workflow


@task
def busy(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@task
def mark(path: str) -> None:
    Path(path).write_text(repr(time.time()))


@workflow
async def three_steps(sleep: float) -> float:
    total = await busy(1.0)
    await asyncio.sleep(sleep)
    total += await busy(1.0)
    await asyncio.sleep(sleep)
    return total + await busy(1.0)


@workflow
async def first_step(marker: str) -> None:
    await mark(marker)
