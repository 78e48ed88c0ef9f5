"""Two schedulers (each with its own connection to one store, as two servers have)
fire the same schedule in real time: each slot starts exactly one run."""

from __future__ import annotations

import asyncio

from keepgoing._clock import system_clock
from keepgoing._open_store import store_from_url
from keepgoing._schedules import commands as ops
from keepgoing._schedules.commands import Actor, ScheduleRequest
from keepgoing._schedules.service import Scheduler
from keepgoing._store.protocol import Store

ME = Actor("user", "tester")


async def wait_for(check: object, deadline: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while not await check():  # type: ignore[operator]
        assert loop.time() < end, "the schedulers did not act on every slot in time"
        await asyncio.sleep(0.05)


async def test_two_schedulers_start_exactly_twenty_runs_for_twenty_slots(store: Store) -> None:
    now = system_clock.now()
    await store.record_workflows(["wf"], ["default"], now)
    # 16 slots already passed (caught up at once) and 4 still to come, one a second.
    first = float(int(now)) - 15
    req = ScheduleRequest(
        workflow="wf", every="1s", overlap="allow_all", start_at=first, end_at=first + 19
    )
    await ops.create(store, "race", req, actor=ME, now=first - 0.5)
    other = store_from_url(store.url)
    await other.open()
    one, two = Scheduler(store), Scheduler(other)
    loops = [asyncio.create_task(one.run()), asyncio.create_task(two.run())]

    async def all_slots() -> bool:
        return len(await store.schedule_actions("race", limit=100)) >= 20

    try:
        await wait_for(all_slots, 30)
    finally:
        one.request_stop()
        two.request_stop()
        await asyncio.gather(*loops)
        await other.close()
    actions = await store.schedule_actions("race", limit=100)
    assert len(actions) == 20 and all(a.status == "started" for a in actions)
    assert len({a.run_id for a in actions}) == 20
    assert len(await store.list_runs(limit=100)) == 20
    assert one.started + two.started == 20
