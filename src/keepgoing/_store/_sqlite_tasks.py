"""Task attempts on SQLite: claims, completions (with the fast activation), failures.

Part of the store's SQL with ``_sqlite_ops`` (runs, history, activations);
functions run inside the caller's write transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from keepgoing._history import events as ev
from keepgoing._store import _sqlite_volumes as volumes
from keepgoing._store import records as rec
from keepgoing._store._sqlite_ops import (
    TASK_COLUMNS,
    append,
    apply_commands,
    marks,
    task_claim,
)
from keepgoing._store.transitions import decide_failure

_WORKER_LOST = "keepgoing.WorkerLost"


# -- tasks -----------------------------------------------------------------------------
def claim_tasks(
    conn: sqlite3.Connection,
    worker_id: str,
    queues: Sequence[str],
    names: Sequence[str],
    limit: int,
    lease_ttl: float,
    now: float,
) -> list[rec.TaskClaim]:
    if not queues or not names or limit <= 0:
        return []
    keys = conn.execute(
        "SELECT run_id, cmd FROM tasks WHERE status = 'pending' AND available_at <= ? "
        f"AND queue IN ({marks(queues)}) AND name IN ({marks(names)}) "
        "ORDER BY available_at LIMIT ? /*FOR UPDATE SKIP LOCKED*/",
        (now, *queues, *names, limit),
    ).fetchall()
    claims = []
    for run_id, cmd in keys:
        row = conn.execute(
            "UPDATE tasks SET status = 'running', attempt = attempt + 1, fence = fence + 1, "
            "started_at = ?, deadline = ? + timeout, lease_owner = ?, "
            "lease_expires_at = MIN(? + ?, ? + timeout + ?) WHERE run_id = ? AND cmd = ? "
            f"RETURNING {TASK_COLUMNS}",
            (now, now, worker_id, now, lease_ttl, now, lease_ttl, run_id, cmd),
        ).fetchone()
        claims.append(task_claim(row))
    return claims


def complete_task(
    conn: sqlite3.Connection, o: rec.TaskOutcome, fast: rec.FastActivation | None
) -> rec.TaskOutcomeResult:
    # Lock order: the run's row before its task's (see _dialect).
    run = conn.execute(_RUN_HEAD, (o.run_id,)).fetchone()
    if run is None:
        return rec.TaskOutcomeResult(accepted=False)
    if not o.ok:
        row = conn.execute(
            "SELECT status, fence FROM tasks WHERE run_id = ? AND cmd = ?", (o.run_id, o.cmd)
        ).fetchone()
        if row is None or row[0] != "running" or row[1] != o.fence:
            return rec.TaskOutcomeResult(accepted=False)
        assert o.error is not None
        return fail_attempt(conn, o.run_id, o.cmd, o.reason, o.error, o.worker_id, o.now)
    # The fence check and the completion are one statement.
    done_row = conn.execute(
        "UPDATE tasks SET status = 'completed', lease_owner = NULL, lease_expires_at = NULL "
        "WHERE run_id = ? AND cmd = ? AND status = 'running' AND fence = ? RETURNING cmd",
        (o.run_id, o.cmd, o.fence),
    ).fetchone()
    if done_row is None:
        return rec.TaskOutcomeResult(accepted=False)
    memory = volumes.commit_task(conn, o) if o.volume_commits else []
    if memory:  # staged volume writes commit with the completion, before it
        last = append(conn, o.run_id, memory, o.now, next_seq=run[5])
        run = (*run[:5], last + 1, *run[6:])
    done = ev.TaskCompleted(
        cmd=o.cmd, result=o.result, attempt=o.attempt, worker=o.worker_id, started_at=o.started_at
    )
    if fast is not None and _unchanged(run, fast, o.now):
        activation = _apply_fast(conn, o.run_id, o.worker_id, o.now, fast, done, run)
        return rec.TaskOutcomeResult(accepted=True, final=True, activation=activation)
    append(conn, o.run_id, [done], o.now, next_seq=run[5])
    return rec.TaskOutcomeResult(accepted=True, final=True)


_RUN_HEAD = (
    "SELECT status, fence, last_input_seq, lease_owner, lease_expires_at, next_seq, "
    "workflow_id, task_queue FROM runs WHERE run_id = ? /*FOR UPDATE*/"
)


def fire_timer(
    conn: sqlite3.Connection,
    run_id: str,
    cmd: int,
    worker_id: str,
    now: float,
    fast: rec.FastActivation,
) -> rec.CommitResult | None:
    """The timer's hot path (see ``Store.fire_timer``); lock order: run, then timer."""
    run = conn.execute(_RUN_HEAD, (run_id,)).fetchone()
    if run is None or run[0] != "running":
        return None
    fired = conn.execute(
        "UPDATE timers SET status = 'fired' WHERE run_id = ? AND cmd = ? "
        "AND status = 'pending' RETURNING cmd",
        (run_id, cmd),
    ).fetchone()
    if fired is None:
        return None
    timer = ev.TimerFired(cmd=cmd)
    if _unchanged(run, fast, now):
        return _apply_fast(conn, run_id, worker_id, now, fast, timer, run)
    append(conn, run_id, [timer], now, next_seq=run[5])
    return None


def _unchanged(run: tuple[Any, ...], fast: rec.FastActivation, now: float) -> bool:
    """Nothing happened to the run since the worker's instance last committed."""
    lease_free = run[3] is None or run[4] < now
    same = run[1] == fast.run_fence and run[2] == fast.last_input_seq
    return bool(run[0] == "running" and same and lease_free)


def _apply_fast(
    conn: sqlite3.Connection,
    run_id: str,
    worker_id: str,
    now: float,
    fast: rec.FastActivation,
    arrived: ev.Event,
    run: tuple[Any, ...],
) -> rec.CommitResult:
    """Append the input that ``fast`` was computed from, its marker and commands."""
    seq = run[5]
    marker = ev.ActivationCompleted(saw_upto=seq, time=fast.time, worker=worker_id)
    last = append(
        conn,
        run_id,
        [arrived, marker, *fast.commands],
        now,
        next_seq=seq,
        then=", fence = fence + 1, runnable = 0, lease_owner = NULL, lease_expires_at = NULL",
    )
    eager = apply_commands(
        conn,
        (run_id, run[6], run[7]),
        fast.commands,
        now,
        worker_id if fast.eager_claim else None,
        fast.eager_limit,
        fast.lease_ttl,
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
) -> rec.TaskOutcomeResult:
    t = conn.execute(
        "SELECT name, attempt, failures, worker_losses, retries, max_worker_losses, retry_delay, "
        "started_at FROM tasks WHERE run_id = ? AND cmd = ?",
        (run_id, cmd),
    ).fetchone()
    name, attempt = t[0], t[1]
    decision = decide_failure(
        reason=reason,
        failures=t[2],
        worker_losses=t[3],
        retries=t[4],
        max_worker_losses=t[5],
        retry_delay=t[6],
        now=now,
    )
    failed = ev.TaskAttemptFailed(
        cmd=cmd,
        name=name,
        attempt=attempt,
        error=error,
        reason=reason,
        worker=worker,
        started_at=t[7],
        retry_at=decision.retry_at,
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
    conn.execute(
        "UPDATE tasks SET status = 'failed', failures = ?, worker_losses = ?, "
        "lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ? AND cmd = ?",
        (decision.failures, decision.worker_losses, run_id, cmd),
    )
    final_error = error
    if decision.final_message is not None:
        final_error = ev.ErrorInfo(type=_WORKER_LOST, message=decision.final_message)
    gave_up = ev.TaskFailed(cmd=cmd, name=name, error=final_error, attempts=attempt, reason=reason)
    append(conn, run_id, [failed, gave_up], now)
    return rec.TaskOutcomeResult(accepted=True, final=True)
