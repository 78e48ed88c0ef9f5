"""The causes a group backend reports when it stops a replica on purpose.

A backend that signals its replicas itself (the local one) calls its
``on_stop`` hook just before each signal, with the replica's pid and host and
the cause (``scaled_down``, ``replaced``, ``drain_timeout``,
``killed_by_request``); the hook records the stop in the store for the worker
that process runs, and the callback it returns settles it once the signal was
sent (``_store/worker_stops.py`` has the rules). :func:`store_hook` is that hook for
the autoscaler's store.

A stop that cannot be recorded (the store is away) never holds the signal
back: the replica still stops, and its losses are ``unexplained``.

A backend whose cluster reports why a replica ended (the Kubernetes one:
``OOMKilled`` in a container's terminated state) offers ``terminations``;
:func:`record_terminations` records each as a stop of the worker that ran in
that container. Such a report comes after the death, so it labels only the
losses the reaper has not recorded yet; it changes no decision either way, since
``oom_killed`` counts against ``max_worker_losses`` just as ``unexplained`` does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from keepgoing._clock import Clock
from keepgoing._procinfo import start_ticks
from keepgoing._store.protocol import Store
from keepgoing._store.records import WorkerRecord, WorkerStop

__all__ = [
    "Settle",
    "StopHook",
    "Termination",
    "matching_workers",
    "record_terminations",
    "store_hook",
]

log = logging.getLogger("keepgoing.groups")

T = TypeVar("T")
#: Called with whether the signal was sent.
Settle = Callable[[bool], None]
#: ``hook(group, pid, host, cause)`` before a signal; returns the stop's :data:`Settle`.
StopHook = Callable[[str, int, str, str], Settle]
_WAIT = 10.0  # seconds a backend thread waits for the store before it signals anyway


def _nothing(sent: bool) -> None:
    return None


def matching_workers(workers: Sequence[WorkerRecord], pid: int, host: str) -> list[WorkerRecord]:
    """The registered workers process ``pid`` on ``host`` runs now: by the process
    identity a ``keepgoing worker`` records (a reused pid never matches), else by pid."""
    ticks = start_ticks(pid)
    found = []
    for w in workers:
        if w.pid != pid or w.host != host:
            continue
        identity = w.info.get("process")
        if isinstance(identity, dict) and identity.get("start_ticks") not in (None, ticks):
            continue  # an earlier process that had this pid
        found.append(w)
    return found


def store_hook(
    store: Store, loop: asyncio.AbstractEventLoop, clock: Clock, *, via: str = "autoscaler"
) -> StopHook:
    """A :data:`StopHook` that records stops in ``store`` from a backend's thread,
    through ``loop`` (the one the store runs on)."""

    def call(coro: Coroutine[Any, Any, T]) -> T | None:
        if _on(loop):  # called on the loop itself: it cannot wait for itself
            coro.close()
            log.warning("a worker stop was signalled from the store's own loop: not recorded")
            return None
        try:
            return asyncio.run_coroutine_threadsafe(coro, loop).result(_WAIT)
        except Exception as exc:  # the signal goes out regardless
            log.warning("could not record a worker stop (%s)", exc)
            return None

    def hook(group: str, pid: int, host: str, cause: str) -> Settle:
        async def record() -> list[int]:
            ids = []
            for worker in matching_workers(await store.list_workers(), pid, host):
                stop = WorkerStop(worker.worker_id, cause, "service", "", via, f"group {group}")
                ids.append(await store.record_worker_stop(stop, now=clock.now()))
            return ids

        ids = call(record()) or []
        if not ids:
            return _nothing

        def settle(sent: bool) -> None:
            async def done() -> None:
                for stop_id in ids:
                    await store.settle_worker_stop(stop_id, signalled=sent)

            call(done())

        return settle

    return hook


def _on(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


@dataclass(frozen=True)
class Termination:
    """A replica's process that ended for a reason its cluster reports.

    ``host`` is the host name its worker registered (a pod's name); ``finished_at``
    when that process ended (a restarted container's predecessor, or the pod's
    last one); ``cause`` one of ``_store/worker_stops.py``'s ``CAUSES``.
    """

    instance_id: str
    host: str
    finished_at: float
    cause: str
    reason: str


async def record_terminations(
    store: Store, terminations: Iterable[Termination], seen: set[tuple[str, float]], now: float
) -> int:
    """Record each termination not in ``seen`` (which it updates) as a stop of the
    workers that ran on its host and started before it ended; how many it recorded."""
    fresh = [t for t in terminations if (t.instance_id, t.finished_at) not in seen]
    if not fresh:
        return 0
    workers = await store.list_workers()
    recorded = 0
    for t in fresh:
        seen.add((t.instance_id, t.finished_at))
        for w in workers:
            if w.host != t.host or w.started_at > t.finished_at:
                continue  # another pod, or the container that replaced the one that ended
            stop = WorkerStop(w.worker_id, t.cause, "", "", "kubernetes", t.reason)
            await store.settle_worker_stop(
                await store.record_worker_stop(stop, now=now), signalled=True
            )
            recorded += 1
    return recorded
