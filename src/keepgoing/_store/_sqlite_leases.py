"""Leases, timers and the worker registry on SQLite (see ``_sqlite_ops``).

The sweeps here run on PostgreSQL too, with any number of callers at once;
their ``SKIP LOCKED`` markers are what make each due timer fire once and
each expired lease be reaped once (lock order: ``_dialect``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from typing import Any

from keepgoing._history import events as ev
from keepgoing._payload import dumps, loads
from keepgoing._store import records as rec
from keepgoing._store._sqlite_ops import append, marks
from keepgoing._store._sqlite_tasks import fail_attempt


def release_tasks(conn: sqlite3.Connection, worker_id: str, now: float) -> int:
    rows = conn.execute(
        "SELECT run_id, cmd FROM tasks WHERE status = 'running' AND lease_owner = ?",
        (worker_id,),
    ).fetchall()
    error = ev.ErrorInfo(type="keepgoing.Released", message="the worker shut down")
    released = 0
    for run_id, cmd in rows:
        # The run's row first, then check the attempt is still ours (a reaper
        # may have taken it since the read above).
        conn.execute("SELECT 1 FROM runs WHERE run_id = ? /*FOR UPDATE*/", (run_id,))
        if conn.execute(
            "SELECT 1 FROM tasks WHERE run_id = ? AND cmd = ? AND status = 'running' "
            "AND lease_owner = ?",
            (run_id, cmd, worker_id),
        ).fetchone():
            fail_attempt(conn, run_id, cmd, "released", error, worker_id, now)
            released += 1
    conn.execute(
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner = ?",
        (worker_id,),
    )
    return released


def heartbeat(
    conn: sqlite3.Connection,
    worker_id: str,
    lease_ttl: float,
    now: float,
    attempts: Collection[tuple[str, int]] | None = None,
    runs: Collection[str] | None = None,
) -> set[tuple[str, int]]:
    # Runs before tasks: the lock order (see _dialect). With ``runs`` or
    # ``attempts``, only those leases: a lease the worker does not know of expires.
    run_ids = None if runs is None else list(runs)
    if run_ids is None or run_ids:
        only = "" if run_ids is None else f" AND run_id IN ({marks(run_ids)})"
        conn.execute(
            f"UPDATE runs SET lease_expires_at = ? WHERE lease_owner = ?{only}",
            (now + lease_ttl, worker_id, *(run_ids or ())),
        )
    keys = None if attempts is None else sorted(attempts)
    held = []
    if keys is None or keys:
        only = "" if keys is None else f" AND (run_id, cmd) IN (VALUES {_pairs(len(keys))})"
        held = conn.execute(
            "UPDATE tasks SET lease_expires_at = MIN(? + ?, deadline + ?) "
            f"WHERE status = 'running' AND lease_owner = ?{only} RETURNING run_id, cmd",
            (now, lease_ttl, lease_ttl, worker_id, *(v for key in keys or () for v in key)),
        ).fetchall()
    conn.execute("UPDATE workers SET heartbeat_at = ? WHERE worker_id = ?", (now, worker_id))
    return {(r[0], r[1]) for r in held}


def fire_due_timers(conn: sqlite3.Connection, now: float, limit: int) -> int:
    due = conn.execute(
        "SELECT t.run_id, t.cmd FROM timers t JOIN runs r ON r.run_id = t.run_id "
        "WHERE t.status = 'pending' AND t.fire_at <= ? AND r.status = 'running' "
        "ORDER BY t.fire_at LIMIT ? /*FOR UPDATE OF t SKIP LOCKED*/",
        (now, limit),
    ).fetchall()
    fired = 0
    for run_id, cmd in due:
        # A run being written now is skipped, not waited for: its timer fires
        # in the next sweep (and this sweep can never be part of a deadlock).
        if not _lock_run_or_skip(conn, run_id):
            continue
        conn.execute(
            "UPDATE timers SET status = 'fired' WHERE run_id = ? AND cmd = ?", (run_id, cmd)
        )
        append(conn, run_id, [ev.TimerFired(cmd=cmd)], now)
        fired += 1
    return fired


def reap_expired_leases(conn: sqlite3.Connection, now: float, limit: int) -> int:
    conn.execute(
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE run_id IN ("
        "SELECT run_id FROM runs WHERE lease_owner IS NOT NULL AND lease_expires_at < ? "
        "/*FOR UPDATE SKIP LOCKED*/)",
        (now,),
    )
    expired = conn.execute(
        "SELECT run_id, cmd, lease_owner, deadline, attempt, timeout FROM tasks "
        "WHERE status = 'running' AND lease_expires_at < ? ORDER BY lease_expires_at LIMIT ? "
        "/*FOR UPDATE SKIP LOCKED*/",
        (now, limit),
    ).fetchall()
    reaped = 0
    for run_id, cmd, owner, deadline, attempt, timeout in expired:
        if not _lock_run_or_skip(conn, run_id):
            continue  # its run is being written: the next sweep reaps it
        if now > deadline:
            reason = "timeout"
            error = ev.ErrorInfo(
                type="TimeoutError",
                message=f"attempt {attempt} exceeded its timeout of {timeout:g}s",
            )
        else:
            reason = "worker_lost"
            error = ev.ErrorInfo(
                type="keepgoing.WorkerLost", message=f"worker {owner} stopped renewing its lease"
            )
        fail_attempt(conn, run_id, cmd, reason, error, owner or "", now)
        reaped += 1
    return reaped


def _pairs(count: int) -> str:
    return ", ".join(["(?, ?)"] * count)


def _lock_run_or_skip(conn: sqlite3.Connection, run_id: str) -> bool:
    """Lock the run's row unless another transaction holds it (SQLite: always)."""
    row = conn.execute(
        "SELECT 1 FROM runs WHERE run_id = ? /*FOR UPDATE SKIP LOCKED*/", (run_id,)
    ).fetchone()
    return row is not None


def next_wakeup(conn: sqlite3.Connection) -> float | None:
    row = conn.execute(
        "SELECT MIN(x) FROM ("
        " SELECT MIN(t.fire_at) AS x FROM timers t JOIN runs r ON r.run_id = t.run_id"
        "  WHERE t.status = 'pending' AND r.status = 'running'"
        " UNION ALL SELECT MIN(available_at) FROM tasks WHERE status = 'pending'"
        " UNION ALL SELECT MIN(lease_expires_at) FROM tasks WHERE status = 'running'"
        " UNION ALL SELECT MIN(lease_expires_at) FROM runs WHERE lease_owner IS NOT NULL) AS due"
    ).fetchone()
    return float(row[0]) if row and row[0] is not None else None


def register_worker(conn: sqlite3.Connection, w: rec.WorkerRecord) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO workers (worker_id, queues, host, pid, started_at, heartbeat_at, "
        "info) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (w.worker_id, dumps(w.queues), w.host, w.pid, w.started_at, w.heartbeat_at, dumps(w.info)),
    )


def deregister_worker(conn: sqlite3.Connection, worker_id: str) -> None:
    conn.execute("DELETE FROM workers WHERE worker_id = ?", (worker_id,))


def list_workers(conn: sqlite3.Connection) -> list[rec.WorkerRecord]:
    rows: list[Any] = conn.execute(
        "SELECT worker_id, queues, host, pid, started_at, heartbeat_at, info FROM workers "
        "ORDER BY started_at, worker_id"
    ).fetchall()
    return [rec.WorkerRecord(r[0], loads(r[1]), r[2], r[3], r[4], r[5], loads(r[6])) for r in rows]


def record_workflows(
    conn: sqlite3.Connection, names: list[str], queues: list[str], now: float
) -> None:
    conn.executemany(
        "INSERT OR REPLACE INTO workflow_catalog (name, queue, last_seen) VALUES (?, ?, ?)",
        [(n, q, now) for n in names for q in queues],
    )


def known_workflows(conn: sqlite3.Connection) -> dict[str, list[str]]:
    known: dict[str, list[str]] = {}
    for name, queue in conn.execute(
        "SELECT name, queue FROM workflow_catalog ORDER BY name, queue"
    ):
        known.setdefault(name, []).append(queue)
    return known
