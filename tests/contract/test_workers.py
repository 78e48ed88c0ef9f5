"""The worker registry."""

from __future__ import annotations

from keepgoing._store.protocol import Store

from ._builders import NOW, TTL, worker


async def test_register_and_list_workers_oldest_first(store: Store) -> None:
    await store.register_worker(worker("w2", started_at=NOW + 5))
    await store.register_worker(worker("w1", started_at=NOW))
    await store.register_worker(worker("w3", started_at=NOW + 9))

    workers = await store.list_workers()

    assert [w.worker_id for w in workers] == ["w1", "w2", "w3"]
    assert workers[0] == worker("w1", started_at=NOW)


async def test_register_replaces_the_row(store: Store) -> None:
    await store.register_worker(worker("w1", queues=["a"], pid=1))
    await store.register_worker(worker("w1", queues=["a", "b"], pid=2, info={"n": 2}))

    workers = await store.list_workers()

    assert len(workers) == 1
    assert (workers[0].queues, workers[0].pid, workers[0].info) == (["a", "b"], 2, {"n": 2})


async def test_deregister_removes_the_row(store: Store) -> None:
    await store.register_worker(worker("w1"))
    await store.register_worker(worker("w2", started_at=NOW + 1))

    await store.deregister_worker("w1")
    await store.deregister_worker("never-registered")

    assert [w.worker_id for w in await store.list_workers()] == ["w2"]


async def test_list_workers_is_empty_at_first(store: Store) -> None:
    assert await store.list_workers() == []


async def test_heartbeat_refreshes_the_workers_row(store: Store) -> None:
    await store.register_worker(worker("w1", started_at=NOW))
    await store.register_worker(worker("w2", started_at=NOW))

    await store.heartbeat("w1", lease_ttl=TTL, now=NOW + 30)

    rows = {w.worker_id: w for w in await store.list_workers()}
    assert rows["w1"].heartbeat_at == NOW + 30
    assert rows["w1"].started_at == NOW
    assert rows["w2"].heartbeat_at == NOW


async def test_heartbeat_of_an_unregistered_worker_registers_nothing(store: Store) -> None:
    await store.heartbeat("ghost", lease_ttl=TTL, now=NOW)

    assert await store.list_workers() == []


async def test_listed_workers_do_not_alias_the_store(store: Store) -> None:
    await store.register_worker(worker("w1", queues=["a"]))
    listed = await store.list_workers()
    listed[0].queues.append("mutated")
    listed[0].info["mutated"] = True

    again = await store.list_workers()

    assert again[0].queues == ["a"]
    assert "mutated" not in again[0].info
