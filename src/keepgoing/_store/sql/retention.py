"""Retention's SQL: the one rule of which ended runs may be deleted, and the deletion.

:func:`deletable` is the rule, one SQL predicate over ``runs r``; the read of
candidates (:func:`expired_runs`) and the deletion (:func:`delete_runs`, which
checks it again under the runs' row locks) both use it, so ``keepgoing runs
prune`` and the services' sweep cannot disagree. A run may go when:

* it ended, and it ended at least its policy ago: the workflow's own
  (``workflow_retention``), else the store's default; with no policy at all
  the run is kept;
* its parent is not open (a child of an open parent is read by that parent);
* no open child and no open continue-as-new successor keeps its revision;
* none of its operations waits for review (an ``uncertain`` task, an
  undecided review).

The deletion removes every row that hangs off the run: its history (events,
attempts, messages), tasks (operation rows), timers, event waits and the
events they consumed (when no kept run consumed them too), reviews, patch
marks, attempt logs, gateway calls and volume read pins. The gateway calls are first folded
into per-day aggregates (``gateway_usage_days``, :mod:`.gateway_days`), and the
gateway's per-day spend (``gateway_spend``) and the audit log stay. Deletes
go by primary key or by an index that leads with ``run_id``, so they are index
scans on both dialects.

Lock order (PostgreSQL): the runs' rows first, ``FOR UPDATE SKIP LOCKED`` (a
run locked by another transaction is left to the next sweep), then the rows
hanging off them. SQLite's single writer needs none.

A schedule's actions (one row per slot) go by the store's default policy too
(:func:`prune_schedule_actions`): an action older than it goes, except each
schedule's newest :data:`KEPT_ACTIONS` (what a schedule's view shows), a
buffered one, and one whose run, or an open run of its workflow id, is open.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from keepgoing._payload import dumps, loads
from keepgoing._store import records as rec
from keepgoing._store.refused import name_refused
from keepgoing._store.retention_protocol import RetentionStore, RetentionWindow, SweptRows
from keepgoing._store.sql import messaging
from keepgoing._store.sql import runs as ops
from keepgoing._store.sql.gateway_days import fold_calls
from keepgoing._store.sql.rows import columns, every, one, value

__all__ = ["KEPT_ACTIONS", "SqlRetentionMixin", "deletable"]

_OPEN = "('running', 'blocked')"
_ENDED = "('completed', 'failed', 'cancelled', 'continued')"
#: The tables keyed by ``run_id`` that a deleted run's rows are in, children first.
_RUN_TABLES = (
    "history",
    "tasks",
    "timers",
    "event_waits",
    "reviews",
    "run_patches",
    "attempt_logs",
    "gateway_calls",
    "volume_reads",
)
#: Each schedule's newest actions, always kept (``get_schedule`` shows them).
KEPT_ACTIONS = 10
#: Pages given back per step (SQLite), and the free pages kept for new rows.
_VACUUM_PAGES = 256
_FREE_KEPT = 1024


class _Policy(NamedTuple):
    name: str
    retain_for: float | None


class _Id(NamedTuple):
    run_id: str


class _Detail(NamedTuple):
    detail: str


class _ActionKey(NamedTuple):
    schedule_id: str
    slot_at: float


def deletable(window: RetentionWindow, floor: float | None) -> tuple[str, list[Any]]:
    """The rule, over ``runs r``: its SQL and its parameters.

    ``floor`` is the latest ``ended_at`` any policy allows (``now`` minus the
    shortest policy): a bound the ``runs_ended`` index can range over.
    """
    params: list[Any] = [window.older_than]
    policy = "?"
    if window.older_than is None:
        policy = (
            "COALESCE((SELECT w.retain_for FROM workflow_retention w "
            "WHERE w.name = r.workflow_name), ?)"
        )
        params = [window.default]
    sql = (
        f"r.status IN {_ENDED} AND r.ended_at IS NOT NULL AND r.ended_at <= ? "
        f"AND r.ended_at <= ? - {policy} "
        f"AND NOT EXISTS (SELECT 1 FROM runs p WHERE p.run_id = r.parent_run_id "
        f"AND p.status IN {_OPEN}) "
        f"AND NOT EXISTS (SELECT 1 FROM runs c WHERE c.parent_run_id = r.run_id "
        f"AND c.status IN {_OPEN}) "
        f"AND NOT EXISTS (SELECT 1 FROM runs n WHERE n.run_id = r.continued_to "
        f"AND n.status IN {_OPEN}) "
        "AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = r.run_id "
        "AND t.status = 'uncertain') "
        "AND NOT EXISTS (SELECT 1 FROM reviews v WHERE v.run_id = r.run_id "
        "AND v.decision IS NULL AND v.abandoned_at IS NULL)"
    )
    out: list[Any] = [floor, window.now, *params]
    if window.workflow is not None:
        sql += " AND r.workflow_name = ?"
        out.append(window.workflow)
    return sql, out


def _floor(conn: Any, window: RetentionWindow) -> float | None:
    """``now`` minus the shortest policy in force; None when no run can go."""
    if window.older_than is not None:
        return window.now - window.older_than
    shortest = [p.retain_for for p in _policies(conn) if p.retain_for is not None]
    if window.default is not None:
        shortest.append(window.default)
    return window.now - min(shortest) if shortest else None


def _policies(conn: Any) -> list[_Policy]:
    return every(conn, _Policy, "SELECT name, retain_for FROM workflow_retention ORDER BY name")


def expired_runs(conn: Any, window: RetentionWindow, limit: int) -> list[rec.RunRecord]:
    floor = _floor(conn, window)
    if floor is None:
        return []
    rule, params = deletable(window, floor)
    return ops.run_records(
        conn,
        f"SELECT {columns(ops.RunRow, 'r.')} FROM runs r WHERE {rule} "
        "ORDER BY r.ended_at, r.run_id LIMIT ?",
        (*params, limit),
    )


def delete_runs(
    conn: Any,
    run_ids: Sequence[str],
    window: RetentionWindow,
    actor: str,
    audit_id: int | None = None,
) -> SweptRows:
    floor = _floor(conn, window)
    if floor is None or not run_ids:
        return SweptRows()
    rule, params = deletable(window, floor)
    marks = ops.marks(run_ids)
    kept = every(
        conn,
        _Id,
        f"SELECT r.run_id FROM runs r WHERE r.run_id IN ({marks}) AND {rule} "
        "ORDER BY r.run_id /*FOR UPDATE OF r SKIP LOCKED*/",
        (*run_ids, *params),
    )
    ids = [k.run_id for k in kept]
    if not ids:
        return SweptRows()
    swept = SweptRows(runs=len(ids), rows=_delete_rows(conn, ids))
    swept.audit_id = _audit_sweep(conn, swept, window.now, actor, audit_id)
    return swept


def _audit_sweep(conn: Any, swept: SweptRows, now: float, actor: str, audit_id: int | None) -> int:
    """Write the pass's ``retention.sweep`` entry, or add ``swept`` to the one an
    earlier batch of the pass wrote (``audit_id``): one entry per pass."""
    earlier = None
    if audit_id is not None:
        earlier = one(
            conn,
            _Detail,
            "SELECT detail FROM audit_log WHERE id = ? AND action = 'retention.sweep'",
            (audit_id,),
        )
    if audit_id is None or earlier is None:
        return messaging.append_audit(
            conn,
            rec.AuditEntry(
                at=now,
                actor_kind="system",
                actor_id=actor,
                action="retention.sweep",
                detail={"runs": swept.runs, "rows": dict(swept.rows)},
            ),
        )
    detail = loads(earlier.detail)
    total = SweptRows(runs=int(detail.get("runs", 0)), rows=dict(detail.get("rows", {})))
    total.add(swept)
    conn.execute(
        "UPDATE audit_log SET detail = ? WHERE id = ?",
        (dumps({"runs": total.runs, "rows": total.rows}), audit_id),
    )
    return audit_id


def _delete_rows(conn: Any, ids: list[str]) -> dict[str, int]:
    marks = ops.marks(ids)
    counts: dict[str, int] = {}
    # The events only these runs consumed go before the waits that say so.
    counts["events"] = conn.execute(
        f"DELETE FROM events WHERE event_id IN (SELECT w.event_id FROM event_waits w "
        f"WHERE w.run_id IN ({marks}) AND w.event_id IS NOT NULL) AND NOT EXISTS "
        f"(SELECT 1 FROM event_waits o WHERE o.event_id = events.event_id "
        f"AND o.run_id NOT IN ({marks}))",
        (*ids, *ids),
    ).rowcount
    # The gateway calls' usage stays, as per-day aggregates, before their rows go.
    fold_calls(conn, marks, ids)
    for table in _RUN_TABLES:
        counts[table] = conn.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", ids).rowcount
    counts["runs"] = conn.execute(f"DELETE FROM runs WHERE run_id IN ({marks})", ids).rowcount
    return {table: n for table, n in counts.items() if n > 0}


def prune_schedule_actions(
    conn: Any, window: RetentionWindow, limit: int, actor: str, audit_id: int | None = None
) -> int:
    """Delete up to ``limit`` schedule actions older than the store's default
    policy (none without one), and write the audit entry; how many went."""
    if window.default is None or window.older_than is not None:
        return 0
    keys = every(
        conn,
        _ActionKey,
        "SELECT a.schedule_id, a.slot_at FROM schedule_actions a "
        "WHERE COALESCE(a.started_at, a.created_at) <= ? AND a.status <> 'buffered' "
        "AND a.slot_at < (SELECT k.slot_at FROM schedule_actions k "
        "WHERE k.schedule_id = a.schedule_id ORDER BY k.slot_at DESC LIMIT 1 OFFSET ?) "
        f"AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = a.run_id "
        f"AND r.status IN {_OPEN}) "
        f"AND NOT EXISTS (SELECT 1 FROM runs w WHERE w.workflow_id = a.workflow_id "
        f"AND w.status IN {_OPEN}) "
        "ORDER BY a.schedule_id, a.slot_at LIMIT ? /*FOR UPDATE OF a SKIP LOCKED*/",
        (window.now - window.default, KEPT_ACTIONS - 1, limit),
    )
    for key in keys:
        conn.execute(
            "DELETE FROM schedule_actions WHERE schedule_id = ? AND slot_at = ?",
            (key.schedule_id, key.slot_at),
        )
    if keys:
        swept = SweptRows(rows={"schedule_actions": len(keys)})
        _audit_sweep(conn, swept, window.now, actor, audit_id)
    return len(keys)


def reclaim_space(conn: Any) -> int:
    """Give a few free pages back to the file system (SQLite with incremental
    auto-vacuum); PostgreSQL's autovacuum does this itself. Pages freed."""
    if not isinstance(conn, sqlite3.Connection):
        return 0
    if int(value(conn, "PRAGMA auto_vacuum")) != 2:  # 2: INCREMENTAL
        return 0
    free = int(value(conn, "PRAGMA freelist_count"))
    if free <= _FREE_KEPT:
        return 0
    step = min(_VACUUM_PAGES, free - _FREE_KEPT)
    # Python's driver steps a pragma once, and each step frees one page: so one
    # page per statement (a few microseconds each).
    for _ in range(step):
        conn.execute("PRAGMA incremental_vacuum(1)")
    return step


def record_retention(conn: Any, policies: Mapping[str, float | None], now: float) -> None:
    conn.executemany(
        "INSERT INTO workflow_retention (name, retain_for, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET retain_for = excluded.retain_for, "
        "updated_at = excluded.updated_at",
        [(name, seconds, now) for name, seconds in policies.items()],
    )


def trim_audit(conn: Any, before: float, limit: int) -> int:
    count: int = conn.execute(
        "DELETE FROM audit_log WHERE id IN "
        "(SELECT id FROM audit_log WHERE at < ? ORDER BY at LIMIT ?)",
        (before, limit),
    ).rowcount
    return count


@name_refused
class SqlRetentionMixin(RetentionStore):
    async def _read(self, op: Any) -> Any: ...  # provided by SqlStore

    async def _write(self, op: Any, notify: Any = False) -> Any: ...  # provided by SqlStore

    async def record_retention(self, policies: Mapping[str, float | None], now: float) -> None:
        if policies:
            await self._write(lambda c: record_retention(c, dict(policies), now))

    async def workflow_retention(self) -> dict[str, float | None]:
        rows: list[_Policy] = await self._read(_policies)
        return {p.name: p.retain_for for p in rows}

    async def expired_runs(self, window: RetentionWindow, limit: int) -> list[rec.RunRecord]:
        runs: list[rec.RunRecord] = await self._read(lambda c: expired_runs(c, window, limit))
        return runs

    async def delete_runs(
        self,
        run_ids: Sequence[str],
        window: RetentionWindow,
        *,
        actor: str,
        audit_id: int | None = None,
    ) -> SweptRows:
        ids = list(run_ids)
        swept: SweptRows = await self._write(lambda c: delete_runs(c, ids, window, actor, audit_id))
        if swept.runs:
            await self._write(reclaim_space)
        return swept

    async def prune_schedule_actions(
        self, window: RetentionWindow, limit: int, *, actor: str, audit_id: int | None = None
    ) -> int:
        count: int = await self._write(
            lambda c: prune_schedule_actions(c, window, limit, actor, audit_id)
        )
        return count

    async def trim_audit(self, before: float, limit: int) -> int:
        count: int = await self._write(lambda c: trim_audit(c, before, limit))
        return count
