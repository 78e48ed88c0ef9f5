"""Task completions and fired timers, with the fast activation that may follow either.

Functions run inside the caller's write transaction. Claims, releases and the
fence itself are in ``leases``; a failed attempt is recorded by ``failures``.
"""

from __future__ import annotations

from typing import NamedTuple

from keepgoing._history import events as ev
from keepgoing._store import records as rec
from keepgoing._store.sql import volumes
from keepgoing._store.sql.commands import append_and_apply
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.failures import fail_attempt
from keepgoing._store.sql.gateway import OPEN_CALLS, mark_attempt_calls
from keepgoing._store.sql.history import append
from keepgoing._store.sql.leases import FENCED
from keepgoing._store.sql.rows import first, one
from keepgoing._store.sql.runs import CommandRun
from keepgoing._store.worker_stops import Stamp


class _RunHead(NamedTuple):
    """What a completion or a timer reads of its run (locked)."""

    status: str
    fenced: bool
    last_input_seq: int
    lease_owner: str | None
    lease_expires_at: float | None
    next_seq: int
    workflow_id: str
    task_queue: str


class _Cmd(NamedTuple):
    cmd: int


class _Done(NamedTuple):
    """What a completion returns of its task: its key, whether the attempt has
    open model calls in the gateway ledger to settle, and whether it held a slot of
    a concurrency limit (its completion frees one: the claims are woken)."""

    cmd: int
    calls: bool
    limit_name: str | None


# ``fenced``: the fast activation's fence still holds (its parameter comes first).
_RUN_HEAD = (
    f"SELECT status, ({FENCED}) AS fenced, last_input_seq, lease_owner, lease_expires_at, "
    "next_seq, workflow_id, task_queue FROM runs WHERE run_id = ? /*FOR UPDATE*/"
)


#: A task's completion: fenced by its attempt's lease, only while its run's row exists.
_COMPLETE = (
    "UPDATE tasks SET status = 'completed', lease_owner = NULL, lease_expires_at = NULL "
    f"WHERE run_id = ? AND cmd = ? AND {FENCED} "
    "AND EXISTS (SELECT 1 FROM runs WHERE run_id = ?) "
    # The limit's name itself, tested here: SQLite 3.40's RETURNING gives
    # ``limit_name IS NOT NULL`` as 1 for a NULL in a column ALTER TABLE added.
    f"RETURNING cmd, EXISTS ({OPEN_CALLS}) AS calls, limit_name"
)


def _run_head(conn: Connection, run_id: str, fast: rec.FastActivation | None) -> _RunHead | None:
    """The run's head, locked; ``fenced`` says whether ``fast`` was computed on it."""
    return one(conn, _RunHead, _RUN_HEAD, (fast.run_fence if fast is not None else -1, run_id))


def complete_task(
    conn: Connection, o: rec.TaskOutcome, fast: rec.FastActivation | None
) -> rec.TaskOutcomeResult:
    if not o.ok:
        return _fail_task(conn, o, fast)
    # Lock order: the run's row before its task's (see sql/dialect.py). The run's read
    # and the task's completion are both sent before either is read: one round trip
    # on PostgreSQL. The fence check and the completion are one statement, which also
    # says whether the attempt made model calls (most make none: nothing to settle);
    # it completes nothing when the run's row is gone.
    head = conn.execute(_RUN_HEAD, (fast.run_fence if fast is not None else -1, o.run_id))
    completed = conn.execute(
        _COMPLETE, (o.run_id, o.cmd, o.fence, o.run_id, o.run_id, o.cmd, o.attempt)
    )
    run = first(head, _RunHead, _RUN_HEAD)
    done_row = first(completed, _Done, _COMPLETE)
    if run is None or done_row is None:
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
    freed = done_row.limit_name is not None
    if fast is not None and _unchanged(run, fast, o.now):
        activation = _apply_fast(conn, o.run_id, o.worker_id, o.now, fast, done, run)
        return rec.TaskOutcomeResult(
            accepted=True, final=True, activation=activation, freed_slot=freed
        )
    append(conn, o.run_id, [done], o.now, next_seq=run.next_seq)
    return rec.TaskOutcomeResult(accepted=True, final=True, freed_slot=freed)


def _fail_task(
    conn: Connection, o: rec.TaskOutcome, fast: rec.FastActivation | None
) -> rec.TaskOutcomeResult:
    """A failed attempt's outcome, if its lease still holds (see ``failures``)."""
    if _run_head(conn, o.run_id, fast) is None:  # lock order: the run's row first
        return rec.TaskOutcomeResult(accepted=False)
    held = conn.execute(
        f"SELECT 1 FROM tasks WHERE run_id = ? AND cmd = ? AND {FENCED}",
        (o.run_id, o.cmd, o.fence),
    ).fetchone()
    if held is None:
        return rec.TaskOutcomeResult(accepted=False)
    assert o.error is not None
    stamp = Stamp(o.cause) if o.cause is not None else None  # why it is not retried
    return fail_attempt(conn, o.run_id, o.cmd, o.reason, o.error, o.worker_id, o.now, stamp)


def fire_timer(
    conn: Connection,
    run_id: str,
    cmd: int,
    worker_id: str,
    now: float,
    fast: rec.FastActivation,
) -> rec.CommitResult | None:
    """The timer's hot path (see ``Store.fire_timer``); lock order: run, then timer."""
    run = _run_head(conn, run_id, fast)
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
    return bool(run.fenced and run.last_input_seq == fast.last_input_seq and lease_free)


def _apply_fast(
    conn: Connection,
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
        CommandRun(run_id, run.workflow_id, run.task_queue),
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
