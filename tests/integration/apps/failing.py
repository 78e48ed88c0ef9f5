"""Tasks that fail: flaky then fine, always failing, and overrunning their timeout."""

from __future__ import annotations

import asyncio
import time

from kg_effects import attempt, record

import keepgoing


@keepgoing.task(retries=2, retry_delay="0.2s")
def flaky(key: str) -> str:
    n = attempt()
    record("start", "flaky", key, n)
    if n < 3:
        raise ValueError(f"flaky attempt {n} failed")
    record("done", "flaky", key, n)
    return f"ok on attempt {n}"


@keepgoing.task(retries=1)
def always_fails(key: str) -> str:
    n = attempt()
    record("start", "always_fails", key, n)
    raise RuntimeError("the disk is on fire")


@keepgoing.task(timeout="0.3s")
async def slow_async(key: str) -> str:
    n = attempt()
    record("start", "slow_async", key, n)
    await asyncio.sleep(30)
    record("done", "slow_async", key, n)
    return "late"


@keepgoing.task(timeout="0.3s")
def slow_sync(key: str, seconds: float) -> str:
    n = attempt()
    record("start", "slow_sync", key, n)
    time.sleep(seconds)  # a thread cannot be cancelled: it runs on after the timeout
    record("done", "slow_sync", key, n)
    return "late"


@keepgoing.workflow
async def run_flaky(key: str) -> str:
    return await flaky(key)


@keepgoing.workflow
async def run_always_fails(key: str) -> str:
    return await always_fails(key)


@keepgoing.workflow
async def run_slow_async(key: str) -> str:
    return await slow_async(key)


@keepgoing.workflow
async def run_slow_sync(key: str, seconds: float) -> str:
    return await slow_sync(key, seconds)
