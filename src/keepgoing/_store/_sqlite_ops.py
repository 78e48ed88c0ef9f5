"""The SQL behind :class:`~keepgoing._store.sqlite.SqliteStore`.

Each function takes a connection inside the caller's transaction and does
one store operation; the thread in ``_sqlite_thread`` supplies the
transaction (``BEGIN IMMEDIATE`` for writes, so the write lock is held from
the first statement and no row lock order is needed). PostgreSQL runs the
same functions; the ``/*FOR UPDATE*/`` comments are its row locks, and
``_dialect`` writes down their order.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from typing import Any

from keepgoing._history import events as ev
from keepgoing._history.codec import decode, encode_at
from keepgoing._payload import dumps, loads
from keepgoing._store import _sqlite_messaging as messaging
from keepgoing._store import records as rec
from keepgoing.errors import WorkflowAlreadyRunningError

RUN_COLUMNS = (
    "run_id, workflow_id, workflow_name, status, input, task_queue, code_version, created_at, "
    "updated_at, result, error, blocked_reason, fence, last_input_seq, runnable, ended_at, "
    "parent_workflow_id, parent_run_id, continued_from, continued_to"
)
TASK_COLUMNS = (
    "run_id, workflow_id, cmd, name, args, kwargs, attempt, fence, started_at, deadline, "
    "lease_expires_at, timeout, retries, retry_delay, max_worker_losses, image"
)


def marks(values: Sequence[object]) -> str:
    return ",".join("?" * len(values))


def run_record(row: sqlite3.Row | tuple[Any, ...]) -> rec.RunRecord:
    error = loads(row[10]) if row[10] else None
    return rec.RunRecord(
        run_id=row[0],
        workflow_id=row[1],
        workflow_name=row[2],
        status=row[3],
        input=loads(row[4]),
        task_queue=row[5],
        code_version=row[6],
        created_at=row[7],
        updated_at=row[8],
        result=loads(row[9]) if row[9] is not None else None,
        error=ev.ErrorInfo(**error) if error else None,
        blocked_reason=row[11],
        fence=row[12],
        last_input_seq=row[13],
        runnable=bool(row[14]),
        ended_at=row[15],
        parent_workflow_id=row[16],
        parent_run_id=row[17],
        continued_from=row[18],
        continued_to=row[19],
    )


def task_claim(row: tuple[Any, ...]) -> rec.TaskClaim:
    return rec.TaskClaim(
        run_id=row[0],
        workflow_id=row[1],
        cmd=row[2],
        name=row[3],
        args=loads(row[4]),
        kwargs=loads(row[5]),
        attempt=row[6],
        fence=row[7],
        started_at=row[8],
        deadline=row[9],
        lease_expires_at=row[10],
        timeout=row[11],
        retries=row[12],
        retry_delay=row[13],
        max_worker_losses=row[14],
        image=row[15],
    )


# -- runs ----------------------------------------------------------------------
def start_run(conn: sqlite3.Connection, req: rec.StartRequest) -> rec.RunRecord:
    open_row = conn.execute(
        "SELECT run_id FROM runs WHERE workflow_id = ? AND status IN ('running', 'blocked')",
        (req.workflow_id,),
    ).fetchone()
    if open_row is not None:
        raise WorkflowAlreadyRunningError(req.workflow_id, open_row[0])
    # The run's row as appending WorkflowStarted (seq 1, an input) leaves it,
    # written at once: one statement instead of an insert, a read and an update.
    row = conn.execute(
        "INSERT INTO runs (run_id, workflow_id, workflow_name, status, input, task_queue, "
        "code_version, created_at, updated_at, next_seq, last_input_seq, runnable, "
        "runnable_since, parent_workflow_id, parent_run_id, parent_cmd, continued_from) "
        "VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, 2, 1, 1, ?, ?, ?, ?, ?) "
        f"RETURNING {RUN_COLUMNS}",
        (
            req.run_id,
            req.workflow_id,
            req.workflow_name,
            dumps(req.input),
            req.task_queue,
            req.code_version,
            req.now,
            req.now,
            req.now,
            req.parent_workflow_id,
            req.parent_run_id,
            req.parent_cmd,
            req.continued_from,
        ),
    ).fetchone()
    started = ev.WorkflowStarted(
        workflow_name=req.workflow_name,
        workflow_id=req.workflow_id,
        run_id=req.run_id,
        input=req.input,
        code_version=req.code_version,
        task_queue=req.task_queue,
        parent_workflow_id=req.parent_workflow_id,
        parent_run_id=req.parent_run_id,
        continued_from=req.continued_from,
    )
    conn.execute(
        "INSERT INTO history (run_id, seq, type, at, body) VALUES (?, 1, ?, ?, ?)",
        (req.run_id, "WorkflowStarted", req.now, encode_at(started, 1, req.now)),
    )
    return run_record(row)


def get_run(conn: sqlite3.Connection, run_id: str) -> rec.RunRecord | None:
    row = conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return run_record(row) if row else None


def find_run(conn: sqlite3.Connection, workflow_id: str) -> rec.RunRecord | None:
    row = conn.execute(
        f"SELECT {RUN_COLUMNS} FROM runs WHERE workflow_id = ? "
        "ORDER BY created_at DESC, rowid DESC LIMIT 1",
        (workflow_id,),
    ).fetchone()
    return run_record(row) if row else None


def list_runs(
    conn: sqlite3.Connection,
    workflow_name: str | None,
    status: str | None,
    limit: int,
    offset: int,
) -> list[rec.RunRecord]:
    where, params = [], []
    if workflow_name is not None:
        where.append("workflow_name = ?")
        params.append(workflow_name)
    if status is not None:
        where.append("status = ?")
        params.append(status)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = conn.execute(
        f"SELECT {RUN_COLUMNS} FROM runs {clause} "
        "ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
        (*params, limit, offset),
    ).fetchall()
    return [run_record(r) for r in rows]


def read_history(conn: sqlite3.Connection, run_id: str, after_seq: int) -> list[ev.Event]:
    rows = conn.execute(
        "SELECT body FROM history WHERE run_id = ? AND seq > ? ORDER BY seq",
        (run_id, after_seq),
    ).fetchall()
    return [decode(loads(r[0])) for r in rows]


# -- appending -------------------------------------------------------------------
def append(
    conn: sqlite3.Connection,
    run_id: str,
    events: Sequence[ev.Event],
    now: float,
    *,
    next_seq: int | None = None,
    then: str = "",
) -> int:
    """Append ``events`` with the next seqs and ``at=now``; update the run row once.

    Returns the seq of the last event. ``next_seq`` saves a read when the caller
    has it; ``then`` adds SET clauses to the run's update (the rightmost
    assignment of a column wins).
    """
    seq = next_seq
    if seq is None:
        seq = conn.execute(
            "SELECT next_seq FROM runs WHERE run_id = ? /*FOR UPDATE*/", (run_id,)
        ).fetchone()[0]
    rows = []
    last_input = 0
    for event in events:
        if event.ROLE == "input":
            last_input = seq
        rows.append((run_id, seq, type(event).__name__, now, encode_at(event, seq, now)))
        seq += 1
    conn.executemany(
        "INSERT INTO history (run_id, seq, type, at, body) VALUES (?, ?, ?, ?, ?)", rows
    )
    if last_input:
        conn.execute(
            "UPDATE runs SET next_seq = ?, last_input_seq = ?, updated_at = ?, "
            "runnable_since = CASE WHEN runnable = 1 THEN runnable_since ELSE ? END, "
            f"runnable = 1{then} WHERE run_id = ?",
            (seq, last_input, now, now, run_id),
        )
    else:
        conn.execute(
            f"UPDATE runs SET next_seq = ?, updated_at = ?{then} WHERE run_id = ?",
            (seq, now, run_id),
        )
    return seq - 1


# -- activations -------------------------------------------------------------------
def claim_activations(
    conn: sqlite3.Connection,
    worker_id: str,
    queues: Sequence[str],
    names: Sequence[str],
    limit: int,
    lease_ttl: float,
    now: float,
) -> list[rec.ActivationClaim]:
    if not queues or not names or limit <= 0:
        return []
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT run_id FROM runs WHERE runnable = 1 AND status = 'running' "
            f"AND task_queue IN ({marks(queues)}) AND workflow_name IN ({marks(names)}) "
            "AND (lease_owner IS NULL OR lease_expires_at < ?) "
            "ORDER BY runnable_since LIMIT ? /*FOR UPDATE SKIP LOCKED*/",
            (*queues, *names, now, limit),
        )
    ]
    if not ids:
        return []
    expires = now + lease_ttl
    rows = conn.execute(
        "UPDATE runs SET fence = fence + 1, lease_owner = ?, lease_expires_at = ? "
        f"WHERE run_id IN ({marks(ids)}) RETURNING {RUN_COLUMNS}",
        (worker_id, expires, *ids),
    ).fetchall()
    order = {run_id: i for i, run_id in enumerate(ids)}  # oldest runnable first
    runs = sorted((run_record(row) for row in rows), key=lambda run: order[run.run_id])
    return [rec.ActivationClaim(run=run, fence=run.fence, lease_expires_at=expires) for run in runs]


def commit_activation(conn: sqlite3.Connection, c: rec.ActivationCommit) -> rec.CommitResult:
    row = conn.execute(
        "SELECT fence, status, last_input_seq, next_seq, workflow_id, task_queue FROM runs "
        "WHERE run_id = ? /*FOR UPDATE*/",
        (c.run_id,),
    ).fetchone()
    if row is None or row[0] != c.fence or row[1] != "running":
        return rec.CommitResult(ok=False)
    if c.blocked_reason is not None:
        blocked = ev.WorkflowBlocked(reason=c.blocked_reason)
        last = append(conn, c.run_id, [blocked], c.now, next_seq=row[3])
        conn.execute(
            "UPDATE runs SET status = 'blocked', blocked_reason = ?, lease_owner = NULL, "
            "lease_expires_at = NULL, runnable = 0 WHERE run_id = ?",
            (c.blocked_reason, c.run_id),
        )
        return rec.CommitResult(ok=True, last_seq=last, fence=c.fence, saw_upto=c.saw_upto)
    still_runnable = 1 if row[2] > c.saw_upto else 0
    marker = ev.ActivationCompleted(saw_upto=c.saw_upto, time=c.time, worker=c.worker_id)
    last = append(
        conn,
        c.run_id,
        [marker, *c.commands],
        c.now,
        next_seq=row[3],
        then=f", lease_owner = NULL, lease_expires_at = NULL, runnable = {still_runnable}",
    )
    eager = apply_commands(
        conn,
        (c.run_id, row[4], row[5]),
        c.commands,
        c.now,
        c.worker_id if c.eager_claim else None,
        c.eager_limit,
        c.lease_ttl,
    )
    return rec.CommitResult(ok=True, last_seq=last, fence=c.fence, eager=eager, saw_upto=c.saw_upto)


def apply_commands(
    conn: sqlite3.Connection,
    run: tuple[str, str, str],
    commands: Sequence[ev.Event],
    now: float,
    eager_worker: str | None,
    eager_limit: int,
    lease_ttl: float,
) -> list[rec.TaskClaim]:
    """Create tasks and timers, cancel timers, end the run: the effects of commands.

    ``run`` is (run_id, workflow_id, task_queue).
    """
    run_id = run[0]
    eager: list[rec.TaskClaim] = []
    for command in commands:
        if isinstance(command, ev.TaskScheduled):
            owner = eager_worker if eager_worker is not None and len(eager) < eager_limit else None
            claim = insert_task(conn, run, command, now, owner, lease_ttl)
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
        elif isinstance(command, ev.WorkflowCompleted | ev.WorkflowFailed | ev.WorkflowCancelled):
            end_run(conn, run_id, command, now)
        else:
            messaging.apply_command(conn, run, command, now)
    return eager


def insert_task(
    conn: sqlite3.Connection,
    run: tuple[str, str, str],
    t: ev.TaskScheduled,
    now: float,
    owner: str | None,
    lease_ttl: float,
) -> rec.TaskClaim | None:
    """Insert a scheduled task; claimed at once by ``owner`` when given (eager dispatch)."""
    run_id, workflow_id, queue = run
    deadline = now + t.timeout
    lease = min(now + lease_ttl, deadline + lease_ttl)
    conn.execute(
        "INSERT INTO tasks (run_id, cmd, workflow_id, name, queue, status, args, kwargs, image, "
        "retries, retry_delay, timeout, max_worker_losses, attempt, fence, available_at, "
        "started_at, deadline, lease_owner, lease_expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run_id,
            t.cmd,
            workflow_id,
            t.name,
            queue,
            "running" if owner else "pending",
            dumps(t.args),
            dumps(t.kwargs),
            t.image,
            t.retries,
            t.retry_delay,
            t.timeout,
            t.max_worker_losses,
            1 if owner else 0,
            1 if owner else 0,
            now,
            now if owner else None,
            deadline if owner else None,
            owner,
            lease if owner else None,
        ),
    )
    if owner is None:
        return None
    return rec.TaskClaim(
        run_id=run_id,
        workflow_id=workflow_id,
        cmd=t.cmd,
        name=t.name,
        args=t.args,
        kwargs=t.kwargs,
        attempt=1,
        fence=1,
        started_at=now,
        deadline=deadline,
        lease_expires_at=lease,
        timeout=t.timeout,
        retries=t.retries,
        retry_delay=t.retry_delay,
        max_worker_losses=t.max_worker_losses,
        image=t.image,
    )


def end_run(conn: sqlite3.Connection, run_id: str, command: ev.Event, now: float) -> None:
    """End a run as the command says, then settle what depended on it."""
    result = error = None
    if isinstance(command, ev.WorkflowCompleted):
        status, result = "completed", dumps(command.result)
    elif isinstance(command, ev.WorkflowFailed):
        status, error = "failed", dumps(dataclasses.asdict(command.error))
    else:
        assert isinstance(command, ev.WorkflowCancelled)
        status = "cancelled"
        info = ev.ErrorInfo(type="asyncio.CancelledError", message=command.reason or "cancelled")
        error = dumps(dataclasses.asdict(info))
    conn.execute(
        "UPDATE runs SET status = ?, result = ?, error = ?, ended_at = ?, updated_at = ?, "
        "runnable = 0, lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ?",
        (status, result, error, now, now, run_id),
    )
    close_run(conn, run_id, now)


def close_run(
    conn: sqlite3.Connection, run_id: str, now: float, *, notify_parent: bool = True
) -> None:
    """Cancel an ended run's open timers, tasks and waits; tell its parent and children."""
    # One look first: most runs end with nothing left open, and each cancel is
    # then skipped. (The run's row is locked: nothing can open meanwhile.)
    timers, tasks, waits, children, parent = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM timers WHERE run_id = ? AND status = 'pending'), "
        "EXISTS (SELECT 1 FROM tasks WHERE run_id = ? AND status IN ('pending', 'running')), "
        "EXISTS (SELECT 1 FROM event_waits WHERE run_id = ? AND status = 'waiting'), "
        "EXISTS (SELECT 1 FROM runs WHERE parent_run_id = ? AND status IN ('running', 'blocked')), "
        "(SELECT parent_run_id FROM runs WHERE run_id = ?)",
        (run_id,) * 5,
    ).fetchone()
    if timers:
        conn.execute(
            "UPDATE timers SET status = 'cancelled' WHERE run_id = ? AND status = 'pending'",
            (run_id,),
        )
    if tasks:
        conn.execute(
            "UPDATE tasks SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL "
            "WHERE run_id = ? AND status IN ('pending', 'running')",
            (run_id,),
        )
    messaging.after_run_ended(
        conn,
        run_id,
        now,
        notify_parent=notify_parent and parent is not None,
        waits=bool(waits),
        children=bool(children),
    )


def release_activation(conn: sqlite3.Connection, run_id: str, fence: int) -> None:
    conn.execute(
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL "
        "WHERE run_id = ? AND fence = ?",
        (run_id, fence),
    )
