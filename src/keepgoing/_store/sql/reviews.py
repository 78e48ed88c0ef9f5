"""Review decisions (``reviews``): one conditional write per uncertain round.

A decision is accepted in the transaction that sends its message: the run's row
is locked first, then the round must still be uncertain (its task row), its run
open, and the round neither decided nor abandoned by the workflow (the
``reviews`` row, whose key makes it happen once). The message, the ``reviews``
row and the ``operation.review`` audit entry commit together or not at all.
The commit that records a workflow's ``ReviewAbandoned`` marks the round, and
decisions on it are refused from then on.
"""

from __future__ import annotations

from typing import NamedTuple

from keepgoing._history import events as ev
from keepgoing._store import records as rec
from keepgoing._store.sql import messaging
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import one
from keepgoing.errors import OperationNotUncertainError, RunNotFoundError, WorkflowNotRunningError

__all__ = ["abandon_review", "decide_review"]


class _Round(NamedTuple):
    status: str
    operation_id: str | None


class _Review(NamedTuple):
    decision: str | None
    actor_kind: str
    actor_id: str
    abandoned_at: float | None


def decide_review(conn: Connection, req: rec.ReviewRequest) -> str:
    """Send ``req``'s decision if round ``req.cmd`` waits for one; the message id.

    Raises:
        OperationNotUncertainError: the round is not uncertain, its run ended, it was
            decided already, or the workflow stopped waiting for a decision.
        RunNotFoundError: no such run.
    """
    op = req.operation_id
    try:
        run = messaging.open_run(conn, req.workflow_id, req.run_id)  # locks the run's row
    except WorkflowNotRunningError as exc:
        raise OperationNotUncertainError(
            f"operation {op!r}: {exc}, not waiting for review"
        ) from None
    if run.run_id != req.run_id:
        raise RunNotFoundError(f"no run {req.run_id!r} of workflow id {req.workflow_id!r}")
    found = one(
        conn,
        _Round,
        "SELECT status, operation_id FROM tasks WHERE run_id = ? AND cmd = ?",
        (req.run_id, req.cmd),
    )
    if found is None or (found.operation_id or f"op-{req.run_id}-{req.cmd}") != op:
        raise OperationNotUncertainError(f"operation {op!r} has no round at step {req.cmd}")
    if found.status != "uncertain":
        raise OperationNotUncertainError(
            f"operation {op!r} is not uncertain (step {req.cmd} is {found.status}), "
            "not waiting for review"
        )
    review = one(
        conn,
        _Review,
        "SELECT decision, actor_kind, actor_id, abandoned_at FROM reviews "
        "WHERE run_id = ? AND cmd = ?",
        (req.run_id, req.cmd),
    )
    if review is not None and review.abandoned_at is not None:
        raise OperationNotUncertainError(
            f"operation {op!r}: the workflow stopped waiting for a review of step {req.cmd} "
            "(a timeout or a cancellation around it); a decision can no longer reach it"
        )
    if review is not None and review.decision is not None:
        raise OperationNotUncertainError(
            f"operation {op!r} was decided already ({review.decision} by "
            f"{review.actor_kind}:{review.actor_id}), not waiting for review"
        )
    message_id = messaging.deliver_message(
        conn,
        rec.MessageRequest(
            workflow_id=req.workflow_id,
            name=ev.REVIEW_PREFIX + op,
            payload=req.payload,
            sender_kind=req.actor_kind,
            sender_id=req.actor_id,
            now=req.now,
            run_id=req.run_id,
        ),
    )
    conn.execute(
        "INSERT INTO reviews (run_id, cmd, operation_id, decision, reason, actor_kind, "
        "actor_id, message_id, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            req.run_id,
            req.cmd,
            op,
            req.decision,
            req.reason,
            req.actor_kind,
            req.actor_id,
            message_id,
            req.now,
        ),
    )
    messaging.append_audit(
        conn,
        rec.AuditEntry(
            req.now,
            req.actor_kind,
            req.actor_id,
            "operation.review",
            req.workflow_id,
            req.run_id,
            {
                "operation_id": op,
                "decision": req.decision,
                "cmd": req.cmd,
                "reason": req.reason,
                "message_id": message_id,
            },
        ),
    )
    return message_id


def abandon_review(conn: Connection, run_id: str, marker: ev.ReviewAbandoned, now: float) -> None:
    """The workflow stopped waiting for a decision on round ``marker.cmd`` (the caller
    holds the run's row): refuse decisions on it from now on."""
    conn.execute(
        "INSERT INTO reviews (run_id, cmd, operation_id, abandoned_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (run_id, cmd) DO UPDATE SET abandoned_at = excluded.abandoned_at",
        (run_id, marker.cmd, marker.operation_id, now),
    )
