"""Liveness tokens: the reaper trusts a held token over an expired lease, and a freed one at once.

A worker whose main thread waits for the GIL behind a long C call cannot
renew its leases, yet it is alive and will finish its attempt; taking the
attempt from it would run the step twice. Its liveness token (a lock file, an
advisory lock, an in-process token) stays held, so its expired lease is kept
until the attempt's own deadline. A worker whose token is free is gone: its
leases are taken back at once, without waiting for them to expire.
"""

from __future__ import annotations

from keepgoing._history.events import TaskAttemptFailed
from keepgoing._store.protocol import Store

from ._builders import NOW, TTL, claim_one, claim_run, of_type, start, start_with, task, worker

TIMEOUT = 60.0


async def _alive(store: Store, worker_id: str = "w1") -> None:
    token = await store.hold_liveness(worker_id)
    assert token is not None
    await store.register_worker(worker(worker_id, liveness=token))


async def test_a_held_token_keeps_an_expired_lease_until_the_deadline(store: Store) -> None:
    await _alive(store)
    run, _ = await start_with(store, [task(1, timeout=TIMEOUT)])
    claim = await claim_one(store)

    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 0
    assert await store.reap_expired_leases(now=NOW + TIMEOUT - 1, limit=10) == 0
    assert await store.reap_expired_leases(now=NOW + TIMEOUT + 1, limit=10) == 1

    (failed,) = of_type(await store.read_history(run.run_id), TaskAttemptFailed)
    assert (failed.cmd, failed.attempt, failed.reason) == (claim.cmd, 1, "timeout")


async def test_a_freed_token_gives_every_lease_back_at_once(store: Store) -> None:
    await _alive(store)
    run, _ = await start_with(store, [task(1, timeout=TIMEOUT)])
    await claim_one(store)
    other = await start(store, "wf-2")
    await claim_run(store, other.run_id)

    await store.release_liveness("w1")  # what the death of its process does

    assert await store.reap_expired_leases(now=NOW + 1, limit=10) == 1  # nothing expired yet
    (lost,) = of_type(await store.read_history(run.run_id), TaskAttemptFailed)
    assert lost.reason == "worker_lost"
    assert lost.error is not None and lost.error.message == "worker w1 is gone"
    again = await claim_run(store, other.run_id, worker="w2", now=NOW + 1)  # its lease is gone
    assert again.run.run_id == other.run_id


async def test_the_token_only_speaks_for_its_own_worker(store: Store) -> None:
    await _alive(store, "w2")  # another worker is alive; w1 has no token
    await start_with(store, [task(1, timeout=TIMEOUT)])
    await claim_one(store)

    assert await store.reap_expired_leases(now=NOW + 1, limit=10) == 0
    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 1


async def test_a_held_token_is_reported_and_dropped_with_its_worker(store: Store) -> None:
    await _alive(store)
    (record,) = await store.list_workers()
    assert record.liveness is not None
    assert record.liveness == await store.hold_liveness("w1")  # idempotent
    await store.deregister_worker("w1")
    await store.release_liveness("w1")
    await store.release_liveness("w1")  # idempotent
    assert await store.list_workers() == []


async def test_a_living_owner_hands_back_a_lease_it_never_heard_of(store: Store) -> None:
    # A claim whose commit answer the worker never got: its heartbeat vouches for every
    # lease granted before ``known_through``, so this one, not named, is handed back.
    await _alive(store)
    run, _ = await start_with(store, [task(1, timeout=TIMEOUT)])
    claim = await claim_one(store)
    held = await store.heartbeat(
        "w1", lease_ttl=TTL, now=NOW + 0.5, attempts=set(), runs=set(), known_through=NOW + 0.1
    )

    assert held == set()
    (back,) = of_type(await store.read_history(run.run_id), TaskAttemptFailed)
    assert (back.cmd, back.attempt, back.reason) == (claim.cmd, 1, "released")
    again = await claim_one(store, worker="w2", now=NOW + 0.5)  # due again at once, uncounted
    assert (again.cmd, again.attempt) == (claim.cmd, 2)


async def test_a_lease_granted_after_known_through_is_left_alone(store: Store) -> None:
    # A process frozen (say by a GIL holder) can resume with a claim's answer still
    # queued behind its heartbeat: that heartbeat cannot name the claim, expired or not.
    await _alive(store)
    await start_with(store, [task(1, timeout=TIMEOUT)])
    claim = await claim_one(store)  # claimed at NOW
    key = (claim.run_id, claim.cmd)
    await store.heartbeat(
        "w1", lease_ttl=TTL, now=NOW + TTL + 2, attempts=set(), runs=set(), known_through=NOW
    )

    assert await store.reap_expired_leases(now=NOW + TTL + 3, limit=10) == 0  # owner lives
    held = await store.heartbeat(
        "w1", lease_ttl=TTL, now=NOW + TTL + 4, attempts={key}, runs=set(), known_through=NOW + 4
    )
    assert held == {key}
