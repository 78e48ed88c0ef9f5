"""The operator facet (``ObserveStore``) on every store: counts, depths, metrics, search."""

from __future__ import annotations

from keepgoing._history.events import TaskScheduled, TimerStarted, WorkflowCompleted
from keepgoing._store.observe_protocol import STEP_BUCKETS, QueueDepth
from keepgoing._store.protocol import Store
from keepgoing._store.records import TaskOutcome

from ._builders import NOW, claim_run, schedule, start


async def test_run_counts_and_search(store: Store) -> None:
    for n in range(3):
        await start(store, f"wf-{n}", now=NOW + n)
    await start(store, "other-1", name="other", now=NOW + 10)
    claim = await claim_run(store, "run-wf-0")
    await schedule(store, claim, [WorkflowCompleted(result=1)])
    assert await store.run_counts() == {"completed": 1, "running": 3}
    found = await store.search_runs(created_after=NOW + 1, created_before=NOW + 10)
    assert [r.workflow_id for r in found] == ["wf-2", "wf-1"]
    assert [r.workflow_id for r in await store.search_runs(workflow_name="other")] == ["other-1"]
    assert [r.workflow_id for r in await store.search_runs(status="completed")] == ["wf-0"]
    page = await store.search_runs(workflow_name="wf", limit=1, offset=1)
    assert [r.workflow_id for r in page] == ["wf-1"]


async def test_queue_depths(store: Store) -> None:
    await start(store, "idle", queue="q2")  # runnable, never claimed
    await start(store, "busy")
    claim = await claim_run(store, "run-busy")
    await schedule(
        store,
        claim,
        [
            TaskScheduled(cmd=1, name="t"),
            TaskScheduled(cmd=2, name="t"),
            TimerStarted(cmd=3, fire_at=NOW + 60),
        ],
    )
    claims = await store.claim_tasks(
        worker_id="w1", queues=["default"], task_names=["t"], limit=1, lease_ttl=15, now=NOW
    )
    assert len(claims) == 1
    depths = await store.queue_depths(NOW)
    assert depths == [
        QueueDepth("default", runnable_runs=0, ready_tasks=1, delayed_tasks=0, running_tasks=1),
        QueueDepth("q2", runnable_runs=1),
    ]
    assert depths[0].depth == 1 and depths[1].depth == 1
    assert (await store.queue_depths(NOW - 1))[0].delayed_tasks == 1


async def test_step_metrics(store: Store) -> None:
    empty = await store.step_metrics()
    assert empty.count == 0 and empty.buckets == (0,) * len(STEP_BUCKETS)
    await start(store, "m")
    claim = await claim_run(store, "run-m")
    await schedule(store, claim, [TaskScheduled(cmd=1, name="t"), TaskScheduled(cmd=2, name="t")])
    first, second = await store.claim_tasks(
        worker_id="w1", queues=["default"], task_names=["t"], limit=2, lease_ttl=1, now=NOW
    )
    done = TaskOutcome(
        run_id="run-m",
        cmd=first.cmd,
        fence=first.fence,
        worker_id="w1",
        attempt=1,
        started_at=NOW,
        now=NOW + 0.3,
        ok=True,
        result=None,
    )
    assert (await store.complete_task(done)).accepted
    assert await store.reap_expired_leases(now=NOW + 5, limit=10) == 1  # the second is lost
    metrics = await store.step_metrics()
    assert metrics.count == 1 and abs(metrics.total_seconds - 0.3) < 1e-6
    assert metrics.lease_expiries == 1
    assert metrics.buckets[STEP_BUCKETS.index(0.25)] == 0
    assert metrics.buckets[STEP_BUCKETS.index(0.5)] == 1 and metrics.buckets[-1] == 1
    assert second.cmd == 2
