"""The SQLite store's operator facet (mixed into ``SqliteStore``).

Step metrics come from the ``metric_*`` tables that triggers keep (0004);
the other views use the partial indexes of pending, runnable and leased rows.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from keepgoing._store.observe_protocol import ObserveStore, QueueDepth, StepMetrics
from keepgoing._store.records import RunRecord
from keepgoing._store.refused import name_refused
from keepgoing._store.sql import admission
from keepgoing._store.sql import runs as ops
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import every


class _Count(NamedTuple):
    """A count of rows, per status or per queue (``label``)."""

    label: str
    n: int


class _Bucket(NamedTuple):
    hits: int


class _Total(NamedTuple):
    name: str
    n: int  # the table's ``count``
    total: float


__all__ = ["SqlObserveMixin"]


@name_refused
class SqlObserveMixin(ObserveStore):
    async def _read(self, op: Any) -> Any: ...  # provided by SqlStore

    async def run_counts(self) -> dict[str, int]:
        counts: dict[str, int] = await self._read(
            lambda c: {
                r.label: r.n
                for r in every(
                    c,
                    _Count,
                    # A queued run (over its workflow's limit) is counted as queued.
                    f"SELECT {admission.STATUS_SHOWN} AS label, COUNT(*) AS n FROM runs "
                    f"GROUP BY {admission.STATUS_SHOWN} ORDER BY label",
                )
            }
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
        where: list[str] = ["1 = 1"]
        params: list[object] = []
        if status is not None:
            rule, values = admission.status_is(status)
            where.append(rule)
            params.extend(values)
        for clause, value in (
            ("workflow_name = ?", workflow_name),
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
        runs: list[RunRecord] = await self._read(lambda c: ops.run_records(c, sql, args))
        return runs


def _queue_depths(conn: Connection, now: float) -> list[QueueDepth]:
    rows: dict[str, dict[str, int]] = {}
    queries = (
        (
            "runnable_runs",
            "SELECT task_queue AS label, COUNT(*) AS n FROM runs "
            "WHERE runnable = 1 AND status = 'running' GROUP BY task_queue",
            (),
        ),
        (
            "ready_tasks",
            "SELECT queue AS label, COUNT(*) AS n FROM tasks "
            "WHERE status = 'pending' AND available_at <= ? GROUP BY queue",
            (now,),
        ),
        (
            "delayed_tasks",
            "SELECT queue AS label, COUNT(*) AS n FROM tasks "
            "WHERE status = 'pending' AND available_at > ? GROUP BY queue",
            (now,),
        ),
        (
            "running_tasks",
            "SELECT queue AS label, COUNT(*) AS n FROM tasks WHERE status = 'running' "
            "GROUP BY queue",
            (),
        ),
    )
    for what, sql, params in queries:
        for r in every(conn, _Count, sql, params):
            rows.setdefault(r.label, {})[what] = r.n
    return [QueueDepth(queue, **counts) for queue, counts in sorted(rows.items())]


def _step_metrics(conn: Connection) -> StepMetrics:
    buckets = tuple(
        b.hits for b in every(conn, _Bucket, "SELECT hits FROM metric_step_buckets ORDER BY le")
    )
    totals = {
        t.name: (t.n, t.total)
        for t in every(conn, _Total, "SELECT name, count AS n, total FROM metric_totals")
    }
    count, total = totals.get("step_seconds", (0, 0.0))
    return StepMetrics(buckets, count, total, totals.get("lease_expiries", (0, 0.0))[0])
