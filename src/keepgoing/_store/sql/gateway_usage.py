"""The usage ledger's reports (``GET /api/v1/gateway/usage``): ``gateway_calls`` grouped
by workflow, run, step, attempt, model or key over a time range, with a series over
time. Read by ``SqlGatewayMixin.gateway_usage``.

A call's workflow is its run's (``runs.workflow_name``, joined on the run id); a call
made outside a run has none. Buckets are computed on whole milliseconds with integer
division, so SQLite and PostgreSQL put every call in the same bucket (a float cast
rounds on one and truncates on the other). The totals, the groups and the
series add the per-day aggregates of calls retention deleted
(:mod:`keepgoing._store.sql.gateway_days`); the groups are ranked again after
that, so a group the ledger alone placed just past ``limit`` may be left out
where its aggregates would have lifted it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

from keepgoing._store.gateway_protocol import (
    USAGE_GROUPS,
    USAGE_MAX_POINTS,
    UsagePoint,
    UsageQuery,
    UsageReport,
    UsageRow,
)
from keepgoing._store.sql.gateway_days import folded_groups, folded_points, folded_totals
from keepgoing._store.sql.rows import every, one

__all__ = ["MAX_POINTS", "check_query", "usage_report"]

MAX_POINTS = USAGE_MAX_POINTS
_MODEL = "COALESCE(c.model_answered, c.model_asked)"
#: The key columns each grouping selects (the others are NULL), in UsageRow's order.
_KEYS: dict[str, dict[str, str]] = {
    "workflow": {"workflow": "r.workflow_name"},
    "run": {"workflow": "r.workflow_name", "run_id": "c.run_id"},
    "step": {"workflow": "r.workflow_name", "run_id": "c.run_id", "step": "c.step"},
    "attempt": {
        "workflow": "r.workflow_name",
        "run_id": "c.run_id",
        "step": "c.step",
        "attempt": "c.attempt",
    },
    "model": {"model": _MODEL},
    "key": {"key_id": "c.key_id"},
}
_KEY_FIELDS = ("workflow", "run_id", "step", "attempt", "model", "key_id")
_SUMS = (
    "COUNT(*) AS calls, "
    "CAST(COALESCE(SUM(CASE WHEN c.status IN ('ok', 'refused') THEN 0 ELSE 1 END), 0) "
    "AS BIGINT) AS errors, "
    "CAST(COALESCE(SUM(CASE WHEN c.status = 'refused' THEN 1 ELSE 0 END), 0) AS BIGINT) "
    "AS refused, "
    "CAST(COALESCE(SUM(c.input_tokens), 0) AS BIGINT) AS input_tokens, "
    "CAST(COALESCE(SUM(c.output_tokens), 0) AS BIGINT) AS output_tokens, "
    "CAST(COALESCE(SUM(c.cost), 0) AS DOUBLE PRECISION) AS cost, "
    "CAST(COALESCE(SUM(c.latency), 0) AS DOUBLE PRECISION) AS latency_sum, "
    "CAST(COALESCE(MAX(c.latency), 0) AS DOUBLE PRECISION) AS latency_max, "
    "MIN(c.created_at) AS first_at, MAX(c.created_at) AS last_at"
)
_FROM = "FROM gateway_calls c LEFT JOIN runs r ON r.run_id = c.run_id"


class _Row(NamedTuple):
    workflow: str | None
    run_id: str | None
    step: int | None
    attempt: int | None
    model: str | None
    key_id: str | None
    attempt_state: str | None
    calls: int
    errors: int
    refused: int
    input_tokens: int
    output_tokens: int
    cost: float
    latency_sum: float
    latency_max: float
    first_at: float | None
    last_at: float | None


class _Point(NamedTuple):
    bucket: int
    calls: int
    input_tokens: int
    output_tokens: int
    cost: float


def check_query(query: UsageQuery) -> None:
    """Refuse a query the report cannot answer.

    Raises:
        ValueError: the message names the field.
    """
    if query.group_by not in USAGE_GROUPS:
        raise ValueError(
            f"group_by must be one of {', '.join(USAGE_GROUPS)}, not {query.group_by!r}"
        )
    for name in ("since", "until"):
        if not math.isfinite(getattr(query, name)):
            raise ValueError(f"{name} must be a finite number of seconds")
    if query.since > query.until:
        raise ValueError(f"since ({query.since:g}) is after until ({query.until:g})")
    if not 1 <= query.limit <= MAX_POINTS:
        raise ValueError(f"limit must be in 1..{MAX_POINTS}, not {query.limit}")
    if query.bucket is not None:
        if not math.isfinite(query.bucket) or query.bucket < 0.001:
            raise ValueError("bucket must be at least 0.001 seconds")
        if (query.until - query.since) / query.bucket > MAX_POINTS:
            raise ValueError(
                f"a bucket of {query.bucket:g}s makes more than {MAX_POINTS} points "
                f"over {query.until - query.since:g}s; choose a larger one"
            )


def _where(query: UsageQuery) -> tuple[str, list[Any]]:
    clauses = ["c.created_at >= ?", "c.created_at < ?"]
    params: list[Any] = [query.since, query.until]
    for clause, value in (
        ("r.workflow_name = ?", query.workflow),
        ("c.run_id = ?", query.run_id),
        ("c.step = ?", query.step),
        (f"{_MODEL} = ?", query.model),
        ("c.key_id = ?", query.key_id),
    ):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    return " AND ".join(clauses), params


def _select(query: UsageQuery) -> tuple[str, str]:
    keys = _KEYS[query.group_by]
    cols = [
        f"{keys[name]} AS {name}" if name in keys else f"NULL AS {name}" for name in _KEY_FIELDS
    ]
    state = "MAX(c.attempt_state)" if query.group_by == "attempt" else "NULL"
    return ", ".join([*cols, f"{state} AS attempt_state"]), ", ".join(keys.values())


def usage_report(conn: Any, query: UsageQuery) -> UsageReport:
    """The report of ``query`` (checked with :func:`check_query` first)."""
    where, params = _where(query)
    select, group = _select(query)
    rows = every(
        conn,
        _Row,
        f"SELECT {select}, {_SUMS} {_FROM} WHERE {where} "
        f"GROUP BY {group} ORDER BY cost DESC, calls DESC, 1, 2, 3, 4, 5, 6 LIMIT ?",
        (*params, query.limit),
    )
    blank = ", ".join(f"NULL AS {name}" for name in (*_KEY_FIELDS, "attempt_state"))
    total = one(conn, _Row, f"SELECT {blank}, {_SUMS} {_FROM} WHERE {where}", params)
    assert total is not None  # an aggregate without GROUP BY always has its row
    return UsageReport(
        rows=_with_folded(conn, query, [_usage(r) for r in rows]),
        totals=folded_totals(conn, query, _usage(total)),
        points=_points(conn, query, where, params) if query.bucket is not None else [],
        bucket=query.bucket,
    )


def _with_folded(conn: Any, query: UsageQuery, rows: list[UsageRow]) -> list[UsageRow]:
    """``rows`` with the aggregates of deleted calls added to their groups, ranked."""
    folded = folded_groups(conn, query)
    if not folded:
        return rows
    by_key = {_key(r): r for r in rows}
    for extra in folded:
        key = _key(extra)
        by_key[key] = _plus(by_key[key], extra) if key in by_key else extra
    ranked = sorted(
        by_key.values(), key=lambda r: (-r.cost, -r.calls, tuple(str(k) for k in _key(r)))
    )
    return ranked[: query.limit]


def _key(row: UsageRow) -> tuple[object, ...]:
    return (row.workflow, row.run_id, row.step, row.attempt, row.model, row.key_id)


def _plus(a: UsageRow, b: UsageRow) -> UsageRow:
    firsts = [t for t in (a.first_at, b.first_at) if t is not None]
    lasts = [t for t in (a.last_at, b.last_at) if t is not None]
    return dataclasses.replace(
        a,
        calls=a.calls + b.calls,
        errors=a.errors + b.errors,
        refused=a.refused + b.refused,
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cost=a.cost + b.cost,
        latency_sum=a.latency_sum + b.latency_sum,
        latency_max=max(a.latency_max, b.latency_max),
        first_at=min(firsts) if firsts else None,
        last_at=max(lasts) if lasts else None,
    )


def _points(conn: Any, query: UsageQuery, where: str, params: list[Any]) -> list[UsagePoint]:
    assert query.bucket is not None
    start, width = math.floor(query.since * 1000), max(1, round(query.bucket * 1000))
    index = f"((CAST(c.created_at * 1000 AS BIGINT) - ?) / {width})"
    found = every(
        conn,
        _Point,
        f"SELECT {index} AS bucket, COUNT(*) AS calls, "
        "CAST(COALESCE(SUM(c.input_tokens), 0) AS BIGINT) AS input_tokens, "
        "CAST(COALESCE(SUM(c.output_tokens), 0) AS BIGINT) AS output_tokens, "
        "CAST(COALESCE(SUM(c.cost), 0) AS DOUBLE PRECISION) AS cost "
        f"{_FROM} WHERE {where} GROUP BY 1 ORDER BY 1",
        (start, *params),
    )
    sums = folded_points(conn, query, start, width)
    for p in found:
        bucket = max(0, int(p.bucket))
        calls, tin, tout, cost = sums.get(bucket, (0, 0, 0, 0.0))
        sums[bucket] = (
            calls + int(p.calls),
            tin + int(p.input_tokens),
            tout + int(p.output_tokens),
            cost + float(p.cost),
        )
    return [
        UsagePoint(
            at=(start + bucket * width) / 1000,
            calls=calls,
            input_tokens=tin,
            output_tokens=tout,
            cost=cost,
        )
        for bucket, (calls, tin, tout, cost) in sorted(sums.items())
    ]


def _usage(row: _Row) -> UsageRow:
    return UsageRow(
        workflow=row.workflow,
        run_id=row.run_id,
        step=None if row.step is None else int(row.step),
        attempt=None if row.attempt is None else int(row.attempt),
        model=row.model,
        key_id=row.key_id,
        attempt_state=row.attempt_state,
        calls=int(row.calls),
        errors=int(row.errors),
        refused=int(row.refused),
        input_tokens=int(row.input_tokens),
        output_tokens=int(row.output_tokens),
        cost=float(row.cost),
        latency_sum=float(row.latency_sum),
        latency_max=float(row.latency_max),
        first_at=row.first_at,
        last_at=row.last_at,
    )
