"""The in-memory store: the reference implementation of :class:`Store`.

Nothing is durable; it serves the in-process orchestrator and unit tests,
and it defines, together with ``tests/contract``, what every other backend
must do. The rules themselves live in :mod:`keepgoing._store._memory_state`;
this module adds locking, copying and change notification.

Each method runs its whole mutation under one ``threading.Lock`` without
awaiting, so every call is atomic, also when a sync facade calls in from a
helper thread. Only :meth:`MemoryStore.wait_for_change` awaits.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections.abc import Collection, Sequence

from keepgoing._history.events import ErrorInfo, Event, TaskCompleted, TimerFired
from keepgoing._store import _memory_messaging as messaging
from keepgoing._store._memory_server import MemoryAuthMixin, MemoryObserveMixin
from keepgoing._store._memory_state import MemoryState, RunRow, TaskRow
from keepgoing._store._memory_volumes import MemoryVolumesMixin
from keepgoing._store.doorbell import LocalBell
from keepgoing._store.protocol import Store
from keepgoing._store.records import (
    ActivationClaim,
    ActivationCommit,
    AuditEntry,
    CancelRequest,
    CommitResult,
    EventPublished,
    EventRequest,
    FastActivation,
    Lineage,
    MessageRequest,
    RunRecord,
    StartRequest,
    TaskClaim,
    TaskOutcome,
    TaskOutcomeResult,
    WorkerRecord,
)

__all__ = ["MemoryStore"]

_RELEASED = ErrorInfo(type="keepgoing.Released", message="the worker shut down")


class MemoryStore(MemoryAuthMixin, MemoryObserveMixin, MemoryVolumesMixin, Store):
    """A :class:`Store` that keeps every run, task, timer and worker in process memory.

    It is task-safe and thread-safe, and it loses everything when the process ends.
    """

    url = "memory://"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = MemoryState()
        self._bell = LocalBell()
        self._catalog: dict[str, set[str]] = {}

    # -- lifecycle -------------------------------------------------------------
    async def open(self) -> None:
        """Nothing to connect to; idempotent."""

    async def close(self) -> None:
        """Nothing to release; idempotent. The state survives a reopen."""

    # -- runs ------------------------------------------------------------------
    async def start_run(self, request: StartRequest) -> RunRecord:
        """Create a running, runnable run with ``WorkflowStarted`` at seq 1.

        Raises:
            WorkflowAlreadyRunningError: ``workflow_id`` has a run that has not ended.
            StoreError: ``run_id`` is already taken.
        """
        with self._lock:
            run = self._state.create_run(request)
            self._notify()
            return run.record()

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run with ``run_id``, or None."""
        with self._lock:
            run = self._state.runs.get(run_id)
            return run.record() if run is not None else None

    async def find_run(self, workflow_id: str) -> RunRecord | None:
        """The newest run of ``workflow_id``, or None."""
        with self._lock:
            runs = self._state.runs_by_workflow.get(workflow_id, [])
            newest = max(runs, key=_newness, default=None)
            return newest.record() if newest is not None else None

    async def list_runs(
        self,
        *,
        workflow_name: str | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunRecord]:
        """Runs, newest first, filtered by workflow name and status."""
        with self._lock:
            runs = [
                run
                for run in self._state.runs.values()
                if (workflow_name is None or run.workflow_name == workflow_name)
                and (status is None or run.status == status)
            ]
            runs.sort(key=_newness, reverse=True)
            start = max(0, offset)
            return [run.record() for run in runs[start : start + max(0, limit)]]

    async def read_history(self, run_id: str, after_seq: int = 0) -> list[Event]:
        """Events of ``run_id`` with ``seq > after_seq``, in seq order."""
        with self._lock:
            run = self._state.runs.get(run_id)
            if run is None:
                return []
            # seq n sits at index n - 1.
            return copy.deepcopy(run.history[max(0, after_seq) :])

    # -- activations -------------------------------------------------------------
    async def claim_activations(
        self,
        *,
        worker_id: str,
        queues: Sequence[str],
        workflow_names: Sequence[str],
        limit: int,
        lease_ttl: float,
        now: float,
    ) -> list[ActivationClaim]:
        """Lease up to ``limit`` runnable runs, oldest runnable first."""
        queue_set, name_set = set(queues), set(workflow_names)
        with self._lock:
            s = self._state
            eligible = [
                run
                for run in s.runnable_runs.values()
                if run.status == "running"
                and run.task_queue in queue_set
                and run.workflow_name in name_set
                and not run.lease_held(now)
            ]
            eligible.sort(key=lambda run: run.runnable_since)
            claims: list[ActivationClaim] = []
            for run in eligible[: max(0, limit)]:
                run.fence += 1
                s.set_run_lease(run, worker_id, now + lease_ttl)
                claims.append(ActivationClaim(run.record(), run.fence, now + lease_ttl))
            return claims

    async def commit_activation(self, commit: ActivationCommit) -> CommitResult:
        """Apply an activation atomically; ``ok=False`` and nothing written on a stale fence.

        Raises:
            StoreError: a command is not a command event, or reuses a task or timer cmd.
        """
        with self._lock:
            s = self._state
            run = s.runs.get(commit.run_id)
            if run is None or run.fence != commit.fence or run.status != "running":
                return CommitResult(ok=False)
            s.check_commands(run, commit.commands)
            result = s.apply_activation(
                run,
                saw_upto=commit.saw_upto,
                time=commit.time,
                worker_id=commit.worker_id,
                commands=commit.commands,
                now=commit.now,
                eager_claim=commit.eager_claim,
                eager_limit=commit.eager_limit,
                lease_ttl=commit.lease_ttl,
                blocked_reason=commit.blocked_reason,
            )
            self._notify()
            return result

    async def release_activation(self, run_id: str, fence: int) -> None:
        """Drop the activation lease taken at ``fence``; the run stays runnable."""
        with self._lock:
            run = self._state.runs.get(run_id)
            if run is None or run.fence != fence or run.lease_owner is None:
                return
            self._state.set_run_lease(run, None, None)
            self._notify()

    # -- tasks ---------------------------------------------------------------------
    async def claim_tasks(
        self,
        *,
        worker_id: str,
        queues: Sequence[str],
        task_names: Sequence[str],
        limit: int,
        lease_ttl: float,
        now: float,
    ) -> list[TaskClaim]:
        """Lease up to ``limit`` due pending tasks, earliest ``available_at`` first."""
        queue_set, name_set = set(queues), set(task_names)
        with self._lock:
            s = self._state
            due = [
                task
                for task in s.active_tasks.values()
                if task.status == "pending"
                and task.available_at <= now
                and task.name in name_set
                and s.runs[task.run_id].task_queue in queue_set
            ]
            due.sort(key=lambda task: (task.available_at, task.order))
            return [s.claim_task(task, worker_id, lease_ttl, now) for task in due[: max(0, limit)]]

    async def complete_task(
        self, outcome: TaskOutcome, fast: FastActivation | None = None
    ) -> TaskOutcomeResult:
        """Record how an attempt ended, fenced by ``outcome.fence``.

        Raises:
            StoreError: ``fast`` carries an invalid command (nothing is written).
        """
        with self._lock:
            s = self._state
            task = s.tasks.get((outcome.run_id, outcome.cmd))
            if task is None or task.status != "running" or task.fence != outcome.fence:
                return TaskOutcomeResult(accepted=False)
            if outcome.ok:
                result = self._complete_ok(task, outcome, fast)
            else:
                decision = s.fail_attempt(
                    task,
                    reason=outcome.reason,
                    error=outcome.error,
                    worker=outcome.worker_id,
                    started_at=outcome.started_at,
                    now=outcome.now,
                )
                result = TaskOutcomeResult(
                    accepted=True, final=decision.retry_at is None, retry_at=decision.retry_at
                )
            self._notify()
            return result

    def _complete_ok(
        self, task: TaskRow, outcome: TaskOutcome, fast: FastActivation | None
    ) -> TaskOutcomeResult:
        s = self._state
        run = s.runs[task.run_id]
        apply_fast = fast is not None and _fast_applies(run, fast, outcome.now)
        if fast is not None and apply_fast:
            s.check_commands(run, fast.commands)
        memory = self._commit_task_volumes(outcome)  # the last step that may refuse
        s.set_task_status(task, "completed")
        for event in memory:
            s.append(run, event, outcome.now)
        completed = TaskCompleted(
            cmd=task.cmd,
            result=outcome.result,
            attempt=task.attempt,
            worker=outcome.worker_id,
            started_at=outcome.started_at,
        )
        seq = s.append(run, completed, outcome.now).seq
        if fast is None or not apply_fast:
            return TaskOutcomeResult(accepted=True, final=True)
        # The fast activation is a claim and a commit in one: it takes a new fence,
        # so any activation claimed at the old fence can no longer commit.
        run.fence += 1
        activation = s.apply_activation(
            run,
            saw_upto=seq,
            time=fast.time,
            worker_id=outcome.worker_id,
            commands=fast.commands,
            now=outcome.now,
            eager_claim=fast.eager_claim,
            eager_limit=fast.eager_limit,
            lease_ttl=fast.lease_ttl,
        )
        return TaskOutcomeResult(accepted=True, final=True, activation=activation)

    async def fire_timer(
        self, run_id: str, cmd: int, *, worker_id: str, now: float, fast: FastActivation
    ) -> CommitResult | None:
        """Fire one pending timer, with the next activation when the run is unchanged."""
        with self._lock:
            s = self._state
            run = s.runs.get(run_id)
            timer = s.pending_timers.get((run_id, cmd))
            if run is None or run.status != "running" or timer is None:
                return None
            applies = _fast_applies(run, fast, now)
            if applies:
                s.check_commands(run, fast.commands)
            del s.pending_timers[(run_id, cmd)]
            timer.status = "fired"
            seq = s.append(run, TimerFired(cmd=cmd), now).seq
            self._notify()
            if not applies:
                return None
            run.fence += 1  # a claim and a commit in one, as in complete_task
            return s.apply_activation(
                run,
                saw_upto=seq,
                time=fast.time,
                worker_id=worker_id,
                commands=fast.commands,
                now=now,
                eager_claim=fast.eager_claim,
                eager_limit=fast.eager_limit,
                lease_ttl=fast.lease_ttl,
            )

    async def release_tasks(self, worker_id: str, now: float) -> int:
        """Give back every attempt and activation lease ``worker_id`` holds."""
        with self._lock:
            s = self._state
            held = _leased_tasks(s, worker_id)
            for task in held:
                s.fail_attempt(
                    task,
                    reason="released",
                    error=_RELEASED,
                    worker=worker_id,
                    started_at=task.started_at,
                    now=now,
                )
            for run in list(s.leased_runs.values()):
                if run.lease_owner == worker_id:
                    s.set_run_lease(run, None, None)
            self._notify()
            return len(held)

    # -- leases and services -----------------------------------------------------------
    async def heartbeat(
        self,
        worker_id: str,
        *,
        lease_ttl: float,
        now: float,
        attempts: Collection[tuple[str, int]] | None = None,
        runs: Collection[str] | None = None,
    ) -> set[tuple[str, int]]:
        """Extend the leases ``worker_id`` holds (of ``attempts`` and ``runs``, when given);
        return the task attempts it still holds."""
        with self._lock:
            s = self._state
            held = _leased_tasks(s, worker_id)
            if attempts is not None:
                held = [task for task in held if task.key in attempts]
            for task in held:
                task.lease_expires_at = task.lease_cap(now, lease_ttl)
            for run in s.leased_runs.values():
                if run.lease_owner == worker_id and (runs is None or run.run_id in runs):
                    run.lease_expires_at = now + lease_ttl
            if worker_id in s.workers:
                order, worker = s.workers[worker_id]
                s.workers[worker_id] = (order, dataclasses.replace(worker, heartbeat_at=now))
            return {task.key for task in held}

    async def fire_due_timers(self, *, now: float, limit: int) -> int:
        """Fire up to ``limit`` due timers of running runs, earliest first."""
        with self._lock:
            s = self._state
            due = [
                timer
                for timer in s.pending_timers.values()
                if timer.fire_at <= now and s.runs[timer.run_id].status == "running"
            ]
            due.sort(key=lambda timer: (timer.fire_at, timer.order))
            for timer in due[: max(0, limit)]:
                del s.pending_timers[(timer.run_id, timer.cmd)]
                timer.status = "fired"
                s.append(s.runs[timer.run_id], TimerFired(cmd=timer.cmd), now)
            fired = min(len(due), max(0, limit))
            if fired:
                self._notify()
            return fired

    async def reap_expired_leases(self, *, now: float, limit: int) -> int:
        """Recover up to ``limit`` attempts whose lease expired before ``now``."""
        with self._lock:
            s = self._state
            expired = [
                task
                for task in s.active_tasks.values()
                if task.status == "running" and (task.lease_expires_at or 0.0) < now
            ]
            expired.sort(key=lambda task: (task.lease_expires_at or 0.0, task.order))
            expired = expired[: max(0, limit)]
            for task in expired:
                _reap_task(s, task, now)
            runs = [r for r in s.leased_runs.values() if (r.lease_expires_at or 0.0) < now]
            for run in runs:
                s.set_run_lease(run, None, None)
            if expired or runs:
                self._notify()
            return len(expired)

    async def next_wakeup(self) -> float | None:
        """The earliest instant at which a timer, a task or a lease becomes due."""
        with self._lock:
            s = self._state
            times = [
                timer.fire_at
                for timer in s.pending_timers.values()
                if s.runs[timer.run_id].status == "running"
            ]
            for task in s.active_tasks.values():
                due = task.available_at if task.status == "pending" else task.lease_expires_at
                if due is not None:
                    times.append(due)
            times.extend(
                run.lease_expires_at
                for run in s.leased_runs.values()
                if run.lease_expires_at is not None
            )
            return min(times, default=None)

    # -- messages, events, cancellation, lineage, audit -----------------------------
    async def send_message(self, request: MessageRequest) -> str:
        """Append ``MessageReceived`` to the open run of ``request.workflow_id``."""
        with self._lock:
            message_id = messaging.send_message(self._state, request)
            self._notify()
            return message_id

    async def publish_event(self, request: EventRequest) -> EventPublished:
        """Store an external event and deliver it to the runs waiting for it."""
        with self._lock:
            published = messaging.publish_event(self._state, request)
            self._notify()
            return published

    async def cancel_run(self, request: CancelRequest) -> RunRecord:
        """Ask the open run of ``workflow_id`` to stop."""
        with self._lock:
            run = messaging.cancel_run(self._state, request)
            self._notify()
            return run

    async def lineage(self, workflow_id: str) -> Lineage:
        """The newest run of ``workflow_id`` with its parent and children."""
        with self._lock:
            return messaging.lineage(self._state, workflow_id)

    async def append_audit(self, entry: AuditEntry) -> int:
        """Record ``entry``; returns its id."""
        with self._lock:
            return messaging.append_audit(self._state, entry)

    async def list_audit(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        action: str | None = None,
        workflow_id: str | None = None,
    ) -> list[AuditEntry]:
        """Audit entries, newest first."""
        with self._lock:
            return messaging.list_audit(self._state, limit, offset, action, workflow_id)

    # -- notification ------------------------------------------------------------------
    async def wait_for_change(self, timeout: float, key: object | None = None) -> None:
        """Return after a change made since this key's previous wait, or after ``timeout``.

        A key's first wait only sees changes made while it waits.
        """
        await self._bell.wait(timeout, key)

    def _notify(self) -> None:
        self._bell.ring()

    # -- workers -------------------------------------------------------------------------
    async def register_worker(self, worker: WorkerRecord) -> None:
        """Insert or replace the worker's registry row."""
        with self._lock:
            workers = self._state.workers
            order = workers[worker.worker_id][0] if worker.worker_id in workers else 0
            workers[worker.worker_id] = (order or self._state.tick(), copy.deepcopy(worker))

    async def deregister_worker(self, worker_id: str) -> None:
        """Remove the worker's registry row, if any."""
        with self._lock:
            self._state.workers.pop(worker_id, None)

    async def list_workers(self) -> list[WorkerRecord]:
        """Every registered worker, oldest ``started_at`` first."""
        with self._lock:
            rows = sorted(self._state.workers.values(), key=lambda r: (r[1].started_at, r[0]))
            return [copy.deepcopy(worker) for _, worker in rows]

    async def record_workflows(
        self, names: Sequence[str], queues: Sequence[str], now: float
    ) -> None:
        """Remember that ``names`` are served on ``queues``."""
        with self._lock:
            for name in names:
                self._catalog.setdefault(name, set()).update(queues)

    async def known_workflows(self) -> dict[str, list[str]]:
        """Every workflow name any worker has served, with its queues."""
        with self._lock:
            return {name: sorted(queues) for name, queues in sorted(self._catalog.items())}


def _newness(run: RunRow) -> tuple[float, int]:
    return (run.created_at, run.order)


def _fast_applies(run: RunRow, fast: FastActivation, now: float) -> bool:
    return (
        run.status == "running"
        and run.fence == fast.run_fence
        and run.last_input_seq == fast.last_input_seq
        and not run.lease_held(now)
    )


def _leased_tasks(s: MemoryState, worker_id: str) -> list[TaskRow]:
    held = [
        task
        for task in s.active_tasks.values()
        if task.status == "running" and task.lease_owner == worker_id
    ]
    return sorted(held, key=lambda task: task.order)


def _reap_task(s: MemoryState, task: TaskRow, now: float) -> None:
    owner = task.lease_owner or ""
    if task.deadline is not None and now > task.deadline:
        reason = "timeout"
        error = ErrorInfo(
            type="TimeoutError",
            message=f"attempt {task.attempt} exceeded its timeout of {task.timeout:g}s",
        )
    else:
        reason = "worker_lost"
        error = ErrorInfo(
            type="keepgoing.WorkerLost", message=f"worker {owner} stopped renewing its lease"
        )
    s.fail_attempt(
        task, reason=reason, error=error, worker=owner, started_at=task.started_at, now=now
    )
