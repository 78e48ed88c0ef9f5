"""What a workflow's commands do, and what a run's ending settles: above ``runs`` and ``messaging``.

A commit's commands create tasks and timers, send messages, start children and
end the run (:func:`commit_activation`, :func:`apply_commands`); an ended run
cancels what it left open and tells its parent and children
(:func:`end_run`, :func:`close_run`, :func:`after_run_ended`), and a child's
ending may end it in turn. These rules call into both ``runs`` and
``messaging``, which therefore never import each other.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from keepgoing._history import events as ev
from keepgoing._payload import dumps, encode
from keepgoing._store import records as rec
from keepgoing._store.sql import history, leases, messaging, prefix, reviews, status, versions
from keepgoing._store.sql import runs as ops
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import columns, every, one, value
from keepgoing._store.transitions import PARENT_ENDED

__all__ = [
    "after_run_ended",
    "append_and_apply",
    "apply_commands",
    "cancel_run",
    "close_run",
    "commit_activation",
    "end_run",
]


class _CommitRun(NamedTuple):
    """What a commit reads of its run (locked, and only while its fence holds)."""

    last_input_seq: int
    next_seq: int
    workflow_id: str
    task_queue: str
    code_version: str
    code_versions: str


class _Open(NamedTuple):
    """What an ended run left open, and its parent."""

    timers: int
    tasks: int
    waits: int
    children: int
    parent_run_id: str | None


class _Child(NamedTuple):
    run_id: str
    status: str


_COMMIT_RUN = (
    f"SELECT {columns(_CommitRun)} FROM runs WHERE run_id = ? AND {leases.FENCED} /*FOR UPDATE*/"
)


def commit_activation(conn: Connection, c: rec.ActivationCommit) -> rec.CommitResult:
    row = one(conn, _CommitRun, _COMMIT_RUN, (c.run_id, c.fence))
    if row is None:
        return rec.CommitResult(ok=False)
    # The code version joins the activation's own update of the run: no update of its own.
    noted = versions.note(conn, c.run_id, c.code_version, row.code_version, row.code_versions)
    if c.blocked_reason is not None:
        last = versions.block(conn, c, next_seq=row.next_seq, noted=noted)
        return rec.CommitResult(ok=True, last_seq=last, fence=c.fence, saw_upto=c.saw_upto)
    still_runnable = 1 if row.last_input_seq > c.saw_upto else 0
    marker = ev.ActivationCompleted(
        saw_upto=c.saw_upto, time=c.time, worker=c.worker_id, code_version=c.code_version
    )
    last, eager = append_and_apply(
        conn,
        ops.CommandRun(c.run_id, row.workflow_id, row.task_queue),
        [marker],
        c.commands,
        c.now,
        next_seq=row.next_seq,
        then=f", lease_owner = NULL, lease_expires_at = NULL, runnable = {still_runnable}"
        f"{noted.sql}",
        then_params=noted.params,
        eager_worker=c.worker_id if c.eager_claim else None,
        eager_limit=c.eager_limit,
        lease_ttl=c.lease_ttl,
    )
    if c.release_held:
        prefix.release_held(conn, c.run_id, c.now)
    return rec.CommitResult(ok=True, last_seq=last, fence=c.fence, eager=eager, saw_upto=c.saw_upto)


def append_and_apply(
    conn: Connection,
    run: ops.CommandRun,
    events: Sequence[ev.Event],
    commands: Sequence[ev.Event],
    now: float,
    *,
    next_seq: int,
    then: str,
    then_params: Sequence[object] = (),
    eager_worker: str | None,
    eager_limit: int,
    lease_ttl: float,
) -> tuple[int, list[rec.TaskClaim]]:
    """Append a commit's ``events`` (what arrived, its marker) and ``commands``, updating
    the run as ``then`` says, and apply the commands; returns the last seq and the eager
    task claims.

    A commit whose one command ends the run (as most ends are) ends it in the append's
    own update of the run, which also says what the run left open: one update of the
    run instead of two, and no read.
    """
    if len(commands) == 1 and isinstance(commands[0], _ENDS):
        ending, params = _ending(commands[0], now)
        left_open = (_Open, f"{_LEFT_OPEN}, parent_run_id", (run.run_id,) * 4)
        last, left = history.append_returning(
            conn,
            run.run_id,
            [*events, *commands],
            now,
            left_open,
            next_seq=next_seq,
            then=f"{then}, {ending}",
            then_params=(*then_params, *params),
        )
        close_run(conn, run.run_id, now, left=left)
        return last, []
    last = history.append(
        conn,
        run.run_id,
        [*events, *commands],
        now,
        next_seq=next_seq,
        then=then,
        then_params=then_params,
    )
    return last, apply_commands(conn, run, commands, now, eager_worker, eager_limit, lease_ttl)


def apply_commands(
    conn: Connection,
    run: ops.CommandRun,
    commands: Sequence[ev.Event],
    now: float,
    eager_worker: str | None,
    eager_limit: int,
    lease_ttl: float,
) -> list[rec.TaskClaim]:
    """Create tasks and timers, cancel timers, end the run: the effects of commands."""
    run_id = run.run_id
    eager: list[rec.TaskClaim] = []
    for command in commands:
        if isinstance(command, ev.TaskScheduled):
            # A task routed to another queue (its own worker group) is never claimed here.
            own_queue = command.task_queue in (None, run.task_queue)
            owner = (
                eager_worker
                if eager_worker is not None and own_queue and len(eager) < eager_limit
                else None
            )
            claim = leases.insert_task(conn, run, command, now, owner, lease_ttl)
            if claim is not None:
                eager.append(claim)
        elif isinstance(command, ev.TimerStarted):
            conn.execute(
                "INSERT INTO timers (run_id, cmd, fire_at, status) VALUES (?, ?, ?, 'pending')",
                (run_id, command.cmd, command.fire_at),
            )
        elif isinstance(command, ev.TimerCancelled):
            conn.execute(
                "UPDATE timers SET status = 'cancelled' WHERE run_id = ? AND cmd = ? "
                "AND status = 'pending'",
                (run_id, command.cmd),
            )
        elif isinstance(command, _ENDS):
            end_run(conn, run_id, command, now)
        else:
            _apply_messaging(conn, run, command, now)
    return eager


def _apply_messaging(conn: Connection, run: ops.CommandRun, command: ev.Event, now: float) -> None:
    """The effects of messaging commands."""
    run_id, workflow_id = run.run_id, run.workflow_id
    if isinstance(command, ev.MessageSent):
        messaging.send_from_workflow(conn, run_id, workflow_id, command, now)
    elif isinstance(command, ev.ChildStarted):
        messaging.start_child(conn, run, command, now)
    elif isinstance(command, ev.EventWaitStarted):
        messaging.start_event_wait(conn, run_id, command, now)
    elif isinstance(command, ev.TaskCancelRequested):
        conn.execute(
            "UPDATE tasks SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL "
            "WHERE run_id = ? AND cmd = ? AND status IN ('pending', 'running')",
            (run_id, command.cmd),
        )
    elif isinstance(command, ev.WorkflowContinuedAsNew):
        _continue_as_new(conn, run_id, command, now)
    elif isinstance(command, ev.PatchMarked):
        conn.execute(
            "INSERT INTO run_patches (run_id, change_id, at) VALUES (?, ?, ?) "
            "ON CONFLICT (run_id, change_id) DO NOTHING",
            (run_id, command.change_id, now),
        )
    elif isinstance(command, ev.ReviewAbandoned):
        reviews.abandon_review(conn, run_id, command, now)
    elif isinstance(command, ev.StatusSet):
        status.record_status(conn, run_id, command, now)
    elif isinstance(command, ev.EventWaitCancelled):
        # An event matched to a wait the workflow gave up on stays available.
        conn.execute(
            "UPDATE event_waits SET status = 'cancelled', event_id = NULL "
            "WHERE run_id = ? AND cmd = ?",
            (run_id, command.cmd),
        )


def _continue_as_new(
    conn: Connection, run_id: str, command: ev.WorkflowContinuedAsNew, now: float
) -> None:
    old = ops.get_run(conn, run_id)
    assert old is not None
    parent_cmd = value(conn, "SELECT parent_cmd FROM runs WHERE run_id = ?", (run_id,))
    new_run_id = command.new_run_id or uuid.uuid4().hex
    conn.execute(
        "UPDATE runs SET status = 'continued', result = ?, ended_at = ?, updated_at = ?, "
        "runnable = 0, lease_owner = NULL, lease_expires_at = NULL, continued_to = ? "
        "WHERE run_id = ?",
        (dumps({"continued_as": new_run_id}), now, now, new_run_id, run_id),
    )
    close_run(conn, run_id, now, notify_parent=False)
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
            parent_cmd=parent_cmd,
            continued_from=run_id,
            revision_of=run_id,  # the successor finishes on the code the run had
        ),
    )


_ENDS = (ev.WorkflowCompleted, ev.WorkflowFailed, ev.WorkflowCancelled)


def _ending(command: ev.Event, now: float) -> tuple[str, tuple[object, ...]]:
    """The SET clauses (and parameters) that end a run as ``command`` says; the
    caller sets ``updated_at``."""
    result = error = None
    if isinstance(command, ev.WorkflowCompleted):
        status, result = "completed", encode(command.result, "the result of the workflow")
    elif isinstance(command, ev.WorkflowFailed):
        status, error = "failed", dumps(dataclasses.asdict(command.error))
    else:
        assert isinstance(command, ev.WorkflowCancelled)
        status = "cancelled"
        info = ev.ErrorInfo(type="asyncio.CancelledError", message=command.reason or "cancelled")
        error = dumps(dataclasses.asdict(info))
    return (
        "status = ?, result = ?, error = ?, ended_at = ?, "
        "runnable = 0, lease_owner = NULL, lease_expires_at = NULL",
        (status, result, error, now),
    )


def end_run(conn: Connection, run_id: str, command: ev.Event, now: float) -> None:
    """End a run as the command says, then settle what depended on it."""
    ending, params = _ending(command, now)
    # The update also says what the run left open (see close_run): no read of its own.
    left = one(
        conn,
        _Open,
        f"UPDATE runs SET {ending}, updated_at = ? WHERE run_id = ? "
        f"RETURNING {_LEFT_OPEN}, parent_run_id",
        (*params, now, run_id, *(run_id,) * 4),
    )
    assert left is not None  # the caller holds the run
    close_run(conn, run_id, now, left=left)


#: What an ended run left open: four ``EXISTS``, each taking the run id.
_LEFT_OPEN = (
    "EXISTS (SELECT 1 FROM timers WHERE run_id = ? AND status = 'pending') AS timers, "
    "EXISTS (SELECT 1 FROM tasks WHERE run_id = ? AND status IN ('pending', 'running')) "
    "AS tasks, "
    "EXISTS (SELECT 1 FROM event_waits WHERE run_id = ? AND status = 'waiting') AS waits, "
    "EXISTS (SELECT 1 FROM runs WHERE parent_run_id = ? AND status IN ('running', 'blocked')) "
    "AS children"
)


def close_run(
    conn: Connection,
    run_id: str,
    now: float,
    *,
    notify_parent: bool = True,
    left: _Open | None = None,
) -> None:
    """Cancel an ended run's open timers, tasks and waits; tell its parent and children.

    ``left`` is what the run left open when the caller has read it already.
    """
    # One look first: most runs end with nothing left open, and each cancel is
    # then skipped. (The run's row is locked: nothing can open meanwhile.)
    if left is None:
        left = one(
            conn,
            _Open,
            f"SELECT {_LEFT_OPEN}, "
            "(SELECT parent_run_id FROM runs WHERE run_id = ?) AS parent_run_id",
            (run_id,) * 5,
        )
        assert left is not None  # a SELECT without FROM returns one row
    if left.timers:
        conn.execute(
            "UPDATE timers SET status = 'cancelled' WHERE run_id = ? AND status = 'pending'",
            (run_id,),
        )
    if left.tasks:
        conn.execute(
            "UPDATE tasks SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL "
            "WHERE run_id = ? AND status IN ('pending', 'running')",
            (run_id,),
        )
    after_run_ended(
        conn,
        run_id,
        now,
        notify_parent=notify_parent and left.parent_run_id is not None,
        waits=bool(left.waits),
        children=bool(left.children),
    )


def after_run_ended(
    conn: Connection,
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
    open_children: list[_Child] = []
    if children:
        open_children = every(
            conn,
            _Child,
            f"SELECT {columns(_Child)} FROM runs "
            "WHERE parent_run_id = ? AND status IN ('running', 'blocked')",
            (run_id,),
        )
    for child in open_children:
        if child.status == "running":
            cancel = ev.CancelRequested(reason=PARENT_ENDED, actor_kind="workflow")
            history.append(conn, child.run_id, [cancel], now)
        else:
            end_run(conn, child.run_id, ev.WorkflowCancelled(reason=PARENT_ENDED), now)
    if notify_parent:
        messaging.tell_parent(conn, run_id, now)


def cancel_run(conn: Connection, req: rec.CancelRequest) -> rec.RunRecord:
    run = messaging.open_run(conn, req.workflow_id, req.run_id)
    if run.status == "running":
        cancel = ev.CancelRequested(
            reason=req.reason, actor_kind=req.actor_kind, actor_id=req.actor_id
        )
        history.append(conn, run.run_id, [cancel], req.now)
    else:
        end_run(conn, run.run_id, ev.WorkflowCancelled(reason=req.reason), req.now)
    entry = rec.AuditEntry(
        req.now,
        req.actor_kind,
        req.actor_id,
        "run.cancel",
        run.workflow_id,
        run.run_id,
        {"reason": req.reason},
    )
    messaging.append_audit(conn, entry)
    updated = ops.get_run(conn, run.run_id)
    assert updated is not None
    return updated
