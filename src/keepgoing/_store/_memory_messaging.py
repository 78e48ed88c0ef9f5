"""Messages, external events, child runs, cancellation and audit for the memory store.

Functions mutate a :class:`~keepgoing._store._memory_state.MemoryState` under
the store's lock, mirroring ``_sqlite_messaging``.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from keepgoing._history import events as ev
from keepgoing._store import records as rec
from keepgoing._store.transitions import PARENT_ENDED, error_of
from keepgoing.errors import RunNotFoundError, WorkflowAlreadyRunningError, WorkflowNotRunningError

if TYPE_CHECKING:
    from keepgoing._store._memory_state import MemoryState, RunRow


@dataclass
class StoredEvent:
    event_id: str
    event_type: str
    correlation_id: str
    payload: Any
    published_at: float


@dataclass
class EventWait:
    run_id: str
    cmd: int
    event_type: str
    correlation_id: str
    deadline: float | None = None
    status: str = "waiting"  # waiting | matched | cancelled
    event_id: str | None = None


@dataclass
class MessagingState:
    events: dict[str, StoredEvent] = field(default_factory=dict)  # insertion ordered
    waits: dict[tuple[str, int], EventWait] = field(default_factory=dict)
    audit: list[rec.AuditEntry] = field(default_factory=list)


def open_run(s: MemoryState, workflow_id: str, run_id: str | None) -> RunRow:
    run = s.runs.get(run_id) if run_id else s.newest_run(workflow_id)
    if run is None or run.workflow_id != workflow_id:
        which = f"run {run_id!r} of workflow id" if run_id else "run with workflow id"
        raise RunNotFoundError(f"no {which} {workflow_id!r}")
    if run.status not in rec.OPEN:
        raise WorkflowNotRunningError(
            f"workflow {workflow_id!r} is not running (its run {run.run_id} is {run.status})"
        )
    return run


# -- commands ------------------------------------------------------------------------------
def apply_command(s: MemoryState, run: RunRow, command: ev.Event, now: float) -> None:
    if isinstance(command, ev.MessageSent):
        request = rec.MessageRequest(
            command.workflow_id, command.name, command.payload, "workflow", run.workflow_id, now
        )
        try:
            message_id = send_message(s, request)
        except (RunNotFoundError, WorkflowNotRunningError) as exc:
            s.append(run, ev.MessageDelivered(cmd=command.cmd, error=error_of(exc)), now)
        else:
            s.append(run, ev.MessageDelivered(cmd=command.cmd, message_id=message_id), now)
    elif isinstance(command, ev.ChildStarted):
        _start_child(s, run, command, now)
    elif isinstance(command, ev.EventWaitStarted):
        _start_event_wait(s, run, command, now)
    elif isinstance(command, ev.TaskCancelRequested):
        task = s.active_tasks.get((run.run_id, command.cmd))
        if task is not None:
            s.set_task_status(task, "cancelled")
    elif isinstance(command, ev.WorkflowContinuedAsNew):
        _continue_as_new(s, run, command, now)
    elif isinstance(command, ev.EventWaitCancelled):
        wait = s.messaging.waits.get((run.run_id, command.cmd))
        if wait is not None:  # an event matched to an abandoned wait stays available
            wait.status, wait.event_id = "cancelled", None


def _start_child(s: MemoryState, run: RunRow, child: ev.ChildStarted, now: float) -> None:
    request = rec.StartRequest(
        run_id=uuid.uuid4().hex,
        workflow_id=child.workflow_id,
        workflow_name=child.workflow_name,
        input=child.input,
        task_queue=child.task_queue or run.task_queue,
        code_version="",
        now=now,
        parent_workflow_id=run.workflow_id,
        parent_run_id=run.run_id,
        parent_cmd=child.cmd,
    )
    try:
        started = s.create_run(request)
    except WorkflowAlreadyRunningError as exc:
        outcome = ev.ChildRunStarted(
            cmd=child.cmd, workflow_id=child.workflow_id, error=error_of(exc)
        )
    else:
        outcome = ev.ChildRunStarted(
            cmd=child.cmd, workflow_id=child.workflow_id, run_id=started.run_id
        )
    s.append(run, outcome, now)


def _continue_as_new(
    s: MemoryState, run: RunRow, command: ev.WorkflowContinuedAsNew, now: float
) -> None:
    new_run_id = command.new_run_id or uuid.uuid4().hex
    run.status, run.result, run.ended_at = "continued", {"continued_as": new_run_id}, now
    run.continued_to = new_run_id
    s.set_runnable(run, False)
    s.set_run_lease(run, None, None)
    s.create_run(
        rec.StartRequest(
            run_id=new_run_id,
            workflow_id=run.workflow_id,
            workflow_name=run.workflow_name,
            input=command.input,
            task_queue=run.task_queue,
            code_version=run.code_version,
            now=now,
            parent_workflow_id=run.parent_workflow_id,
            parent_run_id=run.parent_run_id,
            parent_cmd=run.parent_cmd,
            continued_from=run.run_id,
        )
    )


def _start_event_wait(s: MemoryState, run: RunRow, wait: ev.EventWaitStarted, now: float) -> None:
    row = EventWait(run.run_id, wait.cmd, wait.event_type, wait.correlation_id, wait.deadline)
    s.messaging.waits[(run.run_id, wait.cmd)] = row
    received = {
        w.event_id for w in s.messaging.waits.values() if w.run_id == run.run_id and w.event_id
    }
    for stored in s.messaging.events.values():
        key = (stored.event_type, stored.correlation_id)
        if key == (wait.event_type, wait.correlation_id) and stored.event_id not in received:
            _deliver(s, run, row, stored, now)
            return


def _deliver(s: MemoryState, run: RunRow, wait: EventWait, stored: StoredEvent, now: float) -> None:
    wait.status, wait.event_id = "matched", stored.event_id
    received = ev.EventReceived(
        cmd=wait.cmd,
        event_id=stored.event_id,
        event_type=stored.event_type,
        correlation_id=stored.correlation_id,
        payload=copy.deepcopy(stored.payload),
        published_at=stored.published_at,
    )
    s.append(run, received, now)


# -- run endings ------------------------------------------------------------------------------
def after_run_ended(s: MemoryState, run: RunRow, now: float, *, notify_parent: bool) -> None:
    for wait in s.messaging.waits.values():
        if wait.run_id == run.run_id and wait.status == "waiting":
            wait.status = "cancelled"
    for child in list(s.runs.values()):
        if child.parent_run_id != run.run_id or child.status not in rec.OPEN:
            continue
        if child.status == "running":
            s.append(child, ev.CancelRequested(reason=PARENT_ENDED, actor_kind="workflow"), now)
        else:
            s.end_run(child, ev.WorkflowCancelled(reason=PARENT_ENDED), now)
            s.close_run(child, now)
    parent = s.runs.get(run.parent_run_id) if run.parent_run_id else None
    if notify_parent and parent is not None and parent.status in rec.OPEN:
        assert run.parent_cmd is not None
        ended = ev.ChildEnded(
            cmd=run.parent_cmd,
            workflow_id=run.workflow_id,
            run_id=run.run_id,
            status=run.status,
            result=copy.deepcopy(run.result) if run.status == "completed" else None,
            error=run.error,
        )
        s.append(parent, ended, now)


# -- requests from callers --------------------------------------------------------------------
def send_message(s: MemoryState, req: rec.MessageRequest) -> str:
    run = open_run(s, req.workflow_id, req.run_id)
    message_id = uuid.uuid4().hex
    received = ev.MessageReceived(
        message_id=message_id,
        name=req.name,
        payload=copy.deepcopy(req.payload),
        sender_kind=req.sender_kind,
        sender_id=req.sender_id,
        sent_at=req.now,
    )
    s.append(run, received, req.now)
    if req.sender_kind != "workflow":
        detail = {"name": req.name, "message_id": message_id}
        append_audit(
            s,
            rec.AuditEntry(
                req.now,
                req.sender_kind,
                req.sender_id,
                "message.send",
                run.workflow_id,
                run.run_id,
                detail,
            ),
        )
    return message_id


def publish_event(s: MemoryState, req: rec.EventRequest) -> rec.EventPublished:
    if req.event_id in s.messaging.events:
        return rec.EventPublished(event_id=req.event_id, duplicate=True)
    stored = StoredEvent(
        req.event_id, req.event_type, req.correlation_id, copy.deepcopy(req.payload), req.now
    )
    s.messaging.events[req.event_id] = stored
    matched: list[str] = []
    waits = sorted(s.messaging.waits.values(), key=lambda w: (w.run_id, w.cmd))
    for wait in waits:
        run = s.runs[wait.run_id]
        if (
            wait.status == "waiting"
            and (wait.event_type, wait.correlation_id) == (req.event_type, req.correlation_id)
            and (wait.deadline is None or wait.deadline >= req.now)
            and run.status in rec.OPEN
            and wait.run_id not in matched
        ):
            _deliver(s, run, wait, stored, req.now)
            matched.append(wait.run_id)
    detail = {
        "event_type": req.event_type,
        "correlation_id": req.correlation_id,
        "event_id": req.event_id,
        "matched_runs": matched,
    }
    append_audit(
        s, rec.AuditEntry(req.now, req.actor_kind, req.actor_id, "event.publish", detail=detail)
    )
    return rec.EventPublished(req.event_id, False, matched)


def cancel_run(s: MemoryState, req: rec.CancelRequest) -> rec.RunRecord:
    run = open_run(s, req.workflow_id, req.run_id)
    if run.status == "running":
        cancel = ev.CancelRequested(
            reason=req.reason, actor_kind=req.actor_kind, actor_id=req.actor_id
        )
        s.append(run, cancel, req.now)
    else:
        s.end_run(run, ev.WorkflowCancelled(reason=req.reason), req.now)
        s.close_run(run, req.now)
    append_audit(
        s,
        rec.AuditEntry(
            req.now,
            req.actor_kind,
            req.actor_id,
            "run.cancel",
            run.workflow_id,
            run.run_id,
            {"reason": req.reason},
        ),
    )
    return run.record()


def lineage(s: MemoryState, workflow_id: str) -> rec.Lineage:
    run = s.newest_run(workflow_id)
    if run is None:
        raise RunNotFoundError(f"no run has workflow id {workflow_id!r}")
    parent = s.runs.get(run.parent_run_id) if run.parent_run_id else None
    ids = {r.run_id for r in s.runs_by_workflow.get(workflow_id, [])}
    children = sorted(
        (r for r in s.runs.values() if r.parent_run_id in ids),
        key=lambda r: (r.created_at, r.order),
    )
    return rec.Lineage(
        run=run.record(),
        parent=parent.record() if parent is not None else None,
        children=[c.record() for c in children],
    )


def append_audit(s: MemoryState, entry: rec.AuditEntry) -> int:
    entry_id = len(s.messaging.audit) + 1
    s.messaging.audit.append(
        rec.AuditEntry(
            entry.at,
            entry.actor_kind,
            entry.actor_id,
            entry.action,
            entry.workflow_id,
            entry.run_id,
            copy.deepcopy(entry.detail),
            entry_id,
        )
    )
    return entry_id


def list_audit(
    s: MemoryState, limit: int, offset: int, action: str | None, workflow_id: str | None
) -> list[rec.AuditEntry]:
    entries = [
        e
        for e in reversed(s.messaging.audit)
        if (action is None or e.action == action)
        and (workflow_id is None or e.workflow_id == workflow_id)
    ]
    return copy.deepcopy(entries[max(0, offset) : max(0, offset) + max(0, limit)])
