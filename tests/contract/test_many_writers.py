"""Several store instances on one database, racing: the orchestrator duties need no leader.

Each instance has its own connections, as a separate worker or server process
would, and they all sweep at once. The invariants: each due timer fires once,
each expired lease is reaped once, a completion racing the reaper either
lands or is reaped (never both), one workflow id has one open run, and an
event published while a wait for it commits is received exactly once.

These run on every backend of the suite: a SQLite file and PostgreSQL, both of
which several processes can share.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from keepgoing._history.events import (
    EventReceived,
    EventWaitStarted,
    TaskAttemptFailed,
    TaskCompleted,
    TimerFired,
    TimerStarted,
)
from keepgoing._open_store import store_from_url
from keepgoing._store.protocol import Store
from keepgoing._store.records import EventRequest, TaskClaim, TaskOutcomeResult
from keepgoing.errors import WorkflowAlreadyRunningError

from ._builders import (
    NOW,
    TTL,
    claim_run,
    claim_tasks,
    of_type,
    schedule,
    start,
    start_with,
    success,
    task,
)

RUNS = 40
CALLERS = 4


@pytest.fixture
async def stores(store: Store) -> AsyncIterator[list[Store]]:
    """``store`` and three more instances of it on the same database."""
    others = [store_from_url(store.url) for _ in range(CALLERS - 1)]
    for other in others:
        await other.open()
    try:
        yield [store, *others]
    finally:
        for other in others:
            await other.close()


async def _sweep(stores: list[Store], call: Callable[[Store], Awaitable[int]]) -> list[int]:
    """Every store calls ``call`` until the total reaches RUNS; how many each handled."""
    counts = [0] * len(stores)

    async def sweeper(i: int) -> None:
        for _ in range(1000):
            if sum(counts) >= RUNS:
                return
            counts[i] += await call(stores[i])
            await asyncio.sleep(0)
        raise AssertionError(f"the sweep stalled at {sum(counts)} of {RUNS}")

    await asyncio.gather(*(sweeper(i) for i in range(len(stores))))
    return counts


async def test_each_due_timer_fires_once_however_many_callers_race(stores: list[Store]) -> None:
    runs = [
        (await start_with(stores[0], [TimerStarted(cmd=1, fire_at=NOW + 1)], f"wf-{i}"))[0]
        for i in range(RUNS)
    ]

    counts = await _sweep(stores, lambda s: s.fire_due_timers(now=NOW + 2, limit=3))

    assert sum(counts) == RUNS
    for run in runs:
        assert len(of_type(await stores[0].read_history(run.run_id), TimerFired)) == 1
    assert await stores[1].fire_due_timers(now=NOW + 3, limit=100) == 0


async def _leased_tasks(store: Store) -> list[TaskClaim]:
    """RUNS runs, each with one task claimed by worker w1 (lease ends at NOW + TTL)."""
    for i in range(RUNS):
        await start_with(store, [task(1)], f"wf-{i}")
    claimed = await claim_tasks(store, limit=RUNS)
    assert len(claimed) == RUNS
    return claimed


async def test_each_expired_lease_is_reaped_once_however_many_callers_race(
    stores: list[Store],
) -> None:
    claims = await _leased_tasks(stores[0])

    counts = await _sweep(stores, lambda s: s.reap_expired_leases(now=NOW + TTL + 1, limit=3))

    assert sum(counts) == RUNS
    for claim in claims:
        (lost,) = of_type(await stores[0].read_history(claim.run_id), TaskAttemptFailed)
        assert lost.reason == "worker_lost"
    assert await stores[1].reap_expired_leases(now=NOW + TTL + 2, limit=100) == 0


async def test_a_completion_racing_the_reaper_lands_or_is_reaped_never_both(
    stores: list[Store],
) -> None:
    claims = await _leased_tasks(stores[0])
    late = NOW + TTL + 1  # every lease has expired; none is reaped yet

    async def complete_all() -> list[TaskOutcomeResult]:
        return [await stores[0].complete_task(success(c, now=late)) for c in claims]

    async def reap(store: Store) -> None:
        while await store.reap_expired_leases(now=late, limit=2):
            await asyncio.sleep(0)

    results, *_ = await asyncio.gather(complete_all(), *(reap(s) for s in stores[1:]))

    for claim, result in zip(claims, results, strict=True):
        history = await stores[0].read_history(claim.run_id)
        done = of_type(history, TaskCompleted)
        lost = of_type(history, TaskAttemptFailed)
        assert len(done) + len(lost) == 1, history
        assert result.accepted == bool(done)


async def test_one_workflow_id_gets_one_open_run_however_many_start_it(
    stores: list[Store],
) -> None:
    async def attempt(i: int) -> str:
        try:
            run = await start(stores[i % len(stores)], "same-id", run_id=f"run-{i}")
        except WorkflowAlreadyRunningError:
            return "refused"
        return run.run_id

    outcomes = await asyncio.gather(*(attempt(i) for i in range(8)))

    started = [o for o in outcomes if o != "refused"]
    assert len(started) == 1, outcomes
    found = await stores[1].find_run("same-id")
    assert found is not None and found.run_id == started[0]


async def test_an_event_published_while_its_wait_commits_is_received_once(
    stores: list[Store],
) -> None:
    claims = []
    for i in range(RUNS):
        run = await start(stores[0], f"wf-{i}")
        claims.append(await claim_run(stores[0], run.run_id))

    async def wait(i: int) -> None:
        await schedule(
            stores[i % 2],
            claims[i],
            [EventWaitStarted(cmd=1, event_type="job", correlation_id=f"c{i}")],
        )

    async def publish(i: int) -> None:
        request = EventRequest("job", f"c{i}", {"n": i}, f"e{i}", "user", "u", NOW)
        await stores[2 + i % 2].publish_event(request)

    await asyncio.gather(*(f(i) for i in range(RUNS) for f in (wait, publish)))

    for i, claim in enumerate(claims):
        received = of_type(await stores[0].read_history(claim.run.run_id), EventReceived)
        assert [(e.event_id, e.payload) for e in received] == [(f"e{i}", {"n": i})]
