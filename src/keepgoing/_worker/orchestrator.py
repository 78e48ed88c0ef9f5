"""The orchestrator services: firing due timers, reaping expired leases, marking lost workers.

A server runs them in a loop (:meth:`Orchestrator.run`); a worker runs one
pass (:meth:`Orchestrator.tick`) between its claims when they are due. They
sit with the worker, the lower of the two layers that use them.

Both are single store calls that are safe for any number of concurrent
callers (each timer fires once and each expired lease is reaped once, however
many servers and workers race), so several servers on one store need no
leader election. Event matching needs no loop here: the store matches an
event inside the transaction that publishes it, or inside the commit that
starts a wait for it.

A server's orchestrator also runs the retention sweep (``_worker/retention.py``):
ended runs past their policy, archived and deleted in bounded batches.

Once a second a pass also marks lost the registered workers whose process ended
or whose heartbeat stopped (``_store/lost_workers.py``); that sweep is one read
when nobody is lost.

Each pass fires and reaps up to ``batch`` rows; a full batch means more are
due, so the next pass starts at once. Otherwise the loop sleeps until the
store's next due instant, a change, or ``interval``, whichever comes first.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from keepgoing._clock import Clock, system_clock
from keepgoing._store.protocol import Store
from keepgoing._worker.retention import RetentionSweep
from keepgoing.errors import StoreError

__all__ = ["Orchestrator", "OrchestratorStats"]

log = logging.getLogger("keepgoing.services")


@dataclass
class OrchestratorStats:
    """What this orchestrator did since it started."""

    passes: int = 0
    timers_fired: int = 0
    leases_reaped: int = 0
    workers_lost: int = 0
    errors: int = 0


class Orchestrator:
    """Fires due timers and reaps expired leases until :meth:`request_stop`.

    Args:
        store: an opened store.
        clock: injected time.
        interval: the longest sleep between passes, in seconds.
        batch: timers (and, separately, leases) handled per pass.
        liveness_interval: the least time between two sweeps for lost workers.
        retention: the retention sweep (a server's services; ``_worker/retention.py``).
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock = system_clock,
        interval: float = 0.25,
        batch: int = 100,
        liveness_interval: float = 1.0,
        retention: RetentionSweep | None = None,
    ) -> None:
        if interval <= 0 or batch < 1:
            raise ValueError("interval must be positive and batch at least 1")
        self.store = store
        self.clock = clock
        self.interval = interval
        self.batch = batch
        self.liveness_interval = liveness_interval
        self.retention = retention
        self.stats = OrchestratorStats()
        self._next_liveness = float("-inf")
        self._stopping = asyncio.Event()

    def request_stop(self) -> None:
        self._stopping.set()

    async def tick(self) -> bool:
        """One pass. True when a batch was full, so more work is already due."""
        now = self.clock.now()
        fired = await self.store.fire_due_timers(now=now, limit=self.batch)
        reaped = await self.store.reap_expired_leases(now=now, limit=self.batch)
        self.stats.passes += 1
        self.stats.timers_fired += fired
        self.stats.leases_reaped += reaped
        if reaped:
            log.warning("recovered %d task attempt(s) whose worker stopped renewing", reaped)
        if self.clock.monotonic() >= self._next_liveness:
            self._next_liveness = self.clock.monotonic() + self.liveness_interval
            lost = await self.store.mark_lost_workers(now=now)
            self.stats.workers_lost += lost
            if lost:
                log.warning(
                    "marked %d worker(s) lost: their process ended or stopped beating", lost
                )
        swept = await self.retention.tick() if self.retention is not None else False
        return fired >= self.batch or reaped >= self.batch or swept

    async def run(self) -> None:
        """Serve until :meth:`request_stop`; a failing pass is logged and retried."""
        while not self._stopping.is_set():
            try:
                if await self.tick():
                    continue
                timeout = await self._idle_time()
            except Exception as exc:
                self.stats.errors += 1
                if isinstance(exc, StoreError):  # the database is away: no traceback
                    log.warning("orchestrator pass failed (%s); retrying", exc)
                else:
                    log.exception("orchestrator pass failed; retrying")
                timeout = 1.0
            await self._wait(timeout)

    async def _idle_time(self) -> float:
        wake = await self.store.next_wakeup()
        now = self.clock.now()
        # A due instant already past is work for workers (a ready task), not for us.
        if wake is None or wake <= now:
            return self.interval
        return min(self.interval, wake - now)

    async def _wait(self, timeout: float) -> None:
        stop = asyncio.ensure_future(self._stopping.wait())
        change = asyncio.ensure_future(self.store.wait_for_change(timeout, key=self))
        try:
            await asyncio.wait({stop, change}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (stop, change):
                fut.cancel()
            await asyncio.gather(stop, change, return_exceptions=True)
