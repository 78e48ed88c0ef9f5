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
import socket
import time
import uuid
from dataclasses import dataclass

from keepgoing._backoff import backoff
from keepgoing._clock import Clock, system_clock
from keepgoing._store.protocol import Store
from keepgoing._store.records import (
    ActivationClaim,
    TaskClaim,
    TaskOutcome,
    WorkerRecord,
    WorkerStop,
)
from keepgoing._store.worker_stops import HUNG_RESTART, SHUTDOWN, engine_stop
from keepgoing._worker import process
from keepgoing._worker.activation import NOTHING, Activator, FollowUp
from keepgoing._worker.attempts import failed_outcome, run_attempt
from keepgoing._worker.cache import InstanceCache
from keepgoing._worker.claims import ClaimWindow
from keepgoing._worker.orchestrator import Orchestrator
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.start_records import record_startup
from keepgoing._worker.threads import TaskThreads
from keepgoing._workflow.registry import Registry
from keepgoing._workflow.registry import registry as default_registry
from keepgoing.errors import StoreError

__all__ = ["Worker", "WorkerStats"]

log = logging.getLogger("keepgoing.worker")

STORE_BACKOFF_FIRST = 0.1  # seconds, after the first store error (before jitter)
STORE_BACKOFF_CAP = 2.0  # seconds, after a store error
#: A worker's own timer due this soon (seconds) is waited for with an exact sleep.
PRECISE_WAIT = 0.0015


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
        # Set when a timer joins the heap: an idle wait that began before ends at once.
        self._timer_added = asyncio.Event()
        self._reporting: set[tuple[str, int]] = set()  # outcome being written: not lost
        self._stopping = asyncio.Event()
        self._stop_reason: WorkerStop | None = None  # why it stops (request_stop)
        self._services_due = 0.0
        self._threads = TaskThreads(keep_idle=self.settings.concurrency)
        self.activator = Activator(
            store,
            self.cache,
            clock,
            self.settings,
            self.stats,
            registry=self.registry,
            worker_id=self.worker_id,
            room=self._room,
        )
        self.services = Orchestrator(
            store,
            clock=clock,
            interval=self.settings.services_interval,
            batch=self.settings.reap_batch,
        )
        self.abandoned_threads = False  # attempts still in threads after the shutdown grace
        self._store_errors = 0  # consecutive passes the store failed
        self._activating: set[str] = set()  # runs whose activation lease this worker holds
        self._claims = ClaimWindow(clock)  # claim-capable calls whose claims are not started
        self._blocked_due = 0.0  # when blocked runs are next looked at (at start, first)
        self._backoffs: set[asyncio.Task[None]] = set()  # failed activations, holding a lease
        self._liveness: str | None = None  # the store's liveness token for this worker
        self._claimed_at = float("-inf")  # when the last pass claimed
        self._started_at: float | None = None
        self._reported_hung = 0  # the hung-thread count in the registry row
        #: Stop and ask to be replaced by a fresh process when too many threads hang
        #: (the CLI sets it and re-executes; an in-process worker only reports them).
        self.replace_when_hung = False
        self.replace = False  # set when it stopped for that reason
        #: Capture each attempt's stdout, stderr and logging records and store them
        #: with its outcome (``_worker/logs.py``); the CLI's worker sets it.
        self.capture_logs = False
        #: Record this process's identity (``_worker/process.py``) so the server can
        #: kill it on request; only a plain ``keepgoing worker`` sets it.
        self.killable = False

    # -- public ---------------------------------------------------------------
    def request_stop(self, stop: WorkerStop | None = None) -> None:
        """Stop claiming; :meth:`run` then finishes or releases what it holds and returns.

        ``stop`` says why (the first reason given is kept): it is recorded before any
        attempt is handed back, so each hand-back carries its cause. Without one, the
        worker records ``shutdown``: its host program or its operator stopped it.
        """
        if self._stop_reason is None:
            self._stop_reason = stop
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def running_attempts(self) -> int:
        return len(self._attempts)

    @property
    def keep_failures(self) -> bool:
        """Keep each failed run's own exception in :attr:`failures` (in-process runs)."""
        return self.activator.keep_failures

    @keep_failures.setter
    def keep_failures(self, keep: bool) -> None:
        self.activator.keep_failures = keep

    @property
    def failures(self) -> dict[str, BaseException]:
        """The exception each failed run raised, by run id, when :attr:`keep_failures`."""
        return self.activator.failures

    async def run(self) -> None:
        """Serve until :meth:`request_stop`."""
        await self.store.open()
        # The token first: the reaper reads it for every lease this worker takes.
        self._liveness = await self.store.hold_liveness(self.worker_id)
        await self.store.register_worker(self._record())
        await record_startup(self.store, self.registry, self.settings, self.worker_id, self.clock)
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
        delay = backoff(self._store_errors - 1, base=STORE_BACKOFF_FIRST, cap=STORE_BACKOFF_CAP)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), delay)

    async def tick(self) -> bool:
        """One pass: services, activations, task claims. True if anything happened."""
        now = self.clock.now()
        progressed = await self._fire_local_timers(now)
        if self.run_services and now >= self._services_due:
            progressed = await self._services(now)
        self._claimed_at = self.clock.now()
        if now >= self._blocked_due:
            progressed = await self._retry_blocked(now) or progressed
        claims = await self.store.claim_activations(
            worker_id=self.worker_id,
            queues=self.settings.queues,
            workflow_names=list(self.registry.workflows),
            limit=self.settings.activation_batch,
            lease_ttl=self.settings.lease_ttl,
            now=self.clock.now(),
            revision=self.settings.revision,
        )
        if claims:
            await asyncio.gather(*(self._activate(c) for c in claims))
            progressed = True
        free = self.free_slots()
        if free > 0 and self.registry.tasks:
            with self._claims.pending():
                task_claims = await self.store.claim_tasks(
                    worker_id=self.worker_id,
                    queues=self.settings.queues,
                    task_names=list(self.registry.tasks),
                    limit=free,
                    lease_ttl=self.settings.lease_ttl,
                    now=self.clock.now(),
                    revision=self.settings.revision,
                )
                for claim in task_claims:
                    self.spawn(claim)
            progressed = progressed or bool(task_claims)
        return progressed

    async def idle(self) -> None:
        """Wait for a wake-up, the next due instant, or the poll interval."""
        self._timer_added.clear()  # before the heap is read: no timer added later is missed
        timer = self._timers[0][0] if self._timers else None
        if timer is not None and timer <= self.clock.now():
            return  # due since this pass fired timers: the next pass fires it
        stored = await self.store.next_wakeup()
        wake = stored
        if timer is not None and (wake is None or timer < wake):
            wake = timer
        now = self.clock.now()
        timeout = self.settings.poll_interval
        # An instant that was already due when this pass claimed is work it could not
        # take (a task for other workers, a lease its living owner keeps): no spin on it.
        if wake is not None and wake > self._claimed_at:
            timeout = min(timeout, max(0.0, wake - now))
        # The store's next instant brings the services sweep forward, unless it is one of
        # this worker's own timers: those it fires itself (and sweeps for if it cannot).
        if stored is not None and stored > self._claimed_at and not self._holds_timer(stored):
            self._services_due = min(self._services_due, stored)
        if self.run_services:
            timeout = min(timeout, max(0.0, self._services_due - now))
        if timer is not None and 0 < timer - now <= timeout:
            # The event loop's wait rounds up to the next millisecond: wake a little
            # before one of this worker's own timers is due and sleep the rest exactly,
            # on a thread (the loop goes on; the thread's answer wakes it at once).
            if timer - now <= PRECISE_WAIT:
                await asyncio.to_thread(time.sleep, timer - now)
                return
            timeout = timer - now - PRECISE_WAIT
        if timeout > 0:
            await self._wait(timeout)

    async def _wait(self, timeout: float) -> None:
        # Keyed by the worker: a change made while it was busy ends this wait at once.
        stop = asyncio.ensure_future(self._stopping.wait())
        change = asyncio.ensure_future(self.store.wait_for_change(timeout, key=self))
        timer = asyncio.ensure_future(self._timer_added.wait())
        try:
            await asyncio.wait({stop, change, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (stop, change, timer):
                fut.cancel()
            await asyncio.gather(stop, change, timer, return_exceptions=True)

    def free_slots(self) -> int:
        return self.settings.concurrency - len(self._attempts)

    def _room(self) -> int | None:
        """Free slots for the next steps a commit claims; None once stopping (it takes none)."""
        return None if self._stopping.is_set() else self.free_slots()

    def _follow(self, follow: FollowUp) -> None:
        """Start the attempts a commit claimed for this worker; remember its timers."""
        if follow is NOTHING:
            return
        for claim in follow.claims:
            self.spawn(claim)
        for timer in follow.timers:
            heapq.heappush(self._timers, timer)
            self._timer_added.set()

    @property
    def hung_threads(self) -> int:
        """Threads still running a sync body whose attempt ended (timed out, lost)."""
        return self._threads.hung

    async def _check_hung(self) -> None:
        """Report a changed hung-thread count; past the bound, stop to be replaced."""
        hung = self.hung_threads
        if hung != self._reported_hung:
            self._reported_hung = hung
            await self.store.register_worker(self._record())
            if hung:
                log.warning("%d thread(s) still run sync task bodies that timed out", hung)
        if (
            hung >= self.settings.max_hung_threads
            and self.replace_when_hung
            and not self._stopping.is_set()
        ):
            log.error(
                "%d hung task threads (max_hung_threads=%d): handing back leases and "
                "restarting this worker in a fresh process",
                hung,
                self.settings.max_hung_threads,
            )
            self.replace = True
            await self._record_own_stop()
            self.request_stop()

    async def _record_own_stop(self) -> None:
        """Record why this worker restarts before it stops: the attempts it hands back
        (or, if it cannot, loses) are then ``hung_restart``, counted against neither
        ``retries`` nor ``max_worker_losses``. The hung attempts themselves already
        ended with their timeout, which counted against their task's ``retries``:
        a task that keeps hanging fails by those, and stops causing restarts."""
        stop = WorkerStop(self.worker_id, HUNG_RESTART, "worker", self.worker_id, "worker")
        self._stop_reason = stop
        await self._record_stop(stop, "why this worker restarts")

    async def _record_stop(self, stop: WorkerStop, what: str) -> None:
        """Record one of this worker's own stops, as the engine's (never traced to a task)."""
        try:
            with engine_stop():
                stop_id = await self.store.record_worker_stop(stop, now=self.clock.now())
            await self.store.settle_worker_stop(stop_id, signalled=True)
        except StoreError as exc:
            log.warning("could not record %s (%s)", what, exc)

    # -- timers of cached instances --------------------------------------------------
    async def _fire_local_timers(self, now: float) -> bool:
        fired = False
        while self._timers and self._timers[0][0] <= now:
            _, run_id, cmd = heapq.heappop(self._timers)
            with self._claims.pending():
                follow = await self.activator.fire_timer(run_id, cmd)
                if follow is not None:
                    self._follow(follow)
                    fired = True
                else:  # not fired here (the run is busy or gone): the sweep fires it now
                    self._services_due = min(self._services_due, now)
        return fired

    def _holds_timer(self, instant: float) -> bool:
        return any(fire_at == instant for fire_at, _, _ in self._timers)

    # -- services -----------------------------------------------------------------
    async def _services(self, now: float) -> bool:
        stats = self.services.stats
        before = stats.timers_fired + stats.leases_reaped
        busy = await self.services.tick()
        self._services_due = now if busy else now + self.settings.services_interval
        return stats.timers_fired + stats.leases_reaped > before

    # -- activations ---------------------------------------------------------------
    def code_versions(self) -> dict[str, str]:
        """The code version (hash of its source file) of each workflow this worker serves."""
        return {name: wf.code_version for name, wf in self.registry.workflows.items()}

    async def _retry_blocked(self, now: float) -> bool:
        """Retry the blocked runs that this code has not tried, or whose backoff is over."""
        self._blocked_due = now + self.settings.blocked_interval
        if self.stopping or not self.registry.workflows:
            return False
        claims = await self.store.claim_blocked(
            worker_id=self.worker_id,
            queues=self.settings.queues,
            versions=self.code_versions(),
            limit=self.settings.activation_batch,
            lease_ttl=self.settings.lease_ttl,
            now=now,
            revision=self.settings.revision,
        )
        for claim in claims:
            log.info("retrying blocked run %s with this worker's code", claim.run.run_id)
        if claims:
            await asyncio.gather(*(self._activate(c) for c in claims))
        return bool(claims)

    async def _activate(self, claim: ActivationClaim) -> None:
        self._activating.add(claim.run.run_id)
        hold = None
        try:
            with self._claims.pending():
                self._follow(await self.activator.activate(claim))
        except Exception as exc:
            hold = await self.activator.failed(claim, exc)
        finally:
            if hold is None:
                self._activating.discard(claim.run.run_id)
        if hold is not None:
            # Backoff: the lease is kept (and renewed) meanwhile, so no worker
            # retries the run at once; then it is released for the next try.
            task = asyncio.create_task(self._release_later(claim, hold))
            self._backoffs.add(task)
            task.add_done_callback(self._backoffs.discard)

    async def _release_later(self, claim: ActivationClaim, delay: float) -> None:
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
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
        try:
            outcome = await run_attempt(
                definition,
                claim,
                worker_id=self.worker_id,
                clock=self.clock,
                threads=self._threads,
                store=self.store,
                capture_logs=self.capture_logs,
            )
        except (asyncio.CancelledError, GeneratorExit):
            raise  # the engine's own: a lost lease, a shutdown
        except BaseException as exc:
            log.exception("task %s: its outcome could not be made; failing the attempt", key)
            outcome = failed_outcome(claim, self.worker_id, self.clock, exc)
        if key in self._lost:
            self._lost.discard(key)
            return
        self._reporting.add(key)
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
                await asyncio.shield(self._complete(outcome))
                return
            except StoreError as exc:
                failures += 1
                if failures == 1:
                    log.warning("could not record the outcome of task %s (%s); retrying", key, exc)
                await asyncio.sleep(
                    backoff(failures - 1, base=STORE_BACKOFF_FIRST, cap=STORE_BACKOFF_CAP)
                )

    async def _complete(self, outcome: TaskOutcome) -> None:
        """Record the outcome and start what its commit claimed, as one shielded piece."""
        with self._claims.pending(since=outcome.now):  # its claims are stamped then
            self._follow(await self.activator.complete(outcome))

    # -- leases ---------------------------------------------------------------------
    async def heartbeat_loop(self) -> None:
        """Renew every lease this worker holds, forever; cancel attempts whose lease was lost."""
        while True:
            await asyncio.sleep(self.settings.heartbeat_interval)
            before = set(self._attempts) - self._reporting
            try:
                # Only the leases this worker knows it holds; one the store gave it
                # before ``known_through`` that it does not run (a commit whose answer
                # never arrived) is handed back.
                held = await self.store.heartbeat(
                    self.worker_id,
                    lease_ttl=self.settings.lease_ttl,
                    now=self.clock.now(),
                    attempts=set(self._attempts),
                    runs=set(self._activating),
                    known_through=self._claims.known_through(),
                )
                await self._check_hung()
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
        if self._attempts and self._stop_reason is not None:
            if self._stop_reason.cause != HUNG_RESTART:  # recorded when it was decided
                await self._record_stop(self._stop_reason, "why this worker stops")
        elif self._attempts:
            # Stopped by its host program or a caller of request_stop(): say so first.
            why = "stopped by the program running it"
            stop = WorkerStop(self.worker_id, SHUTDOWN, "", "", "worker", why)
            await self._record_stop(stop, "why this worker stops")
        for key, attempt in list(self._attempts.items()):
            self._lost.add(key)
            attempt.cancel()
            # A sync body cannot be interrupted: once released, its thread must not
            # outlive the process (the CLI exits hard), or the step runs twice.
            self.abandoned_threads = True
        if self._backoffs:  # they end once stopping is set, releasing their leases
            await asyncio.gather(*self._backoffs, return_exceptions=True)
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat
        released = await self.store.release_tasks(self.worker_id, self.clock.now())
        if released:
            log.info("released %d attempt(s) for other workers", released)
        await self.store.deregister_worker(self.worker_id)
        await self.store.release_liveness(self.worker_id)
        self.cache.clear()
        self._threads.shutdown(cancel_waiting=True)

    async def stop_local(self) -> None:
        """End an in-process worker: cancel what still runs and free its threads."""
        attempts = [*self._attempts.values(), *self._backoffs]
        for attempt in attempts:
            attempt.cancel()
        if attempts:
            await asyncio.gather(*attempts, return_exceptions=True)
        self.cache.clear()
        self._threads.shutdown(cancel_waiting=True)

    def _record(self) -> WorkerRecord:
        now = self.clock.now()
        if self._started_at is None:
            self._started_at = now
        return WorkerRecord(
            worker_id=self.worker_id,
            queues=list(self.settings.queues),
            host=socket.gethostname(),
            pid=os.getpid(),
            started_at=self._started_at,
            heartbeat_at=now,
            liveness=self._liveness,
            info={
                "concurrency": self.settings.concurrency,
                "workflows": sorted(self.registry.workflows),
                "tasks": sorted(self.registry.tasks),
                "hung_threads": self.hung_threads,
                "heartbeat_interval": self.settings.heartbeat_interval,
                **({"process": process.identity()} if self.killable else {}),
            },
        )
