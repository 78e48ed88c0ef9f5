"""Messages, external events, child runs, cancellation and the audit log on SQLite.

Functions run inside the caller's write transaction (see ``_sqlite_ops``).
"""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any

from keepgoing._history import events as ev
from keepgoing._payload import dumps, loads
from keepgoing._store import _sqlite_ops as ops
from keepgoing._store import records as rec
from keepgoing._store._dialect import lock_key
from keepgoing._store.transitions import PARENT_ENDED, error_of
from keepgoing.errors import RunNotFoundError, WorkflowAlreadyRunningError, WorkflowNotRunningError


def open_run(conn: sqlite3.Connection, workflow_id: str, run_id: str | None) -> rec.RunRecord:
    """The run a message or cancel addresses; raises if it is missing or has ended."""
    run = ops.get_run(conn, run_id) if run_id else ops.find_run(conn, workflow_id)
    if run is None or run.workflow_id != workflow_id:
        which = f"run {run_id!r} of workflow id" if run_id else "run with workflow id"
        raise RunNotFoundError(f"no {which} {workflow_id!r}")
    # Lock the run before writing to it; it may have ended since the read above.
    status = conn.execute(
        "SELECT status FROM runs WHERE run_id = ? /*FOR UPDATE*/", (run.run_id,)
    ).fetchone()[0]
    if status != run.status:
        run = ops.get_run(conn, run.run_id)
        assert run is not None
    if run.status not in rec.OPEN:
        raise WorkflowNotRunningError(
            f"workflow {workflow_id!r} is not running (its run {run.run_id} is {run.status})"
        )
    return run


# -- commands ---------------------------------------------------------------------------
def apply_command(
    conn: sqlite3.Connection, run: tuple[str, str, str], command: ev.Event, now: float
) -> None:
    """The effects of messaging commands; ``run`` is (run_id, workflow_id, task_queue)."""
    run_id, workflow_id, _ = run
    if isinstance(command, ev.MessageSent):
        _send_from_workflow(conn, run_id, workflow_id, command, now)
    elif isinstance(command, ev.ChildStarted):
        _start_child(conn, run, command, now)
    elif isinstance(command, ev.EventWaitStarted):
        _start_event_wait(conn, run_id, command, now)
    elif isinstance(command, ev.TaskCancelRequested):
        conn.execute(
            "UPDATE tasks SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL "
            "WHERE run_id = ? AND cmd = ? AND status IN ('pending', 'running')",
            (run_id, command.cmd),
        )
    elif isinstance(command, ev.WorkflowContinuedAsNew):
        _continue_as_new(conn, run_id, command, now)
    elif isinstance(command, ev.EventWaitCancelled):
        # An event matched to a wait the workflow gave up on stays available.
        conn.execute(
            "UPDATE event_waits SET status = 'cancelled', event_id = NULL "
            "WHERE run_id = ? AND cmd = ?",
            (run_id, command.cmd),
        )


def _send_from_workflow(
    conn: sqlite3.Connection, run_id: str, workflow_id: str, sent: ev.MessageSent, now: float
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
    except (RunNotFoundError, WorkflowNotRunningError) as exc:
        ops.append(conn, run_id, [ev.MessageDelivered(cmd=sent.cmd, error=error_of(exc))], now)
        return
    ops.append(conn, run_id, [ev.MessageDelivered(cmd=sent.cmd, message_id=message_id)], now)


def _start_child(
    conn: sqlite3.Connection, run: tuple[str, str, str], child: ev.ChildStarted, now: float
) -> None:
    run_id, workflow_id, queue = run
    request = rec.StartRequest(
        run_id=uuid.uuid4().hex,
        workflow_id=child.workflow_id,
        workflow_name=child.workflow_name,
        input=child.input,
        task_queue=child.task_queue or queue,
        code_version="",
        now=now,
        parent_workflow_id=workflow_id,
        parent_run_id=run_id,
        parent_cmd=child.cmd,
    )
    try:
        started = ops.start_run(conn, request)
    except WorkflowAlreadyRunningError as exc:
        outcome = ev.ChildRunStarted(
            cmd=child.cmd, workflow_id=child.workflow_id, error=error_of(exc)
        )
    else:
        outcome = ev.ChildRunStarted(
            cmd=child.cmd, workflow_id=child.workflow_id, run_id=started.run_id
        )
    ops.append(conn, run_id, [outcome], now)


def _continue_as_new(
    conn: sqlite3.Connection, run_id: str, command: ev.WorkflowContinuedAsNew, now: float
) -> None:
    old = ops.get_run(conn, run_id)
    assert old is not None
    parent_cmd = conn.execute("SELECT parent_cmd FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    new_run_id = command.new_run_id or uuid.uuid4().hex
    conn.execute(
        "UPDATE runs SET status = 'continued', result = ?, ended_at = ?, updated_at = ?, "
        "runnable = 0, lease_owner = NULL, lease_expires_at = NULL, continued_to = ? "
        "WHERE run_id = ?",
        (dumps({"continued_as": new_run_id}), now, now, new_run_id, run_id),
    )
    ops.close_run(conn, run_id, now, notify_parent=False)
    ops.start_run(
        conn,
        rec.StartRequest(
            run_id=new_run_id,
            workflow_id=old.workflow_id,
            workflow_name=old.workflow_name,
            input=command.input,
            task_queue=old.task_queue,
            code_version=old.code_version,
            now=now,
            parent_workflow_id=old.parent_workflow_id,
            parent_run_id=old.parent_run_id,
            parent_cmd=parent_cmd[0],
            continued_from=run_id,
        ),
    )


def _start_event_wait(
    conn: sqlite3.Connection, run_id: str, wait: ev.EventWaitStarted, now: float
) -> None:
    # A wait and a publish on the same key take turns, so they always meet.
    lock_key(conn, "event", wait.event_type, wait.correlation_id)
    conn.execute(
        "INSERT INTO event_waits (run_id, cmd, event_type, correlation_id, deadline, status) "
        "VALUES (?, ?, ?, ?, ?, 'waiting')",
        (run_id, wait.cmd, wait.event_type, wait.correlation_id, wait.deadline),
    )
    # An event that arrived before the wait is matched now: the oldest this run
    # has not received yet.
    row = conn.execute(
        "SELECT event_id, payload, published_at FROM events "
        "WHERE event_type = ? AND correlation_id = ? AND event_id NOT IN "
        "(SELECT event_id FROM event_waits WHERE run_id = ? AND event_id IS NOT NULL) "
        "ORDER BY position LIMIT 1",
        (wait.event_type, wait.correlation_id, run_id),
    ).fetchone()
    if row is not None:
        _deliver_event(conn, run_id, wait.cmd, wait.event_type, wait.correlation_id, row, now)


def _deliver_event(
    conn: sqlite3.Connection,
    run_id: str,
    cmd: int,
    event_type: str,
    correlation_id: str,
    row: tuple[Any, ...],
    now: float,
) -> bool:
    """Match the wait ``(run_id, cmd)`` with an event; False if it stopped waiting."""
    event_id, payload, published_at = row
    if not conn.execute(
        "UPDATE event_waits SET status = 'matched', event_id = ? WHERE run_id = ? AND cmd = ? "
        "AND status = 'waiting' RETURNING cmd",
        (event_id, run_id, cmd),
    ).fetchone():
        return False
    received = ev.EventReceived(
        cmd=cmd,
        event_id=event_id,
        event_type=event_type,
        correlation_id=correlation_id,
        payload=loads(payload),
        published_at=published_at,
    )
    ops.append(conn, run_id, [received], now)
    return True


# -- run endings --------------------------------------------------------------------------
def after_run_ended(
    conn: sqlite3.Connection,
    run_id: str,
    now: float,
    *,
    notify_parent: bool,
    waits: bool = True,
    children: bool = True,
) -> None:
    """Cancel the run's waits and open children; tell its parent how it ended.

    ``waits`` and ``children`` False say the caller knows there are none.
    """
    if waits:
        conn.execute(
            "UPDATE event_waits SET status = 'cancelled' WHERE run_id = ? AND status = 'waiting'",
            (run_id,),
        )
    open_children = []
    if children:
        open_children = conn.execute(
            "SELECT run_id, status FROM runs "
            "WHERE parent_run_id = ? AND status IN ('running', 'blocked')",
            (run_id,),
        ).fetchall()
    for child_id, status in open_children:
        if status == "running":
            cancel = ev.CancelRequested(reason=PARENT_ENDED, actor_kind="workflow")
            ops.append(conn, child_id, [cancel], now)
        else:
            ops.end_run(conn, child_id, ev.WorkflowCancelled(reason=PARENT_ENDED), now)
    if notify_parent:
        _tell_parent(conn, run_id, now)


def _tell_parent(conn: sqlite3.Connection, run_id: str, now: float) -> None:
    row = conn.execute(
        "SELECT r.parent_run_id, r.parent_cmd, r.workflow_id, r.status, r.result, r.error, "
        "p.status FROM runs r JOIN runs p ON p.run_id = r.parent_run_id WHERE r.run_id = ?",
        (run_id,),
    ).fetchone()
    if row is None or row[6] not in rec.OPEN:
        return
    parent_run_id, parent_cmd, workflow_id, status, result, error, _ = row
    ended = ev.ChildEnded(
        cmd=parent_cmd,
        workflow_id=workflow_id,
        run_id=run_id,
        status=status,
        result=loads(result) if result is not None and status == "completed" else None,
        error=ev.ErrorInfo(**loads(error)) if error else None,
    )
    ops.append(conn, parent_run_id, [ended], now)


# -- requests from callers ------------------------------------------------------------------
def send_message(conn: sqlite3.Connection, req: rec.MessageRequest) -> str:
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
    ops.append(conn, run.run_id, [received], req.now)
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


def publish_event(conn: sqlite3.Connection, req: rec.EventRequest) -> rec.EventPublished:
    lock_key(conn, "event", req.event_type, req.correlation_id)
    if conn.execute("SELECT 1 FROM events WHERE event_id = ?", (req.event_id,)).fetchone():
        return rec.EventPublished(event_id=req.event_id, duplicate=True)
    position = conn.execute("SELECT COALESCE(MAX(position), 0) + 1 FROM events").fetchone()[0]
    payload = dumps(req.payload)
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
    waits = conn.execute(
        "SELECT w.run_id, MIN(w.cmd) FROM event_waits w JOIN runs r ON r.run_id = w.run_id "
        "WHERE w.status = 'waiting' AND w.event_type = ? AND w.correlation_id = ? "
        "AND (w.deadline IS NULL OR w.deadline >= ?) "
        "AND r.status IN ('running', 'blocked') GROUP BY w.run_id ORDER BY w.run_id",
        (req.event_type, req.correlation_id, req.now),
    ).fetchall()
    row = (req.event_id, payload, req.now)
    matched = []
    for run_id, cmd in waits:
        # Runs in run_id order, each before its wait (lock order: _dialect).
        conn.execute("SELECT 1 FROM runs WHERE run_id = ? /*FOR UPDATE*/", (run_id,))
        if _deliver_event(conn, run_id, cmd, req.event_type, req.correlation_id, row, req.now):
            matched.append(run_id)
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


def cancel_run(conn: sqlite3.Connection, req: rec.CancelRequest) -> rec.RunRecord:
    run = open_run(conn, req.workflow_id, req.run_id)
    if run.status == "running":
        cancel = ev.CancelRequested(
            reason=req.reason, actor_kind=req.actor_kind, actor_id=req.actor_id
        )
        ops.append(conn, run.run_id, [cancel], req.now)
    else:
        ops.end_run(conn, run.run_id, ev.WorkflowCancelled(reason=req.reason), req.now)
    entry = rec.AuditEntry(
        req.now,
        req.actor_kind,
        req.actor_id,
        "run.cancel",
        run.workflow_id,
        run.run_id,
        {"reason": req.reason},
    )
    append_audit(conn, entry)
    updated = ops.get_run(conn, run.run_id)
    assert updated is not None
    return updated


def lineage(conn: sqlite3.Connection, workflow_id: str) -> rec.Lineage:
    run = ops.find_run(conn, workflow_id)
    if run is None:
        raise RunNotFoundError(f"no run has workflow id {workflow_id!r}")
    parent = ops.get_run(conn, run.parent_run_id) if run.parent_run_id else None
    rows = conn.execute(
        f"SELECT {ops.RUN_COLUMNS} FROM runs WHERE parent_run_id IN "
        "(SELECT run_id FROM runs WHERE workflow_id = ?) ORDER BY created_at, rowid",
        (workflow_id,),
    ).fetchall()
    return rec.Lineage(run=run, parent=parent, children=[ops.run_record(r) for r in rows])


# -- audit ---------------------------------------------------------------------------------
def append_audit(conn: sqlite3.Connection, entry: rec.AuditEntry) -> int:
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
    conn: sqlite3.Connection,
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
    rows = conn.execute(
        "SELECT id, at, actor_kind, actor_id, action, workflow_id, run_id, detail FROM audit_log "
        f"{clause} ORDER BY id DESC LIMIT ? OFFSET ?",
        (*params, limit, offset),
    ).fetchall()
    return [
        rec.AuditEntry(
            at=r[1],
            actor_kind=r[2],
            actor_id=r[3],
            action=r[4],
            workflow_id=r[5],
            run_id=r[6],
            detail=loads(r[7]),
            id=r[0],
        )
        for r in rows
    ]


__all__ = [
    "after_run_ended",
    "append_audit",
    "apply_command",
    "cancel_run",
    "lineage",
    "list_audit",
    "open_run",
    "publish_event",
    "send_message",
]
