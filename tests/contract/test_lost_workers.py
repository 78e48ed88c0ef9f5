"""Lost workers on every store: the services' sweep marks a dead worker lost, with why.

A worker that is killed leaves its registry row. ``mark_lost_workers`` marks it
lost once its liveness token is free (at once) or, without a token that can
tell, once its heartbeat is older than its deadline; a held token keeps a
worker live however late its heartbeat (``_store/lost_workers.py``).
"""

from __future__ import annotations

from typing import Any

from keepgoing._store.lost_workers import HEARTBEAT_DEADLINE, KEEP_LOST, deadline_of
from keepgoing._store.protocol import Store
from keepgoing._store.records import WorkerRecord, WorkerStop
from keepgoing._store.sql import workers as sweep_sql
from keepgoing._views.queues import queue_summary
from keepgoing._views.waiting import served_workflows

from ._builders import NOW, worker
from .test_trouble import _eventually


async def _by_id(store: Store) -> dict[str, WorkerRecord]:
    return {w.worker_id: w for w in await store.list_workers()}


async def _alive(store: Store, worker_id: str, **options: Any) -> None:
    token = await store.hold_liveness(worker_id)
    assert token is not None
    await store.register_worker(worker(worker_id, liveness=token, **options))


async def test_a_worker_whose_process_ended_is_marked_lost_at_once(store: Store) -> None:
    await _alive(store, "w1")
    await _alive(store, "w2")
    assert await store.mark_lost_workers(now=NOW + 1) == 0
    await store.release_liveness("w1")  # what the death of its process does
    assert await _eventually(lambda: store.mark_lost_workers(now=NOW + 1)) == 1
    found = await _by_id(store)
    assert found["w1"].lost_at == NOW + 1
    assert found["w1"].lost_reason == "its process ended without deregistering (no known cause)"
    assert found["w2"].lost_at is None and found["w2"].lost_reason is None
    assert await store.mark_lost_workers(now=NOW + 2) == 0  # never twice


async def test_a_held_token_keeps_a_late_worker_live(store: Store) -> None:
    await _alive(store, "w1")
    assert await store.mark_lost_workers(now=NOW + 10 * HEARTBEAT_DEADLINE) == 0


async def test_without_a_token_the_heartbeat_deadline_decides(store: Store) -> None:
    await store.register_worker(worker("w1"))  # no liveness token
    await store.register_worker(worker("slow", info={"heartbeat_interval": 5.0}))
    assert deadline_of({"heartbeat_interval": 5.0}) == 20.0
    assert await store.mark_lost_workers(now=NOW + HEARTBEAT_DEADLINE) == 0
    assert await store.mark_lost_workers(now=NOW + HEARTBEAT_DEADLINE + 2) == 1
    found = await _by_id(store)
    assert found["w1"].lost_reason == "no heartbeat for 12 s (its deadline is 10 s)"
    assert found["slow"].lost_at is None  # its own deadline is longer
    assert await store.mark_lost_workers(now=NOW + 21) == 1


async def test_a_heartbeat_makes_a_worker_marked_lost_live_again(store: Store) -> None:
    await store.register_worker(worker("w1"))
    assert await store.mark_lost_workers(now=NOW + 60) == 1
    await store.heartbeat("w1", lease_ttl=15, now=NOW + 61)
    found = (await _by_id(store))["w1"]
    assert found.lost_at is None and found.lost_reason is None and found.heartbeat_at == NOW + 61
    assert await store.mark_lost_workers(now=NOW + 62) == 0
    assert await store.mark_lost_workers(now=NOW + 90) == 1
    await store.register_worker(worker("w1", started_at=NOW + 91))  # registering again, too
    assert (await _by_id(store))["w1"].lost_at is None


async def test_the_reason_names_the_stop_that_killed_it(store: Store) -> None:
    await _alive(store, "w1")
    stop = WorkerStop("w1", "killed_by_request", actor_kind="user", actor_id="alice", via="ui")
    stop_id = await store.record_worker_stop(stop, now=NOW)
    await store.settle_worker_stop(stop_id, signalled=True)
    await store.release_liveness("w1")
    assert await _eventually(lambda: store.mark_lost_workers(now=NOW + 1)) == 1
    found = (await _by_id(store))["w1"]
    assert found.lost_reason == "worker killed from the UI by alice: its process ended"


async def test_a_worker_that_beats_during_the_sweep_is_not_marked(store: Store) -> None:
    await store.register_worker(worker("w1"))
    probe = store._probe_liveness  # type: ignore[attr-defined]
    found = await store._read(lambda c: sweep_sql.find_lost(c, NOW + 60, probe))  # type: ignore[attr-defined]
    assert [w for w, _, _ in found.lost] == ["w1"]
    await store.heartbeat("w1", lease_ttl=15, now=NOW + 60)  # between the read and the write
    marked = await store._write(lambda c: sweep_sql.mark_lost(c, found, NOW + 60))  # type: ignore[attr-defined]
    assert marked == 0
    assert (await _by_id(store))["w1"].lost_at is None


async def test_lost_workers_are_forgotten_after_a_day(store: Store) -> None:
    await store.register_worker(worker("w1"))
    await store.register_worker(worker("w2", started_at=NOW + KEEP_LOST))
    assert await store.mark_lost_workers(now=NOW + 60) == 1
    assert set(await _by_id(store)) == {"w1", "w2"}
    await store.heartbeat("w2", lease_ttl=15, now=NOW + KEEP_LOST + 61)
    await store.mark_lost_workers(now=NOW + KEEP_LOST + 61)
    assert set(await _by_id(store)) == {"w2"}


async def test_a_lost_worker_serves_nothing_and_counts_in_no_queue(store: Store) -> None:
    info = {"workflows": ["wf"]}
    await store.register_worker(worker("w1", info=info))
    await _alive(store, "w2", info=info, queues=["other"])
    assert await store.mark_lost_workers(now=NOW + 30) == 1
    everyone = await store.list_workers()
    assert served_workflows(everyone, NOW + 30).pairs == {("wf", "other")}
    queues = {q["queue"]: q["workers"] for q in await queue_summary(store, NOW + 30)}
    assert queues == {"other": 1}
