"""A worker's idle wait and its own timers (the ones it fires for runs it holds).

A timer that fell due during a pass, or joined the heap while the worker was
already waiting, must end the wait at once: before, such a timer waited for
the next services sweep (a quarter of a second) or the poll interval.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from keepgoing import workflow
from keepgoing._store.records import StartRequest
from keepgoing._store.sqlite import SqliteStore
from keepgoing._worker.activation import FollowUp
from keepgoing._worker.inprocess import drive
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.worker import Worker

HOUR = 3600.0
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def worker() -> AsyncIterator[Worker]:
    store = SqliteStore(":memory:")
    await store.open()
    # Nothing else would end a wait: no poll within the hour, no services pass.
    settings = WorkerSettings(queues=("q",), poll_interval=HOUR, services_interval=HOUR)
    worker = Worker(store, settings=settings, worker_id="w-timers", run_services=False)
    try:
        yield worker
    finally:
        await store.close()


async def test_a_timer_that_fell_due_during_the_pass_ends_the_wait_at_once(
    worker: Worker,
) -> None:
    now = worker.clock.now()
    worker._follow(FollowUp(timers=[(now - 0.001, "run-1", 1)]))
    worker._claimed_at = now  # the pass stamped its claims after the timer fell due
    await asyncio.wait_for(worker.idle(), timeout=30)


async def test_a_timer_added_while_the_worker_waits_ends_the_wait(worker: Worker) -> None:
    waiting = asyncio.create_task(worker.idle())
    for _ in range(20):
        await asyncio.sleep(0)  # the wait begins with no timer
    assert not waiting.done()
    worker._follow(FollowUp(timers=[(worker.clock.now() + 0.005, "run-1", 1)]))
    await asyncio.wait_for(waiting, timeout=30)


@pytest.mark.parametrize("ahead", [0.0005, 0.0014, 0.004])
async def test_the_wait_for_a_close_timer_ends_only_once_it_is_due(
    worker: Worker, ahead: float
) -> None:
    due = worker.clock.now() + ahead
    worker._follow(FollowUp(timers=[(due, "run-1", 1)]))
    while worker.clock.now() < due:  # it may wake early once, never end up before it
        await asyncio.wait_for(worker.idle(), timeout=30)
    assert worker.clock.now() >= due


@workflow(name="worker_timers.naps")
async def naps() -> str:
    for _ in range(3):
        await asyncio.sleep(0.01)  # durable timers the worker holding the run fires itself
    return "rested"


async def _drive_naps(worker: Worker) -> str:
    run_id = uuid.uuid4().hex
    await worker.store.start_run(
        StartRequest(
            run_id=run_id,
            workflow_id=f"naps-{run_id}",
            workflow_name=naps.name,
            input={"args": [], "kwargs": {}},
            task_queue="q",
            code_version="v1",
            now=worker.clock.now(),
        )
    )
    try:
        run = await asyncio.wait_for(drive(worker, run_id), timeout=30)
    finally:
        await worker.stop_local()
    assert run.status == "completed", run
    return str(run.result)


async def test_a_workers_own_timers_do_not_bring_the_services_sweep_forward(
    worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker.run_services = True
    passes: list[float] = []
    services = worker._services

    async def counted(now: float) -> bool:
        passes.append(now)
        return await services(now)

    monkeypatch.setattr(worker, "_services", counted)
    assert await _drive_naps(worker) == "rested"
    assert len(passes) == 1, passes  # the first pass only: each timer was fired here


async def test_a_timer_the_worker_cannot_fire_itself_is_swept_at_once(
    worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker.run_services = True

    async def cannot(run_id: str, cmd: int) -> FollowUp | None:
        return None  # as when the run is busy or no longer cached

    monkeypatch.setattr(worker.activator, "fire_timer", cannot)
    # Without the sweep at once, the next one would be an hour away: drive times out.
    assert await _drive_naps(worker) == "rested"
