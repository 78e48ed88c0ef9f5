"""A heartbeat renews only the leases the worker knows it holds.

A worker whose connection drops while a claim commits does not know whether
the claim landed. If it did, the store holds a lease for the worker that the
worker will never run; a heartbeat that renewed every lease of the worker
would keep that work from everyone for as long as the worker lives. With
``attempts`` and ``runs`` the worker names what it holds, and the rest expires.
"""

from __future__ import annotations

from keepgoing._history.events import TaskAttemptFailed
from keepgoing._store.protocol import Store

from ._builders import (
    NOW,
    TTL,
    claim_run,
    claim_runs,
    claim_tasks,
    of_type,
    start,
    start_with,
    task,
)


async def test_only_the_named_attempts_are_renewed(store: Store) -> None:
    run, _ = await start_with(store, [task(1), task(2)])
    known, unknown = await claim_tasks(store, limit=2)

    held = await store.heartbeat(
        "w1", lease_ttl=TTL, now=NOW + 10, attempts={(known.run_id, known.cmd)}, runs=set()
    )

    assert held == {(known.run_id, known.cmd)}
    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 1
    (lost,) = of_type(await store.read_history(run.run_id), TaskAttemptFailed)
    assert (lost.cmd, lost.reason) == (unknown.cmd, "worker_lost")


async def test_no_named_attempts_renews_none(store: Store) -> None:
    await start_with(store, [task(1)])
    await claim_tasks(store)

    assert await store.heartbeat("w1", lease_ttl=TTL, now=NOW + 10, attempts=set()) == set()
    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 1


async def test_without_names_every_lease_of_the_worker_is_renewed(store: Store) -> None:
    await start_with(store, [task(1), task(2)])
    claimed = await claim_tasks(store, limit=2)

    held = await store.heartbeat("w1", lease_ttl=TTL, now=NOW + 10)

    assert held == {(c.run_id, c.cmd) for c in claimed}
    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 0


async def test_only_the_named_activations_are_renewed(store: Store) -> None:
    kept = await start(store, "wf-kept")
    dropped = await start(store, "wf-dropped")
    await claim_run(store, kept.run_id)
    await claim_runs(store)  # takes wf-dropped too

    await store.heartbeat("w1", lease_ttl=TTL, now=NOW + 10, attempts=set(), runs={kept.run_id})

    others = await claim_runs(store, worker="w2", now=NOW + TTL + 1)
    assert [c.run.run_id for c in others] == [dropped.run_id]
