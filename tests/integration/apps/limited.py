"""Tasks under flow control, for tests with several worker processes.

Each body writes a ``start`` and a ``done`` line to the side-effects log
(``kg_effects``), so a test measures overlap from the tasks' own intervals.
"""

from __future__ import annotations

import asyncio
import time

from kg_effects import attempt, record, wait_for_marker

import keepgoing
from keepgoing import Concurrency, RateLimit


@keepgoing.task(concurrency=3)
def capped(key: str) -> str:
    n = attempt()
    record("start", "capped", key, n)
    time.sleep(0.3)
    record("done", "capped", key, n)
    return key


@keepgoing.task(concurrency=Concurrency(1, key="customer"))
def per_customer(customer: str, key: str) -> str:
    n = attempt()
    record("start", "per_customer", f"{customer}:{key}", n)
    time.sleep(0.3)
    record("done", "per_customer", f"{customer}:{key}", n)
    return key


@keepgoing.task(rate_limit=RateLimit("5/s", burst=2))
def rated(key: str) -> str:
    record("start", "rated", key, attempt())
    return key


@keepgoing.task(concurrency=1, timeout="60s")
def held(key: str) -> str:
    """Holds its slot until the marker ``go`` exists."""
    n = attempt()
    record("start", "held", key, n)
    wait_for_marker("go")
    record("done", "held", key, n)
    return key


@keepgoing.workflow
async def fan_capped(prefix: str, n: int) -> list[str]:
    return list(await asyncio.gather(*(capped(f"{prefix}-{i}") for i in range(n))))


@keepgoing.workflow
async def fan_customers(customers: list[str], n: int) -> list[str]:
    calls = [per_customer(c, f"{i}") for i in range(n) for c in customers]
    return list(await asyncio.gather(*calls))


@keepgoing.workflow
async def fan_rated(prefix: str, n: int) -> list[str]:
    return list(await asyncio.gather(*(rated(f"{prefix}-{i}") for i in range(n))))


@keepgoing.workflow
async def two_held() -> list[str]:
    return list(await asyncio.gather(held("first"), held("second")))
