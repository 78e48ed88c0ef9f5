"""Three sync steps a -> b -> c, and a variant with a durable sleep between two steps.

``step_b`` can hold "in the middle" until the marker file ``release-<key>``
appears (``hold=True``), or take ``b_seconds`` of wall time.
"""

from __future__ import annotations

import asyncio
import os
import time

from kg_effects import attempt, record, wait_for_marker

import keepgoing


@keepgoing.task
def step_a(key: str, x: int) -> int:
    n = attempt()
    record("start", "a", key, n)
    record("done", "a", key, n)
    return x + 1


@keepgoing.task
def step_b(key: str, x: int, hold: bool = False, seconds: float = 0.0) -> dict:
    n = attempt()
    record("start", "b", key, n)
    if hold:
        wait_for_marker(f"release-{key}")
    if seconds:
        time.sleep(seconds)
    record("done", "b", key, n)
    return {"value": x * 10, "attempt": n, "pid": os.getpid()}


@keepgoing.task(timeout="3s", retries=1)
def step_b_short(key: str, x: int, hold: bool = False) -> dict:
    """``step_b`` with a deadline of 3 s and one retry."""
    return step_b.fn(key, x, hold)


@keepgoing.task
def step_c(key: str, b: dict) -> dict:
    n = attempt()
    record("start", "c", key, n)
    record("done", "c", key, n)
    return {"value": b["value"] + 1, "b": b}


@keepgoing.workflow
async def abc(key: str, x: int, hold: bool = False, b_seconds: float = 0.0) -> dict:
    a = await step_a(key, x)
    b = await step_b(key, a, hold, b_seconds)
    return await step_c(key, b)


@keepgoing.workflow
async def abc_short(key: str, x: int, hold: bool = False) -> dict:
    a = await step_a(key, x)
    b = await step_b_short(key, a, hold)
    return await step_c(key, b)


@keepgoing.workflow
async def nap(key: str, x: int, seconds: float) -> dict:
    a = await step_a(key, x)
    await asyncio.sleep(seconds)  # a durable timer: no worker holds the run meanwhile
    return await step_b(key, a)
