"""The SQL for code versions and blocked runs (see :mod:`keepgoing._store._versions`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from keepgoing._history import events as ev
from keepgoing._history.codec import decode, encode_at
from keepgoing._payload import dumps, loads
from keepgoing._store import records as rec
from keepgoing._store._versions import retry_blocked_after, should_retry, with_version
from keepgoing._store.sql import history, leases, messaging
from keepgoing._store.sql import runs as ops
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import columns, every, one, value
from keepgoing.errors import WorkflowNotRunningError

__all__ = ["RunSet", "block", "claim_blocked", "note", "unblock_run"]

_SCAN = 200  # blocked runs looked at per claim; they are few, and each is cheap


class _Blocked(NamedTuple):
    """What deciding whether to retry a blocked run reads of it."""

    run_id: str
    workflow_name: str
    blocked_versions: str
    retry_blocked_at: float | None


class _Blocks(NamedTuple):
    blocked_versions: str
    block_count: int


class RunSet(NamedTuple):
    """SET clauses (with their parameters) for a caller's own update of the run."""

    sql: str = ""
    params: tuple[object, ...] = ()


_NOTHING = RunSet()


def note(conn: Connection, run_id: str, version: str, started_as: str, seen: str) -> RunSet:
    """Record that code ``version`` activates the run (in the caller's transaction).

    A run started by name, by a client that never imported the code, has no
    version yet: the first activation fills it, in the run and in its
    ``WorkflowStarted``, so old and new code can be told apart later. The
    run's columns are not written here: the clauses returned join the
    activation's own update of the run (none when nothing is new).
    """
    if not version:
        return _NOTHING
    known = loads(seen)
    if started_as and version in known:
        return _NOTHING
    if not started_as:
        body = value(conn, "SELECT body FROM history WHERE run_id = ? AND seq = 1", (run_id,))
        started = decode(loads(body))
        if isinstance(started, ev.WorkflowStarted) and not started.code_version:
            filled = dataclasses.replace(started, code_version=version)
            conn.execute(
                "UPDATE history SET body = ? WHERE run_id = ? AND seq = 1",
                (encode_at(filled, 1, started.at), run_id),
            )
    return RunSet(
        ", code_versions = ?, code_version = ?",
        (dumps(with_version(known, version)), started_as or version),
    )


def block(
    conn: Connection, c: rec.ActivationCommit, *, next_seq: int, noted: RunSet = _NOTHING
) -> int:
    """Append ``WorkflowBlocked`` and mark the run blocked until it is retried.

    ``noted`` (from :func:`note`) joins the same update of the run.
    """
    assert c.blocked_reason is not None
    row = one(conn, _Blocks, f"SELECT {columns(_Blocks)} FROM runs WHERE run_id = ?", (c.run_id,))
    assert row is not None  # the commit holds the run
    count = row.block_count + 1
    blocked = ev.WorkflowBlocked(reason=c.blocked_reason, code_version=c.code_version)
    return history.append(
        conn,
        c.run_id,
        [blocked],
        c.now,
        next_seq=next_seq,
        then=", status = 'blocked', blocked_reason = ?, lease_owner = NULL, "
        "lease_expires_at = NULL, runnable = 0, blocked_versions = ?, block_count = ?, "
        f"retry_blocked_at = ?{noted.sql}",
        then_params=(
            c.blocked_reason,
            dumps(with_version(loads(row.blocked_versions), c.code_version)),
            count,
            c.now + retry_blocked_after(count),
            *noted.params,
        ),
    )


def claim_blocked(
    conn: Connection,
    worker_id: str,
    queues: Sequence[str],
    versions: Mapping[str, str],
    limit: int,
    lease_ttl: float,
    now: float,
    revision: int | None = None,
) -> list[rec.ActivationClaim]:
    """Claim blocked runs this code should retry, as activations of ``worker_id``."""
    names = list(versions)
    if not queues or not names or limit <= 0:
        return []
    pinned, pin = leases.revision_rule(revision)
    rows = every(
        conn,
        _Blocked,
        f"SELECT {columns(_Blocked)} FROM runs "
        f"WHERE status = 'blocked' AND task_queue IN ({ops.marks(queues)}) "
        f"AND workflow_name IN ({ops.marks(names)}){pinned} "
        "ORDER BY updated_at LIMIT ? /*FOR UPDATE SKIP LOCKED*/",
        (*queues, *names, *pin, _SCAN),
    )
    ids = [
        r.run_id
        for r in rows
        if should_retry(
            r.workflow_name, loads(r.blocked_versions), r.retry_blocked_at, versions, now
        )
    ][:limit]
    if not ids:
        return []
    expires = now + lease_ttl
    runs = ops.run_records(
        conn,
        "UPDATE runs SET status = 'running', blocked_reason = NULL, runnable = 1, "
        f"runnable_since = ?, {leases.ACTIVATION_LEASE} "
        f"WHERE run_id IN ({ops.marks(ids)}) RETURNING {ops.RUN_COLUMNS}",
        (now, worker_id, expires, *ids),
    )
    return [rec.ActivationClaim(run=run, fence=run.fence, lease_expires_at=expires) for run in runs]


def unblock_run(
    conn: Connection, workflow_id: str, run_id: str | None, now: float
) -> rec.RunRecord:
    """Make a blocked run runnable now, for the next worker that serves it."""
    run = messaging.open_run(conn, workflow_id, run_id)
    if run.status != "blocked":
        raise WorkflowNotRunningError(
            f"run {run.run_id} of {workflow_id!r} is {run.status}, not blocked; "
            "only a blocked run can be unblocked"
        )
    updated = ops.one_run(
        conn,
        "UPDATE runs SET status = 'running', blocked_reason = NULL, runnable = 1, "
        "runnable_since = ?, lease_owner = NULL, lease_expires_at = NULL, updated_at = ? "
        f"WHERE run_id = ? RETURNING {ops.RUN_COLUMNS}",
        (now, now, run.run_id),
    )
    assert updated is not None  # open_run locked it
    return updated
