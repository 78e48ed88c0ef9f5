"""``GET /api/v1/gateway/usage``: the model gateway's usage ledger, read for people.

Tokens, cost, latency and errors of the model calls made in a time range, grouped
by workflow, run, step, attempt, model or key (and narrowed by any of them), the
totals, a series over time for a chart, and each gateway key's budgets with what is
left of them. Its own permission, ``gateway.read``: seeing what a team spends is
not the same as spending it (``gateway.use``) or reading runs (``runs.read``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from keepgoing._server.auth import ReadsGatewayUsage
from keepgoing._server.context import context
from keepgoing._server.errors import ApiError
from keepgoing._server.routes._common import PREFIX, STRICT, documented
from keepgoing._store.gateway_protocol import (
    USAGE_MAX_POINTS,
    UsagePoint,
    UsageQuery,
    UsageRow,
)
from keepgoing._store.protocol import Store

__all__ = ["PERMISSION", "auto_bucket", "router"]

PERMISSION = "gateway.read"
DAY = 86400.0
#: Chart buckets the automatic choice picks from, in seconds.
_BUCKETS = (1, 5, 15, 60, 300, 900, 3600, 3 * 3600, 6 * 3600, DAY, 7 * DAY)
_POINTS = 60  # about this many points on an automatic chart

router = APIRouter(prefix=PREFIX, tags=["gateway"], dependencies=STRICT)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UsageRowView(_Body):
    workflow: str | None = Field(description="The run's workflow (null: a call outside a run).")
    run_id: str | None
    step: int | None = Field(description="The step (the task's `cmd`) of the run.")
    attempt: int | None
    model: str | None = Field(description="The model that answered (else the one asked).")
    key_id: str | None = Field(description='The gateway key\'s token id ("": none).')
    attempt_state: str | None = Field(
        description="By attempt: open, committed (the step's success), failed or lost."
    )
    calls: int
    errors: int = Field(description="Calls no provider answered.")
    refused: int = Field(description="Calls over a key's limit (no provider was asked).")
    input_tokens: int
    output_tokens: int
    tokens: int
    cost: float = Field(description="US dollars.")
    latency_avg: float | None = Field(description="Seconds per call.")
    latency_max: float
    first_at: float | None
    last_at: float | None

    @classmethod
    def of(cls, row: UsageRow) -> UsageRowView:
        return cls(
            workflow=row.workflow,
            run_id=row.run_id,
            step=row.step,
            attempt=row.attempt,
            model=row.model,
            key_id=row.key_id,
            attempt_state=row.attempt_state,
            calls=row.calls,
            errors=row.errors,
            refused=row.refused,
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            tokens=row.tokens,
            cost=row.cost,
            latency_avg=row.latency_avg,
            latency_max=row.latency_max,
            first_at=row.first_at,
            last_at=row.last_at,
        )


class UsagePointView(_Body):
    at: float = Field(description="The bucket's start (UNIX seconds).")
    calls: int
    input_tokens: int
    output_tokens: int
    cost: float


class KeyBudgetView(_Body):
    token_id: str
    name: str
    active: bool
    daily_budget: float | None = Field(description="US dollars a UTC day (null: no limit).")
    total_budget: float | None
    spent_today: float
    spent_total: float
    left_today: float | None = Field(description="What today's budget has left (null: none).")
    left_total: float | None
    requests_per_minute: int | None
    tokens_per_minute: int | None


class UsageReportView(_Body):
    since: float
    until: float
    group_by: str
    bucket: float | None = Field(description="Seconds per point of `series`.")
    totals: UsageRowView
    groups: list[UsageRowView] = Field(description="Most expensive first.")
    series: list[UsagePointView] = Field(description="Only buckets with calls, oldest first.")
    keys: list[KeyBudgetView] = Field(description="Every gateway key, with its budgets.")


def auto_bucket(span: float) -> float:
    """The chart bucket for a range of ``span`` seconds: about 60 points."""
    for bucket in _BUCKETS:
        if span / bucket <= _POINTS:
            return float(bucket)
    return float(_BUCKETS[-1] * max(1, round(span / _BUCKETS[-1] / _POINTS)))


async def key_budgets(store: Store, now: float) -> list[KeyBudgetView]:
    """Every token that may use the gateway (or has limits), with its spend and budgets."""
    limits = {k.token_id: k for k in await store.list_gateway_keys()}
    out = []
    for token in await store.list_tokens():
        key = limits.get(token.token_id)
        if key is None and "gateway.use" not in token.permissions:
            continue
        usage = await store.gateway_key_usage(token.token_id, now)
        daily = key.daily_budget if key else None
        total = key.total_budget if key else None
        out.append(
            KeyBudgetView(
                token_id=token.token_id,
                name=token.name,
                active=token.active,
                daily_budget=daily,
                total_budget=total,
                spent_today=usage.day_cost,
                spent_total=usage.total_cost,
                left_today=None if daily is None else max(0.0, daily - usage.day_cost),
                left_total=None if total is None else max(0.0, total - usage.total_cost),
                requests_per_minute=key.requests_per_minute if key else None,
                tokens_per_minute=key.tokens_per_minute if key else None,
            )
        )
    return out


#: :data:`USAGE_GROUPS`, as the spec's enum (a test checks the two agree).
GroupBy = Literal["workflow", "run", "step", "attempt", "model", "key"]
_Seconds = Annotated[float | None, Query(ge=0, le=1e11, description="UNIX seconds.")]
_Name = Annotated[str | None, Query(min_length=1, max_length=512)]


@router.get(
    "/gateway/usage",
    response_model=UsageReportView,
    responses=documented(),
    summary="The model gateway's usage",
)
async def usage(
    request: Request,
    _: ReadsGatewayUsage,
    since: _Seconds = None,
    until: _Seconds = None,
    group_by: Annotated[GroupBy, Query(description="What the groups are.")] = "model",
    workflow: _Name = None,
    run_id: _Name = None,
    step: Annotated[int | None, Query(ge=1, le=2**31)] = None,
    model: _Name = None,
    key_id: _Name = None,
    bucket: Annotated[
        float | None,
        Query(
            ge=0.001,
            le=1e9,
            description="Seconds per chart point (at least the range over 10,000: a smaller "
            "one is widened to that, and the answer's `bucket` says what was used).",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> UsageReportView:
    """The model calls made in `[since, until)` (default: the last 24 hours; a `since`
    after `until` is an empty range), narrowed by
    `workflow`, `run_id`, `step`, `model` and `key_id`, grouped by `group_by`:
    tokens, cost, latency, errors and refusals per group, their totals, a series over
    time (`bucket` seconds per point; by default about 60 points), and every gateway
    key's budgets with what is left of them today and in all. Read from the usage
    ledger, which keeps every call, including those of attempts that failed or whose
    worker was killed (`attempt_state` says which). Calls that retention deleted with
    their runs stay as per-day aggregates: `totals` adds those whose calls all fall in
    the range (and match `workflow`, `model` and `key_id`; none with `run_id` or `step`)."""
    ctx = context(request)
    now = ctx.clock.now()
    end = until if until is not None else now
    start = since if since is not None else end - DAY
    span = max(end - start, 1.0)
    widest = span / USAGE_MAX_POINTS * (1 + 1e-9)  # rounding never makes one point too many
    chosen = auto_bucket(span) if bucket is None else max(bucket, widest)
    query = UsageQuery(
        since=start,
        until=max(start, end),  # a `since` after `until` is an empty range
        group_by=group_by,
        workflow=workflow,
        run_id=run_id,
        step=step,
        model=model,
        key_id=key_id,
        bucket=chosen,
        limit=limit,
    )
    try:
        report = await ctx.store.gateway_usage(query)
    except ValueError as exc:
        raise ApiError(400, "invalid_request", str(exc)) from None
    return UsageReportView(
        since=start,
        until=end,
        group_by=group_by,
        bucket=report.bucket,
        totals=UsageRowView.of(report.totals),
        groups=[UsageRowView.of(r) for r in report.rows],
        series=[UsagePointView(**_point(p)) for p in report.points],
        keys=await key_budgets(ctx.store, now),
    )


def _point(point: UsagePoint) -> dict[str, Any]:
    return {
        "at": point.at,
        "calls": point.calls,
        "input_tokens": point.input_tokens,
        "output_tokens": point.output_tokens,
        "cost": point.cost,
    }
