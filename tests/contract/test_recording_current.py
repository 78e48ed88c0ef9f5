"""The shipped support-digest recording holds what this build's store writes for the
same events: a worker lost to a kill on request, with its cause, actor and where it
was asked from. (Its customer lookups are held back by the directory's rate limit,
so it need not hold a 429 retried.) A change of what the
store records fails this test until the run is recorded again (``make record-demo``)."""

from __future__ import annotations

import dataclasses

from keepgoing._demo.record import recorded, stale_fields
from keepgoing._history import events as ev
from keepgoing._store.protocol import Store
from keepgoing._store.records import WorkerStop

from ._builders import NOW, TTL, claim_one, of_type, start_with, task


async def _fresh_failures(store: Store) -> list[ev.TaskAttemptFailed]:
    """Attempt failures written by this build: a kill on request."""
    run, _ = await start_with(store, [task(1, retries=4, retry_delay=1.0)])
    now = NOW + 5
    await claim_one(store, worker="w2", now=now, ttl=TTL)
    stop_id = await store.record_worker_stop(
        WorkerStop("w2", "killed_by_request", "user", "alice", "api"), now=now + 1
    )
    await store.settle_worker_stop(stop_id, signalled=True)
    assert await store.reap_expired_leases(now=now + TTL + 2, limit=10) == 1
    return of_type(await store.read_history(run.run_id), ev.TaskAttemptFailed)


async def test_the_recording_has_what_this_build_writes_for_its_failures(store: Store) -> None:
    fresh = await _fresh_failures(store)
    assert [e.reason for e in fresh] == ["worker_lost"]
    assert fresh[0].cause == "killed_by_request"  # the build writes the loss's cause
    shipped = recorded()
    assert stale_fields(shipped, fresh) == [], (
        "the shipped recording is older than this build: run `make record-demo`"
    )


async def test_a_recording_without_the_loss_cause_is_found_stale(store: Store) -> None:
    fresh = await _fresh_failures(store)
    old = [
        dataclasses.replace(e, cause=None, actor=None, via=None)
        if isinstance(e, ev.TaskAttemptFailed) and e.reason == "worker_lost"
        else e
        for e in recorded()
    ]
    problems = stale_fields(old, fresh)
    assert problems == [
        "a TaskAttemptFailed(worker_lost) event of the recording lacks actor, cause, via"
    ]
    without_losses = [e for e in recorded() if not isinstance(e, ev.TaskAttemptFailed)]
    assert "the recording has no TaskAttemptFailed(worker_lost) event" in stale_fields(
        without_losses, fresh
    )
