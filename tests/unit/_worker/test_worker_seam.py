"""The worker's seam: the activator and an attempt work on a store without a Worker.

The activator is given the store, cache, clock, settings and statistics, and
hands back what the worker must do next (the eager claims, the timers); an
attempt describes its own outcome. Both run here on a SQLite store with a
fake clock and no worker at all.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from keepgoing import task, workflow
from keepgoing._backoff import backoff
from keepgoing._store.records import StartRequest, TaskClaim
from keepgoing._store.sqlite import SqliteStore
from keepgoing._worker.activation import NOTHING, Activator, FollowUp
from keepgoing._worker.attempts import run_attempt
from keepgoing._worker.cache import InstanceCache
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.worker import STORE_BACKOFF_FIRST, WorkerStats
from keepgoing._workflow.registry import registry
from keepgoing.testing import FakeClock

QUEUE = "seam"
NAP = 90.0  # seconds the workflow's timer waits


@task(name="seam.double")
async def double(x: int) -> int:
    return 2 * x


@task(name="seam.broken", retries=0)
async def broken() -> None:
    raise LookupError("nothing here")


@task(name="seam.stuck")
async def stuck() -> None:
    await asyncio.Event().wait()  # never set: only the deadline ends it


@workflow(name="seam.nap_and_double")
async def nap_and_double(x: int) -> int:
    napping = asyncio.ensure_future(asyncio.sleep(NAP))
    result = await double(x)
    await napping
    return result


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(str(tmp_path / "seam.db"))
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


def _activator(
    store: SqliteStore, clock: FakeClock, room: int | None
) -> tuple[Activator, WorkerStats]:
    stats = WorkerStats()
    activator = Activator(
        store,
        InstanceCache(8),
        clock,
        WorkerSettings(queues=(QUEUE,)),
        stats,
        registry=registry,
        worker_id="seam-worker",
        room=lambda: room,
    )
    return activator, stats


async def _start_and_activate(store: SqliteStore, clock: FakeClock, room: int | None) -> FollowUp:
    run_id = uuid.uuid4().hex
    await store.start_run(
        StartRequest(
            run_id=run_id,
            workflow_id=f"seam-{run_id}",
            workflow_name=nap_and_double.name,
            input={"args": [21], "kwargs": {}},
            task_queue=QUEUE,
            code_version=nap_and_double.code_version,
            now=clock.now(),
        )
    )
    activator, stats = _activator(store, clock, room)
    [claim] = await store.claim_activations(
        worker_id="seam-worker",
        queues=(QUEUE,),
        workflow_names=[nap_and_double.name],
        limit=1,
        lease_ttl=30.0,
        now=clock.now(),
    )
    follow = await activator.activate(claim)
    assert stats.activations == 1
    return follow


async def test_an_activation_returns_the_claims_and_timers_of_its_commit(
    store: SqliteStore,
) -> None:
    clock = FakeClock()

    follow = await _start_and_activate(store, clock, room=4)

    [claim] = follow.claims
    assert (claim.name, claim.args) == (double.name, [21])
    [(fire_at, run_id, cmd)] = follow.timers
    assert fire_at == clock.now() + NAP
    assert run_id == claim.run_id
    assert cmd != claim.cmd
    # The store leased the task to this worker in the same commit: nobody else claims it.
    assert await _claim_tasks(store, clock, double.name) == []


async def test_a_stopping_worker_gets_no_claims_but_still_its_timers(store: SqliteStore) -> None:
    clock = FakeClock()

    follow = await _start_and_activate(store, clock, room=None)

    assert follow.claims == []
    assert [fire_at for fire_at, _, _ in follow.timers] == [clock.now() + NAP]
    [claim] = await _claim_tasks(store, clock, double.name)  # left for any worker
    assert claim.args == [21]


async def test_an_activation_with_nothing_to_follow_up_returns_nothing(
    store: SqliteStore,
) -> None:
    clock = FakeClock()
    follow = await _start_and_activate(store, clock, room=4)
    [claim] = follow.claims
    activator, _ = _activator(store, clock, room=4)

    # The task's completion, without the cached instance: an ordinary write.
    outcome = await run_attempt(
        double, claim, worker_id="seam-worker", clock=clock, threads=None, store=store
    )

    assert await activator.complete(outcome) is NOTHING
    run = await store.get_run(claim.run_id)
    assert run is not None and run.status == "running"


async def test_an_attempt_describes_its_own_outcome(store: SqliteStore) -> None:
    clock = FakeClock()
    [claim] = (await _start_and_activate(store, clock, room=4)).claims
    clock.advance(2.5)

    outcome = await run_attempt(
        double, claim, worker_id="seam-worker", clock=clock, threads=None, store=store
    )

    assert (outcome.run_id, outcome.cmd, outcome.fence) == (claim.run_id, claim.cmd, claim.fence)
    assert (outcome.attempt, outcome.started_at) == (claim.attempt, claim.started_at)
    assert (outcome.worker_id, outcome.now) == ("seam-worker", clock.now())
    assert (outcome.ok, outcome.result, outcome.error, outcome.reason) == (True, 42, None, "error")


async def test_a_failed_attempt_describes_its_error_and_keeps_no_writes() -> None:
    clock = FakeClock()
    claim = _claim(clock, name=broken.name, args=[], cmd=3, fence=7)

    outcome = await run_attempt(broken, claim, worker_id="seam-worker", clock=clock, threads=None)

    assert (outcome.ok, outcome.result, outcome.reason) == (False, None, "error")
    assert outcome.error is not None
    assert (outcome.error.type, outcome.error.message) == ("LookupError", "nothing here")
    assert (outcome.fence, outcome.now, outcome.volume_commits) == (7, clock.now(), ())


async def test_an_attempt_past_its_deadline_times_out_at_once() -> None:
    clock = FakeClock()
    claim = _claim(
        clock, name=stuck.name, args=[], attempt=2, started_at=clock.now() - 20.0, timeout=15.0
    )

    outcome = await run_attempt(stuck, claim, worker_id="seam-worker", clock=clock, threads=None)

    assert (outcome.ok, outcome.reason) == (False, "timeout")
    assert outcome.error is not None
    assert outcome.error.message == "attempt 2 exceeded its timeout of 15s"


@pytest.mark.parametrize("jitter", [1.0, 0.5])
def test_backoff_doubles_from_a_tenth_of_a_second_up_to_its_cap(jitter: float) -> None:
    for failures in range(1, 16):
        delay = min(2.0, 0.1 * 2 ** (failures - 1))
        waits = [
            backoff(failures - 1, base=STORE_BACKOFF_FIRST, cap=2.0, jitter=jitter)
            for _ in range(200)
        ]
        assert all((1.0 - jitter) * delay <= w <= delay for w in waits), failures
        assert len(set(waits)) > 1, "the delay is jittered"
    # a count of 0 failures is taken as the first
    assert backoff(0 - 1, base=STORE_BACKOFF_FIRST, cap=2.0, jitter=0.0) == 0.1


async def _claim_tasks(store: SqliteStore, clock: FakeClock, name: str) -> list[TaskClaim]:
    return await store.claim_tasks(
        worker_id="another-worker",
        queues=(QUEUE,),
        task_names=[name],
        limit=4,
        lease_ttl=30.0,
        now=clock.now(),
    )


def _claim(
    clock: FakeClock,
    *,
    name: str = double.name,
    args: list[object] | None = None,
    cmd: int = 1,
    fence: int = 1,
    attempt: int = 1,
    started_at: float | None = None,
    timeout: float = 10.0,
) -> TaskClaim:
    """A claim as the store hands it out, for an attempt run without a store."""
    started = clock.now() if started_at is None else started_at
    return TaskClaim(
        run_id="run-1",
        workflow_id="wf-1",
        cmd=cmd,
        name=name,
        args=[1] if args is None else args,
        kwargs={},
        attempt=attempt,
        fence=fence,
        started_at=started,
        deadline=started + timeout,
        lease_expires_at=clock.now() + 30.0,
        timeout=timeout,
        retries=0,
        retry_delay=None,
        max_worker_losses=3,
    )
