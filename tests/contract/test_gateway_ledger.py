"""The gateway facet (``GatewayStore``) on every store: the ledger, its roll-up, key
limits, and ledger rows settled in the transaction of their attempt's outcome."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from keepgoing._store.gateway_protocol import RESERVATION_TTL, GatewayCall, GatewayKey, KeyUsage
from keepgoing._store.protocol import Store
from keepgoing.errors import StoreError

from ._builders import NOW, TTL, claim_one, claim_tasks, failure, start_with, success, task

DAY = 86400.0


def call(call_id: str, **changes: object) -> GatewayCall:
    fields: dict[str, object] = {
        "call_id": call_id,
        "key_id": "k1",
        "operation": "chat",
        "model_asked": "fast",
        "model_answered": "gpt-4o-mini",
        "provider": "openai",
        "input_tokens": 100,
        "output_tokens": 20,
        "cost": 0.25,
        "latency": 0.5,
        "ttft": None,
        "status": "ok",
        "created_at": NOW,
        "prompt": '[{"role":"user","content":"hi"}]',
        "answer": '{"role":"assistant","content":"hello"}',
    }
    fields.update(changes)
    return GatewayCall(**fields)  # type: ignore[arg-type]


async def test_a_call_is_recorded_and_read_back(store: Store) -> None:
    row = call("c1", streamed=True, ttft=0.1, run_id="r1", step=3, attempt=1, attempt_state="open")
    await store.record_gateway_call(row)
    assert await store.list_gateway_calls() == [row]
    assert await store.list_gateway_calls(run_id="r1") == [row]
    assert await store.list_gateway_calls(key_id="nobody") == []
    with pytest.raises(StoreError, match="already recorded"):
        await store.record_gateway_call(row)


async def test_usage_counts_the_minute_the_day_and_ever(store: Store) -> None:
    await store.record_gateway_call(call("old", created_at=NOW - 3 * DAY, cost=1.0))
    await store.record_gateway_call(call("a", created_at=NOW - 30, cost=0.25))
    await store.record_gateway_call(call("b", created_at=NOW - 10, cost=0.5))
    await store.record_gateway_call(call("refused", created_at=NOW - 5, status="refused", cost=0))
    await store.record_gateway_call(call("other-key", key_id="k2", created_at=NOW - 5))
    usage = await store.gateway_key_usage("k1", NOW)
    assert (usage.minute_requests, usage.minute_tokens) == (2, 240)
    assert usage.minute_oldest == NOW - 30
    assert usage.day_cost == pytest.approx(0.75 if _same_day(NOW - 30, NOW) else 0.5)
    assert usage.total_cost == pytest.approx(1.75)
    empty = await store.gateway_key_usage("nobody", NOW)
    assert (empty.minute_requests, empty.total_cost, empty.minute_oldest) == (0, 0.0, None)


def _same_day(a: float, b: float) -> bool:
    return int(a // DAY) == int(b // DAY)


async def test_usage_by_model(store: Store) -> None:
    await store.record_gateway_call(call("a", cost=0.5))
    await store.record_gateway_call(call("b", cost=0.25, status="error", model_answered=None))
    await store.record_gateway_call(call("c", model_answered="claude", provider="anthropic"))
    rows = await store.gateway_usage_by_model()
    assert [(r.model, r.provider, r.calls, r.errors) for r in rows] == [
        ("gpt-4o-mini", "openai", 1, 0),
        ("claude", "anthropic", 1, 0),
        ("fast", "openai", 1, 1),
    ]
    assert rows[0].input_tokens == 100 and rows[0].cost == pytest.approx(0.5)


async def test_key_limits_are_created_and_replaced(store: Store) -> None:
    assert await store.get_gateway_key("t1") is None
    first = GatewayKey("t1", models=("fast",), requests_per_minute=10, updated_at=NOW)
    await store.set_gateway_key(first)
    assert await store.get_gateway_key("t1") == first
    second = dataclasses.replace(first, models=None, total_budget=5.0, updated_at=NOW + 1)
    await store.set_gateway_key(second)
    assert await store.list_gateway_keys() == [second]


async def test_the_attempts_calls_commit_with_the_steps_completion(store: Store) -> None:
    run, _ = await start_with(store, [task(1)])
    claim = await claim_one(store)
    open_row = call("c1", run_id=run.run_id, step=1, attempt=1, attempt_state="open")
    await store.record_gateway_call(open_row)
    await store.complete_task(success(claim))
    [row] = await store.list_gateway_calls(run_id=run.run_id)
    assert row.attempt_state == "committed"


async def test_a_completion_settles_only_its_own_attempts_open_calls(store: Store) -> None:
    run, _ = await start_with(store, [task(1), task(2)])
    other, _ = await start_with(store, [task(1)], workflow_id="wf-2")
    by_step = {(c.run_id, c.cmd): c for c in await claim_tasks(store, limit=3)}
    assert set(by_step) == {(run.run_id, 1), (run.run_id, 2), (other.run_id, 1)}
    for call_id, run_id, step in (("s2", run.run_id, 2), ("o1", other.run_id, 1)):
        await store.record_gateway_call(
            call(call_id, run_id=run_id, step=step, attempt=1, attempt_state="open")
        )
    # Step 1 of the run made no model call: its completion leaves every other row open.
    assert (await store.complete_task(success(by_step[(run.run_id, 1)]))).accepted
    states = {r.call_id: r.attempt_state for r in await store.list_gateway_calls()}
    assert states == {"s2": "open", "o1": "open"}
    # Step 2 made two calls: both are settled with it, and only they.
    await store.record_gateway_call(
        call("s2b", run_id=run.run_id, step=2, attempt=1, attempt_state="open")
    )
    assert (await store.complete_task(success(by_step[(run.run_id, 2)]))).accepted
    states = {r.call_id: r.attempt_state for r in await store.list_gateway_calls()}
    assert states == {"s2": "committed", "s2b": "committed", "o1": "open"}


async def test_a_failed_attempts_calls_are_kept_as_failed(store: Store) -> None:
    run, _ = await start_with(store, [task(1, retries=1)])
    claim = await claim_one(store)
    await store.record_gateway_call(
        call("c1", run_id=run.run_id, step=1, attempt=1, attempt_state="open")
    )
    await store.complete_task(failure(claim))
    retry = await claim_one(store, now=NOW + 100)
    await store.record_gateway_call(
        call("c2", run_id=run.run_id, step=1, attempt=2, attempt_state="open")
    )
    await store.complete_task(success(retry, now=NOW + 101))
    rows = sorted(await store.list_gateway_calls(run_id=run.run_id), key=lambda r: r.call_id)
    assert [(r.attempt, r.attempt_state) for r in rows] == [(1, "failed"), (2, "committed")]


async def test_a_lost_attempts_calls_never_become_the_steps(store: Store) -> None:
    run, _ = await start_with(store, [task(1)])
    old = await claim_one(store, now=NOW, ttl=TTL)
    await store.record_gateway_call(
        call("c1", run_id=run.run_id, step=1, attempt=1, attempt_state="open")
    )
    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 1
    stale = await store.complete_task(success(old, now=NOW + TTL + 3))  # too late
    assert not stale.accepted
    [row] = await store.list_gateway_calls(run_id=run.run_id)
    assert row.attempt_state == "lost"


async def test_key_state_reads_limits_and_usage_together(store: Store) -> None:
    assert await store.gateway_key_state("t1", NOW) == (None, None)
    await store.set_gateway_key(GatewayKey("t1", models=("fast",), updated_at=NOW))
    key, usage = await store.gateway_key_state("t1", NOW)
    assert key is not None and key.models == ("fast",) and usage is None  # no usage limits
    await store.set_gateway_key(GatewayKey("t1", total_budget=1.0, updated_at=NOW))
    await store.record_gateway_call(call("a", key_id="t1", created_at=NOW - 1))
    key, usage = await store.gateway_key_state("t1", NOW)
    assert usage is not None and usage.total_cost == pytest.approx(0.25)
    assert usage.minute_requests == 1


def _rpm(key: GatewayKey, usage: KeyUsage) -> Exception | None:
    limit = key.requests_per_minute
    return RuntimeError("over") if limit is not None and usage.minute_requests >= limit else None


async def test_concurrent_admissions_take_turns_and_a_limit_of_three_admits_three(
    store: Store,
) -> None:
    await store.set_gateway_key(GatewayKey("k1", requests_per_minute=3, updated_at=NOW))
    held = [call(f"r{i}", status="pending", cost=0.0) for i in range(20)]
    answers = await asyncio.gather(*(store.reserve_gateway_call(c, NOW, _rpm) for c in held))
    assert sum(a is None for a in answers) == 3
    rows = await store.list_gateway_calls(limit=100)
    assert sorted(r.status for r in rows) == ["pending"] * 3 + ["refused"] * 17
    refused = [r for r in rows if r.status == "refused"]
    assert all(r.error == "over" and r.cost == 0 and r.input_tokens == 0 for r in refused)


async def test_a_reservation_holds_its_cost_until_it_settles_in_place(store: Store) -> None:
    await store.set_gateway_key(GatewayKey("k1", total_budget=1.0, updated_at=NOW))
    seen: list[KeyUsage] = []

    def look(key: GatewayKey, usage: KeyUsage) -> Exception | None:
        seen.append(usage)
        return None

    await store.reserve_gateway_call(call("c1", status="pending", cost=0.6), NOW, look)
    await store.reserve_gateway_call(call("c2", status="pending", cost=0.3), NOW, look)
    assert seen[1].total_cost == pytest.approx(0.6)  # the first one's reservation counts
    settled = call("c1", cost=0.1, input_tokens=7, output_tokens=3)
    await store.record_gateway_call(settled)  # settles the pending row in place
    usage = await store.gateway_key_usage("k1", NOW)
    assert usage.total_cost == pytest.approx(0.1 + 0.3)
    assert [r for r in await store.list_gateway_calls() if r.call_id == "c1"] == [settled]
    with pytest.raises(StoreError, match="already recorded"):
        await store.record_gateway_call(settled)  # a settled row is never settled again
    # A reservation its server never settled stops holding the budget after the TTL.
    later = await store.gateway_key_usage("k1", NOW + RESERVATION_TTL + 1)
    assert later.total_cost == pytest.approx(0.1)


async def test_text_the_store_cannot_hold_is_kept_escaped(store: Store) -> None:
    odd = call("odd", model_asked="m\udc80", prompt='[{"content":"a\ud800b"}]', error="x\x00y")
    await store.record_gateway_call(odd)
    (row,) = await store.list_gateway_calls()
    assert row.model_asked == "m\\udc80" and row.prompt == '[{"content":"a\\ud800b"}]'
    assert row.error == "x\\x00y"
    assert (await store.gateway_key_usage("k1", NOW)).minute_requests == 1
