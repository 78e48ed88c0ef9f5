"""Flow control in one process: a concurrency cap and a rate limit hold, and the
waiting attempts are woken when a slot frees (no poll interval between waves)."""

from __future__ import annotations

import asyncio
import time

import keepgoing
from keepgoing import Concurrency, RateLimit

ACTIVE: dict[str, int] = {}
PEAK: dict[str, int] = {}
STARTS: list[float] = []


async def _hold(key: str, seconds: float) -> None:
    ACTIVE[key] = ACTIVE.get(key, 0) + 1
    PEAK[key] = max(PEAK.get(key, 0), ACTIVE[key])
    await asyncio.sleep(seconds)
    ACTIVE[key] -= 1


@keepgoing.task(name="flow.capped", concurrency=2)
async def capped(i: int) -> int:
    await _hold("capped", 0.05)
    return i


@keepgoing.task(name="flow.keyed", concurrency=Concurrency(1, key="customer"))
async def keyed(customer: str, i: int) -> int:
    await _hold(customer, 0.05)
    await _hold("keyed-all", 0.0)
    return i


@keepgoing.task(name="flow.rated", rate_limit=RateLimit("20/s", burst=2))
def rated(i: int) -> int:
    STARTS.append(time.monotonic())
    return i


@keepgoing.workflow(name="flow.fan")
async def fan(n: int) -> list[int]:
    return list(await asyncio.gather(*(capped(i) for i in range(n))))


@keepgoing.workflow(name="flow.keys")
async def keys() -> list[int]:
    calls = [keyed(c, i) for i, c in enumerate(["a", "a", "b", "b", "c", "c"])]
    return list(await asyncio.gather(*calls))


@keepgoing.workflow(name="flow.rate")
async def rate(n: int) -> list[int]:
    return list(await asyncio.gather(*(rated(i) for i in range(n))))


def test_a_cap_holds_and_freed_slots_are_reused_at_once() -> None:
    started = time.monotonic()
    assert asyncio.run(fan(8)) == list(range(8))
    assert PEAK["capped"] == 2
    assert time.monotonic() - started < 0.9  # four waves of 0.05 s, not a poll per wave


def test_each_key_has_its_own_cap() -> None:
    assert asyncio.run(keys()) == list(range(6))
    assert PEAK["a"] == PEAK["b"] == PEAK["c"] == 1


def test_a_rate_limit_spaces_the_starts() -> None:
    STARTS.clear()
    assert asyncio.run(rate(6)) == list(range(6))
    span = STARTS[-1] - STARTS[0]
    assert span >= (6 - 2) / 20 * 0.9  # the burst at once, then one per 50 ms
