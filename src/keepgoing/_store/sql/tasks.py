"""Task attempts on SQLite: claims, completions (with the fast activation), failures.

Part of the store's SQL with ``_sqlite_ops`` (runs, history, activations);
functions run inside the caller's write transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import NamedTuple

from keepgoing._history import events as ev
from keepgoing._store import records as rec
from keepgoing._store.sql import volumes
from keepgoing._store.sql.commands import append_and_apply
from keepgoing._store.sql.gateway import OPEN_CALLS, mark_attempt_calls
from keepgoing._store.sql.rows import columns, every, one
from keepgoing._store.sql.runs import TASK_COLUMNS, RunRef, TaskRow, append, marks, task_claim
from keepgoing._store.stops import Stamp
from keepgoing._store.transitions import UNCERTAIN, decide_failure

_WORKER_LOST = "keepgoing.WorkerLost"


class TaskKey(NamedTuple):
    """A task's key: its run and the command that scheduled it."""

    run_id: str
    cmd: int


class _RunHead(NamedTuple):
    """What a completion or a timer reads of its run (locked)."""

    status: str
    fence: int
    last_input_seq: int
    lease_owner: str | None
    lease_expires_at: float | None
    next_seq: int
    workflow_id: str
    task_queue: str


class _Attempt(NamedTuple):
    status: str
    fence: int


class _Cmd(NamedTuple):
    cmd: int


class _Done(NamedTuple):
    """What a completion returns of its task: its key, and whether the attempt has
    open model calls in the gateway ledger to settle."""

    cmd: int
    calls: bool


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


_RUN_HEAD = f"SELECT {columns(_RunHead)} FROM runs WHERE run_id = ? /*FOR UPDATE*/"


# -- tasks -----------------------------------------------------------------------------
def claim_tasks(
    conn: sqlite3.Connection,
    worker_id: str,
    queues: Sequence[str],
    names: Sequence[str],
    limit: int,
    lease_ttl: float,
    now: float,
    revision: int | None = None,
) -> list[rec.TaskClaim]:
    if not queues or not names or limit <= 0:
        return []
    # Pinning: a task on its run's own queue runs on the run's revision; a task routed
    # to a per-task group's queue runs on any revision of that group.
    pinned, params = "", []
    if revision is not None:
        pinned = (
            " AND EXISTS (SELECT 1 FROM runs r WHERE r.run_id = tasks.run_id AND "
            "(r.task_queue <> tasks.queue OR r.group_revision IS NULL OR r.group_revision = ?))"
        )
        params = [revision]
    keys = every(
        conn,
        TaskKey,
        f"SELECT {columns(TaskKey)} FROM tasks WHERE status = 'pending' AND available_at <= ? "
        f"AND queue IN ({marks(queues)}) AND name IN ({marks(names)}){pinned} "
        "ORDER BY available_at LIMIT ? /*FOR UPDATE SKIP LOCKED*/",
        (now, *queues, *names, *params, limit),
    )
    claims = []
    for key in keys:
        row = one(
            conn,
            TaskRow,
            "UPDATE tasks SET status = 'running', attempt = attempt + 1, fence = fence + 1, "
            "started_at = ?, deadline = ? + timeout, lease_owner = ?, "
            "lease_expires_at = MIN(? + ?, ? + timeout + ?) WHERE run_id = ? AND cmd = ? "
            f"RETURNING {TASK_COLUMNS}",
            (now, now, worker_id, now, lease_ttl, now, lease_ttl, key.run_id, key.cmd),
        )
        assert row is not None  # the row was just selected, and is locked
        claims.append(task_claim(row))
    return claims


def complete_task(
    conn: sqlite3.Connection, o: rec.TaskOutcome, fast: rec.FastActivation | None
) -> rec.TaskOutcomeResult:
    # Lock order: the run's row before its task's (see _dialect).
    run = one(conn, _RunHead, _RUN_HEAD, (o.run_id,))
    if run is None:
        return rec.TaskOutcomeResult(accepted=False)
    if not o.ok:
        row = one(
            conn,
            _Attempt,
            f"SELECT {columns(_Attempt)} FROM tasks WHERE run_id = ? AND cmd = ?",
            (o.run_id, o.cmd),
        )
        if row is None or row.status != "running" or row.fence != o.fence:
            return rec.TaskOutcomeResult(accepted=False)
        assert o.error is not None
        stamp = Stamp(o.cause) if o.cause is not None else None  # why it is not retried
        return fail_attempt(conn, o.run_id, o.cmd, o.reason, o.error, o.worker_id, o.now, stamp)
    # The fence check and the completion are one statement; it also says whether the
    # attempt made model calls, so that most completions (none) skip settling them.
    done_row = one(
        conn,
        _Done,
        "UPDATE tasks SET status = 'completed', lease_owner = NULL, lease_expires_at = NULL "
        "WHERE run_id = ? AND cmd = ? AND status = 'running' AND fence = ? RETURNING cmd, "
        f"EXISTS ({OPEN_CALLS}) AS calls",
        (o.run_id, o.cmd, o.fence, o.run_id, o.cmd, o.attempt),
    )
    if done_row is None:
        return rec.TaskOutcomeResult(accepted=False)
    if done_row.calls:  # the attempt's model calls become the step's, in this transaction
        mark_attempt_calls(conn, o.run_id, o.cmd, o.attempt, "committed")
    memory = volumes.commit_task(conn, o) if o.volume_commits else []
    if memory:  # staged volume writes commit with the completion, before it
        last = append(conn, o.run_id, memory, o.now, next_seq=run.next_seq)
        run = run._replace(next_seq=last + 1)
    done = ev.TaskCompleted(
        cmd=o.cmd, result=o.result, attempt=o.attempt, worker=o.worker_id, started_at=o.started_at
    )
    if fast is not None and _unchanged(run, fast, o.now):
        activation = _apply_fast(conn, o.run_id, o.worker_id, o.now, fast, done, run)
        return rec.TaskOutcomeResult(accepted=True, final=True, activation=activation)
    append(conn, o.run_id, [done], o.now, next_seq=run.next_seq)
    return rec.TaskOutcomeResult(accepted=True, final=True)


def fire_timer(
    conn: sqlite3.Connection,
    run_id: str,
    cmd: int,
    worker_id: str,
    now: float,
    fast: rec.FastActivation,
) -> rec.CommitResult | None:
    """The timer's hot path (see ``Store.fire_timer``); lock order: run, then timer."""
    run = one(conn, _RunHead, _RUN_HEAD, (run_id,))
    if run is None or run.status != "running":
        return None
    fired = one(
        conn,
        _Cmd,
        "UPDATE timers SET status = 'fired' WHERE run_id = ? AND cmd = ? "
        "AND status = 'pending' RETURNING cmd",
        (run_id, cmd),
    )
    if fired is None:
        return None
    timer = ev.TimerFired(cmd=cmd)
    if _unchanged(run, fast, now):
        return _apply_fast(conn, run_id, worker_id, now, fast, timer, run)
    append(conn, run_id, [timer], now, next_seq=run.next_seq)
    return None


def _unchanged(run: _RunHead, fast: rec.FastActivation, now: float) -> bool:
    """Nothing happened to the run since the worker's instance last committed."""
    lease_free = (
        run.lease_owner is None or run.lease_expires_at is None or run.lease_expires_at < now
    )
    same = run.fence == fast.run_fence and run.last_input_seq == fast.last_input_seq
    return bool(run.status == "running" and same and lease_free)


def _apply_fast(
    conn: sqlite3.Connection,
    run_id: str,
    worker_id: str,
    now: float,
    fast: rec.FastActivation,
    arrived: ev.Event,
    run: _RunHead,
) -> rec.CommitResult:
    """Append the input that ``fast`` was computed from, its marker and commands."""
    seq = run.next_seq
    marker = ev.ActivationCompleted(
        saw_upto=seq, time=fast.time, worker=worker_id, code_version=fast.code_version
    )
    last, eager = append_and_apply(
        conn,
        RunRef(run_id, run.workflow_id, run.task_queue),
        [arrived, marker],
        fast.commands,
        now,
        next_seq=seq,
        then=", fence = fence + 1, runnable = 0, lease_owner = NULL, lease_expires_at = NULL",
        eager_worker=worker_id if fast.eager_claim else None,
        eager_limit=fast.eager_limit,
        lease_ttl=fast.lease_ttl,
    )
    return rec.CommitResult(
        ok=True, last_seq=last, fence=fast.run_fence + 1, eager=eager, saw_upto=seq
    )


def fail_attempt(
    conn: sqlite3.Connection,
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
