"""Services: timers, the lease reaper, heartbeats and the next wake-up."""

from __future__ import annotations

import asyncio

from keepgoing._history.events import (
    TaskAttemptFailed,
    TaskFailed,
    TimerCancelled,
    TimerFired,
    TimerStarted,
)
from keepgoing._store.protocol import Store

from ._builders import (
    NOW,
    TTL,
    claim_one,
    claim_run,
    claim_runs,
    claim_tasks,
    failure,
    of_type,
    schedule,
    start,
    start_with,
    success,
    task,
)

# -- timers ---------------------------------------------------------------------------


async def test_a_due_timer_fires_once_and_makes_the_run_runnable(store: Store) -> None:
    run, _ = await start_with(store, [TimerStarted(cmd=1, fire_at=NOW + 5)])

    early = await store.fire_due_timers(now=NOW + 4.9, limit=10)
    due = await store.fire_due_timers(now=NOW + 5, limit=10)
    again = await store.fire_due_timers(now=NOW + 6, limit=10)

    assert (early, due, again) == (0, 1, 0)
    history = await store.read_history(run.run_id)
    assert history[-1] == TimerFired(seq=4, at=NOW + 5, cmd=1)
    record = await store.get_run(run.run_id)
    assert record is not None and record.runnable is True and record.last_input_seq == 4
    assert len(await claim_runs(store, now=NOW + 6)) == 1


async def test_racing_callers_fire_each_timer_once(store: Store) -> None:
    run, _ = await start_with(
        store, [TimerStarted(cmd=1, fire_at=NOW + 1), TimerStarted(cmd=2, fire_at=NOW + 2)]
    )

    counts = await asyncio.gather(
        *(store.fire_due_timers(now=NOW + 10, limit=10) for _ in range(4))
    )

    assert sum(counts) == 2
    fired = of_type(await store.read_history(run.run_id), TimerFired)
    assert sorted(e.cmd for e in fired) == [1, 2]


async def test_timers_fire_earliest_first_up_to_the_limit(store: Store) -> None:
    run, _ = await start_with(
        store,
        [
            TimerStarted(cmd=1, fire_at=NOW + 3),
            TimerStarted(cmd=2, fire_at=NOW + 1),
            TimerStarted(cmd=3, fire_at=NOW + 2),
        ],
    )

    first = await store.fire_due_timers(now=NOW + 10, limit=2)
    fired = [e.cmd for e in of_type(await store.read_history(run.run_id), TimerFired)]
    rest = await store.fire_due_timers(now=NOW + 10, limit=2)

    assert first == 2 and fired == [2, 3]
    assert rest == 1
    assert [e.cmd for e in of_type(await store.read_history(run.run_id), TimerFired)] == [2, 3, 1]


async def test_timers_of_several_runs_fire_together(store: Store) -> None:
    a, _ = await start_with(store, [TimerStarted(cmd=1, fire_at=NOW + 1)], "wf-a")
    b, _ = await start_with(store, [TimerStarted(cmd=1, fire_at=NOW + 1)], "wf-b")

    assert await store.fire_due_timers(now=NOW + 1, limit=10) == 2
    for run in (a, b):
        assert len(of_type(await store.read_history(run.run_id), TimerFired)) == 1


async def test_a_cancelled_timer_never_fires(store: Store) -> None:
    run, _ = await start_with(store, [TimerStarted(cmd=1, fire_at=NOW + 5), task(2)])
    await store.complete_task(success(await claim_one(store), now=NOW + 1))
    claim = await claim_run(store, run.run_id, now=NOW + 2)
    await schedule(store, claim, [TimerCancelled(cmd=1)], now=NOW + 2)

    assert await store.fire_due_timers(now=NOW + 100, limit=10) == 0
    assert of_type(await store.read_history(run.run_id), TimerFired) == []
    assert await store.next_wakeup() is None


async def test_timers_of_a_blocked_run_do_not_fire(store: Store) -> None:
    run, _ = await start_with(store, [TimerStarted(cmd=1, fire_at=NOW + 5), task(2)])
    await store.complete_task(success(await claim_one(store), now=NOW + 1))
    claim = await claim_run(store, run.run_id, now=NOW + 2)
    await schedule(store, claim, [], now=NOW + 2, blocked_reason="nondeterminism")

    assert await store.fire_due_timers(now=NOW + 100, limit=10) == 0
    assert of_type(await store.read_history(run.run_id), TimerFired) == []


# -- reaping ----------------------------------------------------------------------------


async def test_reaping_a_lost_worker_retries_the_attempt(store: Store) -> None:
    run, _ = await start_with(store, [task(1, retries=0, timeout=600.0)])
    claim = await claim_one(store, worker="w1", now=NOW, ttl=TTL)

    at_expiry = await store.reap_expired_leases(now=NOW + TTL, limit=10)
    reaped = await store.reap_expired_leases(now=NOW + TTL + 1, limit=10)
    again = await store.reap_expired_leases(now=NOW + TTL + 2, limit=10)

    assert (at_expiry, reaped, again) == (0, 1, 0)
    history = await store.read_history(run.run_id)
    lost = of_type(history, TaskAttemptFailed)
    assert len(lost) == 1
    assert lost[0].reason == "worker_lost"
    assert lost[0].error.type == "keepgoing.WorkerLost"
    assert "w1" in lost[0].error.message
    assert lost[0].worker == "w1"
    assert lost[0].attempt == 1
    assert lost[0].started_at == NOW
    assert lost[0].at == NOW + TTL + 1
    assert lost[0].retry_at is not None
    assert of_type(history, TaskFailed) == []
    assert (await store.complete_task(success(claim, now=NOW + TTL + 2))).accepted is False
    retry = await claim_one(store, worker="w2", now=lost[0].retry_at)
    assert retry.attempt == 2


async def test_reaping_past_the_deadline_is_a_timeout(store: Store) -> None:
    run, _ = await start_with(store, [task(1, retries=0, timeout=5.0)])
    await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    await store.heartbeat("w1", lease_ttl=TTL, now=NOW + 10)  # capped at NOW + 5 + TTL

    assert await store.reap_expired_leases(now=NOW + 5 + TTL + 1, limit=10) == 1

    history = await store.read_history(run.run_id)
    timed_out = of_type(history, TaskAttemptFailed)[0]
    assert timed_out.reason == "timeout"
    assert timed_out.error.type == "TimeoutError"
    failed = of_type(history, TaskFailed)
    assert len(failed) == 1 and failed[0].reason == "timeout" and failed[0].attempts == 1
    record = await store.get_run(run.run_id)
    assert record is not None and record.runnable is True


async def test_reaping_is_bounded_by_the_limit(store: Store) -> None:
    await start_with(store, [task(1), task(2), task(3)])
    await claim_tasks(store, worker="w1", now=NOW, ttl=TTL)

    first = await store.reap_expired_leases(now=NOW + TTL + 1, limit=2)
    second = await store.reap_expired_leases(now=NOW + TTL + 1, limit=2)

    assert (first, second) == (2, 1)


async def test_reaping_clears_expired_activation_leases(store: Store) -> None:
    run = await start(store)
    await claim_run(store, run.run_id, worker="w1", ttl=TTL)

    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 0
    # The lease is gone, so a late heartbeat of w1 cannot revive it.
    await store.heartbeat("w1", lease_ttl=TTL, now=NOW + TTL + 1)

    claims = await claim_runs(store, worker="w2", now=NOW + TTL + 2)
    assert [c.run.run_id for c in claims] == [run.run_id]
    record = await store.get_run(run.run_id)
    assert record is not None and record.runnable is True


# -- heartbeats ---------------------------------------------------------------------------


async def test_heartbeat_extends_task_leases_and_reports_them(store: Store) -> None:
    run, _ = await start_with(store, [task(1), task(2)])
    await claim_tasks(store, worker="w1", now=NOW, ttl=TTL)

    held = await store.heartbeat("w1", lease_ttl=TTL, now=NOW + 10)

    assert held == {(run.run_id, 1), (run.run_id, 2)}
    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 0
    assert await store.reap_expired_leases(now=NOW + 10 + TTL + 1, limit=10) == 2


async def test_heartbeat_caps_task_leases_at_deadline_plus_ttl(store: Store) -> None:
    await start_with(store, [task(1, timeout=5.0)])
    await claim_one(store, worker="w1", now=NOW, ttl=TTL)

    await store.heartbeat("w1", lease_ttl=TTL, now=NOW + 10)

    # Uncapped, the lease would run to NOW + 25; capped, it ends at NOW + 20.
    assert await store.next_wakeup() == NOW + 5 + TTL
    assert await store.reap_expired_leases(now=NOW + 5 + TTL + 1, limit=10) == 1


async def test_a_reclaimed_task_leaves_the_old_workers_held_set(store: Store) -> None:
    run, _ = await start_with(store, [task(1)])
    await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    await store.reap_expired_leases(now=NOW + TTL + 1, limit=10)
    retry = await claim_tasks(store, worker="w2", now=NOW + 100)
    assert len(retry) == 1

    old = await store.heartbeat("w1", lease_ttl=TTL, now=NOW + 101)
    new = await store.heartbeat("w2", lease_ttl=TTL, now=NOW + 101)

    assert old == set()
    assert new == {(run.run_id, 1)}


async def test_heartbeat_of_a_worker_without_leases_is_empty(store: Store) -> None:
    await start_with(store, [task(1)])
    await claim_one(store, worker="w1")

    assert await store.heartbeat("w9", lease_ttl=TTL, now=NOW + 1) == set()


async def test_heartbeat_extends_activation_leases(store: Store) -> None:
    run = await start(store)
    await claim_run(store, run.run_id, worker="w1", ttl=TTL)

    await store.heartbeat("w1", lease_ttl=TTL, now=NOW + 10)

    assert await claim_runs(store, worker="w2", now=NOW + TTL + 1) == []
    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 0
    later = await claim_runs(store, worker="w2", now=NOW + 10 + TTL + 1)
    assert [c.run.run_id for c in later] == [run.run_id]


# -- next wake-up ---------------------------------------------------------------------------


async def test_next_wakeup_is_none_when_nothing_is_scheduled(store: Store) -> None:
    assert await store.next_wakeup() is None
    await start(store)
    assert await store.next_wakeup() is None


async def test_next_wakeup_follows_timers_tasks_and_leases(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id, now=NOW, ttl=TTL)
    assert await store.next_wakeup() == NOW + TTL  # the activation lease

    await schedule(store, claim, [TimerStarted(cmd=1, fire_at=NOW + 50), task(2)], now=NOW + 1)
    assert await store.next_wakeup() == NOW + 1  # the pending task is available

    t = await claim_one(store, now=NOW + 2, ttl=TTL)
    assert await store.next_wakeup() == NOW + 2 + TTL  # the task's lease

    await store.complete_task(success(t, now=NOW + 3))
    assert await store.next_wakeup() == NOW + 50  # the timer

    await store.fire_due_timers(now=NOW + 50, limit=10)
    assert await store.next_wakeup() is None


async def test_next_wakeup_includes_a_retry(store: Store) -> None:
    await start_with(store, [task(1, retries=1, retry_delay=30.0)])
    claim = await claim_one(store, now=NOW)

    result = await store.complete_task(failure(claim, now=NOW + 1))

    assert result.retry_at is not None
    assert await store.next_wakeup() == result.retry_at
