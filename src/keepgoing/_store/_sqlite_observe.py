"""The SQLite store's operator facet (mixed into ``SqliteStore``).

Step metrics come from the ``metric_*`` tables that triggers keep (0004);
the other views use the partial indexes of pending, runnable and leased rows.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from keepgoing._store import _sqlite_ops as ops
from keepgoing._store.observe_protocol import ObserveStore, QueueDepth, StepMetrics
from keepgoing._store.records import RunRecord

__all__ = ["SqliteObserveMixin"]


class SqliteObserveMixin(ObserveStore):
    async def _read(self, op: Any) -> Any: ...  # provided by SqliteStore

    async def run_counts(self) -> dict[str, int]:
        counts: dict[str, int] = await self._read(
            lambda c: dict(
                c.execute("SELECT status, COUNT(*) FROM runs GROUP BY status ORDER BY status")
            )
        )
        return counts

    async def queue_depths(self, now: float) -> list[QueueDepth]:
        depths: list[QueueDepth] = await self._read(lambda c: _queue_depths(c, now))
        return depths

    async def step_metrics(self) -> StepMetrics:
        metrics: StepMetrics = await self._read(_step_metrics)
        return metrics

    async def search_runs(
        self,
        *,
        workflow_name: str | None = None,
        status: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunRecord]:
        where, params = ["1 = 1"], []
        for clause, value in (
            ("workflow_name = ?", workflow_name),
            ("status = ?", status),
            ("created_at >= ?", created_after),
            ("created_at < ?", created_before),
        ):
            if value is not None:
                where.append(clause)
                params.append(value)
        sql = (
            f"SELECT {ops.RUN_COLUMNS} FROM runs WHERE {' AND '.join(where)} "
            "ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?"
        )
        args = (*params, max(0, limit), max(0, offset))
        runs: list[RunRecord] = await self._read(
            lambda c: [ops.run_record(r) for r in c.execute(sql, args).fetchall()]
        )
        return runs


def _queue_depths(conn: sqlite3.Connection, now: float) -> list[QueueDepth]:
    rows: dict[str, dict[str, int]] = {}
    queries = (
        (
            "runnable_runs",
            "SELECT task_queue, COUNT(*) FROM runs WHERE runnable = 1 AND status = 'running' "
            "GROUP BY task_queue",
            (),
        ),
        (
            "ready_tasks",
            "SELECT queue, COUNT(*) FROM tasks WHERE status = 'pending' AND available_at <= ? "
            "GROUP BY queue",
            (now,),
        ),
        (
            "delayed_tasks",
            "SELECT queue, COUNT(*) FROM tasks WHERE status = 'pending' AND available_at > ? "
            "GROUP BY queue",
            (now,),
        ),
        (
            "running_tasks",
            "SELECT queue, COUNT(*) FROM tasks WHERE status = 'running' GROUP BY queue",
            (),
        ),
    )
    for what, sql, params in queries:
        for queue, count in conn.execute(sql, params):
            rows.setdefault(queue, {})[what] = count
    return [QueueDepth(queue, **counts) for queue, counts in sorted(rows.items())]


def _step_metrics(conn: sqlite3.Connection) -> StepMetrics:
    buckets = tuple(h for (h,) in conn.execute("SELECT hits FROM metric_step_buckets ORDER BY le"))
    totals = {
        name: (count, total)
        for name, count, total in conn.execute("SELECT name, count, total FROM metric_totals")
    }
    count, total = totals.get("step_seconds", (0, 0.0))
    return StepMetrics(buckets, count, total, totals.get("lease_expiries", (0, 0.0))[0])
