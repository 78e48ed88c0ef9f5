"""The query a rendered ScaledObject gives KEDA, run on the real PostgreSQL against a real queue."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from types import MappingProxyType

import pytest

from keepgoing._groups.kubernetes import KubernetesSettings, render_objects
from keepgoing._groups.spec import GroupRevision
from keepgoing._history.events import (
    ChildStarted,
    TimerStarted,
    WorkflowCompleted,
    WorkflowContinuedAsNew,
)
from keepgoing._store.protocol import Store

from ._builders import claim_runs, claim_tasks, schedule, start, task

QUEUE = "workflows.wf-agent"
HOUR = 3600.0


@pytest.fixture
async def pg(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    from keepgoing._store.postgres import PostgresStore  # noqa: PLC0415
    from postgres_support import migrated, reset  # noqa: PLC0415

    url = migrated(request.getfixturevalue("postgres_url"))
    reset(url)
    store = PostgresStore(url)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def revision(**options: object) -> GroupRevision:
    values: dict[str, object] = {
        "group": "wf-agent",
        "revision": 1,
        "task_queue": QUEUE,
        "source": "",
        "filename": "agent.py",
        "env": MappingProxyType({}),
        "max_replicas": 3,
        "shutdown_delay_seconds": 2.0,
    }
    values.update(options)
    return GroupRevision(**values)  # type: ignore[arg-type]


def keda_query(store: Store, rev: GroupRevision, wake_ahead: float = 30.0) -> str:
    settings = KubernetesSettings(store_url=store.url, wake_ahead_seconds=wake_ahead)  # type: ignore[attr-defined]
    (scaled,) = [o for o in render_objects(rev, settings) if o["kind"] == "ScaledObject"]
    query: str = scaled["spec"]["triggers"][0]["metadata"]["query"]
    return query


def run_query(store: Store, query: str) -> object:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(store.url) as conn:  # type: ignore[attr-defined]
        rows = conn.execute(query).fetchall()  # type: ignore[arg-type]
    assert len(rows) == 1 and len(rows[0]) == 1, rows  # KEDA wants one value
    return rows[0][0]


async def test_the_query_counts_queued_and_running_work(pg: Store) -> None:
    query = keda_query(pg, revision())
    assert run_query(pg, query) == 0  # nothing anywhere: scale to zero

    now = time.time()
    for i in range(20):
        await start(pg, f"wf-{i}", queue=QUEUE, now=now)
    await start(pg, "other", queue="workflows.elsewhere", now=now)
    value = run_query(pg, query)
    assert value == 20 and isinstance(value, int)

    claims = await claim_runs(pg, now=now, limit=5, ttl=HOUR, queues=(QUEUE,))
    assert run_query(pg, query) == 20  # 15 queued + 5 running: claiming frees no replica

    await schedule(pg, claims[0], [task(1), task(2)], now=now)
    await claim_tasks(pg, now=now, limit=1, ttl=HOUR, queues=(QUEUE,))
    assert run_query(pg, query) == 15 + 4 + 2  # the committed activation became two tasks


async def test_a_sleeping_run_holds_nothing_until_its_timer_is_near(pg: Store) -> None:
    now = time.time()
    await start(pg, "sleeper", queue=QUEUE, now=now)
    await start(pg, "napper", queue=QUEUE, now=now)
    sleeper, napper = await claim_runs(pg, now=now, limit=2, ttl=HOUR, queues=(QUEUE,))
    await schedule(pg, sleeper, [TimerStarted(cmd=1, fire_at=now + HOUR)], now=now)
    assert run_query(pg, keda_query(pg, revision())) == 1  # the napper's activation only

    await schedule(pg, napper, [TimerStarted(cmd=1, fire_at=now + 20)], now=now)
    assert run_query(pg, keda_query(pg, revision(), wake_ahead=5)) == 0
    # due within the wake-ahead time: one replica, so it is up when the timer fires
    assert run_query(pg, keda_query(pg, revision(), wake_ahead=60)) == 1


async def test_keep_warm_holds_one_replica_while_a_run_is_open(pg: Store) -> None:
    now = time.time()
    await start(pg, "sleeper", queue=QUEUE, now=now)
    (claim,) = await claim_runs(pg, now=now, ttl=HOUR, queues=(QUEUE,))
    await schedule(pg, claim, [TimerStarted(cmd=1, fire_at=now + HOUR)], now=now)
    assert run_query(pg, keda_query(pg, revision())) == 0
    assert run_query(pg, keda_query(pg, revision(keep_warm_while_open=True))) == 1


async def test_ended_runs_release_the_group(pg: Store) -> None:
    now = time.time()
    await start(pg, "done", queue=QUEUE, now=now)
    (claim,) = await claim_runs(pg, now=now, ttl=HOUR, queues=(QUEUE,))
    assert run_query(pg, keda_query(pg, revision())) == 1
    await schedule(pg, claim, [WorkflowCompleted(result=None)], now=now)
    assert run_query(pg, keda_query(pg, revision(keep_warm_while_open=True))) == 0


async def _two_revisions(pg: Store, now: float, *, old: int, new: int) -> None:
    """Deploy revision 1 with ``old`` runs started on it, then revision 2 with ``new``."""
    spec = json.dumps({"group": "wf-agent", "revision": 0})
    kw = {"task_queue": QUEUE, "backend": "kubernetes", "parent": None, "spec": spec}
    await pg.deploy_group(name="wf-agent", now=now, **kw)  # type: ignore[arg-type]
    for i in range(old):
        await start(pg, "old" if old == 1 else f"old-{i + 1}", queue=QUEUE, now=now)
    await pg.deploy_group(name="wf-agent", now=now, **kw)  # type: ignore[arg-type]
    for i in range(new):
        await start(pg, f"new-{i + 1}", queue=QUEUE, now=now)


def revision_query(pg: Store, number: int, *, pinned: bool) -> str:
    """The KEDA query of revision ``number``'s ScaledObject (``pinned``: an older one)."""
    settings = KubernetesSettings(store_url=pg.url)  # type: ignore[attr-defined]
    objs = render_objects(revision(revision=number), settings, pinned=pinned)
    (scaled,) = [o for o in objs if o["kind"] == "ScaledObject"]
    return str(scaled["spec"]["triggers"][0]["metadata"]["query"])


async def test_each_revision_counts_the_work_of_its_own_runs(pg: Store) -> None:
    """A pinned revision's ScaledObject sees only its runs: it scales to zero while
    they wait, and back up when one is runnable again."""
    now = time.time()
    await _two_revisions(pg, now, old=1, new=2)
    assert run_query(pg, revision_query(pg, 2, pinned=False)) == 2
    assert run_query(pg, revision_query(pg, 1, pinned=True)) == 1
    claims = await claim_runs(pg, now=now, limit=10, ttl=HOUR, queues=(QUEUE,))
    (old,) = [c for c in claims if c.run.workflow_id == "old"]
    await schedule(pg, old, [TimerStarted(cmd=1, fire_at=now + HOUR)], now=now)
    # It waits: revision 1 holds nothing; revision 2 has the two leased activations.
    assert run_query(pg, revision_query(pg, 1, pinned=True)) == 0
    assert run_query(pg, revision_query(pg, 2, pinned=False)) == 2


async def test_a_pinned_parents_children_scale_its_own_revision(pg: Store) -> None:
    """On Kubernetes a child of a revision-1 run is revision 1's work: the pinned
    Deployment's ScaledObject wakes for it, the newest revision's does not."""
    now = time.time()
    await _two_revisions(pg, now, old=1, new=0)
    (old,) = await claim_runs(pg, now=now, limit=10, ttl=HOUR, queues=(QUEUE,))
    children = [
        ChildStarted(cmd=i, workflow_name="wf", workflow_id=f"child-{i}", input={}) for i in (1, 2)
    ]
    await schedule(pg, old, [*children, WorkflowContinuedAsNew(input={})], now=now)
    # The two children and the successor are runnable, all on revision 1.
    assert run_query(pg, revision_query(pg, 1, pinned=True)) == 3
    assert run_query(pg, revision_query(pg, 2, pinned=False)) == 0
