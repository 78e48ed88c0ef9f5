"""Leases and the fence: every statement that grants, renews, checks or takes back one.

A lease is a value on its row: ``lease_owner``, ``lease_expires_at`` and the
fencing token ``fence``, which every claim increments. A run's lease is an
activation (one worker runs its workflow code); a task's is an attempt. This
module holds the two rules every such statement uses, each one SQL fragment:

* :data:`FENCED`, the fence: a holder's write lands only while its row still
  runs under the fence its claim took (a completion, a commit, a release);
* :func:`attempt_lease`, the attempt-lease cap: ``lease_ttl`` from now, never
  more than ``lease_ttl`` past the attempt's deadline (a claim, a heartbeat;
  the eager claim, whose figures are all in hand, takes the same cap from
  :func:`attempt_lease_at`, the rule's one Python spelling);

and the statements: activation claims (:func:`claim_activations`, with the
revision rule :func:`revision_rule`), task claims (:func:`claim_tasks`), the
eager claim of a task a commit schedules (:func:`insert_task`), releases
(:func:`release_activation`, :func:`release_tasks`, :func:`hand_back_unknown`),
the heartbeat, the reaper (:func:`reap_expired_leases`) and the due-timer sweep.

The sweeps run on PostgreSQL too, with any number of callers at once; their
``SKIP LOCKED`` markers are what make each due timer fire once and each expired
lease be reaped once (lock order: ``sql/dialect.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple

from keepgoing._history import events as ev
from keepgoing._payload import encode, loads
from keepgoing._store import records as rec
from keepgoing._store.sql.admission import (
    RUN_ORDER,
    SLOT_FREE,
    TASK_ORDER,
    Candidate,
    admit_claimed,
)
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.failures import fail_attempt
from keepgoing._store.sql.history import append
from keepgoing._store.sql.limits import (
    ADMITTED,
    LIMIT_COLUMNS,
    RENEWABLE,
    Buckets,
    LimitRow,
    admit,
    limit_row,
    save_buckets,
)
from keepgoing._store.sql.rows import columns, every, one, value
from keepgoing._store.sql.runs import (
    RUN_COLUMNS,
    TASK_COLUMNS,
    ClaimRow,
    CommandRun,
    marks,
    run_records,
    task_claim,
)
from keepgoing._store.sql.worker_stops import stops_of
from keepgoing._store.transitions import lost_error, reap_reason
from keepgoing._store.worker_stops import StopRow, loss_stamp, release_stamp

#: The fence rule, for a run's row or a task's: the holder's write lands only while
#: the row still runs under the fence its claim took. One parameter: that fence.
FENCED = "status = 'running' AND fence = ?"

#: What an activation claim sets on a run's row: a new fence, the owner, the expiry.
#: Parameters: the owner, the expiry.
ACTIVATION_LEASE = "fence = fence + 1, lease_owner = ?, lease_expires_at = ?"


def attempt_lease(deadline: str) -> str:
    """The attempt-lease cap: an attempt's lease runs ``lease_ttl`` from now, but never
    more than ``lease_ttl`` past its ``deadline`` (an SQL expression). Parameters:
    now, lease_ttl, those of ``deadline``, lease_ttl."""
    return f"MIN(? + ?, {deadline} + ?)"


def attempt_lease_at(now: float, lease_ttl: float, deadline: float) -> float:
    """:func:`attempt_lease` on figures in hand: the same sums and the same least, in
    the same IEEE doubles the stores compute with, so the value is the one SQL gives."""
    return min(now + lease_ttl, deadline + lease_ttl)


class TaskKey(NamedTuple):
    """A task's key: its run and the command that scheduled it."""

    run_id: str
    cmd: int


class _Lease(NamedTuple):
    lease_expires_at: float


# -- claims ------------------------------------------------------------------------
def revision_rule(revision: int | None, column: str = "group_revision") -> tuple[str, list[int]]:
    """The claim rule of pinning: a worker of group revision ``revision`` takes only the
    runs of that revision (and runs from before their queue had a group); a worker of
    no revision takes any. Returns the SQL to AND in, and its parameters."""
    if revision is None:
        return "", []
    return f" AND ({column} IS NULL OR {column} = ?)", [revision]


def claim_activations(
    conn: Connection,
    worker_id: str,
    queues: Sequence[str],
    names: Sequence[str],
    limit: int,
    lease_ttl: float,
    now: float,
    revision: int | None = None,
) -> list[rec.ActivationClaim]:
    if not queues or not names or limit <= 0:
        return []
    pinned, pin = revision_rule(revision)
    # A queued run is selected only with a free slot of its key; admit_claimed
    # admits it (or leaves it queued when an earlier run here took the slot).
    candidates = every(
        conn,
        Candidate,
        f"SELECT {columns(Candidate)} FROM runs WHERE runnable = 1 AND status = 'running' "
        f"AND task_queue IN ({marks(queues)}) AND workflow_name IN ({marks(names)}) "
        f"AND (lease_owner IS NULL OR lease_expires_at < ?){pinned} AND {SLOT_FREE} "
        f"ORDER BY {RUN_ORDER} LIMIT ? /*FOR UPDATE SKIP LOCKED*/",
        (*queues, *names, now, *pin, limit),
    )
    ids = admit_claimed(conn, candidates)
    if not ids:
        return []
    expires = now + lease_ttl
    claimed = run_records(
        conn,
        f"UPDATE runs SET {ACTIVATION_LEASE} "
        f"WHERE run_id IN ({marks(ids)}) RETURNING {RUN_COLUMNS}",
        (worker_id, expires, *ids),
    )
    order = {run_id: i for i, run_id in enumerate(ids)}  # in RUN_ORDER
    runs = sorted(claimed, key=lambda run: order[run.run_id])
    return [rec.ActivationClaim(run=run, fence=run.fence, lease_expires_at=expires) for run in runs]


def insert_task(
    conn: Connection,
    run: CommandRun,
    t: ev.TaskScheduled,
    now: float,
    owner: str | None,
    lease_ttl: float,
) -> rec.TaskClaim | None:
    """Insert a scheduled task; claimed at once by ``owner`` when given (eager dispatch)."""
    run_id, workflow_id, queue = run.run_id, run.workflow_id, run.task_queue
    queue = t.task_queue or queue
    what = f"the arguments of task {t.name!r}"
    args, kwargs = encode(t.args, what), encode(t.kwargs, what)
    deadline = now + t.timeout
    limits, available_at = limit_row(t.limits), now
    if owner is not None and limits != _UNLIMITED:
        # The eager claim admits like any claim; held back, the task is inserted pending.
        admission = admit(conn, limits, now)
        if not admission.admitted:
            owner, available_at = None, admission.retry_at or now
    # The eager claim: the task is inserted running, its lease capped by the one rule,
    # figured here: nothing is read back, so on PostgreSQL the INSERT waits for no answer.
    lease = None if owner is None else attempt_lease_at(now, lease_ttl, deadline)
    conn.execute(
        "INSERT INTO tasks (run_id, cmd, workflow_id, name, queue, status, args, kwargs, image, "
        "retries, retry_delay, timeout, max_worker_losses, attempt, fence, available_at, "
        f"started_at, deadline, lease_owner, lease_expires_at, operation_id, {_LIMITS}, "
        "priority) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        f"{marks(LIMIT_COLUMNS)}, (SELECT priority FROM runs WHERE run_id = ?))",
        (
            run_id,
            t.cmd,
            workflow_id,
            t.name,
            queue,
            "running" if owner else "pending",
            args,
            kwargs,
            t.image,
            t.retries,
            t.retry_delay,
            t.timeout,
            t.max_worker_losses,
            1 if owner else 0,
            1 if owner else 0,
            available_at,
            now if owner else None,
            deadline if owner else None,
            owner,
            lease,
            t.operation_id,
            *limits,
            run_id,
        ),
    )
    if lease is None:  # not claimed
        return None
    return rec.TaskClaim(
        run_id=run_id,
        workflow_id=workflow_id,
        cmd=t.cmd,
        name=t.name,
        args=loads(args),  # decoded from what is stored: never the workflow's own objects
        kwargs=loads(kwargs),
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
        operation_id=t.operation_id,
    )


_UNLIMITED = LimitRow()
_LIMITS = ", ".join(LIMIT_COLUMNS)


class _Candidate(NamedTuple):
    """A pending task a claim may take, with its limits."""

    run_id: str
    cmd: int
    limit_name: str | None
    limit_key: str | None
    concurrency_cap: int | None
    rate_name: str | None
    rate_key: str | None
    rate_tokens: int | None
    rate_period: float | None
    rate_burst: int | None


def claim_tasks(
    conn: Connection,
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
        _Candidate,
        f"SELECT {columns(_Candidate)} FROM tasks WHERE status = 'pending' AND available_at <= ? "
        f"AND queue IN ({marks(queues)}) AND name IN ({marks(names)}){pinned} AND {ADMITTED} "
        f"ORDER BY {TASK_ORDER} LIMIT ? /*FOR UPDATE SKIP LOCKED*/",
        (now, *queues, *names, *params, now, limit),
    )
    claims = []
    counts: dict[tuple[str, str], int] = {}  # slots held per key, counted once per claim
    buckets: Buckets = {}  # token buckets, read once per claim and written once at its end
    for key in keys:
        limits = LimitRow(*key[2:])
        if limits != _UNLIMITED:  # flow control: a slot and a token, or it waits pending
            admission = admit(conn, limits, now, counts, buckets)
            if not admission.admitted:
                if admission.retry_at is not None:  # its token's instant: the next wake-up
                    conn.execute(
                        "UPDATE tasks SET available_at = ? WHERE run_id = ? AND cmd = ?",
                        (admission.retry_at, key.run_id, key.cmd),
                    )
                continue
        row = one(
            conn,
            ClaimRow,
            "UPDATE tasks SET status = 'running', attempt = attempt + 1, fence = fence + 1, "
            "started_at = ?, deadline = ? + timeout, lease_owner = ?, "
            f"lease_expires_at = {attempt_lease('? + timeout')} WHERE run_id = ? AND cmd = ? "
            f"RETURNING {TASK_COLUMNS}",
            (now, now, worker_id, now, lease_ttl, now, lease_ttl, key.run_id, key.cmd),
        )
        assert row is not None  # the row was just selected, and is locked
        claims.append(task_claim(row))
    save_buckets(conn, buckets, now)
    return claims


# -- releases, heartbeats, the reaper --------------------------------------------
def release_activation(conn: Connection, run_id: str, fence: int) -> None:
    conn.execute(
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL "
        f"WHERE run_id = ? AND {FENCED}",
        (run_id, fence),
    )


class _Expired(NamedTuple):
    """A running attempt whose lease a sweep may take back."""

    run_id: str
    cmd: int
    lease_owner: str | None
    deadline: float
    attempt: int
    timeout: float
    lease_expires_at: float
    limit_name: str | None


class _Owner(NamedTuple):
    worker_id: str
    liveness: str


def release_tasks(conn: Connection, worker_id: str, now: float) -> int:
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
    conn: Connection,
    worker_id: str,
    lease_ttl: float,
    now: float,
    attempts: Collection[tuple[str, int]] | None = None,
    runs: Collection[str] | None = None,
    known_through: float | None = None,
) -> Beat:
    # Runs before tasks: the lock order (see sql/dialect.py). With ``runs`` or
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
            f"UPDATE tasks SET lease_expires_at = {attempt_lease('deadline')} "
            f"WHERE status = 'running' AND lease_owner = ? AND {RENEWABLE}{only} "
            f"RETURNING {columns(TaskKey)}",
            (
                now,
                lease_ttl,
                lease_ttl,
                worker_id,
                now,
                now,
                *(v for key in keys or () for v in key),
            ),
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
    conn: Connection, worker_id: str, known: set[tuple[str, int]], before: float
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
    conn: Connection, worker_id: str, known: set[tuple[str, int]], before: float, now: float
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


def fire_due_timers(conn: Connection, now: float, limit: int) -> int:
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


def token_owners(conn: Connection) -> list[tuple[str, str]]:
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
    conn: Connection, now: float, limit: int, probe: Probe | None = None
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
    # the ones it does not know it holds itself, on its heartbeat), except a slot of
    # a concurrency limit: that was given back when its lease expired.
    kept = (
        f" AND (lease_owner NOT IN ({marks(alive)}) OR deadline < ? OR limit_name IS NOT NULL)"
        if alive
        else ""
    )
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
            expired=t.lease_expires_at < now,
            past_deadline=now > t.deadline,
            owner_alive=None if state and t.limit_name is not None else state,
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


def _lock_run_or_skip(conn: Connection, run_id: str) -> bool:
    """Lock the run's row unless another transaction holds it (SQLite: always)."""
    row = conn.execute(
        "SELECT 1 FROM runs WHERE run_id = ? /*FOR UPDATE SKIP LOCKED*/", (run_id,)
    ).fetchone()
    return row is not None


def next_wakeup(conn: Connection) -> float | None:
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
