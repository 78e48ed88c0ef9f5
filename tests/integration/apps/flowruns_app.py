"""Workflows with run-flow limits: concurrency (plain and keyed), one at a time, singletons.

Each run's one step records its interval in the effects log (``start``/``done``
with the run's key), and may hold until the marker ``release-<gate>`` appears.
The tests start them by name, without this code: the limits hold because the
worker recorded them.
"""

from __future__ import annotations

import time

from kg_effects import attempt, record, wait_for_marker

import keepgoing


@keepgoing.task(timeout="60s")
def step(key: str, seconds: float = 0.0, gate: str | None = None) -> str:
    n = attempt()
    record("start", "step", key, n)
    if gate is not None:
        wait_for_marker(f"release-{gate}")
    if seconds:
        time.sleep(seconds)
    record("done", "step", key, n)
    return key


@keepgoing.workflow(concurrency=2)
async def two_at_a_time(key: str, seconds: float = 0.3) -> str:
    return await step(key, seconds)


@keepgoing.workflow(concurrency=keepgoing.Concurrency(1, key="account"))
async def one_per_account(account: str, key: str, seconds: float = 0.3) -> str:
    return await step(key, seconds)


@keepgoing.workflow(concurrency=1)
async def one_at_a_time(key: str, gate: str | None = None) -> str:
    return await step(key, 0.0, gate)


@keepgoing.workflow(singleton="account", on_conflict="skip")
async def sync_skip(account: str, key: str, gate: str | None = None) -> str:
    return await step(key, 0.0, gate)


@keepgoing.workflow(singleton="account", on_conflict="queue")
async def sync_queue(account: str, key: str, gate: str | None = None) -> str:
    return await step(key, 0.0, gate)


@keepgoing.workflow(singleton="account", on_conflict="cancel_running")
async def sync_replace(account: str, key: str, gate: str | None = None) -> str:
    return await step(key, 0.0, gate)
