"""Admission of runs: workflow concurrency slots, queued runs, priorities and singletons."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from keepgoing._history.events import ChildRunStarted, ChildStarted, WorkflowCompleted
from keepgoing._run_flow import RunFlow
from keepgoing._store.inspect_protocol import RunFilter
from keepgoing._store.protocol import Store
from keepgoing._store.records import ActivationClaim, CancelRequest, RunRecord, StartRequest
from keepgoing.errors import InvalidRequestError

from ._builders import NOW, QUEUE, TTL, WF, claim_run, claim_runs, claim_tasks, schedule, task

pytestmark = pytest.mark.timeout(60)

TWO = RunFlow(limit=2)
BY_ACCOUNT = RunFlow(limit=1, key="account", params=("account",))


async def begin(
    store: Store,
    wid: str,
    *,
    flow: RunFlow | None = TWO,
    input: dict[str, Any] | None = None,
    priority: int = 0,
    now: float = NOW,
    flow_key: str | None = None,
) -> RunRecord:
    return await store.start_run(
        StartRequest(
            run_id=f"run-{wid}",
            workflow_id=wid,
            workflow_name=WF,
            input=input if input is not None else {"args": [], "kwargs": {}},
            task_queue=QUEUE,
            code_version="v1",
            now=now,
            priority=priority,
            flow=flow,
            flow_key=flow_key,
        )
    )


async def finish(store: Store, claim: ActivationClaim, now: float = NOW + 1) -> None:
    await schedule(store, claim, [WorkflowCompleted(result=None)], now=now)


def ids(claims: list[ActivationClaim]) -> list[str]:
    return [c.run.workflow_id for c in claims]


async def test_runs_over_the_limit_wait_queued_and_say_for_what(store: Store) -> None:
    first, second, third = [await begin(store, f"r{i}") for i in range(3)]

    assert (first.status, second.status, third.status) == ("running", "running", "queued")
    assert third.queued_for == "waiting for a concurrency slot of wf (2/2 held)"
    again = await store.get_run(third.run_id)
    assert again is not None and again.status == "queued"
    assert again.queued_for == "waiting for a concurrency slot of wf (2/2 held)"
    claims = await claim_runs(store)
    assert ids(claims) == ["r0", "r1"]


async def test_a_slot_freed_by_an_ending_run_admits_the_next_queued_run(store: Store) -> None:
    for i in range(3):
        await begin(store, f"r{i}")
    claims = await claim_runs(store)
    await finish(store, claims[0])

    later = await claim_runs(store, now=NOW + 2)

    assert "r2" in ids(later)
    run = await store.get_run("run-r2")
    assert run is not None and run.status == "running"


async def test_a_run_holds_its_slot_while_it_sleeps_and_after_its_lease_expires(
    store: Store,
) -> None:
    await begin(store, "r0", flow=RunFlow(limit=1))
    await begin(store, "r1", flow=RunFlow(limit=1))
    (claim,) = await claim_runs(store)
    # Its worker dies: the lease is reaped, the run is claimable again, and keeps its slot.
    await store.reap_expired_leases(now=NOW + TTL + 1, limit=100)

    again = await claim_runs(store, worker="w2", now=NOW + TTL + 2)

    assert ids(again) == ["r0"]
    queued = await store.get_run("run-r1")
    assert queued is not None and queued.status == "queued"
    assert claim.run.run_id == "run-r0"


async def test_a_keyed_limit_holds_per_key_while_other_keys_run(store: Store) -> None:
    a1 = await begin(store, "a1", flow=BY_ACCOUNT, input={"args": ["a"], "kwargs": {}})
    b1 = await begin(store, "b1", flow=BY_ACCOUNT, input={"args": [], "kwargs": {"account": "b"}})
    a2 = await begin(store, "a2", flow=BY_ACCOUNT, input={"args": ["a"], "kwargs": {}})

    assert (a1.status, b1.status, a2.status) == ("running", "running", "queued")
    assert a2.queued_for == 'waiting for a concurrency slot of wf for "a" (1/1 held)'


async def test_the_recorded_spec_holds_for_a_start_without_one(store: Store) -> None:
    await store.record_flows({WF: RunFlow(limit=1)}, NOW)

    first = await begin(store, "r0", flow=None)
    second = await begin(store, "r1", flow=None)
    third = await begin(store, "r2", flow=RunFlow(limit=5))  # a client cannot lift it

    assert (first.status, second.status, third.status) == ("running", "queued", "queued")
    assert (await store.run_flows()) == {WF: RunFlow(limit=1)}


async def test_a_callable_key_needs_the_key_its_client_computed(store: Store) -> None:
    flow = RunFlow(limit=1, callable_key=True)
    await store.record_flows({WF: flow}, NOW)

    with pytest.raises(InvalidRequestError, match="only a process with the workflow's code"):
        await begin(store, "r0", flow=None)
    run = await begin(store, "r1", flow=None, flow_key='"k"')
    assert run.status == "running"


async def test_queued_runs_are_admitted_highest_priority_first(store: Store) -> None:
    one = RunFlow(limit=1)
    await begin(store, "blocker", flow=one)
    await begin(store, "low", flow=one, now=NOW)
    await begin(store, "high", flow=one, priority=5, now=NOW + 0.5)
    (claim,) = await claim_runs(store)
    await finish(store, claim)

    (next_claim,) = await claim_runs(store, now=NOW + 2)

    assert next_claim.run.workflow_id == "high"


async def test_a_priority_point_is_worth_a_minute_of_waiting(store: Store) -> None:
    await begin(store, "old", flow=None, now=NOW - 120)
    await begin(store, "new", flow=None, priority=1, now=NOW)

    (first,) = await claim_runs(store, limit=1)

    assert first.run.workflow_id == "old"  # two minutes of waiting beat one point


async def test_cancelling_a_queued_run_ends_it_at_once(store: Store) -> None:
    one = RunFlow(limit=1)
    await begin(store, "r0", flow=one)
    queued = await begin(store, "r1", flow=one)

    cancelled = await store.cancel_run(
        CancelRequest(workflow_id="r1", reason="no", actor_kind="user", actor_id="u", now=NOW)
    )

    assert queued.status == "queued" and cancelled.status == "cancelled"


def singleton(mode: str) -> RunFlow:
    return RunFlow(limit=1, key="account", singleton=True, on_conflict=mode, params=("account",))  # type: ignore[arg-type]


async def test_a_singleton_skip_returns_the_open_run(store: Store) -> None:
    a = {"args": ["a"], "kwargs": {}}
    first = await begin(store, "s0", flow=singleton("skip"), input=a)

    second = await begin(store, "s1", flow=singleton("skip"), input=a)
    other = await begin(store, "s2", flow=singleton("skip"), input={"args": ["b"], "kwargs": {}})

    assert second.run_id == first.run_id
    assert other.status == "running"


async def test_a_singleton_queue_starts_behind_the_open_run(store: Store) -> None:
    a = {"args": ["a"], "kwargs": {}}
    await begin(store, "s0", flow=singleton("queue"), input=a)

    second = await begin(store, "s1", flow=singleton("queue"), input=a)

    assert second.status == "queued"


async def test_a_singleton_cancel_running_cancels_the_open_run_then_runs(store: Store) -> None:
    a = {"args": ["a"], "kwargs": {}}
    await begin(store, "s0", flow=singleton("cancel_running"), input=a)
    queued = await begin(store, "s1", flow=singleton("cancel_running"), input=a)
    assert queued.status == "queued"

    third = await begin(store, "s2", flow=singleton("cancel_running"), input=a)

    # The queued one ended at once; the running one was asked to cancel, and the
    # new start waits for it to end.
    ended = await store.get_run("run-s1")
    assert ended is not None and ended.status == "cancelled"
    history = await store.read_history("run-s0")
    assert [type(e).__name__ for e in history][-1] == "CancelRequested"
    assert third.status == "queued"


async def test_the_list_of_queued_runs(store: Store) -> None:
    one = RunFlow(limit=1)
    await begin(store, "r0", flow=one)
    await begin(store, "r1", flow=one)

    page = await store.list_runs(status="queued")
    running = await store.search_runs(status="running")
    one_status = await store.page_runs(RunFilter(statuses=("queued",)))
    both = await store.page_runs(RunFilter(statuses=("queued", "running")))
    counts = await store.count_runs_by_status(RunFilter())

    assert [r.workflow_id for r in page] == ["r1"]
    assert [r.workflow_id for r in running] == ["r0"]
    assert [r.workflow_id for r in one_status.runs] == ["r1"]
    assert sorted(r.workflow_id for r in both.runs) == ["r0", "r1"]
    assert counts == {"queued": 1, "running": 1}


async def test_concurrent_starts_admit_no_more_than_the_limit(store: Store) -> None:
    runs = await asyncio.gather(*(begin(store, f"c{i}") for i in range(10)))

    assert sorted(r.status for r in runs) == ["queued"] * 8 + ["running"] * 2


async def test_concurrent_skip_starts_of_one_key_start_one_run(store: Store) -> None:
    a = {"args": ["a"], "kwargs": {}}
    runs = await asyncio.gather(
        *(begin(store, f"s{i}", flow=singleton("skip"), input=a) for i in range(10))
    )

    assert len({r.run_id for r in runs}) == 1


async def test_tasks_inherit_their_runs_priority(store: Store) -> None:
    await begin(store, "plain", flow=None, now=NOW)
    await begin(store, "urgent", flow=None, priority=3, now=NOW)
    for wid in ("plain", "urgent"):
        claim = await claim_run(store, f"run-{wid}")
        await schedule(store, claim, [task(1)], now=NOW + 1)

    (first,) = await claim_tasks(store, limit=1, now=NOW + 2)

    assert first.workflow_id == "urgent"


async def test_a_child_keeps_its_parents_priority(store: Store) -> None:
    await begin(store, "parent", flow=None, priority=7)
    claim = await claim_run(store, "run-parent")
    child = ChildStarted(cmd=1, workflow_name=WF, workflow_id="child", input={})

    await schedule(store, claim, [child], now=NOW + 1)

    found = await store.find_run("child")
    assert found is not None and found.priority == 7


async def test_the_use_of_a_workflow_limit_is_listed_with_the_task_limits(store: Store) -> None:
    await store.record_flows({WF: RunFlow(limit=1, key="account", params=("account",))}, NOW)
    for wid, account in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        await begin(store, wid, flow=None, input={"args": [account], "kwargs": {}})

    (use,) = [u for u in await store.limit_use(NOW) if u.limit.name == f"workflow:{WF}"]

    assert (use.limit.concurrency_cap, use.limit.keyed) == (1, True)
    assert (use.held, use.waiting) == (2, 1)


async def test_a_workflow_recorded_without_a_limit_loses_its_spec(store: Store) -> None:
    await store.record_flows({WF: RunFlow(limit=1), "other": None}, NOW)
    await store.record_flows({WF: None}, NOW + 1)

    assert await store.run_flows() == {}
    assert (await begin(store, "r0", flow=None)).status == "running"


async def test_a_child_whose_key_needs_code_fails_to_start_and_the_parent_hears_why(
    store: Store,
) -> None:
    await store.record_flows({"keyed_child": RunFlow(limit=1, callable_key=True)}, NOW)
    await begin(store, "parent", flow=None)
    claim = await claim_run(store, "run-parent")
    child = ChildStarted(cmd=1, workflow_name="keyed_child", workflow_id="kid", input={})

    await schedule(store, claim, [child], now=NOW + 1)

    history = await store.read_history("run-parent")
    (started,) = [e for e in history if isinstance(e, ChildRunStarted)]
    assert started.error is not None and "workflow's code" in started.error.message


async def test_run_counts_count_a_queued_run_as_queued(store: Store) -> None:
    # What /metrics exports as keepgoing_runs{status=...}.
    for i in range(3):
        await begin(store, f"c{i}")
    assert await store.run_counts() == {"queued": 1, "running": 2}
