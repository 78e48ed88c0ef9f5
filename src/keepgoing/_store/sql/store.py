"""The body both SQL stores share: each :class:`Store` method is one query, read or write.

Each method is a plain function over a connection (``runs``, ``history``,
``tasks``, ``leases``, ``workers``, ``worker_stops``, ``messaging``, ``versions``,
``auth``, ``observe``, ``volumes``), handed to :meth:`SqlStore._read` or
:meth:`SqlStore._write`. A dialect (:class:`~keepgoing._store.sqlite.SqliteStore`,
:class:`~keepgoing._store.postgres.PostgresStore`) supplies only the transport
behind those two, how it opens and closes, how other processes are woken
(:meth:`wait_for_change`), and how a worker's liveness is held and probed.
"""

from __future__ import annotations

import abc
import dataclasses
import os
import socket
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from keepgoing._history.events import (
    Event,
    StatusSet,
    TaskScheduled,
    WorkflowCancelled,
    WorkflowCompleted,
    WorkflowContinuedAsNew,
    WorkflowFailed,
)
from keepgoing._procinfo import in_tree
from keepgoing._run_flow import RunFlow
from keepgoing._runtime.context import current_task_context
from keepgoing._store import records as rec
from keepgoing._store import worker_stops as stop_rules
from keepgoing._store.protocol import Store
from keepgoing._store.refused import name_refused
from keepgoing._store.sql import (
    admission,
    commands,
    history,
    leases,
    messaging,
    reviews,
    singletons,
    tasks,
    worker_stops,
    workers,
)
from keepgoing._store.sql import runs as ops
from keepgoing._store.sql import versions as versions_sql
from keepgoing._store.sql.auth import SqlAuthMixin
from keepgoing._store.sql.gateway import SqlGatewayMixin
from keepgoing._store.sql.groups import SqlGroupsMixin
from keepgoing._store.sql.inspect import SqlInspectMixin, save_attempt_log
from keepgoing._store.sql.limits import SqlLimitsMixin
from keepgoing._store.sql.observe import SqlObserveMixin
from keepgoing._store.sql.recovery import SqlRecoveryMixin
from keepgoing._store.sql.retention import SqlRetentionMixin
from keepgoing._store.sql.revisions import SqlRevisionsMixin
from keepgoing._store.sql.schedules import SqlSchedulesMixin
from keepgoing._store.sql.volume_pins import SqlVolumePinsMixin
from keepgoing._store.sql.volume_retention import SqlVolumeRetentionMixin
from keepgoing._store.sql.volumes import SqlVolumesMixin

__all__ = ["SqlStore"]


@name_refused
class SqlStore(
    SqlAuthMixin,
    SqlObserveMixin,
    SqlInspectMixin,
    SqlVolumesMixin,
    SqlVolumeRetentionMixin,
    SqlVolumePinsMixin,
    SqlGatewayMixin,
    SqlGroupsMixin,
    SqlRevisionsMixin,
    SqlSchedulesMixin,
    SqlRecoveryMixin,
    SqlRetentionMixin,
    SqlLimitsMixin,
    Store,
):
    """A :class:`Store` over SQL; a dialect supplies the transport and the liveness probe."""

    # -- what a dialect supplies -------------------------------------------------------
    @abc.abstractmethod
    async def _read(self, op: Any) -> Any:
        """Run ``op(conn)`` in a read transaction; its return value."""

    @abc.abstractmethod
    async def _write(self, op: Any, notify: Any = False) -> Any:
        """Run ``op(conn)`` in a write transaction; wake other processes when
        ``notify`` is true or, if callable, true of the result."""

    async def _write_lease(self, op: Any, notify: Any = False) -> Any:
        """A write that only takes, extends or drops leases (no step, start or message):
        a dialect may commit it without waiting for the disk, as long as it survives
        a crash of any process. By default, :meth:`_write`."""
        return await self._write(op, notify)

    @abc.abstractmethod
    def _refresh_liveness(self) -> None:
        """Keep this process's liveness tokens fresh (called on each heartbeat)."""

    @abc.abstractmethod
    def _probe_liveness(self, conn: Any, owners: list[tuple[str, str]]) -> dict[str, bool | None]:
        """For each (owner, token): alive, dead, or None when the token cannot tell."""

    # -- runs --------------------------------------------------------------------
    async def start_run(self, request: rec.StartRequest) -> rec.RunRecord:
        run: rec.RunRecord = await self._write(lambda c: singletons.start_run(c, request), True)
        return run

    async def start_runs(
        self, requests: Sequence[rec.StartRequest]
    ) -> list[tuple[rec.RunRecord, bool]]:
        batch = list(requests)
        runs: list[tuple[rec.RunRecord, bool]] = await self._write(
            lambda c: ops.start_runs(c, batch, singletons.start_run),
            lambda done: any(new for _, new in done),
        )
        return runs

    async def get_run(self, run_id: str) -> rec.RunRecord | None:
        run: rec.RunRecord | None = await self._read(lambda c: ops.get_run(c, run_id))
        return run

    async def find_run(self, workflow_id: str) -> rec.RunRecord | None:
        run: rec.RunRecord | None = await self._read(lambda c: ops.find_run(c, workflow_id))
        return run

    async def list_runs(
        self,
        *,
        workflow_name: str | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[rec.RunRecord]:
        runs: list[rec.RunRecord] = await self._read(
            lambda c: ops.list_runs(c, workflow_name, status, limit, offset)
        )
        return runs

    async def read_history(self, run_id: str, after_seq: int = 0) -> list[Event]:
        events: list[Event] = await self._read(lambda c: history.read_history(c, run_id, after_seq))
        return events

    # -- activations -----------------------------------------------------------------
    async def claim_activations(
        self,
        *,
        worker_id: str,
        queues: Sequence[str],
        workflow_names: Sequence[str],
        limit: int,
        lease_ttl: float,
        now: float,
        revision: int | None = None,
    ) -> list[rec.ActivationClaim]:
        claims: list[rec.ActivationClaim] = await self._write_lease(
            lambda c: leases.claim_activations(
                c, worker_id, list(queues), list(workflow_names), limit, lease_ttl, now, revision
            )
        )
        return claims

    async def commit_activation(self, commit: rec.ActivationCommit) -> rec.CommitResult:
        result: rec.CommitResult = await self._write(
            lambda c: commands.commit_activation(c, commit),
            lambda r: r.ok and (commit.blocked_reason is not None or _wakes(commit.commands, r)),
        )
        return result

    async def claim_blocked(
        self,
        *,
        worker_id: str,
        queues: Sequence[str],
        versions: Mapping[str, str],
        limit: int,
        lease_ttl: float,
        now: float,
        revision: int | None = None,
    ) -> list[rec.ActivationClaim]:
        claims: list[rec.ActivationClaim] = await self._write(
            lambda c: versions_sql.claim_blocked(
                c, worker_id, list(queues), dict(versions), limit, lease_ttl, now, revision
            )
        )
        return claims

    async def unblock_run(self, workflow_id: str, run_id: str | None, now: float) -> rec.RunRecord:
        run: rec.RunRecord = await self._write(
            lambda c: versions_sql.unblock_run(c, workflow_id, run_id, now), True
        )
        return run

    async def release_activation(self, run_id: str, fence: int) -> None:
        await self._write_lease(lambda c: leases.release_activation(c, run_id, fence), True)

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
        revision: int | None = None,
    ) -> list[rec.TaskClaim]:
        claims: list[rec.TaskClaim] = await self._write(
            lambda c: leases.claim_tasks(
                c, worker_id, list(queues), list(task_names), limit, lease_ttl, now, revision
            )
        )
        return claims

    async def complete_task(
        self, outcome: rec.TaskOutcome, fast: rec.FastActivation | None = None
    ) -> rec.TaskOutcomeResult:
        result: rec.TaskOutcomeResult = await self._write(
            lambda c: _complete_with_log(c, outcome, fast),
            lambda r: (
                r.accepted
                and (
                    r.freed_slot  # a slot of a concurrency limit frees: wake the claims
                    or r.activation is None
                    or fast is None
                    or _wakes(fast.commands, r.activation)
                )
            ),
        )
        return result

    async def fire_timer(
        self, run_id: str, cmd: int, *, worker_id: str, now: float, fast: rec.FastActivation
    ) -> rec.CommitResult | None:
        result: rec.CommitResult | None = await self._write(
            lambda c: tasks.fire_timer(c, run_id, cmd, worker_id, now, fast),
            lambda r: r is None or _wakes(fast.commands, r),
        )
        return result

    async def release_tasks(self, worker_id: str, now: float) -> int:
        count: int = await self._write(lambda c: leases.release_tasks(c, worker_id, now), True)
        return count

    # -- leases and services ----------------------------------------------------------
    async def heartbeat(
        self,
        worker_id: str,
        *,
        lease_ttl: float,
        now: float,
        attempts: Collection[tuple[str, int]] | None = None,
        runs: Collection[str] | None = None,
        known_through: float | None = None,
    ) -> set[tuple[str, int]]:
        self._refresh_liveness()
        beat: leases.Beat = await self._write_lease(
            lambda c: leases.heartbeat(c, worker_id, lease_ttl, now, attempts, runs, known_through)
        )
        if beat.unknown and attempts is not None and known_through is not None:
            # A hand-back appends history: a write of its own, committed durably (the
            # heartbeat's commit, lease writes only, may skip the fsync).
            known, before = set(attempts), known_through
            await self._write(
                lambda c: leases.hand_back_unknown(c, worker_id, known, before, now),
                lambda released: released > 0,  # handed-back attempts are due again
            )
        return beat.held

    async def fire_due_timers(self, *, now: float, limit: int) -> int:
        count: int = await self._write(
            lambda c: leases.fire_due_timers(c, now, limit), lambda n: n > 0
        )
        return count

    async def reap_expired_leases(self, *, now: float, limit: int) -> int:
        count: int = await self._write(
            lambda c: leases.reap_expired_leases(c, now, limit, self._probe_liveness),
            lambda n: n > 0,
        )
        return count

    async def next_wakeup(self) -> float | None:
        when: float | None = await self._read(leases.next_wakeup)
        return when

    # -- messages, events, cancellation, lineage, audit -----------------------------
    async def send_message(self, request: rec.MessageRequest) -> str:
        message_id: str = await self._write(lambda c: messaging.send_message(c, request), True)
        return message_id

    async def decide_review(self, request: rec.ReviewRequest) -> str:
        message_id: str = await self._write(lambda c: reviews.decide_review(c, request), True)
        return message_id

    async def publish_event(self, request: rec.EventRequest) -> rec.EventPublished:
        published: rec.EventPublished = await self._write(
            lambda c: messaging.publish_event(c, request), lambda p: bool(p.matched_runs)
        )
        return published

    async def cancel_run(self, request: rec.CancelRequest) -> rec.RunRecord:
        run: rec.RunRecord = await self._write(lambda c: commands.cancel_run(c, request), True)
        return run

    async def lineage(self, workflow_id: str) -> rec.Lineage:
        found: rec.Lineage = await self._read(lambda c: messaging.lineage(c, workflow_id))
        return found

    async def append_audit(self, entry: rec.AuditEntry) -> int:
        entry_id: int = await self._write(lambda c: messaging.append_audit(c, entry))
        return entry_id

    async def list_audit(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        action: str | None = None,
        workflow_id: str | None = None,
    ) -> list[rec.AuditEntry]:
        entries: list[rec.AuditEntry] = await self._read(
            lambda c: messaging.list_audit(c, limit, offset, action, workflow_id)
        )
        return entries

    # -- workers ---------------------------------------------------------------------
    async def register_worker(self, worker: rec.WorkerRecord) -> None:
        await self._write(lambda c: workers.register_worker(c, worker))

    async def deregister_worker(self, worker_id: str) -> None:
        await self._write(lambda c: workers.deregister_worker(c, worker_id))

    async def record_worker_stop(self, stop: rec.WorkerStop, *, now: float) -> int:
        stop = await self._traced(stop)
        stop_id: int = await self._write(lambda c: worker_stops.record_stop(c, stop, now))
        return stop_id

    async def _traced(self, stop: rec.WorkerStop) -> rec.WorkerStop:
        """``stop`` traced to the task that asked for it, if it is the stopped worker's
        own doing (``_store/worker_stops.py``): from inside one of its attempts, or from its
        process or a descendant of it on this machine."""
        if stop.cause in stop_rules.BY_TASK:
            return stop
        ctx = current_task_context()
        attempt = (ctx.worker_id, ctx.run_id, ctx.cmd) if ctx is not None else None
        from_worker = False
        if attempt is None or attempt[0] != stop.worker_id:
            workers = await self.list_workers()
            target = next((w for w in workers if w.worker_id == stop.worker_id), None)
            if target is not None and target.host == socket.gethostname():
                identity = target.info.get("process")
                ticks = identity.get("start_ticks") if isinstance(identity, dict) else None
                origin = stop.origin_pid or os.getpid()
                from_worker = in_tree(origin, target.pid, ticks if isinstance(ticks, int) else None)
        found = stop_rules.traced(
            stop.worker_id, stop.cause, stop.detail, attempt=attempt, from_worker=from_worker
        )
        if found is None:
            return stop
        return dataclasses.replace(
            stop,
            cause=found.cause,
            detail=found.detail,
            blame_run_id=found.blame_run_id or stop.blame_run_id,
            blame_cmd=found.blame_cmd if found.blame_run_id else stop.blame_cmd,
        )

    async def settle_worker_stop(self, stop_id: int, *, signalled: bool) -> None:
        # Wakes the services: a sweep may have left the worker's attempts for this.
        await self._write(lambda c: worker_stops.settle_stop(c, stop_id, signalled), True)

    async def list_workers(self) -> list[rec.WorkerRecord]:
        found: list[rec.WorkerRecord] = await self._read(workers.list_workers)
        return found

    async def mark_lost_workers(self, *, now: float) -> int:
        sweep: workers.LostSweep = await self._read(
            lambda c: workers.find_lost(c, now, self._probe_liveness)
        )
        if not sweep.lost and not sweep.forget:
            return 0  # the common pass: one read, no write
        marked: int = await self._write(lambda c: workers.mark_lost(c, sweep, now))
        return marked

    async def record_workflows(
        self, names: Sequence[str], queues: Sequence[str], now: float
    ) -> None:
        await self._write(lambda c: workers.record_workflows(c, list(names), list(queues), now))

    async def record_flows(self, flows: Mapping[str, RunFlow | None], now: float) -> None:
        if flows:
            await self._write(lambda c: admission.record_flows(c, dict(flows), now))

    async def run_flows(self) -> dict[str, RunFlow]:
        flows: dict[str, RunFlow] = await self._read(admission.recorded_flows)
        return flows

    async def known_workflows(self) -> dict[str, list[str]]:
        known: dict[str, list[str]] = await self._read(workers.known_workflows)
        return known


def _complete_with_log(
    conn: Any, outcome: rec.TaskOutcome, fast: rec.FastActivation | None
) -> rec.TaskOutcomeResult:
    """Record the outcome and, when the store took it, the attempt's log with it."""
    result = tasks.complete_task(conn, outcome, fast)
    if result.accepted and outcome.logs is not None:
        save_attempt_log(conn, outcome.logs)
    return result


_ENDS = (WorkflowCompleted, WorkflowFailed, WorkflowCancelled, WorkflowContinuedAsNew)
_WAKING = (*_ENDS, StatusSet)


def _wakes(issued: Sequence[Event], result: rec.CommitResult) -> bool:
    """Whether a commit leaves work for other processes, ends the run (a client
    waiting for its result is woken by it) or publishes a status (a client may wait
    for it: ``Client.get_status``)."""
    scheduled = 0
    for command in issued:  # one pass, no generator frames: this runs every step
        if isinstance(command, _WAKING):
            return True
        scheduled += isinstance(command, TaskScheduled)
    return scheduled > len(result.eager)
