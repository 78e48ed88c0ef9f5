"""The worker: claims activations and task attempts with leases, runs them, commits.

One asyncio loop per worker process. Each pass of the main loop runs the
orchestrator services when due (timers, expired leases), claims runnable
runs and activates them together (their commits share one group commit),
then claims task attempts up to ``concurrency``. When there is nothing to
do it waits for the store's wake-up, the next due timer, or the poll
interval, whichever comes first. A heartbeat task renews every lease the
worker holds in one write and cancels attempts whose lease was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import os
import random
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from keepgoing._api.registry import Registry
from keepgoing._api.registry import registry as default_registry
from keepgoing._clock import Clock, system_clock
from keepgoing._history.events import Event, TimerStarted
from keepgoing._services.orchestrator import Orchestrator
from keepgoing._store.protocol import Store
from keepgoing._store.records import ActivationClaim, TaskClaim, TaskOutcome, WorkerRecord
from keepgoing._worker.activation import Activator
from keepgoing._worker.attempts import run_attempt
from keepgoing._worker.cache import InstanceCache
from keepgoing._worker.settings import WorkerSettings
from keepgoing.errors import StoreError

__all__ = ["Worker", "WorkerStats"]

log = logging.getLogger("keepgoing.worker")


@dataclass
class WorkerStats:
    activations: int = 0
    replays: int = 0
    attempts: int = 0
    fast_path: int = 0
    lost_leases: int = 0
    blocked: int = 0


def new_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Worker:
    """Serves the workflows and tasks of ``registry`` from ``store``.

    Args:
        store: where runs live; opened by :meth:`run` if needed.
        settings: queues, concurrency, leases and intervals.
        registry: the tasks and workflows this worker can run.
        clock: injected time; tests use a fake clock.
        run_services: also fire timers and reap expired leases.
    """

    def __init__(
        self,
        store: Store,
        *,
        settings: WorkerSettings | None = None,
        registry: Registry | None = None,
        clock: Clock = system_clock,
        worker_id: str | None = None,
        run_services: bool = True,
    ) -> None:
        self.store = store
        self.settings = settings or WorkerSettings()
        self.registry = registry or default_registry
        self.clock = clock
        self.worker_id = worker_id or new_worker_id()
        self.run_services = run_services
        self.stats = WorkerStats()
        self.cache = InstanceCache(self.settings.cache_size)
        self._attempts: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._lost: set[tuple[str, int]] = set()
        self._timers: list[tuple[float, str, int]] = []  # (fire_at, run_id, cmd), a heap
        self._reporting: set[tuple[str, int]] = set()  # outcome being written: not lost
        self._stopping = asyncio.Event()
        self._services_due = 0.0
        self._executor = ThreadPoolExecutor(
            max_workers=self.settings.concurrency + 4, thread_name_prefix="keepgoing-task"
        )
        self.activator = Activator(self)
        self.services = Orchestrator(
            store,
            clock=clock,
            interval=self.settings.services_interval,
            batch=self.settings.reap_batch,
        )
        self.abandoned_threads = False  # attempts still in threads after the shutdown grace
        self.keep_failures = False  # in-process runs re-raise the workflow's own exception
        self.failures: dict[str, BaseException] = {}
        self._store_errors = 0  # consecutive passes the store failed
        self._activating: set[str] = set()  # runs whose activation lease this worker holds

    # -- public ---------------------------------------------------------------
    def request_stop(self) -> None:
        """Stop claiming; :meth:`run` then finishes or releases what it holds and returns."""
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def running_attempts(self) -> int:
        return len(self._attempts)

    async def run(self) -> None:
        """Serve until :meth:`request_stop`."""
        await self.store.open()
        await self.store.register_worker(self._record())
        await self.store.record_workflows(
            list(self.registry.workflows), self.settings.queues, self.clock.now()
        )
        heartbeat = asyncio.create_task(self.heartbeat_loop())
        try:
            while not self._stopping.is_set():
                try:
                    if not await self.tick():
                        await self.idle()
                    self._store_errors = 0
                except StoreError as exc:
                    await self._after_store_error(exc)
        finally:
            await self._shutdown(heartbeat)

    async def _after_store_error(self, exc: StoreError) -> None:
        """The store could not answer (its database restarting, say): log it once, back
        off with jitter, and carry on; the store logs when it is reachable again."""
        self._store_errors += 1
        if self._store_errors == 1:
            log.warning("store error (%s); retrying with backoff", exc)
        delay = random.uniform(0.0, min(2.0, 0.05 * 2 ** min(self._store_errors, 10)))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), delay)

    async def tick(self) -> bool:
        """One pass: services, activations, task claims. True if anything happened."""
        now = self.clock.now()
        progressed = await self._fire_local_timers(now)
        if self.run_services and now >= self._services_due:
            progressed = await self._services(now)
        claims = await self.store.claim_activations(
            worker_id=self.worker_id,
            queues=self.settings.queues,
            workflow_names=list(self.registry.workflows),
            limit=self.settings.activation_batch,
            lease_ttl=self.settings.lease_ttl,
            now=self.clock.now(),
        )
        if claims:
            await asyncio.gather(*(self._activate(c) for c in claims))
            progressed = True
        free = self.free_slots()
        if free > 0 and self.registry.tasks:
            task_claims = await self.store.claim_tasks(
                worker_id=self.worker_id,
                queues=self.settings.queues,
                task_names=list(self.registry.tasks),
                limit=free,
                lease_ttl=self.settings.lease_ttl,
                now=self.clock.now(),
            )
            for claim in task_claims:
                self.spawn(claim)
            progressed = progressed or bool(task_claims)
        return progressed

    async def idle(self) -> None:
        """Wait for a wake-up, the next due instant, or the poll interval."""
        wake = await self.store.next_wakeup()
        if self._timers and (wake is None or self._timers[0][0] < wake):
            wake = self._timers[0][0]
        now = self.clock.now()
        timeout = self.settings.poll_interval
        if wake is not None:
            timeout = min(timeout, max(0.0, wake - now))
            self._services_due = min(self._services_due, wake)
        if self.run_services:
            timeout = min(timeout, max(0.0, self._services_due - now))
        if timeout > 0:
            await self._wait(timeout)

    async def _wait(self, timeout: float) -> None:
        # Keyed by the worker: a change made while it was busy ends this wait at once.
        stop = asyncio.ensure_future(self._stopping.wait())
        change = asyncio.ensure_future(self.store.wait_for_change(timeout, key=self))
        try:
            await asyncio.wait({stop, change}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (stop, change):
                fut.cancel()
            await asyncio.gather(stop, change, return_exceptions=True)

    def free_slots(self) -> int:
        return self.settings.concurrency - len(self._attempts)

    # -- timers of cached instances --------------------------------------------------
    def note_timers(self, run_id: str, commands: list[Event]) -> None:
        """Remember timers this worker's cached instances started, to fire them on time."""
        for command in commands:
            if isinstance(command, TimerStarted):
                heapq.heappush(self._timers, (command.fire_at, run_id, command.cmd))

    async def _fire_local_timers(self, now: float) -> bool:
        fired = False
        while self._timers and self._timers[0][0] <= now:
            _, run_id, cmd = heapq.heappop(self._timers)
            fired = await self.activator.fire_timer(run_id, cmd) or fired
        return fired

    # -- services -----------------------------------------------------------------
    async def _services(self, now: float) -> bool:
        stats = self.services.stats
        before = stats.timers_fired + stats.leases_reaped
        busy = await self.services.tick()
        self._services_due = now if busy else now + self.settings.services_interval
        return stats.timers_fired + stats.leases_reaped > before

    # -- activations ---------------------------------------------------------------
    async def _activate(self, claim: ActivationClaim) -> None:
        self._activating.add(claim.run.run_id)
        try:
            await self.activator.activate(claim)
        except Exception as exc:
            if isinstance(exc, StoreError):  # the database, not the code: no traceback
                log.warning("activation of run %s not committed: %s", claim.run.run_id, exc)
            else:
                log.exception("activation of run %s failed; it will be retried", claim.run.run_id)
            with contextlib.suppress(Exception):
                await self.store.release_activation(claim.run.run_id, claim.fence)
        finally:
            self._activating.discard(claim.run.run_id)

    # -- task attempts ---------------------------------------------------------------
    def spawn(self, claim: TaskClaim) -> None:
        key = (claim.run_id, claim.cmd)
        self.stats.attempts += 1
        attempt = asyncio.create_task(self._attempt(claim), name=f"attempt {claim.name}")
        self._attempts[key] = attempt
        attempt.add_done_callback(lambda _: self._attempts.pop(key, None))

    async def _attempt(self, claim: TaskClaim) -> None:
        key = (claim.run_id, claim.cmd)
        definition = self.registry.tasks[claim.name]
        result = await run_attempt(
            definition,
            claim,
            worker_id=self.worker_id,
            remaining=claim.deadline - self.clock.now(),
            executor=self._executor,
            store=self.store,
        )
        if key in self._lost:
            self._lost.discard(key)
            return
        self._reporting.add(key)
        outcome = TaskOutcome(
            run_id=claim.run_id,
            cmd=claim.cmd,
            fence=claim.fence,
            worker_id=self.worker_id,
            attempt=claim.attempt,
            started_at=claim.started_at,
            now=self.clock.now(),
            ok=result.ok,
            result=result.result,
            error=result.error,
            reason=result.reason,
            volume_commits=result.volume_commits,
        )
        try:
            await self._record_outcome(key, outcome)
        except Exception:
            log.exception("could not record the outcome of task %s; its lease will expire", key)
        finally:
            self._reporting.discard(key)

    async def _record_outcome(self, key: tuple[str, int], outcome: TaskOutcome) -> None:
        """Write an attempt's outcome. A write the store could not commit is not done:
        the same fenced write is tried again until the store answers; it is refused
        if the first one landed after all, or if the lease was lost meanwhile."""
        failures = 0
        while True:
            try:
                # Shielded: once the outcome is being written, its follow-up (the
                # cached instance's position, the eager claim of the next task)
                # must not be cut off half way.
                await asyncio.shield(self.activator.complete(outcome))
                return
            except StoreError as exc:
                failures += 1
                if failures == 1:
                    log.warning("could not record the outcome of task %s (%s); retrying", key, exc)
                await asyncio.sleep(random.uniform(0.0, min(2.0, 0.05 * 2 ** min(failures, 10))))

    # -- leases ---------------------------------------------------------------------
    async def heartbeat_loop(self) -> None:
        """Renew every lease this worker holds, forever; cancel attempts whose lease was lost."""
        while True:
            await asyncio.sleep(self.settings.heartbeat_interval)
            before = set(self._attempts) - self._reporting
            try:
                # Only the leases this worker knows it holds: one the store gave it
                # in a commit whose answer never arrived is left to expire.
                held = await self.store.heartbeat(
                    self.worker_id,
                    lease_ttl=self.settings.lease_ttl,
                    now=self.clock.now(),
                    attempts=set(self._attempts),
                    runs=set(self._activating),
                )
            except Exception as exc:
                log.warning("heartbeat failed (%s); retrying", exc)
                continue
            for key in before - held:
                attempt = self._attempts.get(key)
                if attempt is not None and key not in self._reporting:
                    log.warning("lost the lease of task attempt %s; abandoning it", key)
                    self.stats.lost_leases += 1
                    self._lost.add(key)
                    attempt.cancel()

    async def _shutdown(self, heartbeat: asyncio.Task[None]) -> None:
        if self._attempts:
            log.info("stopping: waiting for %d running attempt(s)", len(self._attempts))
            await asyncio.wait(list(self._attempts.values()), timeout=self.settings.shutdown_grace)
        for key, attempt in list(self._attempts.items()):
            self._lost.add(key)
            attempt.cancel()
            # A sync body cannot be interrupted: once released, its thread must not
            # outlive the process (the CLI exits hard), or the step runs twice.
            self.abandoned_threads = True
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat
        released = await self.store.release_tasks(self.worker_id, self.clock.now())
        if released:
            log.info("released %d attempt(s) for other workers", released)
        await self.store.deregister_worker(self.worker_id)
        self.cache.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def stop_local(self) -> None:
        """End an in-process worker: cancel what still runs and free its threads."""
        attempts = list(self._attempts.values())
        for attempt in attempts:
            attempt.cancel()
        if attempts:
            await asyncio.gather(*attempts, return_exceptions=True)
        self.cache.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _record(self) -> WorkerRecord:
        now = self.clock.now()
        return WorkerRecord(
            worker_id=self.worker_id,
            queues=list(self.settings.queues),
            host=socket.gethostname(),
            pid=os.getpid(),
            started_at=now,
            heartbeat_at=now,
            info={
                "concurrency": self.settings.concurrency,
                "workflows": sorted(self.registry.workflows),
                "tasks": sorted(self.registry.tasks),
            },
        )
