"""Trouble markers on every store: the counters the commits keep, their filters and counts.

A run's worker losses, retries, rate-limited attempts and open review waits are
counted by the statement that appends their events (``_store/trouble.py``), so
the runs list filters and counts them without reading any history.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from keepgoing._history.events import (
    ErrorInfo,
    MessageWaitStarted,
    WorkflowCancelled,
)
from keepgoing._store.inspect_protocol import RunFilter
from keepgoing._store.protocol import Store
from keepgoing._store.records import CancelRequest, ReviewRequest
from keepgoing._store.trouble import MARKERS, Trouble, markers, run_state

from ._builders import (
    NOW,
    claim_one,
    claim_run,
    failure,
    schedule,
    start,
    start_with,
    success,
    task,
    worker,
)

LIMITED = ErrorInfo(type="agent.RateLimitedError", message="429 Too Many Requests; retry in 1s")
BROKEN = ErrorInfo(type="ValueError", message="bad row 7")


async def _ids(store: Store, *trouble: str) -> list[str]:
    page = await store.page_runs(RunFilter(trouble=trouble), limit=50)
    return [r.workflow_id for r in page.runs]


async def _trouble(store: Store, run_id: str) -> Trouble:
    run = await store.get_run(run_id)
    assert run is not None
    return run.trouble


async def test_a_new_run_has_no_trouble(store: Store) -> None:
    run = await start(store, "calm-1")
    assert run.trouble == Trouble()
    assert markers(run.status, run.trouble) == []
    assert await _ids(store, "worker_lost") == []


async def test_retries_and_rate_limits_are_counted_as_they_are_recorded(store: Store) -> None:
    run, _ = await start_with(store, [task(1, retries=3)], "retry-1")
    await start(store, "calm-1", now=NOW + 1)
    for n, error in enumerate((LIMITED, BROKEN, LIMITED)):
        claim = await claim_one(store, now=NOW + 10 * n)
        done = await store.complete_task(failure(claim, error, now=NOW + 10 * n + 1))
        assert done.accepted and not done.final
    assert await _trouble(store, run.run_id) == Trouble(retries=3, rate_limited=2)
    claim = await claim_one(store, now=NOW + 100)
    await store.complete_task(failure(claim, LIMITED, now=NOW + 101))  # the last: not retried
    found = await _trouble(store, run.run_id)
    assert found == Trouble(retries=3, rate_limited=3)
    texts = [m.text for m in markers("running", found)]
    assert texts == ["retried \u00d73", "rate-limited \u00d73"]
    assert await _ids(store, "retried") == ["retry-1"]
    assert await _ids(store, "rate_limited") == ["retry-1"]
    assert await _ids(store, "retried", "worker_lost") == []  # every marker must hold


async def test_a_lost_worker_is_counted_and_filtered(store: Store) -> None:
    token = await store.hold_liveness("w1")
    await store.register_worker(worker("w1", liveness=token))
    run, _ = await start_with(store, [task(1)], "lost-1")
    await start(store, "calm-1", now=NOW + 1)
    assert (await claim_one(store)).run_id == run.run_id
    await store.release_liveness("w1")  # what the death of its process does
    assert await _eventually(lambda: store.reap_expired_leases(now=NOW + 1, limit=10)) == 1
    assert await _trouble(store, run.run_id) == Trouble(worker_losses=1)
    assert await _ids(store, "worker_lost") == ["lost-1"]
    again = await claim_one(store, worker="w2", now=NOW + 2)
    await store.complete_task(success(again, now=NOW + 3, worker="w2"))
    assert await _trouble(store, run.run_id) == Trouble(worker_losses=1)  # kept once it ends


async def _eventually(sweep: Callable[[], Awaitable[int]], deadline: float = 10.0) -> int:
    """The first non-zero answer of ``sweep``: PostgreSQL frees a closed session's
    advisory lock a moment after the close returns."""
    stop = time.monotonic() + deadline
    while True:
        found = await sweep()
        if found or time.monotonic() > stop:
            return found
        await asyncio.sleep(0.02)


async def _uncertain(store: Store, workflow_id: str) -> str:
    """A run whose step 1 raised UncertainOutcome; returns its run id."""
    run, _ = await start_with(store, [task(1)], workflow_id)
    claim = await claim_one(store)
    await store.complete_task(failure(claim, BROKEN, reason="uncertain"))
    return run.run_id


async def _wait(store: Store, run_id: str, cmd: int, name: str, now: float) -> None:
    claim = await claim_run(store, run_id, now=now)
    await schedule(store, claim, [MessageWaitStarted(cmd=cmd, name=name)], now=now)


async def _send(store: Store, workflow_id: str, name: str, now: float) -> None:
    """A reviewer's decision on round 1: through the store's one review path, which
    sends it as the message ``name`` (``review:<operation id>``)."""
    decision = {"decision": "approve", "cmd": 1, "result": {"v": 4}}
    operation_id = name.removeprefix("review:")
    run_id = operation_id.removeprefix("op-").rsplit("-", 1)[0]
    await store.decide_review(
        ReviewRequest(
            operation_id, workflow_id, run_id, 1, "approve", decision, "", "user", "rev", now
        )
    )


async def test_a_review_wait_is_a_state_until_its_decision_arrives(store: Store) -> None:
    run_id = await _uncertain(store, "crm-1")
    await start(store, "calm-1", now=NOW + 1)
    name = f"review:op-{run_id}-1"
    await _wait(store, run_id, 2, name, NOW + 2)
    found = await store.get_run(run_id)
    assert found is not None and found.trouble.reviews_waiting == 1
    assert run_state(found.status, found.trouble) == "waiting_for_review"
    assert [m.kind for m in markers(found.status, found.trouble)] == ["waiting_for_review"]
    assert await _ids(store, "waiting_for_review") == ["crm-1"]
    counts = await store.count_trouble(RunFilter())
    assert counts == {**dict.fromkeys(MARKERS, 0), "waiting_for_review": 1}

    await _send(store, "crm-1", name, NOW + 3)  # the decision answers the wait
    assert (await _trouble(store, run_id)).reviews_waiting == 0
    assert await _ids(store, "waiting_for_review") == []
    # Not a decision for this round: the workflow takes it and waits again.
    await _wait(store, run_id, 3, name, NOW + 4)
    assert (await _trouble(store, run_id)).reviews_waiting == 1
    cancel = CancelRequest("crm-1", "enough", "user", "root", NOW + 5)
    await store.cancel_run(cancel)
    claim = await claim_run(store, run_id, now=NOW + 6)
    await schedule(store, claim, [WorkflowCancelled()], now=NOW + 6)
    assert (await _trouble(store, run_id)).reviews_waiting == 0  # ended: nothing waits


async def test_a_decision_sent_before_the_wait_leaves_nothing_waiting(store: Store) -> None:
    run_id = await _uncertain(store, "crm-2")
    name = f"review:op-{run_id}-1"
    await _send(store, "crm-2", name, NOW + 1)  # kept in the inbox until the wait asks
    await _wait(store, run_id, 2, name, NOW + 2)
    assert (await _trouble(store, run_id)).reviews_waiting == 0


async def test_other_message_waits_are_no_review(store: Store) -> None:
    run_id = await _uncertain(store, "crm-3")
    claim = await claim_run(store, run_id, now=NOW + 1)
    waits = [
        MessageWaitStarted(cmd=2, name="review:op-another-run-1"),
        MessageWaitStarted(cmd=3, name="approve"),
        MessageWaitStarted(cmd=4, name=f"review:op-{run_id}-9"),  # no such step
        MessageWaitStarted(cmd=5, name=f"review:op-{run_id}-01"),
    ]
    await schedule(store, claim, waits, now=NOW + 1)
    assert (await _trouble(store, run_id)).reviews_waiting == 0


async def test_counts_follow_the_filters(store: Store) -> None:
    await _uncertain(store, "crm-4")
    await start(store, "calm-1", name="other", now=NOW + 1)
    counts = await store.count_trouble(RunFilter(workflow_name="other"))
    assert counts == dict.fromkeys(MARKERS, 0)


async def test_an_unknown_marker_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="'killed' is not a trouble marker"):
        await store.page_runs(RunFilter(trouble=("killed",)))
    with pytest.raises(ValueError, match="not a trouble marker"):
        await store.count_trouble(RunFilter(trouble=("killed",)))
