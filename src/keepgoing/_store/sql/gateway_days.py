"""The usage ledger's per-day aggregates: what stays of gateway calls that retention deleted.

Retention deletes a run's ``gateway_calls`` rows with the run. Before it does,
in the same transaction, :func:`fold_calls` adds them to ``gateway_usage_days``:
one row per UTC day, workflow, model and key with the calls' counts, tokens,
cost, latency and first and last times. (Budgets read ``gateway_spend``, which
retention never touches.)

The usage report (:mod:`keepgoing._store.sql.gateway_usage`) adds to its totals
:func:`folded_totals`: the aggregate rows whose calls all fall inside its range
and match its filters. A row a range only partly covers is left out (its calls
cannot be split), and a filter by run or step leaves every aggregate out (the
runs are gone). So totals over months still add up, and never count a call twice:
a call is in the ledger or in an aggregate, never both.

The same rows go into the report's groups (:func:`folded_groups`) and its
series (:func:`folded_points`), so groups and points add up to the totals too:
grouped by workflow, model or key an aggregate joins its group; grouped by
run, step or attempt (the runs are gone) the aggregates of a workflow make one
row with that workflow and no run id. In the series a day's aggregate goes in
the bucket of its first call (a day's calls cannot be split either).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, NamedTuple

from keepgoing._store.gateway_protocol import UsageQuery, UsageRow
from keepgoing._store.sql.rows import every, one

__all__ = ["fold_calls", "folded_groups", "folded_points", "folded_totals"]


class _Call(NamedTuple):
    workflow: str | None
    model: str
    key_id: str
    status: str
    input_tokens: int
    output_tokens: int
    cost: float
    latency: float
    created_at: float


class _Day(NamedTuple):
    calls: int
    errors: int
    refused: int
    input_tokens: int
    output_tokens: int
    cost: float
    latency_sum: float
    latency_max: float
    first_at: float
    last_at: float


class _Totals(NamedTuple):
    calls: int | None
    errors: int | None
    refused: int | None
    input_tokens: int | None
    output_tokens: int | None
    cost: float | None
    latency_sum: float | None
    latency_max: float | None
    first_at: float | None
    last_at: float | None


def _add(column: str) -> str:
    return f"{column} = gateway_usage_days.{column} + excluded.{column}"


def _pick(column: str, op: str) -> str:
    return (
        f"{column} = CASE WHEN excluded.{column} {op} gateway_usage_days.{column} "
        f"THEN excluded.{column} ELSE gateway_usage_days.{column} END"
    )


#: One statement adds a day's calls, so two deletions folding into one day at
#: once (the sweep and ``runs prune``) both count.
_UPSERT = (
    f"INSERT INTO gateway_usage_days (day, workflow, model, key_id, {', '.join(_Day._fields)}) "
    f"VALUES ({', '.join('?' * 14)}) ON CONFLICT (day, workflow, model, key_id) DO UPDATE SET "
    + ", ".join(
        [
            *(_add(c) for c in _Day._fields[:7]),
            _pick("latency_max", ">"),
            _pick("first_at", "<"),
            _pick("last_at", ">"),
        ]
    )
)


def _day(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d")


def _merge(a: _Day, b: _Day) -> _Day:
    return _Day(
        a.calls + b.calls,
        a.errors + b.errors,
        a.refused + b.refused,
        a.input_tokens + b.input_tokens,
        a.output_tokens + b.output_tokens,
        a.cost + b.cost,
        a.latency_sum + b.latency_sum,
        max(a.latency_max, b.latency_max),
        min(a.first_at, b.first_at),
        max(a.last_at, b.last_at),
    )


def fold_calls(conn: Any, marks: str, run_ids: Sequence[str]) -> int:
    """Add the gateway calls of ``run_ids`` to the per-day aggregates; calls folded."""
    calls = every(
        conn,
        _Call,
        "SELECT r.workflow_name AS workflow, "
        "COALESCE(c.model_answered, c.model_asked) AS model, c.key_id, c.status, "
        "c.input_tokens, c.output_tokens, c.cost, c.latency, c.created_at "
        "FROM gateway_calls c LEFT JOIN runs r ON r.run_id = c.run_id "
        f"WHERE c.run_id IN ({marks})",
        list(run_ids),
    )
    days: dict[tuple[str, str, str, str], _Day] = {}
    for c in calls:
        key = (_day(c.created_at), c.workflow or "", c.model, c.key_id)
        error = 0 if c.status in ("ok", "refused") else 1
        row = _Day(
            1,
            error,
            int(c.status == "refused"),
            int(c.input_tokens),
            int(c.output_tokens),
            float(c.cost),
            float(c.latency),
            float(c.latency),
            float(c.created_at),
            float(c.created_at),
        )
        days[key] = _merge(days[key], row) if key in days else row
    for key, row in sorted(days.items()):
        conn.execute(_UPSERT, (*key, *row))
    return len(calls)


class _Folded(NamedTuple):
    workflow: str
    model: str
    key_id: str
    calls: int
    errors: int
    refused: int
    input_tokens: int
    output_tokens: int
    cost: float
    latency_sum: float
    latency_max: float
    first_at: float
    last_at: float


def _matching(query: UsageQuery) -> tuple[str, list[Any]] | None:
    """The aggregates ``query`` counts: its SQL condition, or None for none at all."""
    if query.run_id is not None or query.step is not None:
        return None
    clauses = ["first_at >= ?", "last_at < ?"]
    params: list[Any] = [query.since, query.until]
    for column, value in (
        ("workflow", query.workflow),
        ("model", query.model),
        ("key_id", query.key_id),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    return " AND ".join(clauses), params


def _folded(conn: Any, query: UsageQuery) -> list[_Folded]:
    matching = _matching(query)
    if matching is None:
        return []
    where, params = matching
    return every(
        conn,
        _Folded,
        f"SELECT workflow, model, key_id, {', '.join(_Day._fields)} FROM gateway_usage_days "
        f"WHERE {where} ORDER BY day, workflow, model, key_id",
        params,
    )


def _group_key(query: UsageQuery, row: _Folded) -> tuple[str | None, str | None, str | None]:
    """(workflow, model, key_id) of the group an aggregate joins."""
    workflow = row.workflow or None
    if query.group_by == "model":
        return None, row.model, None
    if query.group_by == "key":
        return None, None, row.key_id
    return workflow, None, None  # by workflow; by run, step or attempt: the runs are gone


def folded_groups(conn: Any, query: UsageQuery) -> list[UsageRow]:
    """The aggregates ``query`` counts, one row per group it groups them in."""
    groups: dict[tuple[str | None, str | None, str | None], _Day] = {}
    for row in _folded(conn, query):
        key = _group_key(query, row)
        day = _Day(*(getattr(row, name) for name in _Day._fields))
        groups[key] = _merge(groups[key], day) if key in groups else day
    return [
        UsageRow(
            workflow=workflow,
            run_id=None,
            step=None,
            attempt=None,
            model=model,
            key_id=key_id,
            attempt_state=None,
            calls=d.calls,
            errors=d.errors,
            refused=d.refused,
            input_tokens=int(d.input_tokens),
            output_tokens=int(d.output_tokens),
            cost=float(d.cost),
            latency_sum=float(d.latency_sum),
            latency_max=float(d.latency_max),
            first_at=float(d.first_at),
            last_at=float(d.last_at),
        )
        for (workflow, model, key_id), d in groups.items()
    ]


def folded_points(
    conn: Any, query: UsageQuery, start: int, width: int
) -> dict[int, tuple[int, int, int, float]]:
    """By bucket index (milliseconds ``start`` and ``width``, as the report counts
    them): the calls, tokens and cost of the aggregates whose first call is in it."""
    out: dict[int, tuple[int, int, int, float]] = {}
    for row in _folded(conn, query):
        bucket = max(0, (int(row.first_at * 1000) - start) // width)
        calls, tin, tout, cost = out.get(bucket, (0, 0, 0, 0.0))
        out[bucket] = (
            calls + int(row.calls),
            tin + int(row.input_tokens),
            tout + int(row.output_tokens),
            cost + float(row.cost),
        )
    return out


def folded_totals(conn: Any, query: UsageQuery, totals: UsageRow) -> UsageRow:
    """``totals`` with the aggregates whose calls all fall in ``query``'s range added."""
    matching = _matching(query)
    if matching is None:
        return totals
    where, params = matching
    found = one(
        conn,
        _Totals,
        "SELECT CAST(SUM(calls) AS BIGINT) AS calls, CAST(SUM(errors) AS BIGINT) AS errors, "
        "CAST(SUM(refused) AS BIGINT) AS refused, "
        "CAST(SUM(input_tokens) AS BIGINT) AS input_tokens, "
        "CAST(SUM(output_tokens) AS BIGINT) AS output_tokens, "
        "CAST(SUM(cost) AS DOUBLE PRECISION) AS cost, "
        "CAST(SUM(latency_sum) AS DOUBLE PRECISION) AS latency_sum, "
        "MAX(latency_max) AS latency_max, MIN(first_at) AS first_at, MAX(last_at) AS last_at "
        f"FROM gateway_usage_days WHERE {where}",
        params,
    )
    if found is None or not found.calls:
        return totals
    firsts = [t for t in (totals.first_at, found.first_at) if t is not None]
    lasts = [t for t in (totals.last_at, found.last_at) if t is not None]
    return UsageRow(
        workflow=totals.workflow,
        run_id=totals.run_id,
        step=totals.step,
        attempt=totals.attempt,
        model=totals.model,
        key_id=totals.key_id,
        attempt_state=totals.attempt_state,
        calls=totals.calls + int(found.calls),
        errors=totals.errors + int(found.errors or 0),
        refused=totals.refused + int(found.refused or 0),
        input_tokens=totals.input_tokens + int(found.input_tokens or 0),
        output_tokens=totals.output_tokens + int(found.output_tokens or 0),
        cost=totals.cost + float(found.cost or 0.0),
        latency_sum=totals.latency_sum + float(found.latency_sum or 0.0),
        latency_max=max(totals.latency_max, float(found.latency_max or 0.0)),
        first_at=min(firsts) if firsts else None,
        last_at=max(lasts) if lasts else None,
    )
