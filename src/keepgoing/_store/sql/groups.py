"""The worker-group facet both SQL stores share (mixed into ``SqlStore``); tables from 0009.

Rows are read by column name (:func:`_rows`) into the records of
``group_records``. The load of a queue (:func:`_group_loads`) reads the same
partial indexes the claims use: pending and leased tasks, runnable and leased
runs, pending timers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple, TypeVar

from keepgoing._store.group_records import (
    DecisionRecord,
    GroupLoad,
    GroupRecord,
    InstanceRecord,
    RevisionRecord,
)
from keepgoing._store.groups_protocol import GroupStore
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import every, one, value
from keepgoing._store.sql.runs import marks
from keepgoing.errors import GroupConflictError

__all__ = ["SqlGroupsMixin"]

T = TypeVar("T")
_KEEP_INSTANCES = 50
_KEEP_DECISIONS = 2000
_GROUP = "name, task_queue, backend, parent, revision, replicas, cold_start, created_at, updated_at"
_INSTANCE = "instance_id, group_name, revision, state, pid, host, started_at, ended_at, exit_status"
_DECISION = "id, group_name, at, from_replicas, to_replicas, reason, queued, running, revision"


def _rows(conn: Connection, cls: type[T], sql: str, params: Sequence[Any] = ()) -> list[T]:
    """The rows of ``sql`` (``SELECT <columns> FROM ...``) as ``cls``, by column name."""
    columns = sql[len("SELECT ") : sql.index(" FROM ")].split(",")
    names = [c.strip().rsplit(".", 1)[-1] for c in columns]
    rows = conn.execute(sql, tuple(params)).fetchall()
    return [cls(**dict(zip(names, tuple(row), strict=True))) for row in rows]


class _Name(NamedTuple):
    name: str


class _Lease(NamedTuple):
    owner: str
    expires_at: float


class _Counts(NamedTuple):
    queue: str
    queued: int | None
    running: int | None
    open_runs: int | None


class _Due(NamedTuple):
    queue: str
    due: float | None


class SqlGroupsMixin(GroupStore):
    async def _read(self, op: Any) -> Any: ...  # provided by SqlStore
    async def _write(self, op: Any, notify: Any = False) -> Any: ...  # provided by SqlStore

    async def deploy_group(
        self,
        *,
        name: str,
        task_queue: str,
        backend: str,
        parent: str | None,
        spec: str,
        now: float,
    ) -> int:
        revision: int = await self._write(
            lambda c: _deploy(c, name, task_queue, backend, parent, spec, now), True
        )
        return revision

    async def get_group(self, name: str) -> GroupRecord | None:
        found: list[GroupRecord] = await self._read(
            lambda c: _rows(
                c, GroupRecord, f"SELECT {_GROUP} FROM worker_groups WHERE name = ?", [name]
            )
        )
        return next(iter(found), None)

    async def list_groups(self) -> list[GroupRecord]:
        found: list[GroupRecord] = await self._read(
            lambda c: _rows(c, GroupRecord, f"SELECT {_GROUP} FROM worker_groups ORDER BY name")
        )
        return found

    async def get_revision(self, name: str, revision: int | None = None) -> RevisionRecord | None:
        cols = "r.group_name, r.revision, r.spec, r.created_at, r.retired_at"
        if revision is None:
            sql = (
                f"SELECT {cols} FROM group_revisions r JOIN worker_groups g "
                "ON g.name = r.group_name AND g.revision = r.revision WHERE g.name = ?"
            )
            params: list[Any] = [name]
        else:
            sql = f"SELECT {cols} FROM group_revisions r WHERE r.group_name = ? AND r.revision = ?"
            params = [name, revision]
        found: list[RevisionRecord] = await self._read(
            lambda c: _rows(c, RevisionRecord, sql, params)
        )
        return next(iter(found), None)

    async def delete_group(self, name: str) -> bool:
        existed: bool = await self._write(lambda c: _delete(c, name), True)
        return existed

    async def record_decision(
        self,
        name: str,
        *,
        to_replicas: int,
        reason: str,
        queued: int,
        running: int,
        now: float,
        revision: int | None = None,
        from_replicas: int | None = None,
    ) -> DecisionRecord | None:
        found: DecisionRecord | None = await self._write(
            lambda c: _decide(
                c, name, to_replicas, reason, queued, running, now, revision, from_replicas
            )
        )
        return found

    async def list_decisions(self, name: str, *, limit: int = 50) -> list[DecisionRecord]:
        found: list[DecisionRecord] = await self._read(
            lambda c: _rows(
                c,
                DecisionRecord,
                f"SELECT {_DECISION} FROM group_decisions WHERE group_name = ? "
                "ORDER BY id DESC LIMIT ?",
                [name, limit],
            )
        )
        return found

    async def set_cold_start(self, name: str, seconds: float) -> None:
        await self._write(
            lambda c: c.execute(
                "UPDATE worker_groups SET cold_start = ? WHERE name = ?", (seconds, name)
            )
        )

    async def group_loads(self, queues: Sequence[str], now: float) -> list[GroupLoad]:
        found: list[GroupLoad] = await self._read(lambda c: _group_loads(c, list(queues), now))
        return found

    async def record_instances(self, name: str, instances: Sequence[InstanceRecord]) -> None:
        await self._write(lambda c: _record_instances(c, name, list(instances)))

    async def list_instances(self, name: str) -> list[InstanceRecord]:
        found: list[InstanceRecord] = await self._read(
            lambda c: _rows(
                c,
                InstanceRecord,
                f"SELECT {_INSTANCE} FROM group_instances WHERE group_name = ? "
                "ORDER BY CASE WHEN state = 'running' THEN 0 ELSE 1 END, started_at DESC",
                [name],
            )
        )
        return found

    async def put_secret(self, scope: str, name: str, ciphertext: str, now: float) -> None:
        await self._write(
            lambda c: c.execute(
                "INSERT INTO secrets (scope, name, ciphertext, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (scope, name) DO UPDATE SET ciphertext = excluded.ciphertext, "
                "updated_at = excluded.updated_at",
                (scope, name, ciphertext, now),
            )
        )

    async def get_secrets(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        wanted = list(dict.fromkeys(keys))

        def read(conn: Connection) -> dict[tuple[str, str], str]:
            found: dict[tuple[str, str], str] = {}
            for scope, name in wanted:
                cipher = value(
                    conn,
                    "SELECT ciphertext FROM secrets WHERE scope = ? AND name = ?",
                    (scope, name),
                )
                if cipher is not None:
                    found[(scope, name)] = str(cipher)
            return found

        found: dict[tuple[str, str], str] = await self._read(read)
        return found

    async def list_secrets(self, scope: str = "") -> list[str]:
        names: list[str] = await self._read(
            lambda c: [
                r.name
                for r in every(
                    c, _Name, "SELECT name FROM secrets WHERE scope = ? ORDER BY name", (scope,)
                )
            ]
        )
        return names

    async def delete_secret(self, scope: str, name: str) -> bool:
        count: int = await self._write(
            lambda c: (
                c.execute(
                    "DELETE FROM secrets WHERE scope = ? AND name = ?", (scope, name)
                ).rowcount
            )
        )
        return count > 0

    async def claim_service(self, name: str, owner: str, *, ttl: float, now: float) -> bool:
        held: bool = await self._write(lambda c: _claim_service(c, name, owner, ttl, now))
        return held

    async def release_service(self, name: str, owner: str) -> None:
        await self._write(
            lambda c: c.execute(
                "DELETE FROM service_leases WHERE name = ? AND owner = ?", (name, owner)
            )
        )

    async def service_holder(self, name: str, now: float) -> str | None:
        holder: str | None = await self._read(
            lambda c: value(
                c, "SELECT owner FROM service_leases WHERE name = ? AND expires_at > ?", (name, now)
            )
        )
        return holder


def _deploy(
    conn: Connection,
    name: str,
    task_queue: str,
    backend: str,
    parent: str | None,
    spec: str,
    now: float,
) -> int:
    other = value(
        conn,
        "SELECT name FROM worker_groups WHERE task_queue = ? AND name <> ?",
        (task_queue, name),
    )
    if other is not None:
        raise GroupConflictError(f"queue {task_queue!r} is already served by group {other!r}")
    row = value(conn, "SELECT revision FROM worker_groups WHERE name = ? /*FOR UPDATE*/", (name,))
    last = value(conn, "SELECT MAX(revision) FROM group_revisions WHERE group_name = ?", (name,))
    revision = int(last or 0) + 1
    body = json.loads(spec)
    body["revision"] = revision
    conn.execute(
        "INSERT INTO group_revisions (group_name, revision, spec, created_at) VALUES (?, ?, ?, ?)",
        (name, revision, json.dumps(body, sort_keys=True, separators=(",", ":")), now),
    )
    if row is None:
        conn.execute(
            "INSERT INTO worker_groups (name, task_queue, backend, parent, revision, replicas, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?)",
            (name, task_queue, backend, parent, revision, now, now),
        )
    else:
        conn.execute(
            "UPDATE worker_groups SET task_queue = ?, backend = ?, parent = ?, revision = ?, "
            "updated_at = ? WHERE name = ?",
            (task_queue, backend, parent, revision, now, name),
        )
    return revision


def _delete(conn: Connection, name: str) -> bool:
    names = [name] + [
        r.name
        for r in every(conn, _Name, "SELECT name FROM worker_groups WHERE parent = ?", (name,))
    ]
    existed = False
    for group in names:
        existed = (
            conn.execute("DELETE FROM worker_groups WHERE name = ?", (group,)).rowcount > 0
            or existed
        )
        for table, column in (
            ("group_revisions", "group_name"),
            ("group_decisions", "group_name"),
            ("group_instances", "group_name"),
            ("secrets", "scope"),
        ):
            conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (group,))
    return existed


def _decide(
    conn: Connection,
    name: str,
    to_replicas: int,
    reason: str,
    queued: int,
    running: int,
    now: float,
    revision: int | None = None,
    from_replicas: int | None = None,
) -> DecisionRecord | None:
    current = value(
        conn, "SELECT replicas FROM worker_groups WHERE name = ? /*FOR UPDATE*/", (name,)
    )
    if current is None:
        return None
    if revision is None:  # an older revision's replicas are not the group's desired count
        conn.execute(
            "UPDATE worker_groups SET replicas = ?, updated_at = ? WHERE name = ?",
            (to_replicas, now, name),
        )
    else:
        current = from_replicas if from_replicas is not None else 0
    conn.execute(
        "INSERT INTO group_decisions (group_name, at, from_replicas, to_replicas, reason, "
        "queued, running, revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (name, now, current, to_replicas, reason, queued, running, revision),
    )
    (found,) = _rows(
        conn,
        DecisionRecord,
        f"SELECT {_DECISION} FROM group_decisions WHERE group_name = ? ORDER BY id DESC LIMIT 1",
        [name],
    )
    conn.execute(
        "DELETE FROM group_decisions WHERE group_name = ? AND id <= ?",
        (name, found.id - _KEEP_DECISIONS),
    )
    return found


def _group_loads(conn: Connection, queues: list[str], now: float) -> list[GroupLoad]:
    if not queues:
        return []
    q = marks(queues)
    load: dict[str, dict[str, Any]] = {name: {} for name in queues}

    def add(sql: str, params: Sequence[Any]) -> None:
        for r in every(conn, _Counts, sql, (*params, *queues)):
            for field in ("queued", "running", "open_runs"):
                count = getattr(r, field)
                if count is not None:
                    load[r.queue][field] = load[r.queue].get(field, 0) + count

    add(
        "SELECT queue, SUM(CASE WHEN status = 'pending' AND available_at <= ? THEN 1 ELSE 0 END) "
        "AS queued, SUM(CASE WHEN status = 'running' THEN 1 ELSE 0 END) AS running, "
        "NULL AS open_runs FROM tasks "
        f"WHERE status IN ('pending', 'running') AND queue IN ({q}) GROUP BY queue",
        [now],
    )
    add(
        "SELECT task_queue AS queue, SUM(CASE WHEN runnable = 1 AND (lease_owner IS NULL OR "
        "lease_expires_at <= ?) THEN 1 ELSE 0 END) AS queued, SUM(CASE WHEN lease_owner IS NOT "
        "NULL AND lease_expires_at > ? THEN 1 ELSE 0 END) AS running, COUNT(*) AS open_runs "
        f"FROM runs WHERE status = 'running' AND task_queue IN ({q}) GROUP BY task_queue",
        [now, now],
    )
    for due in every(
        conn,
        _Due,
        "SELECT r.task_queue AS queue, MIN(t.fire_at) AS due FROM timers t JOIN runs r "
        f"ON r.run_id = t.run_id WHERE t.status = 'pending' AND r.task_queue IN ({q}) "
        "GROUP BY r.task_queue",
        tuple(queues),
    ):
        load[due.queue]["next_timer"] = due.due
    for due in every(
        conn,
        _Due,
        "SELECT queue, MIN(available_at) AS due FROM tasks "
        f"WHERE status = 'pending' AND available_at > ? AND queue IN ({q}) GROUP BY queue",
        (now, *queues),
    ):
        load[due.queue]["next_task"] = due.due
    return [
        GroupLoad(
            task_queue=name,
            queued=int(v.get("queued", 0)),
            running=int(v.get("running", 0)),
            open_runs=int(v.get("open_runs", 0)),
            next_timer=v.get("next_timer"),
            next_task=v.get("next_task"),
        )
        for name, v in load.items()
    ]


def _record_instances(conn: Connection, name: str, instances: list[InstanceRecord]) -> None:
    for i in instances:
        conn.execute(
            "INSERT INTO group_instances (instance_id, group_name, revision, state, pid, host, "
            "started_at, ended_at, exit_status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (group_name, instance_id) DO UPDATE SET state = excluded.state, "
            "ended_at = excluded.ended_at, exit_status = excluded.exit_status",
            (
                i.instance_id,
                name,
                i.revision,
                i.state,
                i.pid,
                i.host,
                i.started_at,
                i.ended_at,
                i.exit_status,
            ),
        )
    old = _rows(
        conn,
        InstanceRecord,
        f"SELECT {_INSTANCE} FROM group_instances WHERE group_name = ? AND state <> 'running' "
        "ORDER BY started_at DESC",
        [name],
    )
    for ended in old[_KEEP_INSTANCES:]:
        conn.execute(
            "DELETE FROM group_instances WHERE group_name = ? AND instance_id = ?",
            (name, ended.instance_id),
        )


def _claim_service(conn: Connection, name: str, owner: str, ttl: float, now: float) -> bool:
    row = one(
        conn,
        _Lease,
        "SELECT owner, expires_at FROM service_leases WHERE name = ? /*FOR UPDATE*/",
        (name,),
    )
    if row is None:
        conn.execute(
            "INSERT INTO service_leases (name, owner, expires_at) VALUES (?, ?, ?) "
            "ON CONFLICT (name) DO NOTHING",
            (name, owner, now + ttl),
        )
    elif row.owner == owner or row.expires_at <= now:
        conn.execute(
            "UPDATE service_leases SET owner = ?, expires_at = ? WHERE name = ? "
            "AND (owner = ? OR expires_at <= ?)",
            (owner, now + ttl, name, owner, now),
        )
    held = value(conn, "SELECT owner FROM service_leases WHERE name = ?", (name,))
    return bool(held == owner)
