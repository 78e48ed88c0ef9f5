"""Leases, timers and the worker registry on SQLite (see ``_sqlite_ops``).

The sweeps here run on PostgreSQL too, with any number of callers at once;
their ``SKIP LOCKED`` markers are what make each due timer fire once and
each expired lease be reaped once (lock order: ``_dialect``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection
from typing import Any, NamedTuple

from keepgoing._history import events as ev
from keepgoing._payload import dumps, loads
from keepgoing._store import records as rec
from keepgoing._store.sql.rows import columns, every, value
from keepgoing._store.sql.runs import append, marks
from keepgoing._store.sql.stops import stops_of
from keepgoing._store.sql.tasks import TaskKey, fail_attempt
from keepgoing._store.stops import StopRow, loss_stamp, release_stamp
from keepgoing._store.transitions import lost_error, reap_reason


class _Expired(NamedTuple):
    """A running attempt whose lease a sweep may take back."""

    run_id: str
    cmd: int
    lease_owner: str | None
    deadline: float
    attempt: int
    timeout: float
    lease_expires_at: float


class _Owner(NamedTuple):
    worker_id: str
    liveness: str


class _Worker(NamedTuple):
    worker_id: str
    queues: str
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    info: str
    liveness: str | None
    lost_at: float | None
    lost_reason: str | None


class _Catalog(NamedTuple):
    name: str
    queue: str


def release_tasks(conn: sqlite3.Connection, worker_id: str, now: float) -> int:
    keys = every(
        conn,
        TaskKey,
        f"SELECT {columns(TaskKey)} FROM tasks WHERE status = 'running' AND lease_owner = ?",
        (worker_id,),
    )
    error = ev.ErrorInfo(type="keepgoing.Released", message="the worker shut down")
    stops = stops_of(conn, worker_id) if keys else []
    released = 0
    for key in keys:
        # The run's row first, then check the attempt is still ours (a reaper
        # may have taken it since the read above).
        conn.execute("SELECT 1 FROM runs WHERE run_id = ? /*FOR UPDATE*/", (key.run_id,))
        if conn.execute(
            "SELECT 1 FROM tasks WHERE run_id = ? AND cmd = ? AND status = 'running' "
            "AND lease_owner = ?",
            (key.run_id, key.cmd, worker_id),
        ).fetchone():
            stamp = release_stamp(stops, (key.run_id, key.cmd))
            fail_attempt(conn, key.run_id, key.cmd, "released", error, worker_id, now, stamp)
            released += 1
    conn.execute(
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner = ?",
        (worker_id,),
    )
    return released


class Beat(NamedTuple):
    """What a heartbeat did: the attempt leases still held, and whether the worker
    holds attempts it did not name that :func:`hand_back_unknown` is to hand back."""

    held: set[tuple[str, int]]
    unknown: bool


def heartbeat(
    conn: sqlite3.Connection,
    worker_id: str,
    lease_ttl: float,
    now: float,
    attempts: Collection[tuple[str, int]] | None = None,
    runs: Collection[str] | None = None,
    known_through: float | None = None,
) -> Beat:
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
    held: list[TaskKey] = []
    if keys is None or keys:
        only = "" if keys is None else f" AND (run_id, cmd) IN (VALUES {_pairs(len(keys))})"
        held = every(
            conn,
            TaskKey,
            "UPDATE tasks SET lease_expires_at = MIN(? + ?, deadline + ?) "
            f"WHERE status = 'running' AND lease_owner = ?{only} RETURNING {columns(TaskKey)}",
            (now, lease_ttl, lease_ttl, worker_id, *(v for key in keys or () for v in key)),
        )
    unknown = False
    if keys is not None and known_through is not None:
        unknown = bool(_unknown(conn, worker_id, set(keys), known_through))
    # A heartbeat from a worker marked lost (it was only frozen) makes it live again.
    conn.execute(
        "UPDATE workers SET heartbeat_at = ?, lost_at = NULL, lost_reason = NULL "
        "WHERE worker_id = ?",
        (now, worker_id),
    )
    return Beat({(r.run_id, r.cmd) for r in held}, unknown)


def _unknown(
    conn: sqlite3.Connection, worker_id: str, known: set[tuple[str, int]], before: float
) -> list[TaskKey]:
    """The attempts ``worker_id`` holds, claimed before ``before``, that it does not run."""
    rows = every(
        conn,
        TaskKey,
        f"SELECT {columns(TaskKey)} FROM tasks WHERE status = 'running' AND lease_owner = ? "
        "AND started_at < ?",
        (worker_id, before),
    )
    return [key for key in rows if (key.run_id, key.cmd) not in known]


def hand_back_unknown(
    conn: sqlite3.Connection, worker_id: str, known: set[tuple[str, int]], before: float, now: float
) -> int:
    """Hand back the attempts ``worker_id`` holds, claimed before ``before``, that it
    does not run: claims whose commit answer it never got (see ``Store.heartbeat``).

    Its own write, never a heartbeat's: it appends history, so it commits durably."""
    rows = _unknown(conn, worker_id, known, before)
    error = ev.ErrorInfo(
        type="keepgoing.Released",
        message="the worker never heard back from the commit that claimed this attempt",
    )
    released = 0
    for key in rows:
        if not _lock_run_or_skip(conn, key.run_id):
            continue  # its run is being written: the next beat
        still = conn.execute(
            "SELECT 1 FROM tasks WHERE run_id = ? AND cmd = ? AND status = 'running' "
            "AND lease_owner = ? AND started_at < ?",
            (key.run_id, key.cmd, worker_id, before),
        ).fetchone()
        if not still:
            continue  # ended or taken since the read above
        fail_attempt(conn, key.run_id, key.cmd, "released", error, worker_id, now)
        released += 1
    return released


def fire_due_timers(conn: sqlite3.Connection, now: float, limit: int) -> int:
    due = every(
        conn,
        TaskKey,  # a timer's key has the same shape: its run and its command
        f"SELECT {columns(TaskKey, 't.')} FROM timers t JOIN runs r ON r.run_id = t.run_id "
        "WHERE t.status = 'pending' AND t.fire_at <= ? AND r.status = 'running' "
        "ORDER BY t.fire_at LIMIT ? /*FOR UPDATE OF t SKIP LOCKED*/",
        (now, limit),
    )
    fired = 0
    for timer in due:
        # A run being written now is skipped, not waited for: its timer fires
        # in the next sweep (and this sweep can never be part of a deadlock).
        if not _lock_run_or_skip(conn, timer.run_id):
            continue
        conn.execute(
            "UPDATE timers SET status = 'fired' WHERE run_id = ? AND cmd = ?",
            (timer.run_id, timer.cmd),
        )
        append(conn, timer.run_id, [ev.TimerFired(cmd=timer.cmd)], now)
        fired += 1
    return fired


#: Reads the liveness tokens of lease owners: ``[(worker_id, token)]`` in, each
#: owner's state out (True alive, False gone, None unknown). The store supplies it.
Probe = Callable[[Any, list[tuple[str, str]]], dict[str, bool | None]]


def token_owners(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """The lease owners that recorded a liveness token, with the token."""
    rows = every(
        conn,
        _Owner,
        f"SELECT {columns(_Owner)} FROM workers WHERE liveness IS NOT NULL AND worker_id IN ("
        "SELECT lease_owner FROM tasks WHERE status = 'running' "
        "UNION SELECT lease_owner FROM runs WHERE lease_owner IS NOT NULL)",
    )
    return [(str(r.worker_id), str(r.liveness)) for r in rows]


def reap_expired_leases(
    conn: sqlite3.Connection, now: float, limit: int, probe: Probe | None = None
) -> int:
    """Take back the leases :func:`~keepgoing._store.transitions.reap_reason` says to:
    expired ones, except a living owner's before the attempt's deadline, and
    every lease of an owner whose token is free."""
    owners = token_owners(conn) if probe is not None else []
    states = probe(conn, owners) if probe is not None and owners else {}
    dead = sorted(o for o, alive in states.items() if alive is False)
    alive = sorted(o for o, alive in states.items() if alive is True)
    gone = f" OR lease_owner IN ({marks(dead)})" if dead else ""
    conn.execute(
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE run_id IN ("
        f"SELECT run_id FROM runs WHERE lease_owner IS NOT NULL AND (lease_expires_at < ?{gone}) "
        "/*FOR UPDATE SKIP LOCKED*/)",
        (now, *dead),
    )
    # A living owner keeps its expired leases until the deadline (it hands back
    # the ones it does not know it holds itself, on its heartbeat).
    kept = f" AND (lease_owner NOT IN ({marks(alive)}) OR deadline < ?)" if alive else ""
    expired = every(
        conn,
        _Expired,
        f"SELECT {columns(_Expired)} "
        f"FROM tasks WHERE status = 'running' AND ((lease_expires_at < ?{kept}){gone}) "
        "ORDER BY lease_expires_at LIMIT ? /*FOR UPDATE SKIP LOCKED*/",
        (now, *alive, *((now,) if alive else ()), *dead, limit),
    )
    reaped = 0
    stops: dict[str, list[StopRow]] = {}
    for t in expired:
        state = states.get(t.lease_owner) if t.lease_owner is not None else None
        reason = reap_reason(
            expired=t.lease_expires_at < now, past_deadline=now > t.deadline, owner_alive=state
        )
        if reason is None or not _lock_run_or_skip(conn, t.run_id):
            continue  # its run is being written: the next sweep reaps it
        stamp = None
        if reason == "worker_lost":
            owner = t.lease_owner or ""
            if owner not in stops:
                stops[owner] = stops_of(conn, owner)
            stamp = loss_stamp(
                stops[owner],
                lease_expires_at=t.lease_expires_at,
                owner_alive=state,
                now=now,
                key=(t.run_id, t.cmd),
            )
            if stamp is None:
                continue  # a stop of its worker is being signalled: the next sweep
        error = lost_error(reason, t.lease_owner, t.attempt, t.timeout, state)
        fail_attempt(conn, t.run_id, t.cmd, reason, error, t.lease_owner or "", now, stamp)
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
    due = value(
        conn,
        "SELECT MIN(x) FROM ("
        " SELECT MIN(t.fire_at) AS x FROM timers t JOIN runs r ON r.run_id = t.run_id"
        "  WHERE t.status = 'pending' AND r.status = 'running'"
        " UNION ALL SELECT MIN(available_at) FROM tasks WHERE status = 'pending'"
        " UNION ALL SELECT MIN(lease_expires_at) FROM tasks WHERE status = 'running'"
        " UNION ALL SELECT MIN(lease_expires_at) FROM runs WHERE lease_owner IS NOT NULL) AS due",
    )
    return float(due) if due is not None else None


def register_worker(conn: sqlite3.Connection, w: rec.WorkerRecord) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO workers (worker_id, queues, host, pid, started_at, heartbeat_at, "
        "info, liveness, lost_at, lost_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
        (
            w.worker_id,
            dumps(w.queues),
            w.host,
            w.pid,
            w.started_at,
            w.heartbeat_at,
            dumps(w.info),
            w.liveness,
        ),
    )


def deregister_worker(conn: sqlite3.Connection, worker_id: str) -> None:
    conn.execute("DELETE FROM workers WHERE worker_id = ?", (worker_id,))


def list_workers(conn: sqlite3.Connection) -> list[rec.WorkerRecord]:
    rows = every(
        conn, _Worker, f"SELECT {columns(_Worker)} FROM workers ORDER BY started_at, worker_id"
    )
    return [
        rec.WorkerRecord(
            worker_id=r.worker_id,
            queues=loads(r.queues),
            host=r.host,
            pid=r.pid,
            started_at=r.started_at,
            heartbeat_at=r.heartbeat_at,
            info=loads(r.info),
            liveness=r.liveness,
            lost_at=r.lost_at,
            lost_reason=r.lost_reason,
        )
        for r in rows
    ]


def record_workflows(
    conn: sqlite3.Connection, names: list[str], queues: list[str], now: float
) -> None:
    conn.executemany(
        "INSERT OR REPLACE INTO workflow_catalog (name, queue, last_seen) VALUES (?, ?, ?)",
        [(n, q, now) for n in names for q in queues],
    )


def known_workflows(conn: sqlite3.Connection) -> dict[str, list[str]]:
    known: dict[str, list[str]] = {}
    for r in every(
        conn, _Catalog, f"SELECT {columns(_Catalog)} FROM workflow_catalog ORDER BY name, queue"
    ):
        known.setdefault(r.name, []).append(r.queue)
    return known
