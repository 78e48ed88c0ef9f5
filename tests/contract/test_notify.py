"""wait_for_change: waiters wake on new work and on a run's end.

A waiter is given a few turns of the loop to start waiting; the change is
then made, and the waiter must return long before its own timeout.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

from keepgoing._history.events import (
    TimerStarted,
    WorkflowCancelled,
    WorkflowCompleted,
    WorkflowContinuedAsNew,
)
from keepgoing._store.protocol import Store

from ._builders import NOW, claim_run, schedule, start, start_with, task

LONG = 30.0  # a waiter's timeout; a woken waiter returns well before it
PROMPT = 5.0  # how long the test allows for the wake-up


async def _woken_by(store: Store, change: Callable[[], Awaitable[object]]) -> None:
    waiter = asyncio.create_task(store.wait_for_change(LONG))
    for _ in range(5):
        await asyncio.sleep(0)  # let the waiter start waiting; no time passes
    assert not waiter.done(), "wait_for_change returned before anything changed"

    await change()

    await asyncio.wait_for(waiter, PROMPT)


async def test_wait_for_change_returns_after_its_timeout(store: Store) -> None:
    await asyncio.wait_for(store.wait_for_change(0.01), PROMPT)


async def test_start_run_wakes_a_waiter(store: Store) -> None:
    await _woken_by(store, lambda: start(store))


async def test_scheduling_a_task_wakes_a_waiter(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)

    await _woken_by(store, lambda: schedule(store, claim, [task(1)]))


async def test_a_firing_timer_wakes_a_waiter(store: Store) -> None:
    await start_with(store, [TimerStarted(cmd=1, fire_at=NOW + 1)])

    await _woken_by(store, lambda: store.fire_due_timers(now=NOW + 1, limit=10))


async def test_the_end_of_a_run_wakes_a_waiter(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)

    await _woken_by(store, lambda: schedule(store, claim, [WorkflowCompleted(result=1)]))


async def test_a_run_ending_cancelled_wakes_a_waiter(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)

    await _woken_by(store, lambda: schedule(store, claim, [WorkflowCancelled(reason="asked")]))


async def test_a_run_continuing_as_new_wakes_a_waiter(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)

    await _woken_by(
        store,
        lambda: schedule(store, claim, [WorkflowContinuedAsNew(input={}, new_run_id="r-next")]),
    )


async def test_a_waiter_on_another_threads_loop_wakes(store: Store) -> None:
    woken = threading.Event()

    def wait_in_thread() -> None:
        async def wait() -> None:
            await store.wait_for_change(LONG)
            woken.set()

        asyncio.run(wait())

    thread = threading.Thread(target=wait_in_thread, daemon=True)
    thread.start()
    try:
        # The other loop starts at its own pace: make changes until it wakes.
        for i in range(100):
            await start(store, f"wf-{i}")
            if await asyncio.to_thread(woken.wait, 0.05):
                break
        assert woken.is_set()
    finally:
        await asyncio.to_thread(thread.join, PROMPT)
    assert not thread.is_alive()
