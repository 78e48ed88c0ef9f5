"""The ``keepgoing_queue_work`` view counts exactly what a worker would claim, on both stores.

The view reads the database's own clock (KEDA queries it with no parameters),
so these tests use the real time rather than the suite's fake ``NOW``.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Any

import pytest

from keepgoing._history.events import TimerStarted, WorkflowCompleted
from keepgoing._store.protocol import Store

from ._builders import (
    claim_runs,
    claim_tasks,
    failure,
    schedule,
    start,
    task,
)

QUEUE = "default"
HOUR = 3600.0


@dataclass(frozen=True)
class Work:
    queued: int
    running: int
    delayed: int
    next_due_at: float | None
    open_runs: int


IDLE = Work(0, 0, 0, None, 0)


def _rows(store: Store, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    url: str = store.url  # type: ignore[attr-defined]
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql.replace("%s", "?"), params)]
        finally:
            conn.close()
    import psycopg  # noqa: PLC0415
    from psycopg.rows import dict_row  # noqa: PLC0415

    with psycopg.connect(url, row_factory=dict_row) as pg:
        return list(pg.execute(sql, params))  # type: ignore[arg-type]


def work(store: Store, queue: str = QUEUE) -> Work:
    rows = _rows(
        store,
        "SELECT queued, running, delayed, next_due_at, open_runs "
        "FROM keepgoing_queue_work WHERE queue = %s",
        (queue,),
    )
    if not rows:
        return IDLE
    (row,) = rows
    due = row["next_due_at"]
    return Work(
        int(row["queued"]),
        int(row["running"]),
        int(row["delayed"]),
        None if due is None else float(due),
        int(row["open_runs"]),
    )


async def test_an_empty_store_has_no_work(store: Store) -> None:
    assert _rows(store, "SELECT * FROM keepgoing_queue_work") == []
    assert work(store) == IDLE


async def test_started_runs_are_queued_and_claimed_ones_running(store: Store) -> None:
    now = time.time()
    for i in range(5):
        await start(store, f"wf-{i}", now=now)
    assert work(store) == Work(5, 0, 0, None, 5)

    claimed = await claim_runs(store, now=now, limit=2, ttl=HOUR)
    assert len(claimed) == 2
    assert work(store) == Work(3, 2, 0, None, 5)

    # Committing an activation that schedules three tasks: its lease is gone, three
    # attempts are queued.
    await schedule(store, claimed[0], [task(1), task(2), task(3)], now=now)
    assert work(store) == Work(6, 1, 0, None, 5)

    tasks = await claim_tasks(store, now=now, limit=2, ttl=HOUR)
    assert len(tasks) == 2
    assert work(store) == Work(4, 3, 0, None, 5)


async def test_sleeping_runs_hold_nothing_but_report_their_wake_up(store: Store) -> None:
    now = time.time()
    await start(store, "sleeper", now=now)
    (claim,) = await claim_runs(store, now=now, ttl=HOUR)
    await schedule(store, claim, [TimerStarted(cmd=1, fire_at=now + HOUR)], now=now)

    got = work(store)
    assert (got.queued, got.running, got.delayed, got.open_runs) == (0, 0, 0, 1)
    assert got.next_due_at == pytest.approx(now + HOUR)


async def test_a_due_timer_not_yet_fired_is_queued(store: Store) -> None:
    now = time.time()
    await start(store, "due", now=now)
    (claim,) = await claim_runs(store, now=now, ttl=HOUR)
    await schedule(store, claim, [TimerStarted(cmd=1, fire_at=now - 1)], now=now)
    assert work(store) == Work(1, 0, 0, None, 1)

    assert await store.fire_due_timers(now=now, limit=10) == 1
    # fired: the run is runnable, an activation to claim
    assert work(store) == Work(1, 0, 0, None, 1)


async def test_a_retry_waiting_out_its_delay_is_delayed_not_queued(store: Store) -> None:
    now = time.time()
    await start(store, "retry", now=now)
    (claim,) = await claim_runs(store, now=now, ttl=HOUR)
    await schedule(store, claim, [task(1, retries=3, retry_delay=HOUR)], now=now)
    (attempt,) = await claim_tasks(store, now=now, ttl=HOUR)
    assert work(store) == Work(0, 1, 0, None, 1)

    result = await store.complete_task(failure(attempt, now=now))
    assert result.accepted
    got = work(store)
    assert (got.queued, got.running, got.delayed, got.open_runs) == (0, 0, 1, 1)
    assert got.next_due_at is not None and got.next_due_at > now + 60  # the delay has jitter


async def test_ended_runs_and_other_queues_are_not_counted(store: Store) -> None:
    now = time.time()
    await start(store, "elsewhere", queue="workflows.other", now=now)
    await start(store, "done", now=now)
    (claim,) = await claim_runs(store, now=now, ttl=HOUR)
    await schedule(store, claim, [WorkflowCompleted(result=1)], now=now)

    assert work(store) == IDLE
    assert work(store, "workflows.other") == Work(1, 0, 0, None, 1)


async def test_counts_match_what_a_worker_then_claims(store: Store) -> None:
    """Enqueue N, claim k: the view said N - k were left, and exactly that many claim."""
    now = time.time()
    await start(store, "parent", now=now)
    (claim,) = await claim_runs(store, now=now, ttl=HOUR)
    await schedule(store, claim, [task(i) for i in range(1, 8)], now=now)
    await claim_tasks(store, now=now, limit=3, ttl=HOUR)
    before = work(store)
    assert (before.queued, before.running) == (4, 3)

    rest = await claim_tasks(store, worker="w2", now=now, limit=100, ttl=HOUR)
    assert len(rest) == before.queued
    assert work(store) == Work(0, 7, 0, None, 1)
