"""The worker-group facet: deploys and revisions, loads, decisions, instances, secrets, leases."""

from __future__ import annotations

import json

import pytest

from keepgoing._history.events import TimerStarted
from keepgoing._store.group_records import InstanceRecord
from keepgoing._store.protocol import Store
from keepgoing.errors import GroupConflictError as GroupError

from ._builders import NOW, QUEUE, claim_run, claim_tasks, schedule, start, task

SPEC = json.dumps({"group": "g", "revision": 0})


async def deploy(store: Store, name: str = "g", queue: str = QUEUE, **kw: object) -> int:
    return await store.deploy_group(
        name=name,
        task_queue=queue,
        backend="local",
        parent=kw.get("parent"),  # type: ignore[arg-type]
        spec=SPEC,
        now=NOW,
    )


async def test_deploy_adds_revisions_and_runs_record_theirs(store: Store) -> None:
    before = await start(store, "before")
    assert await deploy(store) == 1
    first = await start(store, "first")
    assert await deploy(store) == 2
    second = await start(store, "second")

    assert (before.group_revision, first.group_revision, second.group_revision) == (None, 1, 2)
    again = await store.get_run(first.run_id)
    assert again is not None and again.group_revision == 1
    group = await store.get_group("g")
    assert group is not None and (group.revision, group.replicas, group.task_queue) == (
        2,
        0,
        QUEUE,
    )
    current = await store.get_revision("g")
    old = await store.get_revision("g", 1)
    assert current is not None and json.loads(current.spec)["revision"] == 2
    assert old is not None and json.loads(old.spec)["revision"] == 1
    assert await store.get_revision("g", 9) is None
    assert await store.get_revision("nope") is None


async def test_one_queue_one_group(store: Store) -> None:
    await deploy(store, "a")
    with pytest.raises(GroupError, match="already served by group 'a'"):
        await deploy(store, "b")
    assert [g.name for g in await store.list_groups()] == ["a"]


async def test_loads_count_queued_and_running_work_and_timers(store: Store) -> None:
    idle = await store.group_loads([QUEUE, "other"], NOW)
    assert [(x.task_queue, x.queued, x.running, x.open_runs) for x in idle] == [
        (QUEUE, 0, 0, 0),
        ("other", 0, 0, 0),
    ]
    run = await start(store, "r1")
    (load,) = await store.group_loads([QUEUE], NOW)
    assert (load.queued, load.running, load.open_runs) == (1, 0, 1)

    claim = await claim_run(store, run.run_id)
    (load,) = await store.group_loads([QUEUE], NOW)
    assert (load.queued, load.running) == (0, 1)  # the activation is leased

    await schedule(store, claim, [task(1), TimerStarted(cmd=2, fire_at=NOW + 60)])
    (load,) = await store.group_loads([QUEUE], NOW)
    assert (load.queued, load.running, load.next_timer) == (1, 0, NOW + 60)
    await claim_tasks(store)
    (load,) = await store.group_loads([QUEUE], NOW)
    assert (load.queued, load.running, load.open_runs) == (0, 1, 1)


async def test_decisions_are_kept_newest_first(store: Store) -> None:
    await deploy(store)
    assert (
        await store.record_decision("nope", to_replicas=1, reason="x", queued=0, running=0, now=NOW)
        is None
    )
    await store.record_decision(
        "g", to_replicas=1, reason="work queued", queued=3, running=0, now=NOW
    )
    await store.record_decision("g", to_replicas=0, reason="idle", queued=0, running=0, now=NOW + 5)
    decisions = await store.list_decisions("g")
    assert [(d.from_replicas, d.to_replicas, d.reason) for d in decisions] == [
        (1, 0, "idle"),
        (0, 1, "work queued"),
    ]
    group = await store.get_group("g")
    assert group is not None and group.replicas == 0


async def test_instances_upsert_and_delete_with_the_group(store: Store) -> None:
    await deploy(store)
    await deploy(store, "g-abc", queue="workflows.g-abc", parent="g")
    one = InstanceRecord("i1", "g", 1, "running", 42, "h", NOW, None, None)
    await store.record_instances("g", [one])
    await store.record_instances(
        "g", [InstanceRecord("i1", "g", 1, "exited", 42, "h", NOW, NOW + 1, -9)]
    )
    (got,) = await store.list_instances("g")
    assert (got.state, got.exit_status, got.ended_at) == ("exited", -9, NOW + 1)
    await store.put_secret("g", "TOKEN", "cipher", NOW)
    await store.put_secret("", "KEPT", "cipher2", NOW)

    assert await store.delete_group("g") is True
    assert await store.delete_group("g") is False
    assert await store.list_groups() == []  # the per-task group went with it
    assert await store.list_instances("g") == []
    assert await store.list_secrets("g") == []
    assert await store.list_secrets() == ["KEPT"]


async def test_secrets_round_trip_by_scope(store: Store) -> None:
    await store.put_secret("", "A", "c1", NOW)
    await store.put_secret("", "A", "c2", NOW + 1)
    await store.put_secret("grp", "A", "c3", NOW)
    assert await store.get_secrets([("", "A"), ("grp", "A"), ("", "missing")]) == {
        ("", "A"): "c2",
        ("grp", "A"): "c3",
    }
    assert await store.delete_secret("", "A") is True
    assert await store.delete_secret("", "A") is False


async def test_one_service_lease_holder_until_it_expires(store: Store) -> None:
    assert await store.claim_service("autoscaler", "a", ttl=5, now=NOW)
    assert not await store.claim_service("autoscaler", "b", ttl=5, now=NOW + 1)
    assert await store.claim_service("autoscaler", "a", ttl=5, now=NOW + 4)  # renewed
    assert await store.service_holder("autoscaler", NOW + 8) == "a"
    assert not await store.claim_service("autoscaler", "b", ttl=5, now=NOW + 8.5)
    assert await store.claim_service("autoscaler", "b", ttl=5, now=NOW + 9.5)  # expired
    await store.release_service("autoscaler", "b")
    assert await store.service_holder("autoscaler", NOW + 10) is None
