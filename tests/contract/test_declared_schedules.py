"""Schedules declared in code: registered, updated on a change, paused when dropped."""

from __future__ import annotations

import asyncio

import pytest

from keepgoing import Schedule, workflow
from keepgoing._schedules import commands as ops
from keepgoing._schedules.commands import Actor
from keepgoing._schedules.declared import DROPPED, sync_declared
from keepgoing._store.protocol import Store
from keepgoing._worker.worker import Worker
from keepgoing._workflow.registry import Registry
from keepgoing.errors import InvalidScheduleError

ME = Actor("worker", "w1")
T0 = 1_767_225_600.0


async def sync(store: Store, *declared: tuple[str, Schedule], now: float = T0) -> list[str]:
    return await sync_declared(
        store, list(declared), workflows=["digest"], queue="default", actor=ME, now=now
    )


async def test_declared_schedules_follow_the_code(store: Store) -> None:
    weekly = Schedule(cron="0 8 * * 1", timezone="Europe/Paris", schedule_id="digest")
    assert await sync(store, ("digest", weekly)) == ["created schedule digest"]
    assert await sync(store, ("digest", weekly)) == []  # the same code again: nothing
    record = await store.get_schedule("digest")
    assert record is not None and record.source == "code" and record.task_queue == "default"

    daily = Schedule(cron="0 8 * * *", timezone="Europe/Paris", schedule_id="digest")
    assert await sync(store, ("digest", daily)) == ["updated schedule digest"]
    record = await store.get_schedule("digest")
    assert record is not None and record.spec["cron"] == "0 8 * * *"

    assert await sync(store, now=T0 + 10) == [f"paused schedule digest: {DROPPED}"]
    record = await store.get_schedule("digest")
    assert record is not None and record.paused and (record.note or "").startswith(DROPPED)

    assert await sync(store, ("digest", daily), now=T0 + 20) == ["updated schedule digest"]
    record = await store.get_schedule("digest")
    assert record is not None and not record.paused


async def test_a_users_pause_outlives_a_redeploy(store: Store) -> None:
    s = Schedule(every="1h", schedule_id="digest")
    await sync(store, ("digest", s))
    await ops.pause(store, "digest", note="on holiday", actor=ME, now=T0 + 1)
    await sync(store, ("digest", Schedule(every="2h", schedule_id="digest")), now=T0 + 2)
    record = await store.get_schedule("digest")
    assert record is not None and record.paused and record.note == "on holiday"
    assert record.spec["every"] == 7200


def test_the_decorator_declares_and_checks_them() -> None:
    @workflow(name="sched_weekday", schedule="0 8 * * 1-5", schedule_timezone="Europe/Paris")
    async def weekday() -> None:
        return None

    (only,) = weekday.schedules
    assert (only.schedule_id, only.cron, only.timezone) == (
        "sched_weekday",
        "0 8 * * 1-5",
        "Europe/Paris",
    )
    with pytest.raises(InvalidScheduleError, match="not a valid cron"):

        @workflow(name="sched_bad", schedule="99 * * * *")
        async def bad() -> None:
            return None

    with pytest.raises(InvalidScheduleError, match="unknown time zone"):
        Schedule(cron="@daily", timezone="Moon/Base")


async def test_a_worker_registers_what_its_workflows_declare(store: Store) -> None:
    @workflow(name="sched_served", schedule=Schedule(every="1h", schedule_id="served-hourly"))
    async def served() -> None:
        return None

    mine = Registry()
    mine.add_workflow(served)  # type: ignore[arg-type]
    worker = Worker(store, registry=mine)
    running = asyncio.create_task(worker.run())
    try:
        for _ in range(200):
            if await store.get_schedule("served-hourly") is not None:
                break
            await asyncio.sleep(0.02)
    finally:
        worker.request_stop()
        await running
    record = await store.get_schedule("served-hourly")
    assert record is not None and record.source == "code" and record.task_queue == "default"
