"""Pinning, the store's half (mixed into ``SqlStore``; tables from 0009 and 0013).

A run keeps the group revision it started on (``runs.group_revision``) and is
claimed only by that revision's workers (the claim rule is
:func:`keepgoing._store.sql.leases.revision_rule`). This module holds the rest:
each revision's open runs and load, moving a run to another revision, and
retiring the revisions no run is left on.

Lock order: the group's row, then the run's row (a migration locks the run's
row only; retiring reads the runs of revisions it locks none of, and a run can
only move *to* a revision that is not retired, checked in the moving
transaction).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from keepgoing._store import records as rec
from keepgoing._store.group_records import OpenRun, RevisionLoad, RevisionStatus
from keepgoing._store.groups_protocol import RevisionStore
from keepgoing._store.sql import runs as ops
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.messaging import open_run
from keepgoing._store.sql.rows import columns, every, one, value
from keepgoing.errors import GroupConflictError, GroupError, GroupNotFoundError

__all__ = ["SqlRevisionsMixin"]


class _Revision(NamedTuple):
    revision: int
    spec: str
    created_at: float
    retired_at: float | None


class _OnRevision(NamedTuple):
    revision: int | None
    open_runs: int
    blocked_runs: int


class _Load(NamedTuple):
    revision: int | None
    queued: int | None
    running: int | None
    open_runs: int | None


class _Due(NamedTuple):
    revision: int | None
    due: float | None


class _Group(NamedTuple):
    name: str
    revision: int
    replicas: int


class SqlRevisionsMixin(RevisionStore):
    async def _read(self, op: Any) -> Any: ...  # provided by SqlStore
    async def _write(self, op: Any, notify: Any = False) -> Any: ...  # provided by SqlStore

    async def list_revisions(self, name: str) -> list[RevisionStatus]:
        found: list[RevisionStatus] = await self._read(lambda c: _revisions(c, name))
        return found

    async def revision_loads(self, task_queue: str, now: float) -> list[RevisionLoad]:
        found: list[RevisionLoad] = await self._read(lambda c: _loads(c, task_queue, now))
        return found

    async def open_runs_on(self, task_queue: str) -> list[OpenRun]:
        found: list[OpenRun] = await self._read(
            lambda c: every(
                c,
                OpenRun,
                f"SELECT {columns(OpenRun)} FROM runs WHERE task_queue = ? "
                "AND status IN ('running', 'blocked') ORDER BY created_at DESC, run_id",
                (task_queue,),
            )
        )
        return found

    async def migrate_run(
        self,
        workflow_id: str,
        run_id: str | None,
        *,
        to_revision: int,
        now: float,
        expect_seq: int | None = None,
    ) -> rec.RunRecord:
        run: rec.RunRecord = await self._write(
            lambda c: _migrate(c, workflow_id, run_id, to_revision, now, expect_seq), True
        )
        return run

    async def retire_revisions(self, name: str, now: float) -> list[int]:
        retired: list[int] = await self._write(lambda c: _retire(c, name, now))
        return retired


def _revisions(conn: Connection, name: str) -> list[RevisionStatus]:
    group = one(
        conn, _Group, "SELECT name, revision, replicas FROM worker_groups WHERE name = ?", (name,)
    )
    if group is None:
        return []
    queue = value(conn, "SELECT task_queue FROM worker_groups WHERE name = ?", (name,))
    counts = {
        r.revision: r
        for r in every(
            conn,
            _OnRevision,
            "SELECT group_revision AS revision, COUNT(*) AS open_runs, "
            "SUM(CASE WHEN status = 'blocked' THEN 1 ELSE 0 END) AS blocked_runs FROM runs "
            "WHERE task_queue = ? AND status IN ('running', 'blocked') GROUP BY group_revision",
            (queue,),
        )
    }
    # Runs from before the queue had a group run on whatever revision is current.
    unpinned = counts.pop(None, None)
    out = []
    for r in every(
        conn,
        _Revision,
        f"SELECT {columns(_Revision)} FROM group_revisions WHERE group_name = ? "
        "ORDER BY revision DESC",
        (name,),
    ):
        on = counts.get(r.revision)
        n, blocked = (on.open_runs, int(on.blocked_runs or 0)) if on else (0, 0)
        if r.revision == group.revision and unpinned is not None:
            n, blocked = n + unpinned.open_runs, blocked + int(unpinned.blocked_runs or 0)
        out.append(
            RevisionStatus(
                group_name=name,
                revision=r.revision,
                created_at=r.created_at,
                retired_at=r.retired_at,
                open_runs=n,
                blocked_runs=blocked,
                current=r.revision == group.revision,
                upgrade=str(json.loads(r.spec).get("upgrade", "pinned")),
            )
        )
    return out


def _loads(conn: Connection, queue: str, now: float) -> list[RevisionLoad]:
    """The work of each revision of ``queue``, as ``keepgoing_revision_work`` counts it
    (with the caller's clock, like ``group_loads``)."""
    load: dict[int | None, dict[str, Any]] = {}

    def add(rows: Sequence[_Load]) -> None:
        for r in rows:
            slot = load.setdefault(r.revision, {})
            for field in ("queued", "running", "open_runs"):
                count = getattr(r, field)
                if count is not None:
                    slot[field] = slot.get(field, 0) + int(count)

    add(
        every(
            conn,
            _Load,
            "SELECT r.group_revision AS revision, SUM(CASE WHEN t.status = 'pending' AND "
            "t.available_at <= ? THEN 1 ELSE 0 END) AS queued, SUM(CASE WHEN t.status = "
            "'running' THEN 1 ELSE 0 END) AS running, NULL AS open_runs FROM tasks t "
            "JOIN runs r ON r.run_id = t.run_id WHERE t.status IN ('pending', 'running') "
            "AND t.queue = ? AND r.task_queue = t.queue GROUP BY r.group_revision",
            (now, queue),
        )
    )
    add(
        every(
            conn,
            _Load,
            "SELECT group_revision AS revision, SUM(CASE WHEN status = 'running' AND "
            "runnable = 1 AND (lease_owner IS NULL OR lease_expires_at <= ?) THEN 1 ELSE 0 END) "
            "AS queued, SUM(CASE WHEN status = 'running' AND lease_owner IS NOT NULL AND "
            "lease_expires_at > ? THEN 1 ELSE 0 END) AS running, COUNT(*) AS open_runs "
            "FROM runs WHERE task_queue = ? AND status IN ('running', 'blocked') "
            "GROUP BY group_revision",
            (now, now, queue),
        )
    )
    for due in every(
        conn,
        _Due,
        "SELECT r.group_revision AS revision, MIN(t.fire_at) AS due FROM timers t JOIN runs r "
        "ON r.run_id = t.run_id WHERE t.status = 'pending' AND r.task_queue = ? "
        "GROUP BY r.group_revision",
        (queue,),
    ):
        load.setdefault(due.revision, {})["next_timer"] = due.due
    for due in every(
        conn,
        _Due,
        "SELECT r.group_revision AS revision, MIN(t.available_at) AS due FROM tasks t "
        "JOIN runs r ON r.run_id = t.run_id WHERE t.status = 'pending' AND t.available_at > ? "
        "AND t.queue = ? AND r.task_queue = t.queue GROUP BY r.group_revision",
        (now, queue),
    ):
        load.setdefault(due.revision, {})["next_task"] = due.due
    return [
        RevisionLoad(
            task_queue=queue,
            revision=revision,
            queued=int(v.get("queued", 0)),
            running=int(v.get("running", 0)),
            open_runs=int(v.get("open_runs", 0)),
            next_timer=v.get("next_timer"),
            next_task=v.get("next_task"),
        )
        for revision, v in sorted(load.items(), key=lambda kv: -1 if kv[0] is None else kv[0])
    ]


def _migrate(
    conn: Connection,
    workflow_id: str,
    run_id: str | None,
    to_revision: int,
    now: float,
    expect_seq: int | None,
) -> rec.RunRecord:
    run = open_run(conn, workflow_id, run_id)  # locks the run's row
    group = value(conn, "SELECT name FROM worker_groups WHERE task_queue = ?", (run.task_queue,))
    if group is None:
        raise GroupNotFoundError(
            f"run {run.run_id} is on queue {run.task_queue!r}, which no worker group serves"
        )
    found = one(
        conn,
        _Revision,
        f"SELECT {columns(_Revision)} FROM group_revisions WHERE group_name = ? AND revision = ?",
        (group, to_revision),
    )
    if found is None:
        raise GroupNotFoundError(f"group {group!r} has no revision {to_revision}")
    if found.retired_at is not None:
        raise GroupError(f"revision {to_revision} of group {group!r} is retired")
    if expect_seq is not None:
        seq = value(conn, "SELECT next_seq FROM runs WHERE run_id = ?", (run.run_id,))
        if seq != expect_seq:
            raise GroupConflictError(
                f"run {run.run_id} moved on since it was checked (history at {seq - 1}, "
                f"checked up to {expect_seq - 1}); it stays on revision {run.group_revision}"
            )
    # A blocked run that moves is retried by its new revision's workers at once. The
    # fence moves on and the activation lease goes: nothing the old revision's workers
    # hold for the run (an activation in flight, a cached instance's fast path) commits.
    moved = ops.one_run(
        conn,
        "UPDATE runs SET group_revision = ?, updated_at = ?, fence = fence + 1, "
        "lease_owner = NULL, lease_expires_at = NULL, "
        "runnable = CASE WHEN status = 'blocked' THEN 1 ELSE runnable END, "
        "runnable_since = CASE WHEN status = 'blocked' THEN ? ELSE runnable_since END, "
        "blocked_reason = CASE WHEN status = 'blocked' THEN NULL ELSE blocked_reason END, "
        "status = CASE WHEN status = 'blocked' THEN 'running' ELSE status END "
        f"WHERE run_id = ? RETURNING {ops.RUN_COLUMNS}",
        (to_revision, now, now, run.run_id),
    )
    assert moved is not None
    return moved


def _retire(conn: Connection, name: str, now: float) -> list[int]:
    group = one(
        conn,
        _Group,
        "SELECT name, revision, replicas FROM worker_groups WHERE name = ? /*FOR UPDATE*/",
        (name,),
    )
    if group is None:
        return []
    queue = value(conn, "SELECT task_queue FROM worker_groups WHERE name = ?", (name,))
    candidates = [
        r.revision
        for r in every(
            conn,
            _Revision,
            f"SELECT {columns(_Revision)} FROM group_revisions WHERE group_name = ? "
            "AND revision < ? AND retired_at IS NULL ORDER BY revision",
            (name, group.revision),
        )
    ]
    retired = []
    for revision in candidates:
        left = value(
            conn,
            "SELECT COUNT(*) FROM runs WHERE task_queue = ? AND group_revision = ? "
            "AND status IN ('running', 'blocked')",
            (queue, revision),
        )
        if left:
            continue
        conn.execute(
            "UPDATE group_revisions SET retired_at = ? WHERE group_name = ? AND revision = ?",
            (now, name, revision),
        )
        conn.execute(
            "INSERT INTO group_decisions (group_name, at, from_replicas, to_replicas, reason, "
            "queued, running) VALUES (?, ?, ?, ?, ?, 0, 0)",
            (
                name,
                now,
                group.replicas,
                group.replicas,
                f"revision {revision} retired: no run is left on it",
            ),
        )
        retired.append(revision)
    return retired
