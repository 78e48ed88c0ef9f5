"""Messages, external events, child runs, cancellation and the audit log on SQLite.

Functions run inside the caller's write transaction (see ``runs``). The
messaging commands a workflow issues, and what a run's ending settles, are
in ``commands``.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from keepgoing._history import events as ev
from keepgoing._payload import dumps, encode, loads
from keepgoing._store import records as rec
from keepgoing._store.sql import history
from keepgoing._store.sql import runs as ops
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.dialect import lock_key
from keepgoing._store.sql.rows import columns, every, one, value
from keepgoing._store.transitions import error_of
from keepgoing.errors import (
    InvalidRequestError,
    RunNotFoundError,
    WorkflowAlreadyRunningError,
    WorkflowNotRunningError,
)


class _Event(NamedTuple):
    """An event as a wait receives it."""

    event_id: str
    payload: str
    published_at: float


class _Ended(NamedTuple):
    """What a parent is told of its child's ending (``parent_status``: whether to tell)."""

    parent_run_id: str
    parent_cmd: int
    workflow_id: str
    status: str
    result: str | None
    error: str | None
    parent_status: str


class _Wait(NamedTuple):
    """The oldest wait of a run that an event matches."""

    run_id: str
    cmd: int


class _Audit(NamedTuple):
    id: int
    at: float
    actor_kind: str
    actor_id: str
    action: str
    workflow_id: str | None
    run_id: str | None
    detail: str


def open_run(conn: Connection, workflow_id: str, run_id: str | None) -> rec.RunRecord:
    """The run a message or cancel addresses; raises if it is missing or has ended."""
    run = ops.get_run(conn, run_id) if run_id else ops.find_run(conn, workflow_id)
    if run is None or run.workflow_id != workflow_id:
        which = f"run {run_id!r} of workflow id" if run_id else "run with workflow id"
        raise RunNotFoundError(f"no {which} {workflow_id!r}")
    # Lock the run before writing to it; it may have ended since the read above.
    status = value(conn, "SELECT status FROM runs WHERE run_id = ? /*FOR UPDATE*/", (run.run_id,))
    if status != run.status:
        run = ops.get_run(conn, run.run_id)
        assert run is not None
    if run.status not in rec.OPEN:
        raise WorkflowNotRunningError(
            f"workflow {workflow_id!r} is not running (its run {run.run_id} is {run.status})"
        )
    return run


# -- commands ---------------------------------------------------------------------------
def send_from_workflow(
    conn: Connection, run_id: str, workflow_id: str, sent: ev.MessageSent, now: float
) -> None:
    request = rec.MessageRequest(
        workflow_id=sent.workflow_id,
        name=sent.name,
        payload=sent.payload,
        sender_kind="workflow",
        sender_id=workflow_id,
        now=now,
    )
    try:
        message_id = send_message(conn, request)
    except (RunNotFoundError, WorkflowNotRunningError, InvalidRequestError) as exc:
        history.append(conn, run_id, [ev.MessageDelivered(cmd=sent.cmd, error=error_of(exc))], now)
        return
    history.append(conn, run_id, [ev.MessageDelivered(cmd=sent.cmd, message_id=message_id)], now)


def start_child(conn: Connection, run: ops.CommandRun, child: ev.ChildStarted, now: float) -> None:
    run_id, workflow_id, queue = run.run_id, run.workflow_id, run.task_queue
    child_queue = child.task_queue or queue
    request = rec.StartRequest(
        run_id=uuid.uuid4().hex,
        workflow_id=child.workflow_id,
        workflow_name=child.workflow_name,
        input=child.input,
        task_queue=child_queue,
        code_version="",
        now=now,
        parent_workflow_id=workflow_id,
        parent_run_id=run_id,
        parent_cmd=child.cmd,
        # On its parent's queue (its group), a child runs on its parent's revision;
        # another group's revisions are numbered apart: there, that group's current one.
        revision_of=run_id if child_queue == queue else None,
    )
    try:
        started = ops.start_run(conn, request)
    except (WorkflowAlreadyRunningError, InvalidRequestError) as exc:  # a limit's key too
        outcome = ev.ChildRunStarted(
            cmd=child.cmd, workflow_id=child.workflow_id, error=error_of(exc)
        )
    else:
        outcome = ev.ChildRunStarted(
            cmd=child.cmd, workflow_id=child.workflow_id, run_id=started.run_id
        )
    history.append(conn, run_id, [outcome], now)


def start_event_wait(conn: Connection, run_id: str, wait: ev.EventWaitStarted, now: float) -> None:
    # A wait and a publish on the same key take turns, so they always meet.
    lock_key(conn, "event", wait.event_type, wait.correlation_id)
    conn.execute(
        "INSERT INTO event_waits (run_id, cmd, event_type, correlation_id, deadline, status) "
        "VALUES (?, ?, ?, ?, ?, 'waiting')",
        (run_id, wait.cmd, wait.event_type, wait.correlation_id, wait.deadline),
    )
    # An event that arrived before the wait is matched now: the oldest this run
    # has not received yet.
    row = one(
        conn,
        _Event,
        f"SELECT {columns(_Event)} FROM events "
        "WHERE event_type = ? AND correlation_id = ? AND event_id NOT IN "
        "(SELECT event_id FROM event_waits WHERE run_id = ? AND event_id IS NOT NULL) "
        "ORDER BY position LIMIT 1",
        (wait.event_type, wait.correlation_id, run_id),
    )
    if row is not None:
        _deliver_event(conn, run_id, wait.cmd, wait.event_type, wait.correlation_id, row, now)


def _deliver_event(
    conn: Connection,
    run_id: str,
    cmd: int,
    event_type: str,
    correlation_id: str,
    event: _Event,
    now: float,
) -> bool:
    """Match the wait ``(run_id, cmd)`` with an event; False if it stopped waiting."""
    if not conn.execute(
        "UPDATE event_waits SET status = 'matched', event_id = ? WHERE run_id = ? AND cmd = ? "
        "AND status = 'waiting' RETURNING cmd",
        (event.event_id, run_id, cmd),
    ).fetchone():
        return False
    received = ev.EventReceived(
        cmd=cmd,
        event_id=event.event_id,
        event_type=event_type,
        correlation_id=correlation_id,
        payload=loads(event.payload),
        published_at=event.published_at,
    )
    history.append(conn, run_id, [received], now)
    return True


# -- run endings --------------------------------------------------------------------------
def tell_parent(conn: Connection, run_id: str, now: float) -> None:
    row = one(
        conn,
        _Ended,
        "SELECT r.parent_run_id, r.parent_cmd, r.workflow_id, r.status, r.result, r.error, "
        "p.status AS parent_status FROM runs r JOIN runs p ON p.run_id = r.parent_run_id "
        "WHERE r.run_id = ?",
        (run_id,),
    )
    if row is None or row.parent_status not in rec.OPEN:
        return
    completed = row.result is not None and row.status == "completed"
    ended = ev.ChildEnded(
        cmd=row.parent_cmd,
        workflow_id=row.workflow_id,
        run_id=run_id,
        status=row.status,
        result=loads(row.result) if completed and row.result is not None else None,
        error=ev.ErrorInfo(**loads(row.error)) if row.error else None,
    )
    history.append(conn, row.parent_run_id, [ended], now)


# -- requests from callers ------------------------------------------------------------------
def send_message(conn: Connection, req: rec.MessageRequest) -> str:
    """Send a message; a name kept for review decisions is refused (they go through
    ``reviews.decide_review``, which checks the round and records the decision)."""
    if req.name.startswith(ev.REVIEW_PREFIX):
        raise InvalidRequestError(
            f"message name {req.name[:60]!r} starts with {ev.REVIEW_PREFIX!r}, kept for "
            "review decisions: decide an uncertain operation with Client.review_operation, "
            "POST /api/v1/operations/{id}/review or keepgoing review"
        )
    return deliver_message(conn, req)


def deliver_message(conn: Connection, req: rec.MessageRequest) -> str:
    """Append ``req`` to its open run (and audit it unless a workflow sent it)."""
    run = open_run(conn, req.workflow_id, req.run_id)
    message_id = uuid.uuid4().hex
    received = ev.MessageReceived(
        message_id=message_id,
        name=req.name,
        payload=req.payload,
        sender_kind=req.sender_kind,
        sender_id=req.sender_id,
        sent_at=req.now,
    )
    history.append(conn, run.run_id, [received], req.now)
    if req.sender_kind != "workflow":
        detail = {"name": req.name, "message_id": message_id}
        entry = rec.AuditEntry(
            req.now,
            req.sender_kind,
            req.sender_id,
            "message.send",
            run.workflow_id,
            run.run_id,
            detail,
        )
        append_audit(conn, entry)
    return message_id


def publish_event(conn: Connection, req: rec.EventRequest) -> rec.EventPublished:
    lock_key(conn, "event", req.event_type, req.correlation_id)
    if conn.execute("SELECT 1 FROM events WHERE event_id = ?", (req.event_id,)).fetchone():
        return rec.EventPublished(event_id=req.event_id, duplicate=True)
    position = value(conn, "SELECT COALESCE(MAX(position), 0) + 1 FROM events")
    payload = encode(req.payload, f"the payload of event {req.event_type!r}")
    conn.execute(
        "INSERT INTO events (event_id, event_type, correlation_id, payload, published_at, "
        "actor_kind, actor_id, position) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            req.event_id,
            req.event_type,
            req.correlation_id,
            payload,
            req.now,
            req.actor_kind,
            req.actor_id,
            position,
        ),
    )
    waits = every(
        conn,
        _Wait,
        "SELECT w.run_id, MIN(w.cmd) AS cmd FROM event_waits w JOIN runs r ON r.run_id = w.run_id "
        "WHERE w.status = 'waiting' AND w.event_type = ? AND w.correlation_id = ? "
        "AND (w.deadline IS NULL OR w.deadline >= ?) "
        "AND r.status IN ('running', 'blocked') GROUP BY w.run_id ORDER BY w.run_id",
        (req.event_type, req.correlation_id, req.now),
    )
    event = _Event(req.event_id, payload, req.now)
    matched = []
    for wait in waits:
        # Runs in run_id order, each before its wait (lock order: sql/dialect.py).
        conn.execute("SELECT 1 FROM runs WHERE run_id = ? /*FOR UPDATE*/", (wait.run_id,))
        if _deliver_event(
            conn, wait.run_id, wait.cmd, req.event_type, req.correlation_id, event, req.now
        ):
            matched.append(wait.run_id)
    detail = {
        "event_type": req.event_type,
        "correlation_id": req.correlation_id,
        "event_id": req.event_id,
        "matched_runs": matched,
    }
    append_audit(
        conn, rec.AuditEntry(req.now, req.actor_kind, req.actor_id, "event.publish", detail=detail)
    )
    return rec.EventPublished(req.event_id, False, matched)


def lineage(conn: Connection, workflow_id: str) -> rec.Lineage:
    run = ops.find_run(conn, workflow_id)
    if run is None:
        raise RunNotFoundError(f"no run has workflow id {workflow_id!r}")
    parent = ops.get_run(conn, run.parent_run_id) if run.parent_run_id else None
    children = ops.run_records(
        conn,
        f"SELECT {ops.RUN_COLUMNS} FROM runs WHERE parent_run_id IN "
        "(SELECT run_id FROM runs WHERE workflow_id = ?) ORDER BY created_at, rowid",
        (workflow_id,),
    )
    return rec.Lineage(run=run, parent=parent, children=children)


# -- audit ---------------------------------------------------------------------------------
def append_audit(conn: Connection, entry: rec.AuditEntry) -> int:
    cursor = conn.execute(
        "INSERT INTO audit_log (at, actor_kind, actor_id, action, workflow_id, run_id, detail) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            entry.at,
            entry.actor_kind,
            entry.actor_id,
            entry.action,
            entry.workflow_id,
            entry.run_id,
            dumps(entry.detail),
        ),
    )
    return int(cursor.lastrowid or 0)


def list_audit(
    conn: Connection,
    limit: int,
    offset: int,
    action: str | None,
    workflow_id: str | None,
) -> list[rec.AuditEntry]:
    where, params = [], []
    if action is not None:
        where.append("action = ?")
        params.append(action)
    if workflow_id is not None:
        where.append("workflow_id = ?")
        params.append(workflow_id)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = every(
        conn,
        _Audit,
        f"SELECT {columns(_Audit)} FROM audit_log {clause} ORDER BY id DESC LIMIT ? OFFSET ?",
        (*params, limit, offset),
    )
    return [
        rec.AuditEntry(
            at=r.at,
            actor_kind=r.actor_kind,
            actor_id=r.actor_id,
            action=r.action,
            workflow_id=r.workflow_id,
            run_id=r.run_id,
            detail=loads(r.detail),
            id=r.id,
        )
        for r in rows
    ]


__all__ = [
    "append_audit",
    "lineage",
    "list_audit",
    "open_run",
    "publish_event",
    "send_from_workflow",
    "send_message",
]
