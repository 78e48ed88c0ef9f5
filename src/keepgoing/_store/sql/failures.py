"""A failed attempt: recorded, and its task's fate decided (retry, give up, review).

Called with the attempt held: by a completion that reports a failure
(``tasks``) and by the leases taken back from a worker (``leases``: a release,
a hand-back, the reaper). The rules of the decision are in ``_store/transitions.py``.
"""

from __future__ import annotations

from typing import NamedTuple

from keepgoing._history import events as ev
from keepgoing._store import records as rec
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.gateway import mark_attempt_calls
from keepgoing._store.sql.history import append
from keepgoing._store.sql.rows import columns, one
from keepgoing._store.transitions import UNCERTAIN, decide_failure
from keepgoing._store.worker_stops import Stamp

__all__ = ["fail_attempt"]

_WORKER_LOST = "keepgoing.WorkerLost"


class _Failing(NamedTuple):
    """What deciding a failed attempt reads of its task."""

    name: str
    attempt: int
    failures: int
    worker_losses: int
    retries: int
    max_worker_losses: int
    retry_delay: float
    started_at: float | None


def fail_attempt(
    conn: Connection,
    run_id: str,
    cmd: int,
    reason: str,
    error: ev.ErrorInfo,
    worker: str,
    now: float,
    stamp: Stamp | None = None,
) -> rec.TaskOutcomeResult:
    """Record a failed attempt and decide its task's fate; ``stamp`` is why its
    worker stopped, for an attempt lost or released with it."""
    t = one(
        conn,
        _Failing,
        f"SELECT {columns(_Failing)} FROM tasks WHERE run_id = ? AND cmd = ?",
        (run_id, cmd),
    )
    assert t is not None  # the caller holds the attempt
    name, attempt = t.name, t.attempt
    # Its model calls are kept (they were paid for) but never count as the step's.
    lost = reason in ("worker_lost", "released")
    mark_attempt_calls(conn, run_id, cmd, attempt, "lost" if lost else "failed")
    decision = decide_failure(
        reason=reason,
        failures=t.failures,
        worker_losses=t.worker_losses,
        retries=t.retries,
        max_worker_losses=t.max_worker_losses,
        retry_delay=t.retry_delay,
        now=now,
        cause=stamp.cause if stamp is not None else None,
    )
    failed = ev.TaskAttemptFailed(
        cmd=cmd,
        name=name,
        attempt=attempt,
        error=error,
        reason=reason,
        worker=worker,
        started_at=t.started_at,
        retry_at=decision.retry_at,
        cause=stamp.cause if stamp is not None else None,
        actor=stamp.actor if stamp is not None else None,
        via=stamp.via if stamp is not None else None,
    )
    if decision.retry_at is not None:
        conn.execute(
            "UPDATE tasks SET status = 'pending', available_at = ?, failures = ?, "
            "worker_losses = ?, lease_owner = NULL, lease_expires_at = NULL "
            "WHERE run_id = ? AND cmd = ?",
            (decision.retry_at, decision.failures, decision.worker_losses, run_id, cmd),
        )
        append(conn, run_id, [failed], now)
        return rec.TaskOutcomeResult(accepted=True, final=False, retry_at=decision.retry_at)
    # An uncertain outcome is final too, but kept apart: it is the review queue.
    conn.execute(
        "UPDATE tasks SET status = ?, failures = ?, worker_losses = ?, "
        "lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ? AND cmd = ?",
        (
            "uncertain" if reason == UNCERTAIN else "failed",
            decision.failures,
            decision.worker_losses,
            run_id,
            cmd,
        ),
    )
    final_error = error
    if decision.final_message is not None:
        final_error = ev.ErrorInfo(type=_WORKER_LOST, message=decision.final_message)
    gave_up = ev.TaskFailed(cmd=cmd, name=name, error=final_error, attempts=attempt, reason=reason)
    append(conn, run_id, [failed, gave_up], now)
    return rec.TaskOutcomeResult(accepted=True, final=True)
