"""Flow control at claim time: concurrency slots held by leases, token buckets,
the eager claim admitting like any claim, and what the store reports of limits."""

from __future__ import annotations

from typing import Any

import pytest

from keepgoing._store.limits_protocol import DeclaredLimit, LimitWait
from keepgoing._store.protocol import Store

from ._builders import NOW, TTL, claim_tasks, failure, start_with, success, task


def capped(cmd: int, cap: int, key: str = "", name: str = "lookup") -> Any:
    limits = {"limit_name": name, "limit_key": key, "concurrency_cap": cap}
    return task(cmd, limits=limits)


def rated(cmd: int, tokens: int, period: float, burst: int, key: str = "") -> Any:
    limits = {
        "rate_name": "crm",
        "rate_key": key,
        "rate_tokens": tokens,
        "rate_period": period,
        "rate_burst": burst,
    }
    return task(cmd, limits=limits)


async def test_a_full_key_admits_no_more_across_workers(store: Store) -> None:
    await start_with(store, [capped(i, 2) for i in range(1, 6)])

    first = await claim_tasks(store, worker="w1", limit=1)
    second = await claim_tasks(store, worker="w2", limit=5)
    third = await claim_tasks(store, worker="w3", limit=5)

    assert len(first) == 1 and len(second) == 1 and third == []


async def test_a_finished_or_failed_attempt_gives_its_slot_back(store: Store) -> None:
    await start_with(store, [capped(i, 1) for i in range(1, 4)])
    (one,) = await claim_tasks(store, worker="w1")
    assert await claim_tasks(store, worker="w2") == []

    done = await store.complete_task(success(one))
    (two,) = await claim_tasks(store, worker="w2", now=NOW + 2)
    await store.complete_task(failure(two, now=NOW + 3))
    (three,) = await claim_tasks(store, worker="w3", now=NOW + 4)

    assert done.freed_slot
    assert three.cmd == 3


async def test_an_unlimited_completion_frees_no_slot(store: Store) -> None:
    # A completion that frees a slot wakes every claim on the store, so an
    # unlimited one must not say it did (SQLite 3.40's RETURNING once read the
    # NULL limit of a column ALTER TABLE added as not NULL).
    await start_with(store, [task(1), capped(2, 1)])
    claims = {c.cmd: c for c in await claim_tasks(store, worker="w1", limit=5)}

    plain = await store.complete_task(success(claims[1]))
    limited = await store.complete_task(success(claims[2]))

    assert plain.accepted and not plain.freed_slot
    assert limited.accepted and limited.freed_slot


async def test_keys_have_their_own_slots(store: Store) -> None:
    commands = [capped(1, 1, '"a"'), capped(2, 1, '"a"'), capped(3, 1, '"b"')]
    await start_with(store, commands)

    claimed = await claim_tasks(store, worker="w1", limit=5)

    assert sorted(c.cmd for c in claimed) == [1, 3]


async def test_an_expired_lease_holds_no_slot(store: Store) -> None:
    await start_with(store, [capped(1, 1), capped(2, 1)])
    (held,) = await claim_tasks(store, worker="w1", ttl=TTL)

    before = await claim_tasks(store, worker="w2", now=NOW + TTL - 1)
    after = await claim_tasks(store, worker="w2", now=NOW + TTL + 1)
    beat = await store.heartbeat(
        "w1", lease_ttl=TTL, now=NOW + TTL + 2, attempts={(held.run_id, 1)}
    )

    assert before == [] and [c.cmd for c in after] == [2]
    assert beat == set()  # its slot is gone: the frozen worker cannot take it back


async def test_a_blocked_task_does_not_stop_unlimited_ones(store: Store) -> None:
    await start_with(store, [capped(1, 1), capped(2, 1), task(3)])
    await claim_tasks(store, worker="w1", limit=1)

    claimed = await claim_tasks(store, worker="w2", limit=1)

    assert [c.cmd for c in claimed] == [3]


async def test_the_eager_claim_admits_like_a_claim(store: Store) -> None:
    _, result = await start_with(
        store, [capped(i, 2) for i in range(1, 5)], eager_claim=True, eager_limit=10
    )

    assert len(result.eager) == 2
    assert await claim_tasks(store, worker="w2", limit=5) == []


async def test_a_bucket_gives_burst_then_its_rate(store: Store) -> None:
    await start_with(store, [rated(i, 2, 1.0, 2) for i in range(1, 7)])

    burst = await claim_tasks(store, worker="w1", limit=10)
    empty = await claim_tasks(store, worker="w1", limit=10, now=NOW + 0.1)
    refilled = await claim_tasks(store, worker="w1", limit=10, now=NOW + 0.6)

    assert len(burst) == 2 and empty == [] and len(refilled) == 1


async def test_a_task_without_a_token_waits_until_its_token_is_due(store: Store) -> None:
    run, _ = await start_with(store, [rated(1, 1, 2.0, 1), rated(2, 1, 2.0, 1)])
    await claim_tasks(store, worker="w1", limit=1)
    await claim_tasks(store, worker="w1", limit=5, now=NOW + 0.5)

    waits = await store.limit_waits([run.run_id], NOW + 0.5)
    wake = await store.next_wakeup()

    assert waits == [LimitWait(run.run_id, "t", "rate", "crm", until=pytest.approx(NOW + 2.0))]
    assert wake is not None and wake <= NOW + 2.0
    assert len(await claim_tasks(store, worker="w2", now=NOW + 2.0)) == 1


async def test_waits_and_use_say_what_holds_a_task_back(store: Store) -> None:
    run, _ = await start_with(store, [capped(i, 2) for i in range(1, 4)])
    await claim_tasks(store, worker="w1", limit=5)
    await store.record_limits([DeclaredLimit("lookup", concurrency_cap=2)], NOW)

    waits = await store.limit_waits([run.run_id], NOW + 1)
    (use,) = await store.limit_use(NOW + 1)

    assert waits == [LimitWait(run.run_id, "t", "concurrency", "lookup", held=2, cap=2)]
    assert (use.limit.name, use.held, use.waiting, use.tokens) == ("lookup", 2, 1, None)


async def test_declared_limits_are_updated_and_report_tokens(store: Store) -> None:
    rate = DeclaredLimit("crm", rate_tokens=5, rate_period=1.0, rate_burst=3)
    await store.record_limits([DeclaredLimit("crm", concurrency_cap=1)], NOW)
    await store.record_limits([rate], NOW)
    await start_with(store, [rated(1, 5, 1.0, 3)])
    await claim_tasks(store, worker="w1", now=NOW)

    (use,) = await store.limit_use(NOW)

    assert use.limit == rate
    assert use.tokens == pytest.approx(2.0)
