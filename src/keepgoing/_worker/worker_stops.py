"""Stopping a worker on purpose: the stop is recorded, then signalled, then settled.

The order is what lets the reaper name the cause of every attempt the worker
loses (``_store/worker_stops.py``): a stop recorded only after the signal could be
read too late, after the loss was recorded as unexplained; one left behind by a
signal that never reached a live process would explain a death it did not cause.
"""

from __future__ import annotations

import asyncio

from keepgoing._store.protocol import Store
from keepgoing._store.records import WorkerRecord, WorkerStop
from keepgoing._worker import process
from keepgoing.errors import StoreError

__all__ = ["kill_recorded", "settle"]


async def kill_recorded(
    store: Store, worker: WorkerRecord, stop: WorkerStop, now: float
) -> process.Killed:
    """SIGKILL ``worker`` (as :func:`process.kill` does), its stop recorded first.

    Raises:
        NotKillable: as :func:`process.kill`; the recorded stop is removed again.
    """
    stop_id = await store.record_worker_stop(stop, now=now)
    try:
        killed = process.kill(worker.info, worker.pid, worker.host)
    except BaseException:
        await settle(store, stop_id, signalled=False)
        raise
    await settle(store, stop_id, signalled=True)
    return killed


async def settle(store: Store, stop_id: int, *, signalled: bool, tries: int = 3) -> None:
    """Settle a stop, trying again on a store error: a stop left pending is ignored
    after ``stops.PENDING_GRACE``, and the loss it explained then counts."""
    for attempt in range(1, tries + 1):
        try:
            await store.settle_worker_stop(stop_id, signalled=signalled)
            return
        except StoreError:
            if attempt == tries:
                raise
            await asyncio.sleep(0.2 * attempt)
